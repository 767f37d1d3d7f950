"""playbooks/acceptance.yml ("find the bad node") end to end on four simulated hosts.

One cluster, several runs (the install cost is paid once):
1. healthy: every pair measured in N-1 = 3 rounds, the pairs of a round at the same time, the
   MPI preflight passes, no pair is flagged; `gpuval report` twice gives the same results. Its
   verdict is UNJUDGED, as it must be: gloo on CPUs is bound by the CPUs, so the all-reduce pairs
   cannot be compared with the network's bound; the default gate fails the report play on it
   (ansible-playbook exits 2, `gpuval report` 3).
2. node3's link throttled to 100 Mbit/s, 1 % of the veth's 10 Gbit/s: node3 and only node3 is
   flagged by its iperf3 pairs (report, junit.xml), the run fails.
3. Ctrl-C (SIGINT to ansible-playbook) mid pair phase: the nodes are still collected and the
   report rendered before ansible-playbook exits (interrupted, 99); the verdict fails (the pairs
   not measured are missing).
4. node4's traffic dropped (iptables DROP) after the first round: its captures time out, ssh's
   keepalive finds it unreachable, the run completes, node4 is flagged, files measured before the
   fault are on the controller.
5. node2 killed after the first round: the run completes without it, its pairs fail closed and
   what it measured first was collected.

The nodes get torch from the controller's .venv (site-packages bound read-only, PYTHONPATH), so
the all-reduce pairs run too. Every run is judged with gpuval's default thresholds. Timings go to
stdout and $GPUVAL_TIMINGS_FILE.
"""

from __future__ import annotations

import json
import os
import signal
import site
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuval.plan.steps import pair_step
from tests.simhosts import faults
from tests.simhosts.cluster import Cluster
from tests.simhosts.fixtures import simulated_hosts

pytestmark = pytest.mark.simhosts

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SITE_PACKAGES = next(p for p in site.getsitepackages() if p.endswith("site-packages"))
HOSTS = ["node1", "node2", "node3", "node4"]
# A throttle far below anything a healthy pair of this loaded 2-core VM measures (several
# Gbit/s over the 10 Gbit/s veths), so no threshold decides it.
THROTTLE = "100mbit"
# Fault runs: iperf3 only and one repeat, to keep the suite short (the healthy run covers the
# all-reduce pairs and the full repeats; the all-reduce judging of a slow pair is unit-tested, and
# here it would cost the throttled run a third of its time without an assertion of its own).
IPERF3_ONLY: dict[str, object] = {"bench_pairs_allreduce": False, "bench_pairs_max_tries": 2}
FAST = {
    "bench_pairs_iperf3_seconds": 2,
    "bench_pairs_iperf3_timeout_s": 15,
    "bench_pairs_pythonpath": SITE_PACKAGES,
    "bench_pairs_allreduce_min_bytes": "1M",
    "bench_pairs_allreduce_max_bytes": "4M",
    "bench_pairs_allreduce_iterations": 5,
    "bench_pairs_allreduce_warmup": 1,
    "bench_pairs_allreduce_timeout_s": 60,
    "gpuval_network_interface": "eth0",
}


@dataclass
class Run:
    returncode: int
    output: str
    seconds: float
    run_dir: Path


