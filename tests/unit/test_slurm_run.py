"""`gpuval run --drain-failed` and `gpuval run --slurm`, against the stand-in scontrol
(tests/fake_scontrol.py: the Slurm 22.05 of tests/data/slurm/, partition gpu, gpu1 the one node
in service) and a stand-in sbatch (tests/fake_sbatch.py). No playbook runs: the post-run drain
is tested on judged run folders of tests/data, the job script by running it with bash."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests import fake_sbatch, fake_scontrol

from gpuval.cli import build_parser
from gpuval.cli.slurm_run import drain_after_run
from gpuval.slurm import batch

REPO = Path(__file__).parents[2]
OUTPUTS = REPO / "tests" / "data" / "slurm"
VERDICTS = REPO / "tests" / "data" / "verdicts"
SAMPLE_REASON = (
    "gpuval: nccl-tests.all_reduce.complete (+1 more): did not complete: 19 row(s) but no "
    "closing # Av..."
)
# What Slurm 22.05's sbatch said here for a partition that does not exist (tests/data/slurm/).
REFUSED = (OUTPUTS / "sbatch-invalid-partition-22.05.stderr").read_text().strip()


def copied(tmp_path: Path, source: Path) -> Path:
    run = tmp_path / "reports" / source.name
    shutil.copytree(source, run)
    return run


def updates(folder: Path) -> list[list[str]]:
    return [call for call in fake_scontrol.calls(folder) if call[:1] == ["update"]]


@pytest.fixture
def on_fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake scontrol first on PATH of this process; the folder of its call log."""
    environment = fake_scontrol.install(tmp_path / "slurm", OUTPUTS)
    for name in ("PATH", "FAKE_SCONTROL_LOG", "FAKE_SCONTROL_TEXT", "FAKE_SCONTROL_REFUSED"):
        monkeypatch.setenv(name, environment[name])
    return tmp_path / "slurm"


def run_args(*words: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *words])


# --drain-failed: after the report


