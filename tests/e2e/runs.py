"""Running the playbooks on simulated hosts, for the end-to-end tests and `make bench-ansible`
(the hosts' doubles: tests/e2e/doubles.py)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuval.plan.step_history import busy_seconds, sidecar_intervals
from tests.e2e.doubles import REPO, TOOLKIT_VARS, VENV_BIN
from tests.simhosts.cluster import Cluster

# The longest a test's playbook run may take (make test's longest runs take a few minutes).
PLAYBOOK_LIMIT_S = 1800.0


@dataclass
class PlaybookRun:
    returncode: int
    output: str
    seconds: float
    run_dir: Path
    # CPU time of ansible-playbook and the workers it forked (the controller's share; sshd and
    # the modules on simulated hosts are not its children, though they share this machine).
    controller_cpu_s: float = 0.0


def inventory_dir(cluster: Cluster, where: Path, hosts: Path | None = None) -> Path:
    """The cluster's inventory (or `hosts`, an inventory of some of its hosts) beside the
    repository's group_vars, as a user's inventory sits; host_vars/ is there for a test to break
    one node."""
    where.mkdir(parents=True, exist_ok=True)
    shutil.copy(hosts or cluster.inventory, where / "cluster.ini")
    (where / "group_vars").symlink_to(REPO / "inventory" / "group_vars")
    (where / "host_vars").mkdir()
    return where / "cluster.ini"


def run_playbook(
    playbook: str,
    inventory: Path,
    reports: Path,
    run_id: str,
    extra_vars: dict[str, object],
    arguments: Sequence[str] = (),
    environment: dict[str, str] | None = None,
    limit_s: float | None = PLAYBOOK_LIMIT_S,
) -> PlaybookRun:
    """playbooks/<playbook> from the repository root with its ansible.cfg; the output is kept
    beside the run folder for a failing test's reader. A run still going after `limit_s` is
    killed and fails the test (a hung run would otherwise hold make test until CI's limit)."""
    variables = {
        "gpuval_run_id": run_id, "gpuval_reports_dir": str(reports), **TOOLKIT_VARS, **extra_vars
    }  # fmt: skip
    command: Sequence[str] = [
        str(VENV_BIN / "ansible-playbook"), "-i", str(inventory),
        str(REPO / "playbooks" / playbook), "-e", json.dumps(variables), *arguments,
    ]  # fmt: skip
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    env["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    # This cluster's facts only: another cluster's node1 is not this one.
    env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] = str(inventory.parent / "facts")
    env.update(environment or {})
    started, cpu = time.monotonic(), _children_cpu_s()
    reports.mkdir(parents=True, exist_ok=True)
    log = reports / f"{run_id}.ansible.log"
    try:
        done = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, check=False,
            timeout=limit_s,
        )  # fmt: skip
    except subprocess.TimeoutExpired as hung:
        log.write_text(_text(hung.stdout) + _text(hung.stderr))
        raise AssertionError(f"{playbook} still running after {limit_s} s, killed: {log}") from None
    seconds, controller_cpu_s = time.monotonic() - started, _children_cpu_s() - cpu
    output = done.stdout + done.stderr
    log.write_text(output)
    return PlaybookRun(done.returncode, output, seconds, reports / run_id, controller_cpu_s)


def _text(partial: str | bytes | None) -> str:
    """What a killed run printed (TimeoutExpired gives bytes even for a text run)."""
    if isinstance(partial, bytes):
        return partial.decode("utf-8", errors="replace")
    return partial or ""


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def record(line: str) -> None:
    """A timing: printed, and appended to $GPUVAL_TIMINGS_FILE when set."""
    print(line)
    if target := os.environ.get("GPUVAL_TIMINGS_FILE"):
        with open(target, "a", encoding="utf-8") as timings:
            timings.write(line + "\n")


def process_seconds(run_dir: Path) -> float:
    """Wall time during which a captured benchmark process ran on some node: the union of the
    [started_at, ended_at] intervals of every sidecar of the run (concurrent ones count once)."""
    return busy_seconds(sidecar_intervals(run_dir))


# The pair phase's iperf3 pairs, shorter than a cluster's: the benchmark.yml runs are about
# the playbook.
SHORT_PAIRS = {"bench_pairs_iperf3_seconds": 2, "bench_pairs_iperf3_timeout_s": 20}


def sidecar(run: PlaybookRun, host: str, step: str) -> dict[str, object]:
    document = json.loads((run.run_dir / "raw" / host / f"{step}.meta.json").read_text())
    assert isinstance(document, dict)
    return document


def summary(run: PlaybookRun) -> dict[str, object]:
    document = json.loads((run.run_dir / "summary.json").read_text())
    assert isinstance(document, dict)
    return document