@dataclass
class Bench:
    cluster: Cluster
    inventory: Path
    reports: Path

    def variables(self, run_id: str) -> dict[str, object]:
        return {"gpuval_run_id": run_id, "gpuval_reports_dir": str(self.reports), **FAST}

    def start(self, run_id: str, extra: dict[str, object]) -> subprocess.Popen[str]:
        variables = {**self.variables(run_id), **extra}
        command = [
            str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory),
            str(REPO / "playbooks" / "acceptance.yml"), "-e", json.dumps(variables),
        ]  # fmt: skip
        environment = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
        environment["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
        environment["ANSIBLE_CACHE_PLUGIN_CONNECTION"] = str(self.inventory.parent / "facts")
        environment["ANSIBLE_FORCE_COLOR"] = "0"
        return subprocess.Popen(
            command, cwd=REPO, env=environment, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

    def run(
        self,
        run_id: str,
        extra: dict[str, object] | None = None,
        then: Callable[[subprocess.Popen[str]], None] | None = None,
        when: Callable[[Path], bool] = lambda run_dir: round_one_collected(run_dir),
    ) -> Run:
        """The playbook; `then` is called once, as soon as `when` (polled) says so."""
        started = time.monotonic()
        process = self.start(run_id, extra or {})
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(process.stdout or []), daemon=True)
        reader.start()
        while process.poll() is None and time.monotonic() - started < 1200:
            if then is not None and when(self.reports / run_id):
                then(process)
                then = None
            time.sleep(0.2)
        returncode = process.wait(timeout=60)
        reader.join(timeout=60)
        return Run(returncode, "".join(lines), time.monotonic() - started, self.reports / run_id)


def record(line: str) -> None:
    print(line)
    if target := os.environ.get("GPUVAL_TIMINGS_FILE"):
        with open(target, "a", encoding="utf-8") as timings:
            timings.write(line + "\n")


def report(run_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(VENV_BIN / "gpuval"), "report", str(run_dir), "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def results(run: Run) -> dict[str, object]:
    document = json.loads((run.run_dir / "results.json").read_text())
    assert isinstance(document, dict)
    return document


def failing(run: Run) -> list[dict[str, str]]:
    checks = results(run)["checks"]
    assert isinstance(checks, list)
    return [c for c in checks if c["status"] in ("fail", "error")]


def sidecars(run: Run, prefix: str) -> list[dict[str, object]]:
    return [
        json.loads(path.read_text())
        for path in sorted((run.run_dir / "raw").glob(f"*/{prefix}*.meta.json"))
    ]


def flagged_nodes(run: Run) -> set[str]:
    return {c["host"] for c in failing(run) if c["check_id"].endswith(".node")}


def failing_links_without(run: Run, lost: str) -> list[str]:
    """Links failed for lack of a number that do not involve the lost node: what explaining away
    must prevent. The other nodes' bandwidth is not asserted in the fault runs: with one of four
    CPU-simulated hosts gone, one or two pairs are the healthy reference and a healthy node
    measured 75-80 % of them on an idle machine (a spread no fault run controls; the healthy and
    throttled runs judge bandwidth)."""
    return [
        c["check_id"] for c in failing(run)
        if ".link." in c["check_id"] and lost not in c["check_id"]
        and "no measurement" in c["reason"]
    ]  # fmt: skip


def round_one_collected(run_dir: Path) -> bool:
    """Both directions of round 1's two pairs are on the controller."""
    return len(list(run_dir.glob("raw/*/pair-iperf3-r1-*-try1.json"))) == 4


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    work = tmp_path_factory.mktemp("find-bad-node")
    with simulated_hosts(len(HOSTS), name="e2e-pairs", bind_ro=[SITE_PACKAGES]) as cluster:
        (work / "inventory").mkdir()
        inventory = work / "inventory" / "cluster.ini"
        inventory.write_text(cluster.inventory.read_text())
        (work / "inventory" / "group_vars").symlink_to(REPO / "inventory" / "group_vars")
        yield Bench(cluster, inventory, work / "reports")


@pytest.fixture(scope="module")
def healthy(bench: Bench) -> Run:
    run = bench.run("healthy")
    record(f"acceptance.yml, 4 healthy hosts (install included): {run.seconds:.0f} s")
    return run


EXIT_UNJUDGED = 3  # gpuval report's exit status for an unjudged verdict (the default gate)


def test_healthy_pairs_run_in_three_rounds_of_concurrent_pairs(healthy: Run) -> None:
    assert healthy.returncode == 2, healthy.output[-5000:]  # the report play fails on UNJUDGED
    assert results(healthy)["verdict"] == "unjudged"
    assert "MPI preflight passed" in healthy.output
    tries = [t for t in results(healthy)["pairs"]["tries"] if t["kind"] == "iperf3"]  # type: ignore[index]
    first = [t for t in tries if t["attempt"] == 1]
    assert {(t["a"], t["b"]) for t in first} == {
        (a, b) for i, a in enumerate(HOSTS) for b in HOSTS[i + 1 :]
    }
    assert {t["round"] for t in first} == {1, 2, 3}
    assert all(t["outcome"] == "ok" for t in first)
    by_round: dict[int, list[dict[str, object]]] = {}
    for meta in sidecars(healthy, "pair-iperf3-"):
        step = pair_step(str(meta["name"]))
        if step is not None and step.attempt == 1:
            by_round.setdefault(step.round, []).append(meta)
    for number, metas in by_round.items():
        forward = [m for m in metas if str(m["command"]).find(" -R") < 0]
        assert len(forward) == 2, (number, metas)
        latest_start = max(str(m["started_at"]) for m in forward)
        earliest_end = min(str(m["ended_at"]) for m in forward)
        assert latest_start < earliest_end, f"round {number} pairs did not overlap: {forward}"
    allreduce = [t for t in results(healthy)["pairs"]["tries"] if t["kind"] == "allreduce"]  # type: ignore[index]
    assert len({(t["a"], t["b"]) for t in allreduce}) == 6
    assert not [c for c in failing(healthy) if c["check_id"].startswith("pairs.")]
    assert not list((healthy.run_dir / "raw").glob("*/peer-*")), "second sides stay on the nodes"


def test_report_is_deterministic(healthy: Run) -> None:
    documents = []
    for _ in range(2):
        done = report(healthy.run_dir)
        assert done.returncode == EXIT_UNJUDGED, done.stdout + done.stderr
        document = json.loads((healthy.run_dir / "results.json").read_text())
        document.pop("generated_at")
        documents.append(document)
    assert documents[0] == documents[1]


def test_throttled_host_and_only_it_is_flagged(bench: Bench) -> None:
    node3 = bench.cluster.host("node3")
    faults.throttle(node3, THROTTLE)
    try:
        run = bench.run("throttled", IPERF3_ONLY)
    finally:
        faults.unthrottle(node3)
    flagged_at = run.output.find("gpuval verdict FAIL")
    record(
        f"acceptance.yml, node3 throttled to {THROTTLE}: {run.seconds:.0f} s until the "
        f"report said FAIL (flag found in output: {flagged_at >= 0})"
    )
    assert run.returncode == 2, run.output[-5000:]
    assert flagged_nodes(run) == {"node3"}, [c["reason"] for c in failing(run)]
    assert "pairs.iperf3.node" in {c["check_id"] for c in failing(run) if c["host"] == "node3"}
    junit = ElementTree.parse(run.run_dir / "junit.xml").getroot()
    with_failure = {
        suite.get("name") for suite in junit.iter("testsuite")
        if any(case.find("failure") is not None for case in suite.iter("testcase"))
    }  # fmt: skip
    assert "node3" in with_failure
    assert not with_failure & {"node1", "node2", "node4"}
    assert report(run.run_dir).returncode == 1


def test_an_interrupted_run_still_collects_and_reports(bench: Bench) -> None:
    run = bench.run("interrupted", IPERF3_ONLY, then=lambda p: p.send_signal(signal.SIGINT))
    assert run.returncode == 99, run.output[-5000:]  # ansible-playbook's "interrupted"
    assert "collecting run interrupted and rendering its report" in run.output
    assert (run.run_dir / "report.html").is_file()
    # The pairs of the rounds that never ran are missing: fail closed.
    assert json.loads((run.run_dir / "summary.json").read_text())["verdict"] == "fail"
    assert list((run.run_dir / "raw").glob("*/pair-iperf3-r1-*.json")), "round 1 was measured"
    done = report(run.run_dir)
    assert done.returncode == 1, done.stdout + done.stderr
    assert results(run)["pairs"]["tries"]  # type: ignore[index]


def test_dropped_traffic_times_out_and_the_run_goes_on(bench: Bench) -> None:
    node4 = bench.cluster.host("node4")
    try:
        # While node2 measures against node4 in round 2 (its sidecar is written at the start).
        run = bench.run(
            "dropped", IPERF3_ONLY, then=lambda _: faults.drop_traffic(node4),
            when=lambda _: (bench.cluster.host("node2").root / "var/tmp/gpuval/runs/dropped"
                            / "pair-iperf3-r2-node2--node4-try1.meta.json").is_file(),
        )  # fmt: skip
    finally:
        faults.restore_traffic(node4)
    record(f"acceptance.yml, node4's traffic dropped in round 2: {run.seconds:.0f} s")
    assert (run.run_dir / "report.html").is_file(), run.output[-5000:]
    # ssh's keepalive (ansible.cfg) finds node4 gone within 30 s: ansible-playbook's status for a
    # host that became unreachable (4) outranks the report's failed task (2).
    assert run.returncode == 4, run.output[-5000:]
    assert "UNREACHABLE" in run.output and "gpuval verdict FAIL" in run.output
    assert "node4" in flagged_nodes(run)
    assert not failing_links_without(run, "node4"), [c["reason"] for c in failing(run)]
    timed_out = [m["name"] for m in sidecars(run, "pair-") if m["timed_out"]]
    assert "pair-iperf3-r2-node2--node4-try1" in timed_out, "the hung client was killed in time"
    assert list((run.run_dir / "raw").glob("*/pair-iperf3-r1-*.json"))  # measured before


def test_killed_host_is_reported_and_the_others_judged(bench: Bench) -> None:
    node2 = bench.cluster.host("node2")
    run = bench.run("killed", IPERF3_ONLY, then=lambda _: faults.kill_host(bench.cluster, node2))
    record(f"acceptance.yml, node2 killed after round 1: {run.seconds:.0f} s")
    assert (run.run_dir / "report.html").is_file(), run.output[-5000:]
    # ansible-playbook's status for a run in which a host became unreachable (4) outranks the one
    # of a failed task (2), here the report's FAIL: still a failure, never 0.
    assert run.returncode == 4, run.output[-5000:]
    assert "gpuval verdict FAIL" in run.output
    assert "UNREACHABLE" in run.output
    assert "node2" in flagged_nodes(run)
    assert not failing_links_without(run, "node2"), [c["reason"] for c in failing(run)]
    # Its preflight outputs and round 1 were gathered before it died.
    assert (run.run_dir / "raw" / "node2" / "os-release.txt").is_file()
    assert list((run.run_dir / "raw").glob("*/pair-iperf3-r1-*.json"))
