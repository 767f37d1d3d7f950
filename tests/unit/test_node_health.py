"""`gpuval node-health`, Slurm's HealthCheckProgram, on a simulated 4x H100 node: the GPU test
doubles (tests/fixtures/gpu-doubles) print recorded real outputs, health-data.py adds the node
health recordings with at most one fault, and a stand-in scontrol (tests/fake_scontrol.py) plays
the Slurm 22.05 of tests/data/slurm/ (gpu1 idle, gpu2 drained by a person "disk replacement,
ticket 4711", gpu4 drained by gpuval for nccl-tests.all_reduce.busbw).

The PCI sysfs the probe reads is a folder made from this project's development VM's listing
(tests/data/outputs/sysfs-pci/dev-vm-grep-virtio-no-link.txt: one file per `path:value` line).

What the truth is, written down before running: the fault `off-bus` is GPU0 (bus 0000:06:00)
fallen off the bus an hour ago, which health.xid fails; the clean recordings pass every check;
growth of counters needs a previous capture, so a node's first run is unjudged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests import fake_scontrol
from tests.node_doubles import SLURM, node_data, node_health

OFF_BUS_REASON = "gpuval: health.xid.0000:06:00: fallen off the bus"
PERSON = "disk replacement, ticket 4711"


def updates(folder: Path) -> list[list[str]]:
    return [call for call in fake_scontrol.calls(folder) if call[:1] == ["update"]]


def drained_by_gpuval_for(folder: Path, reason: str) -> Path:
    """DERIVED: the recorded `scontrol show node gpu1` of gpu1 drained by gpuval, with only its
    Reason= text replaced."""
    line = (SLURM / "scontrol-show-node-gpu1-drained-by-gpuval-oneliner-22.05.txt").read_text()
    head, _, _ = line.partition("Reason=")
    path = folder / "gpu1-drained.txt"
    path.write_text(f"{head}Reason={reason} [root@2026-11-26T05:14:50]\n")
    return path


def test_a_node_whose_gpu_fell_off_the_bus_fails_and_is_drained_with_the_check(
    tmp_path: Path,
) -> None:
    node_data(tmp_path, "off-bus")
    done = node_health(tmp_path, "gpu1", "--slurm")
    assert done.returncode == 1, done.stderr
    assert "gpu1: health.xid.0000:06:00: fail: fallen off the bus" in done.stdout
    (update,) = updates(tmp_path)
    assert update[:3] == ["update", "NodeName=gpu1", "State=DRAIN"]
    assert update[3].startswith(f"Reason={OFF_BUS_REASON}")
    assert len(update[3].removeprefix("Reason=")) <= 100


def test_the_run_folder_holds_each_probe_with_its_sidecar(tmp_path: Path) -> None:
    node_data(tmp_path, None)
    done = node_health(tmp_path, "gpu1", "--keep")
    run_dir = Path(done.stdout.split("run folder: ", 1)[1].split("\n", 1)[0])
    sidecars = {p.name for p in (run_dir / "raw" / "gpu1").glob("*.meta.json")}
    assert "health-kernel-log-after.meta.json" in sidecars
    assert "nvidia-smi-query-after.meta.json" in sidecars
    sidecar = json.loads((run_dir / "raw/gpu1/health-kernel-log-after.meta.json").read_text())
    assert (sidecar["phase"], sidecar["exit_code"], sidecar["timed_out"]) == ("health", 0, False)
    assert oct(run_dir.stat().st_mode & 0o777) == "0o700"


def test_a_first_run_is_unjudged_and_changes_nothing_in_slurm(tmp_path: Path) -> None:
    node_data(tmp_path, None)
    reason = drained_by_gpuval_for(tmp_path, OFF_BUS_REASON + " on GPU0")
    done = node_health(tmp_path, "gpu1", "--slurm", scontrol_text=reason)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "their growth cannot be judged" in done.stdout
    assert updates(tmp_path) == []


def test_a_node_gpuval_drained_is_resumed_when_its_check_passes_again(tmp_path: Path) -> None:
    node_data(tmp_path, None)
    reason = drained_by_gpuval_for(tmp_path, OFF_BUS_REASON + " on GPU0")
    node_health(tmp_path, "gpu1", scontrol_text=reason)  # the first capture
    done = node_health(tmp_path, "gpu1", "--slurm", scontrol_text=reason)
    assert done.returncode == 0, done.stdout + done.stderr
    assert updates(tmp_path) == [["update", "NodeName=gpu1", "State=RESUME"]]
    assert "gpu1: resumed" in done.stdout


def test_a_node_gpuval_drained_for_a_benchmark_stays_drained(tmp_path: Path) -> None:
    node_data(tmp_path, None)
    node_health(tmp_path, "gpu1")
    drained = SLURM / "scontrol-show-node-gpu1-drained-by-gpuval-oneliner-22.05.txt"
    done = node_health(tmp_path, "gpu1", "--slurm", scontrol_text=drained)
    assert done.returncode == 0, done.stdout + done.stderr
    assert updates(tmp_path) == []
    assert "did not pass nccl-tests.all_reduce.complete on it" in done.stdout


@pytest.mark.parametrize("fault", [None, "off-bus"])
def test_a_persons_drain_is_never_touched(tmp_path: Path, fault: str | None) -> None:
    node_data(tmp_path, fault)
    node_health(tmp_path, "gpu2")
    done = node_health(tmp_path, "gpu2", "--slurm")
    assert done.returncode == (1 if fault else 0), done.stdout + done.stderr
    assert updates(tmp_path) == []
    assert PERSON in done.stdout


def test_a_node_without_nvidia_smi_is_unjudged_and_never_drained(tmp_path: Path) -> None:
    node_data(tmp_path, None)
    node_health(tmp_path, "gpu1", gpu_tools=False)
    done = node_health(tmp_path, "gpu1", "--slurm", gpu_tools=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "nvidia-smi-query-after: unjudged: nvidia-smi not found on this host" in done.stdout
    assert updates(tmp_path) == []


def test_a_probe_that_hangs_is_killed_at_its_share_of_the_budget(tmp_path: Path) -> None:
    node_data(tmp_path, None)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 600\n")
    (tools / "nvidia-smi").chmod(0o755)
    done = node_health(tmp_path, "gpu1", "--budget", "3", "--keep")
    assert done.returncode == 3, done.stdout + done.stderr
    run_dir = Path(done.stdout.split("run folder: ", 1)[1].split("\n", 1)[0])
    sidecar = json.loads((run_dir / "raw/gpu1/nvidia-smi-query-after.meta.json").read_text())
    assert (sidecar["timed_out"], sidecar["exit_code"], sidecar["timeout_s"]) == (True, None, 2.0)