def test_a_failing_run_drains_its_failing_node_by_its_slurm_name(
    tmp_path: Path, on_fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copied(tmp_path, REPO / "tests" / "data" / "sample-run")
    inventory = tmp_path / "cluster.ini"
    inventory.write_text(
        "[gpu_nodes]\ndgx-8xa100 gpuval_slurm_node=gpu1\ndgx-8xh100 gpuval_slurm_node=gpu3\n"
    )
    code = drain_after_run(run_args("-i", str(inventory), "--drain-failed"), run, 1)
    assert code == 1  # the run's own exit status
    assert updates(on_fake_slurm) == [
        ["update", "NodeName=gpu1", "State=DRAIN", f"Reason={SAMPLE_REASON}"]
    ]
    assert f"gpu1: drained: {SAMPLE_REASON}" in capsys.readouterr().out


def test_exactly_the_nodes_the_verdict_fails_are_drained_not_a_bad_links_ends(
    tmp_path: Path, on_fake_slurm: Path
) -> None:
    """node4 is low with everyone, the link node1-node2 is low (expected.json, written before
    gpuval judged it): node4 is drained, node1 and node2 are not."""
    case = VERDICTS / "pairs-iperf3-4hosts-bad-node-and-link"
    expected = json.loads((case / "expected.json").read_text())
    run = copied(tmp_path, case)
    assert drain_after_run(run_args("--drain-failed"), run, 1) == 1
    drained = {call[1].removeprefix("NodeName=") for call in updates(on_fake_slurm)}
    assert drained == set(expected["failing_hosts"]) - {"cluster"}


def test_a_run_judged_error_drains_nothing_and_says_so(
    tmp_path: Path, on_fake_slurm: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copied(tmp_path, VERDICTS / "run-json-hosts-not-a-list")
    assert drain_after_run(run_args("--drain-failed"), run, 2) == 2
    assert "nothing drained" in capsys.readouterr().out
    assert fake_scontrol.calls(on_fake_slurm) == []


def test_a_refused_drain_makes_the_run_exit_2(
    tmp_path: Path, on_fake_slurm: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("FAKE_SCONTROL_REFUSE", "node4")
    run = copied(tmp_path, VERDICTS / "pairs-iperf3-4hosts-bad-node-and-link")
    assert drain_after_run(run_args("--drain-failed"), run, 1) == 2
    assert "Invalid node state specified" in capsys.readouterr().err


def test_a_passing_run_drains_nothing(tmp_path: Path, on_fake_slurm: Path) -> None:
    run = copied(tmp_path, VERDICTS / "pairs-iperf3-8hosts-healthy")
    assert drain_after_run(run_args("--drain-failed"), run, 0) == 0
    assert updates(on_fake_slurm) == []


# --slurm: the job


def test_the_sbatch_command_asks_for_idle_whole_nodes_at_low_priority(tmp_path: Path) -> None:
    job = batch.BatchJob(
        run_dir=tmp_path / "reports" / "r1", workdir=tmp_path, partition="gpu", nodes="1-16",
        time_minutes=81, qos="scavenger", reservation="acceptance",
    )  # fmt: skip
    assert batch.sbatch_command(job) == [
        "sbatch", "--parsable", "--job-name=gpuval-r1", "--partition=gpu", "--nodes=1-16",
        "--exclusive", "--time=81", "--nice=10000", "--no-requeue", "--signal=B:TERM@360",
        f"--chdir={tmp_path}", f"--output={tmp_path}/reports/r1/slurm/slurm-%j.out",
        "--qos=scavenger", "--reservation=acceptance", f"{tmp_path}/reports/r1/slurm/job.sh",
    ]  # fmt: skip


def test_the_time_limit_is_the_prediction_a_quarter_more_and_the_stop_notice() -> None:
    assert batch.time_limit_minutes(3600) == 81  # 60 min + 15 min + 6 min
    assert batch.time_limit_minutes(0) == 6
    assert batch.node_range(1) == "1"
    assert batch.node_range(16) == "1-16"


def test_the_job_script_lists_the_allocation_and_runs_gpuval_on_it(tmp_path: Path) -> None:
    job = batch.BatchJob(tmp_path / "reports" / "r1", tmp_path, "gpu", "1-2", 10)
    base = {"plugin": "slurm", "partition": "gpu", "features": ["h100"],
            "compose": {"ansible_user": "'ubuntu'"}}  # fmt: skip
    inventory = batch.allocation_inventory(base, "gpuval.cluster.slurm")
    script = batch.job_script(job, inventory, ["echo"], ["--drain-failed"], {"A_B": "x y"})
    job.folder.mkdir(parents=True)
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, check=True,
        env={"PATH": os.environ["PATH"], "SLURM_JOB_NODELIST": "gpu[1-2]", "SLURM_JOB_ID": "57"},
    )  # fmt: skip
    # The job is the run's allocation: its srun steps run in it, no second salloc for its nodes.
    assert done.stdout.split() == [
        "run", "-i", str(job.inventory_path), "--run-id", "r1", "--reports",
        str(tmp_path / "reports"), "--drain-failed", "-e", "gpuval_slurm_jobid=57",
    ]  # fmt: skip
    written = yaml.safe_load(job.inventory_path.read_text())
    assert written == {"plugin": "slurm", "features": ["h100"],
                       "compose": {"ansible_user": "'ubuntu'"}, "nodelist": "gpu[1-2]"}  # fmt: skip
    assert "export A_B='x y'" in script
    assert "\nexec echo run" in script  # gpuval replaces the shell: Slurm's signal reaches it


def gpuval(folder: Path, *args: str, **more: str) -> subprocess.CompletedProcess[str]:
    environment = fake_sbatch.install(folder, fake_scontrol.install(folder, OUTPUTS))
    environment |= {"PYTHONPATH": str(REPO / "src"), **more}
    return subprocess.run(
        [sys.executable, "-m", "gpuval", *args],
        capture_output=True, text=True, env=environment, check=False, cwd=folder,
    )  # fmt: skip


def test_run_slurm_submits_the_job_and_says_how_to_follow_it(tmp_path: Path) -> None:
    done = gpuval(
        tmp_path, "run", "--slurm", "gpu", "--qos", "scavenger", "--drain-failed",
        "--run-id", "r1", "--reports", "reports", "--profile", "h100-sxm-8x",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [call] = fake_sbatch.calls(tmp_path)
    argv = call["argv"]
    assert isinstance(argv, list)
    run_dir = tmp_path / "reports" / "r1"
    assert "--nodes=1" in argv  # gpu1 is the partition's one node in service
    assert "--qos=scavenger" in argv
    assert argv[-1] == str(run_dir / "slurm" / "job.sh")
    script = str(call["script"])
    assert "--profile h100-sxm-8x" in script
    assert "--drain-failed --reason-prefix gpuval" in script
    assert f"--run-id r1 --reports {tmp_path / 'reports'}" in script
    assert "squeue -j 4242; sacct -j 4242" in done.stdout
    assert "sbatch --parsable --job-name=gpuval-r1 --partition=gpu" in done.stdout


def test_the_default_time_limit_comes_from_gpuval_plan(tmp_path: Path) -> None:
    plan = gpuval(tmp_path, "plan", "--nodes", "1", "--gpus-per-node", "8", "--profile",
                  "h100-sxm-8x", "--reports", "reports", "--json")  # fmt: skip
    predicted = json.loads(plan.stdout)["total_s"]
    done = gpuval(tmp_path, "run", "--slurm", "gpu", "--run-id", "r2", "--reports", "reports",
                  "--profile", "h100-sxm-8x")  # fmt: skip
    assert done.returncode == 0, done.stderr
    [call] = fake_sbatch.calls(tmp_path)
    assert f"--time={batch.time_limit_minutes(predicted)}" in call["argv"]  # type: ignore[operator]


def test_a_refused_job_is_one_message_and_leaves_no_run_folder(tmp_path: Path) -> None:
    done = gpuval(tmp_path, "run", "--slurm", "nope", "--time", "30", "--nodes", "2",
                  "--run-id", "r3", "--reports", "reports", FAKE_SBATCH_REFUSE=REFUSED)  # fmt: skip
    assert done.returncode == 2
    assert "sbatch: error: Batch job submission failed: Invalid partition name" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "reports" / "r3").exists()


def test_without_sbatch_it_says_where_to_run(tmp_path: Path) -> None:
    environment = fake_scontrol.install(tmp_path, OUTPUTS)
    # the fake scontrol and this Python on PATH, not /usr/bin (which may hold a real sbatch)
    environment["PATH"] = f"{tmp_path / 'bin'}:{Path(sys.executable).parent}"
    environment["PYTHONPATH"] = str(REPO / "src")
    done = subprocess.run(
        [sys.executable, "-m", "gpuval", "run", "--slurm", "gpu", "--reports", "reports"],
        capture_output=True, text=True, env=environment, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert "sbatch, which is not on PATH: run it on a login node" in done.stderr
    assert not (tmp_path / "reports").exists()


def test_an_inventory_of_another_kind_is_refused(tmp_path: Path) -> None:
    (tmp_path / "cluster.ini").write_text("[gpu_nodes]\nnode1\n")
    done = gpuval(tmp_path, "run", "--slurm", "gpu", "-i", "cluster.ini", "--time", "9")
    assert done.returncode == 2
    assert "with --slurm, -i names a slurm inventory file" in done.stderr
    assert fake_sbatch.calls(tmp_path) == []


@pytest.mark.parametrize("nodes", ["x-y", "0", "4-2", "2-", "-4", "2,4"])
def test_a_node_count_sbatch_cannot_take_is_a_usage_error_before_slurm_is_asked(
    nodes: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        build_parser().parse_args(["run", "--slurm", "gpu", "--nodes", nodes])
    assert stopped.value.code == 2
    assert "a node count N or a range MIN-MAX" in capsys.readouterr().err


def test_a_node_count_or_range_is_taken_as_given() -> None:
    for nodes in ("4", "2-16", "1-1"):
        assert build_parser().parse_args(["run", "--slurm", "gpu", "--nodes", nodes]).nodes == nodes
