"""`gpuval drain` and `gpuval resume` against a stand-in scontrol (tests/fake_scontrol.py) that
plays the Slurm 22.05 recorded in tests/data/slurm/: gpu1 idle, gpu2 drained by a person,
gpu3 down, gpu4 drained by gpuval. The run is tests/data/sample-run, whose judgement fails one
node of its own (dgx-8xa100: nccl-tests.all_reduce.complete and .correctness) and no other."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests import fake_scontrol

from gpuval.slurm.inventory import slurm_node_names
from gpuval.slurm.scontrol import REASON_LENGTH, drain_reason

REPO = Path(__file__).parents[2]
OUTPUTS = REPO / "tests" / "data" / "slurm"
FAILING_REASON = (
    "gpuval: nccl-tests.all_reduce.complete (+1 more): did not complete: 19 row(s) but no "
    "closing # Av..."
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("drain") / "sample-run"
    shutil.copytree(REPO / "tests" / "data" / "sample-run", run)
    return run


def inventory(folder: Path, failing_node: str) -> Path:
    path = folder / "cluster.ini"
    path.write_text(
        f"[gpu_nodes]\ndgx-8xa100 gpuval_slurm_node={failing_node}\n"
        "dgx-8xh100 gpuval_slurm_node=gpu3\n"
    )
    return path


def gpuval(
    folder: Path, *args: str, json_file: str | None = None
) -> subprocess.CompletedProcess[str]:
    environment = fake_scontrol.install(folder, OUTPUTS, json_file)
    environment["PYTHONPATH"] = str(REPO / "src")
    return subprocess.run(
        [sys.executable, "-m", "gpuval", *args],
        capture_output=True, text=True, env=environment, check=False, cwd=folder,
    )  # fmt: skip


def updates(folder: Path) -> list[list[str]]:
    return [call for call in fake_scontrol.calls(folder) if call[:1] == ["update"]]


def test_dry_run_prints_the_one_drain_and_runs_none(tmp_path: Path, run_dir: Path) -> None:
    done = gpuval(tmp_path, "drain", str(run_dir), "-i", str(inventory(tmp_path, "gpu1")),
                  "--dry-run")  # fmt: skip
    assert (done.returncode, done.stdout) == (
        0, f'scontrol update NodeName=gpu1 State=DRAIN Reason="{FAILING_REASON}"\n'
    )  # fmt: skip
    assert updates(tmp_path) == []


def test_drain_runs_scontrol_for_the_failing_node_only(tmp_path: Path, run_dir: Path) -> None:
    done = gpuval(tmp_path, "drain", str(run_dir), "-i", str(inventory(tmp_path, "gpu1")))
    assert done.returncode == 0, done.stderr
    assert updates(tmp_path) == [
        ["update", "NodeName=gpu1", "State=DRAIN", f"Reason={FAILING_REASON}"]
    ]


def test_a_node_a_person_drained_keeps_its_reason(tmp_path: Path, run_dir: Path) -> None:
    done = gpuval(tmp_path, "drain", str(run_dir), "-i", str(inventory(tmp_path, "gpu2")))
    assert updates(tmp_path) == []
    assert "gpu2: already UNKNOWN+DRAIN+NOT_RESPONDING for another reason" in done.stdout


def test_without_inventory_the_host_name_is_the_node_name(tmp_path: Path, run_dir: Path) -> None:
    done = gpuval(tmp_path, "drain", str(run_dir), "--dry-run")
    assert done.stdout.startswith("scontrol update NodeName=dgx-8xa100 State=DRAIN")


def test_resume_gives_back_only_what_gpuval_drained(tmp_path: Path) -> None:
    done = gpuval(tmp_path, "resume", "gpu[1-4]")
    assert updates(tmp_path) == [["update", "NodeName=gpu4", "State=RESUME"]]
    assert "gpu2: stays drained: drained for another reason ('disk replacement, ticket 4711')" in (
        done.stdout
    )
    assert done.returncode == 1  # a named node stays drained


def test_resume_touches_only_the_named_nodes_when_slurm_lists_all(tmp_path: Path) -> None:
    """A JSON answer listing every node (as 22.05's `sinfo --json -n gpu1` does, played here as
    scontrol's): gpu4, drained by gpuval but not named, stays as it is."""
    done = gpuval(tmp_path, "resume", "gpu2", json_file="sinfo-22.05.json")
    assert (done.returncode, updates(tmp_path)) == (1, [])
    assert "gpu4" not in done.stdout


def test_resume_from_a_run_keeps_the_nodes_it_failed(tmp_path: Path, run_dir: Path) -> None:
    done = gpuval(tmp_path, "resume", str(run_dir), "-i", str(inventory(tmp_path, "gpu4")),
                  "--dry-run")  # fmt: skip
    assert "gpu4: stays drained: run sample-run did not pass it (fail:" in done.stdout
    assert "scontrol update" not in done.stdout


def test_resume_from_a_run_needs_the_check_it_was_drained_for_passed_again(
    tmp_path: Path, run_dir: Path
) -> None:
    """gpu4 was drained by gpuval for nccl-tests.all_reduce.busbw. dgx-8xh100 passes the sample
    run but ran no all_reduce there: no evidence that the node recovered. lambda-4xh100 passed
    that very check: its node comes back."""
    (tmp_path / "unmeasured").mkdir()
    path = tmp_path / "unmeasured" / "cluster.ini"
    path.write_text("[gpu_nodes]\ndgx-8xh100 gpuval_slurm_node=gpu4\n")
    done = gpuval(tmp_path / "unmeasured", "resume", str(run_dir), "-i", str(path), "--dry-run")
    assert "gpu4: stays drained: run sample-run did not pass nccl-tests.all_reduce.busbw" in (
        done.stdout
    )
    assert "scontrol update" not in done.stdout
    path.write_text("[gpu_nodes]\nlambda-4xh100 gpuval_slurm_node=gpu4\n")
    done = gpuval(tmp_path / "unmeasured", "resume", str(run_dir), "-i", str(path), "--dry-run")
    assert "scontrol update NodeName=gpu4 State=RESUME" in done.stdout


def test_a_refused_update_is_said_and_exits_2(tmp_path: Path) -> None:
    environment = fake_scontrol.install(tmp_path, OUTPUTS)
    environment |= {"PYTHONPATH": str(REPO / "src"), "FAKE_SCONTROL_REFUSE": "gpu4"}
    done = subprocess.run(
        [sys.executable, "-m", "gpuval", "resume", "gpu4"],
        capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "gpu4: `scontrol update NodeName=gpu4 State=RESUME` failed: slurm_update error" in (
        done.stderr
    )


def test_a_controller_out_of_reach_is_its_own_error_not_a_version_fallback(
    tmp_path: Path,
) -> None:
    environment = fake_scontrol.install(tmp_path, OUTPUTS)
    environment |= {"PYTHONPATH": str(REPO / "src"), "FAKE_SCONTROL_DOWN": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "gpuval", "resume", "gpu4"],
        capture_output=True, text=True, env=environment, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "show nodes gpu4 --json` failed: slurm_load_node error: Unable to contact" in done.stderr
    assert [call[:2] for call in fake_scontrol.calls(tmp_path)] == [["show", "nodes"]]


def test_no_run_folder_is_one_message(tmp_path: Path) -> None:
    done = gpuval(tmp_path, "drain", str(tmp_path / "nowhere"))
    assert (done.returncode, done.stderr) == (
        2, f"gpuval drain: {tmp_path / 'nowhere'}: not a run folder (no run.json, no raw/)\n"
    )  # fmt: skip


@pytest.mark.parametrize(
    "detail",
    ['busbw 310 GB/s "low"; see `dmesg` $HOME\\x', "x" * 5000, "line one\nline two"],
)
def test_reasons_are_one_short_unquoted_line(detail: str) -> None:
    reason = drain_reason("gpuval", "nccl-tests.all_reduce.busbw", detail)
    assert len(reason) <= REASON_LENGTH
    assert not set(reason) & set("\"'`$\\\n")
    assert reason.startswith("gpuval: nccl-tests.all_reduce.busbw: ")


def test_an_inventory_without_hosts_is_refused(tmp_path: Path, run_dir: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("[x\n")
    done = gpuval(tmp_path, "drain", str(run_dir), "-i", str(broken), "--dry-run")
    assert (done.returncode, done.stdout) == (2, "")
    assert f"gpuval drain: {broken}: Ansible reads no host from it" in done.stderr


DRAIN_GPU1 = f'scontrol update NodeName=gpu1 State=DRAIN Reason="{FAILING_REASON}"\n'


def test_host_vars_and_group_vars_beside_the_inventory_name_the_nodes(
    tmp_path: Path, run_dir: Path
) -> None:
    """As ansible-playbook reads them: host_vars/ over group_vars/ over the inventory file."""
    source = tmp_path / "cluster.ini"
    source.write_text("[gpu_nodes]\ndgx-8xa100 gpuval_slurm_node=gpu9\ndgx-8xh100\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu_nodes.yml").write_text("gpuval_slurm_node: gpu3\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "dgx-8xa100.yml").write_text("gpuval_slurm_node: gpu1\n")
    done = gpuval(tmp_path, "drain", str(run_dir), "-i", str(source), "--dry-run")
    assert (done.returncode, done.stdout) == (0, DRAIN_GPU1), done.stderr


def test_an_inventory_folder_is_read_with_its_group_vars(tmp_path: Path, run_dir: Path) -> None:
    folder = tmp_path / "inventory"
    (folder / "group_vars").mkdir(parents=True)
    (folder / "hosts.yml").write_text(
        "gpu_nodes:\n  hosts:\n    dgx-8xa100:\n    dgx-8xh100: {gpuval_slurm_node: gpu3}\n"
    )
    (folder / "group_vars" / "gpu_nodes.yml").write_text("gpuval_slurm_node: gpu1\n")
    done = gpuval(tmp_path, "drain", str(run_dir), "-i", str(folder), "--dry-run")
    assert (done.returncode, done.stdout) == (0, DRAIN_GPU1), done.stderr


def test_the_slurm_inventory_plugin_names_its_nodes_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plugin: slurm` is found through the repository's ansible.cfg (as `gpuval run` plays),
    whatever the working folder; the stand-in scontrol lists gpu1 idle in partition gpu."""
    source = tmp_path / "cluster.slurm.yml"
    source.write_text("plugin: slurm\npartition: gpu\n")
    environment = fake_scontrol.install(tmp_path, OUTPUTS)
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    monkeypatch.setenv("PATH", environment["PATH"])
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))
    for name in ("FAKE_SCONTROL_LOG", "FAKE_SCONTROL_TEXT", "FAKE_SCONTROL_REFUSED"):
        monkeypatch.setenv(name, environment[name])
    monkeypatch.chdir(tmp_path)
    assert slurm_node_names(source, REPO / "ansible.cfg") == {"gpu1": "gpu1"}


def test_a_broken_host_vars_file_is_an_error_naming_the_inventory(
    tmp_path: Path, run_dir: Path
) -> None:
    source = inventory(tmp_path, "gpu1")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "dgx-8xa100.yml").write_text("gpuval_slurm_node: [gpu1\n")
    done = gpuval(tmp_path, "drain", str(run_dir), "-i", str(source), "--dry-run")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"gpuval drain: {source}: ") and "Traceback" not in done.stderr
    assert "dgx-8xa100.yml" in done.stderr
