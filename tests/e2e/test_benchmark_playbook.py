"""playbooks/benchmark.yml end to end on simulated hosts (no GPU on this machine).

1. Three hosts without GPUs: the run completes, every GPU phase is skipped with one clear line and
   a sidecar per step saying why, every host's preflight outputs reach the controller, and the
   report is written (verdict error: nothing could be measured, which is never a pass).
2. Two hosts where test doubles print recorded real outputs of a 4x H100 node in place of
   nvidia-smi, all_reduce_perf and p2pBandwidthLatencyTest (tests/fixtures/gpu-doubles): the
   intranode, internode (mpirun over ssh between the hosts), collect and report phases run through
   to a report with the recorded numbers.

Each test runs the playbook twice: the second run has nothing to install or build, and its wall
time (printed, and written to $GPUVAL_TIMINGS_FILE when set) is the suite's own overhead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.shared import DOUBLES_VARIABLES, REPO, TOOLKIT_VARS, VENV_BIN, install_doubles
from tests.simhosts.cluster import Cluster
from tests.simhosts.fixtures import simulated_hosts

pytestmark = pytest.mark.simhosts


@dataclass
class PlaybookRun:
    returncode: int
    output: str
    seconds: float
    run_dir: Path


def _inventory_dir(cluster: Cluster, where: Path) -> Path:
    """The cluster's inventory beside the repository's group_vars, as a user's inventory sits."""
    where.mkdir(parents=True, exist_ok=True)
    shutil.copy(cluster.inventory, where / "cluster.ini")
    (where / "group_vars").symlink_to(REPO / "inventory" / "group_vars")
    return where / "cluster.ini"


