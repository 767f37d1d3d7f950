"""The MPI preflight tried twice: one failed try is not a verdict on a host.

Expected, written from the rule before running gpuval (a node is never failed on one
unconfirmed measurement; a failure that a second try does not repeat is worth a warning):
- first try crashed on node2, second passed: the preflight warns, node2 warns, nothing fails
  (not the first try's exit status either);
- both tries crashed on node2: the preflight fails and so does node2;
- the first names node2, the second node3: the preflight fails, but neither host is confirmed
  (each warns);
- the only try failed (the retry turned off): as before, the preflight and node2 fail;
- an earlier start's failed retry under the same run id judges nothing of this start's passed
  preflight.
The crashes: Open MPI 4.1's own report (mpirun's "process rank R with PID P on node H exited on
signal"), and srun's words recorded on Slurm 22.05 (tests/data/slurm/README.md)."""

from __future__ import annotations

from pathlib import Path

from tests.run_folders import write_run_json, write_step

from gpuval.checks import judge_run
from gpuval.checks.model import Check
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.parsers import gpuval_bench
from gpuval.plugin_api import judge_pairs
from gpuval.records.collective_bench import MpiPreflightRun
from gpuval.runfolder import read_run_folder

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
HOSTS = ["node1", "node2", "node3"]
PASSED = (
    "gpuval-mpi-preflight rank 0/3 host node1\n"
    "gpuval-mpi-preflight library Open MPI v4.1.4, package: Debian OpenMPI\n"
    "gpuval-mpi-preflight rank 1/3 host node2\n"
    "gpuval-mpi-preflight rank 2/3 host node3\n"
    "gpuval-mpi-preflight alltoall pairs 6 bad 0\n"
    "gpuval-mpi-preflight allreduce sum 6 expected 6\n"
    "gpuval-mpi-preflight OK 3 ranks on 3 hosts\n"
)


def mpirun_crash(host: str, rank: int) -> str:
    return (
        "gpuval-mpi-preflight rank 0/3 host node1\n"
        f"[{host}:04242] *** Process received signal ***\n"
        f"[{host}:04242] Signal: Segmentation fault (11)\n"
        f"[{host}:04242] Failing at address: (nil)\n"
        "--------------------------------------------------------------------------\n"
        f"mpirun noticed that process rank {rank} with PID 4242 on node {host} exited on "
        "signal 11 (Segmentation fault).\n"
        "--------------------------------------------------------------------------\n"
    )


# A step of three tasks in which node2's died of SIGSEGV and srun terminated node1's after it.
SRUN_CRASH = (DATA / "srun-step-task-segfault-22.05.txt").read_text()


def try_step(run: Path, name: str, output: str, started: str) -> None:
    write_step(
        run, "node1", name, output, exit_code=0 if output == PASSED else 139,
        phase="mpi-preflight", tool="mpi-preflight", started_at=started,
    )  # fmt: skip


def judged(run: Path, *tries: tuple[str, str, str]) -> list[Check]:
    write_run_json(run, "r", HOSTS)
    for name, output, started in tries:
        try_step(run, name, output, started)
    checks = judge_run(build_evidence(read_run_folder(run)), DEFAULTS).checks
    return [c for c in checks if "preflight" in c.check_id or c.check_id.startswith("parse.")]


def statuses(checks: list[Check]) -> list[tuple[str, str, str]]:
    return sorted((c.check_id, c.host, c.status) for c in checks)


FIRST = ("mpi-preflight", "2026-11-27T20:00:00.000000Z")
RETRY = ("mpi-preflight-retry", "2026-11-27T20:00:05.000000Z")


def test_srun_names_the_task_a_signal_ended_not_the_tasks_it_killed_after() -> None:
    (run,) = gpuval_bench.parse(SRUN_CRASH, tool="mpi-preflight").runs
    assert isinstance(run, MpiPreflightRun)
    assert [(p.host, p.rank) for p in run.problems] == [("node2", 1)]
    # Every rank exits 1 when rank 0 found a problem: the exit codes blame no host (nor does
    # srun's "Terminated" for the tasks it ended after a crash, above).
    exited = "srun: error: node1: task 0: Exited with exit code 1\n"
    (run,) = gpuval_bench.parse(exited, tool="mpi-preflight").runs
    assert isinstance(run, MpiPreflightRun) and run.problems == []


