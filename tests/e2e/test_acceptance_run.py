"""`gpuval run` end to end on two simulated hosts: scheduled acceptance over ansible-runner.

One cluster serves every assertion. `gpuval run` runs playbooks/benchmark.yml through
ansible-runner with `--tags pairs` and the simulated-pairs profile (iperf3 between the two
hosts, 2 s each way, judged against a baseline, tests/e2e/profiles): a nightly network check.

The runs measure but cannot judge the line rate (no preflight): each healthy one is UNJUDGED,
exit status 3.

1. Run 1 shows its progress (phase, host, step, a bar over run.json's expected steps) and keeps
   ansible-runner's artifacts in the run folder; it becomes the baseline.
2. Runs 2-4 are healthy. Before run 5, node2's link is throttled to 20 Mbit/s (tc tbf both
   ways): iperf3 cannot exceed that rate, while healthy runs measure gigabits. The baseline
   rule fails run 5, `gpuval compare` names the regression with both numbers, the history has
   five runs, the Prometheus file says fail, and the webhook is called without its URL ever
   being printed or written.
3. A sixth run is stopped with Ctrl-C (SIGINT) while its iperf3 step runs on node1: the nodes'
   outputs are collected, the report judges them, and the exit status is 2.
4. The overhead of `gpuval run` against a bare ansible-playbook run of the same playbook, tags
   and variables (run 4 and one run of ansible-playbook after the others) is printed and written
   to $GPUVAL_TIMINGS_FILE.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuval.profile import load_profile
from gpuval.run.launch import phase_vars
from tests.simhosts import faults
from tests.simhosts.cluster import Cluster
from tests.simhosts.fixtures import simulated_hosts

pytestmark = pytest.mark.simhosts

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PROFILE = REPO / "tests" / "e2e" / "profiles" / "simulated-pairs.yaml"
THROTTLE = "20mbit"
# iperf3 through a 20 Mbit/s tbf with a 512 KB burst, over 2 s: at most 0.020 + 0.0021 Gbit/s.
THROTTLED_MAX_GBIT = 0.023
SECRET = "T0TEST/B0TEST/not-a-real-token"
EXIT_UNJUDGED = 3  # gpuval run's exit status for an unjudged verdict (the default --fail-on)


@dataclass
class CliRun:
    returncode: int
    output: str
    seconds: float
    run_dir: Path

    def summary(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads((self.run_dir / "summary.json").read_text())
        return document

    def checks(self) -> dict[tuple[str, str], dict[str, Any]]:
        results = json.loads((self.run_dir / "results.json").read_text())
        return {(c["check_id"], c["host"]): c for c in results["checks"]}

    def figure(self, host: str, name: str) -> float:
        found = [
            f["value"] for f in self.summary()["figures"] if (f["host"], f["name"]) == (host, name)
        ]
        assert len(found) == 1, self.summary()["figures"]
        return float(found[0])


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GPUVAL_WEBHOOK_URL"}
    # Facts in memory: the repository's fact cache is keyed by host name, and other tests'
    # simulated clusters, running at the same time, have hosts of the same names.
    return {
        **env, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "ANSIBLE_CACHE_PLUGIN": "memory",
        **extra,
    }  # fmt: skip


def command(inventory: Path, reports: Path, run_id: str, *extra: str) -> list[str]:
    return [
        str(VENV_BIN / "gpuval"), "run", "-i", str(inventory), "--profile", str(PROFILE),
        "--tags", "pairs", "--reports", str(reports), "--run-id", run_id, *extra,
    ]  # fmt: skip


def finished(process: subprocess.Popen[str], started: float, run_dir: Path) -> CliRun:
    try:
        output, _ = process.communicate()
    except BaseException:  # an interrupted test leaves no run behind
        process.kill()
        raise
    (run_dir.parent / f"{run_dir.name}.gpuval.log").write_text(output)  # for a failing test
    return CliRun(process.returncode, output, time.monotonic() - started, run_dir)


def gpuval_run(inventory: Path, reports: Path, run_id: str, **env: str) -> CliRun:
    started = time.monotonic()
    process = subprocess.Popen(
        command(inventory, reports, run_id), cwd=REPO, env=environment(**env), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    return finished(process, started, reports / run_id)


def bare_playbook(inventory: Path, reports: Path, run_id: str) -> CliRun:
    """ansible-playbook itself, with what gpuval run would pass (and the playbook's report)."""
    variables = {
        **load_profile(str(PROFILE)).ansible_vars(), **phase_vars(["pairs"]),
        "gpuval_run_id": run_id, "gpuval_reports_dir": str(reports), "report_fail_play": False,
    }  # fmt: skip
    argv: Sequence[str] = [
        str(VENV_BIN / "ansible-playbook"), "-i", str(inventory),
        str(REPO / "playbooks" / "benchmark.yml"), "--tags", "pairs,collect,report",
        "-e", json.dumps(variables),
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        argv, cwd=REPO, env=environment(ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return CliRun(done.returncode, done.stdout + done.stderr, time.monotonic() - started,
                  reports / run_id)  # fmt: skip


class Receiver(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        Receiver.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@dataclass
class Nodes:
    cluster: Cluster
    inventory: Path  # beside the repository's group_vars, as a user's inventory sits

    def host(self, name: str) -> Any:
        return self.cluster.host(name)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    where = tmp_path_factory.mktemp("acceptance-inventory")
    with simulated_hosts(2, name="e2e-acceptance") as hosts:
        shutil.copy(hosts.inventory, where / "cluster.ini")
        (where / "group_vars").symlink_to(REPO / "inventory" / "group_vars")
        yield Nodes(hosts, where / "cluster.ini")


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("acceptance-reports")


@dataclass
class Series:
    runs: list[CliRun]
    history: subprocess.CompletedProcess[str]
    compare: subprocess.CompletedProcess[str]
    baseline: subprocess.CompletedProcess[str]
    webhook_bodies: list[dict[str, Any]]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "gpuval"), *args], cwd=REPO, env=environment(), capture_output=True,
        text=True, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def series(cluster: Nodes, reports: Path) -> Iterator[Series]:
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{server.server_port}/hooks/{SECRET}"
    runs = [gpuval_run(cluster.inventory, reports, "night-1")]
    baseline = cli("baseline", "create", "night-1", "--reports", str(reports))  # "default"
    runs += [gpuval_run(cluster.inventory, reports, f"night-{n}") for n in (2, 3, 4)]
    faults.throttle(cluster.host("node2"), THROTTLE)
    try:
        runs.append(gpuval_run(cluster.inventory, reports, "night-5", GPUVAL_WEBHOOK_URL=hook))
    finally:
        faults.unthrottle(cluster.host("node2"))
        server.shutdown()
    history = cli("history", "--reports", str(reports))
    compare = cli("compare", "night-4", "night-5", "--reports", str(reports))
    yield Series(runs, history, compare, baseline, list(Receiver.bodies))


def test_gpuval_run_shows_its_progress_and_keeps_runner_artifacts(series: Series) -> None:
    first = series.runs[0]
    assert first.returncode == EXIT_UNJUDGED, first.output[-4000:]
    lines = first.output.splitlines()
    assert any(line.endswith("phase pairs") for line in lines), first.output
    steps = [line for line in lines if "steps" in line and "pairs  node1  pair-iperf3" in line]
    assert len(steps) == 2, first.output
    assert steps[0].startswith("[############------------] 1/2 steps  50 %")
    assert steps[1].startswith("[########################] 2/2 steps 100 %")
    assert {s.rsplit(" ", 1)[1] for s in steps} == {
        "pair-iperf3-r1-node1--node2-try1", "pair-iperf3-r1-node2--node1-try1",
    }  # fmt: skip
    assert "ansible-playbook: successful (rc 0)" in first.output
    # With no preflight, nothing tells the interface's line rate: measured, not judged.
    assert "verdict: UNJUDGED" in first.output
    assert f"report: {first.run_dir / 'report.html'}" in first.output
    artifacts = first.run_dir / "runner" / "benchmark"
    assert len(list((artifacts / "job_events").glob("*.json"))) > 10
    assert "PLAY RECAP" in (artifacts / "stdout").read_text()
    assert (artifacts / "status").read_text() == "successful"
    assert "env" not in json.loads((artifacts / "command").read_text())
    run_json = json.loads((first.run_dir / "run.json").read_text())
    assert run_json["expected"] == {"node1": [
        "pair-iperf3-r1-node1--node2-try1", "pair-iperf3-r1-node2--node1-try1"
    ], "node2": []}  # fmt: skip


def test_the_baseline_catches_the_throttled_link(series: Series) -> None:
    assert series.baseline.returncode == 0, series.baseline.stderr
    healthy, throttled = series.runs[1:4], series.runs[4]
    for run in healthy:  # within the baseline; the line rate still unknown: unjudged
        assert run.returncode == EXIT_UNJUDGED, run.output[-4000:]
        assert run.summary()["baseline"] == "default"
        assert run.summary()["verdict"] == "unjudged"
    assert throttled.returncode == 1, throttled.output[-4000:]
    assert throttled.summary()["verdict"] == "fail"
    baseline_value = series.runs[0].figure("node2", "pair.iperf3")
    for host in ("node1", "node2"):  # one pair: both its ends measured the throttled link
        check = throttled.checks()[("baseline.variance.pair.iperf3", host)]
        assert check["status"] == "fail"
        assert check["measured"] <= THROTTLED_MAX_GBIT
        assert check["reference"] == baseline_value
        assert "of baseline 'default'" in check["reason"]
        assert f"FAIL {host} baseline.variance.pair.iperf3" in throttled.output


def test_history_holds_the_five_runs_and_compare_names_the_regression(series: Series) -> None:
    assert series.history.returncode == 0, series.history.stderr
    out = series.history.stdout
    for n in range(1, 6):
        assert f"#{n:<3} night-{n}" in out
    assert "night-5" in out.splitlines()[5] and "FAIL" in out.splitlines()[5]
    row = next(
        line for line in out.splitlines() if line.startswith("pair.iperf3") and "node2" in line
    )
    values = [float(v) for v in row.split()[3:8]]
    assert values[4] <= THROTTLED_MAX_GBIT < min(values[:4])
    assert series.compare.returncode == 1, series.compare.stdout + series.compare.stderr
    before = series.runs[3].figure("node2", "pair.iperf3")
    after = series.runs[4].figure("node2", "pair.iperf3")
    change = (after - before) / before * 100
    assert (
        f"  FAIL node2 pair.iperf3 {before:.4g} -> {after:.4g} Gbit/s ({change:+.0f} %, beyond "
        "the 10 % allowed)"
    ) in series.compare.stdout.splitlines()


def test_the_prometheus_file_and_the_webhook_tell_the_failure(series: Series) -> None:
    throttled = series.runs[4]
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(
            (throttled.run_dir / "gpuval.prom").read_text()
        )
        for s in family.samples
    }
    assert samples[("gpuval_run_verdict", (("verdict", "fail"),))] == 1
    rate = (("host", "node2"), ("kind", "iperf3"), ("unit", "Gbit/s"))
    assert samples[("gpuval_pair_rate", rate)] == throttled.figure("node2", "pair.iperf3")
    (body,) = series.webhook_bodies  # night-5 alone is given the webhook, and it fails
    assert (body["run_id"], body["verdict"]) == ("night-5", "fail")
    assert "webhook notified (HTTP 200)" in throttled.output
    assert SECRET not in throttled.output
    for path in throttled.run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.fixture(scope="module")
def stopped(cluster: Nodes, reports: Path, series: Series) -> CliRun:
    """A run stopped with SIGINT while node1 runs its first iperf3 step (30 s long)."""
    run_id = "stopped"
    sidecar = (
        cluster.host("node1").root / "var/tmp/gpuval/runs" / run_id
        / "pair-iperf3-r1-node1--node2-try1.meta.json"
    )  # fmt: skip
    started = time.monotonic()
    process = subprocess.Popen(
        [*command(cluster.inventory, reports, run_id), "-e", "bench_pairs_iperf3_seconds=30"],
        cwd=REPO, env=environment(), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    while not sidecar.exists() and process.poll() is None and time.monotonic() - started < 300:
        time.sleep(0.5)
    time.sleep(2)  # the step is running: its sidecar is written before the command starts
    process.send_signal(signal.SIGINT)
    return finished(process, started, reports / run_id)


def test_ctrl_c_stops_the_run_cleanly_and_still_reports(stopped: CliRun) -> None:
    assert stopped.returncode == 2, stopped.output[-4000:]
    assert "SIGINT: stopping ansible-playbook" in stopped.output
    assert "collecting what the nodes measured so far" in stopped.output
    assert "stopped before the end: the run is incomplete (exit 2)" in stopped.output
    # the one measurement was cut short: the pair has no number, which fails it
    assert stopped.summary()["verdict"] == "fail"
    link = stopped.checks()[("pairs.iperf3.link.node1--node2", "cluster")]
    assert link["status"] == "fail"
    assert "did not finish" in link["reason"]
    assert (stopped.run_dir / "report.html").is_file()
    assert (stopped.run_dir / "runner" / "collect-after-stop" / "stdout").is_file()


def test_overhead_of_gpuval_run_against_bare_ansible_playbook(
    cluster: Nodes, reports: Path, series: Series, stopped: CliRun
) -> None:
    """The healthy night-4 against ansible-playbook with the same playbook, tags and variables,
    run next (its own report phase renders the report)."""
    ours = series.runs[3]
    bare = bare_playbook(cluster.inventory, reports, "bare")
    assert bare.returncode == 0, bare.output[-4000:]
    assert (bare.run_dir / "report.html").is_file()
    overhead = (ours.seconds - bare.seconds) / bare.seconds * 100
    line = (
        f"gpuval run against bare ansible-playbook (2 hosts, --tags pairs): "
        f"{ours.seconds:.1f} s vs {bare.seconds:.1f} s ({overhead:+.1f} %)"
    )
    print(line)
    if target := os.environ.get("GPUVAL_TIMINGS_FILE"):
        with open(target, "a", encoding="utf-8") as timings:
            timings.write(line + "\n")