def run_benchmark(
    inventory: Path, reports: Path, run_id: str, extra_vars: dict[str, object]
) -> PlaybookRun:
    variables = {
        "gpuval_run_id": run_id, "gpuval_reports_dir": str(reports), **TOOLKIT_VARS, **extra_vars
    }  # fmt: skip
    command: Sequence[str] = [
        str(VENV_BIN / "ansible-playbook"), "-i", str(inventory),
        str(REPO / "playbooks" / "benchmark.yml"), "-e", json.dumps(variables),
    ]  # fmt: skip
    environment = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    environment["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=REPO, env=environment, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    reports.mkdir(parents=True, exist_ok=True)
    (reports / f"{run_id}.ansible.log").write_text(output)  # kept for a failing test's reader
    return PlaybookRun(done.returncode, output, seconds, reports / run_id)


def record_timings(label: str, first: PlaybookRun, second: PlaybookRun) -> None:
    line = f"{label}: first run {first.seconds:.0f} s, second run {second.seconds:.0f} s"
    print(line)
    if target := os.environ.get("GPUVAL_TIMINGS_FILE"):
        with open(target, "a", encoding="utf-8") as timings:
            timings.write(line + "\n")


def sidecar(run: PlaybookRun, host: str, step: str) -> dict[str, object]:
    document = json.loads((run.run_dir / "raw" / host / f"{step}.meta.json").read_text())
    assert isinstance(document, dict)
    return document


def summary(run: PlaybookRun) -> dict[str, object]:
    document = json.loads((run.run_dir / "summary.json").read_text())
    assert isinstance(document, dict)
    return document


def failing_sources(run: PlaybookRun) -> set[str]:
    """Raw files named by the failing or erroring checks of results.json."""
    results = json.loads((run.run_dir / "results.json").read_text())
    return {
        Path(check["source"].split(":")[0]).name
        for check in results["checks"]
        if check["status"] in ("fail", "error") and check.get("source")
    }


@pytest.fixture(scope="module")
def runs_without_gpu(
    tmp_path_factory: pytest.TempPathFactory, toolkits: list[str]
) -> Iterator[list[PlaybookRun]]:
    work = tmp_path_factory.mktemp("e2e-nogpu")
    with simulated_hosts(3, name="e2e-nogpu", bind_ro=toolkits) as cluster:
        inventory = _inventory_dir(cluster, work / "inventory")
        first = run_benchmark(inventory, work / "reports", "nogpu-1", {})
        second = run_benchmark(inventory, work / "reports", "nogpu-2", {})
        record_timings("benchmark.yml, 3 hosts without GPU", first, second)
        yield [first, second]


@pytest.fixture(scope="module")
def runs_with_doubles(
    tmp_path_factory: pytest.TempPathFactory, toolkits: list[str]
) -> Iterator[list[PlaybookRun]]:
    work = tmp_path_factory.mktemp("e2e-doubles")
    with simulated_hosts(2, name="e2e-doubles", bind_ro=toolkits) as cluster:
        install_doubles(cluster, work / "data")
        inventory = _inventory_dir(cluster, work / "inventory")
        doubles = {**DOUBLES_VARIABLES, "report_fail_on_verdict": []}
        first = run_benchmark(inventory, work / "reports", "doubles-1", doubles)
        second = run_benchmark(inventory, work / "reports", "doubles-2", doubles)
        record_timings("benchmark.yml, 2 hosts with recorded GPU outputs", first, second)
        yield [first, second]


def test_run_without_gpu_completes_and_reports_the_skipped_phases(
    runs_without_gpu: list[PlaybookRun],
) -> None:
    for run in runs_without_gpu:
        assert run.returncode == 0, run.output[-6000:]
        hosts = ["node1", "node2", "node3"]
        meta = json.loads((run.run_dir / "run.json").read_text())
        assert meta["hosts"] == hosts
        for host in hosts:
            assert (run.run_dir / "raw" / host / "os-release.txt").read_text().strip()
            assert "no NVIDIA driver" in str(sidecar(run, host, "nvidia-smi")["skipped"])
            nccl = sidecar(run, host, "nccl-all_reduce")
            assert nccl["raw"] is None
            assert "no usable GPU" in str(nccl["skipped"])
            assert f"{host}: intranode benchmarks skipped: no usable GPU" in run.output
        assert run.output.count("intranode benchmarks skipped") == 3
        assert run.output.count("internode benchmarks skipped: no usable GPU on node1") == 1
        assert "no usable GPU" in str(sidecar(run, "node1", "internode-nccl-sendrecv")["skipped"])
        assert not (run.run_dir / "raw" / "node2" / "internode-nccl-sendrecv.meta.json").exists()
        # No GPU phase measured anything, but the pair tests measured the network between the
        # nodes: evidence, so not ERROR; every skipped GPU step is a warning.
        assert summary(run)["verdict"] == "warn"
        assert "gpuval verdict WARN" in run.output
        report = (run.run_dir / "report.html").read_text()
        assert "no usable GPU on this host" in report


def install_and_build_output(run: PlaybookRun) -> str:
    start = run.output.index("PLAY [Install the CUDA toolkit")
    return run.output[start : run.output.index("PLAY [Benchmark the GPUs inside each node]")]


def test_second_run_installs_and_builds_nothing(runs_without_gpu: list[PlaybookRun]) -> None:
    first, second = runs_without_gpu
    assert "changed:" in install_and_build_output(first)
    assert "changed:" not in install_and_build_output(second)
    assert second.output.count("nccl-tests build skipped: no GPU architecture known") == 3


def test_recorded_gpu_outputs_run_through_to_a_report_with_their_numbers(
    runs_with_doubles: list[PlaybookRun],
) -> None:
    for run in runs_with_doubles:
        assert run.returncode == 0, run.output[-6000:]
        for host in ["node1", "node2"]:
            intranode = sidecar(run, host, "nccl-all_reduce")
            assert intranode["exit_code"] == 0
            assert intranode["command"] and "-g 4" in str(intranode["command"])
            raw = (run.run_dir / "raw" / host / "nccl-all_reduce.txt").read_text()
            assert "# Avg bus bandwidth : 98.414" in raw
            assert sidecar(run, host, "p2pBandwidthLatencyTest")["exit_code"] == 0
        internode = sidecar(run, "node1", "internode-nccl-all_reduce")
        internode_raw = run.run_dir / "raw" / "node1" / "internode-nccl-all_reduce.txt"
        assert internode["exit_code"] == 0, internode_raw.read_text()[-3000:]
        assert "-np 8" in str(internode["command"])
        measurements = (run.run_dir / "measurements.csv").read_text()
        assert "355.89" in measurements  # busbw of the 1 GiB row, as printed
        assert (run.run_dir / "report.html").is_file()
        # The verdict is FAIL for reasons of the recording, not of the suite: the doubles have no
        # recorded `nvidia-smi -q -x` / `nvlink -s` (they exit 2, as a broken tool would), and the
        # single-node recording replayed across nodes (the internode run, and the node1--node2
        # pair run of the pair phase) shows NET/Socket where RDMA is expected.
        assert summary(run)["verdict"] == "fail"
        assert failing_sources(run) == {
            "nvidia-smi-query.xml", "nvidia-smi-nvlink.txt", "internode-nccl-all_reduce.txt",
            "pair-nccl-r1-node1--node2-try1.txt",
        }  # fmt: skip