def test_a_crash_the_second_try_does_not_repeat_warns_and_fails_nothing(tmp_path: Path) -> None:
    checks = judged(tmp_path, (FIRST[0], SRUN_CRASH, FIRST[1]), (RETRY[0], PASSED, RETRY[1]))
    assert statuses(checks) == [
        ("mpi-preflight", "node1", "warn"), ("mpi-preflight.host", "node2", "warn"),
    ]  # fmt: skip
    assert checks[0].reason.startswith(
        "MPI preflight passed on its second try; the first try "
        "failed (raw/node1/mpi-preflight.txt): host(s) node2"
    )
    assert checks[0].source == "raw/node1/mpi-preflight-retry.txt"
    progress = judge_pairs(tmp_path, [])
    assert progress.mpi_preflight["ok"] is True
    assert (progress.mpi_preflight["retry"], progress.mpi_preflight["failed_hosts"]) == (False, [])


def test_a_crash_both_tries_name_fails_the_preflight_and_the_host(tmp_path: Path) -> None:
    crash = mpirun_crash("node2", 1)
    checks = judged(tmp_path, (FIRST[0], crash, FIRST[1]), (RETRY[0], crash, RETRY[1]))
    # The second try's own ending and unfinished output fail as any step's do.
    assert statuses(checks) == [
        ("mpi-preflight", "node1", "fail"), ("mpi-preflight.host", "node2", "fail"),
        ("parse.error", "node1", "fail"), ("step.mpi-preflight-retry", "node1", "fail"),
    ]  # fmt: skip
    reasons = {c.check_id: c.reason for c in checks}
    assert reasons["mpi-preflight"].startswith("MPI preflight failed twice: host(s) node2")
    assert reasons["mpi-preflight.host"].startswith("named by both tries of the MPI preflight: ")
    assert "mpi-preflight-retry.txt" in next(
        c.source for c in checks if c.check_id == "parse.error"
    )
    outcome = judge_pairs(tmp_path, []).mpi_preflight
    assert (outcome["ok"], outcome["retry"], outcome["failed_hosts"]) == (False, False, ["node2"])


def test_two_failed_tries_that_name_different_hosts_confirm_neither(tmp_path: Path) -> None:
    checks = judged(
        tmp_path,
        (FIRST[0], mpirun_crash("node2", 1), FIRST[1]),
        (RETRY[0], mpirun_crash("node3", 2), RETRY[1]),
    )
    assert statuses(checks) == [
        ("mpi-preflight", "node1", "fail"), ("mpi-preflight.host", "node2", "warn"),
        ("mpi-preflight.host", "node3", "warn"), ("parse.error", "node1", "fail"),
        ("step.mpi-preflight-retry", "node1", "fail"),
    ]  # fmt: skip
    assert judge_pairs(tmp_path, []).mpi_preflight["failed_hosts"] == []


def test_a_single_failed_try_fails_and_asks_for_its_retry(tmp_path: Path) -> None:
    checks = judged(tmp_path, (FIRST[0], mpirun_crash("node2", 1), FIRST[1]))
    assert statuses(checks) == [
        ("mpi-preflight", "node1", "fail"), ("mpi-preflight.host", "node2", "fail"),
        ("parse.error", "node1", "fail"), ("step.mpi-preflight", "node1", "fail"),
    ]  # fmt: skip
    outcome = judge_pairs(tmp_path, []).mpi_preflight
    assert (outcome["retry"], outcome["failed_hosts"]) == (True, ["node2"])


def test_an_earlier_start_s_retry_judges_nothing_of_this_start(tmp_path: Path) -> None:
    earlier = ("mpi-preflight-retry", mpirun_crash("node2", 1), "2026-11-27T19:00:00.000000Z")
    checks = judged(tmp_path, earlier, (FIRST[0], PASSED, FIRST[1]))
    assert statuses(checks) == [("mpi-preflight", "node1", "pass")]
    outcome = judge_pairs(tmp_path, []).mpi_preflight
    assert (outcome["ok"], outcome["retry"], outcome["failed_hosts"]) == (True, False, [])
