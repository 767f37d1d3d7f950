"""Find the bad node from pair tests: healthy, throttled host, bad link, many bad nodes, a
uniformly slow network, repeats, timeouts, fail-closed gaps, determinism; and the preflight /
all-nodes benchmark checks. Expected verdicts follow from what was injected: a throttled node
caps every pair it is in, a bad link only its own pair."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.run_folders import pair_analysis

from gpuval.checks.cluster import allnodes_bench_checks
from gpuval.checks.model import CLUSTER, Check
from gpuval.checks.mpi_preflight import mpi_preflight_checks
from gpuval.checks.pairs import PairThresholds, analyse_pairs
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import all_nodes_runs, mpi_preflight_tries, pair_evidence, parsed_files
from gpuval.parsers import gpuval_bench, iperf3, nccl_tests, sysfs_net
from gpuval.plan.host_order import circle_rounds, natural_key
from gpuval.plan.steps import PairStep, pair_step
from gpuval.records.network import Iperf3Run
from gpuval.runfolder import RawFile, RunFolder, Sidecar, read_run_folder

HOSTS = ["node1", "node2", "node3", "node4"]
# Healthy TCP over the simulated bridge: ~15 Gbit/s (shared/notes/test-environment.md)
HEALTHY = {
    ("node1", "node2"): 14.8, ("node2", "node1"): 14.9, ("node1", "node3"): 14.6,
    ("node3", "node1"): 15.1, ("node1", "node4"): 14.7, ("node4", "node1"): 14.8,
    ("node2", "node3"): 15.0, ("node3", "node2"): 14.9, ("node2", "node4"): 14.8,
    ("node4", "node2"): 14.5, ("node3", "node4"): 14.8, ("node4", "node3"): 15.2,
}  # fmt: skip


def iperf3_text(gbps: float | None, reverse: bool = False) -> str:
    start = {
        "version": "iperf 3.12",
        "connecting_to": {"host": "192.168.77.10", "port": 5201},
        "test_start": {"protocol": "TCP", "num_streams": 1, "duration": 5, "reverse": int(reverse)},
    }
    if gbps is None:
        return json.dumps({"start": start, "intervals": [], "end": {},
                           "error": "unable to connect to server: Connection refused"})  # fmt: skip
    bits = gbps * 1e9
    end = {
        "sum_sent": {"start": 0, "end": 5, "seconds": 5, "bytes": int(bits * 5 / 8),
                     "bits_per_second": bits * 1.001, "retransmits": 0},
        "sum_received": {"start": 0, "end": 5, "seconds": 5, "bytes": int(bits * 5 / 8),
                         "bits_per_second": bits},
    }  # fmt: skip
    return json.dumps({"start": start, "intervals": [], "end": end})


def iperf3_file(
    src: str,
    dst: str,
    gbps: float | None,
    round_number: int = 1,
    attempt: int = 1,
    **sidecar: object,
) -> RawFile:
    """The client (first host of the pair in natural order) runs both directions (-R for the
    reverse), so the file lies in its folder."""
    client = min(src, dst, key=natural_key)
    name = f"pair-iperf3-r{round_number}-{src}--{dst}-try{attempt}"
    path = f"raw/{client}/{name}.json"
    fields: dict[str, object] = {"exit_code": 0 if gbps is not None else 1, **sidecar}
    side = Sidecar(name=name, host=client, phase="network", raw=f"{name}.json", tool="iperf3")
    for key, value in fields.items():
        setattr(side, key, value)
    parsed = iperf3.parse(iperf3_text(gbps, reverse=client != src), source=path)
    return RawFile(client, path, side, parsed)


def cluster(value: Callable[[str, str], float | None], hosts: list[str] = HOSTS) -> list[RawFile]:
    files = []
    for number, pairs in enumerate(circle_rounds(hosts), start=1):
        for a, b in pairs:
            files.append(iperf3_file(a, b, value(a, b), number))
            files.append(iperf3_file(b, a, value(b, a), number))
    return files


def pair_checks(
    files: list[RawFile],
    thresholds: PairThresholds | None = None,
    expected: dict[str, list[str]] | None = None,
) -> list[Check]:
    return pair_analysis(files, thresholds, expected).checks


def by_id(checks: list[Check]) -> dict[tuple[str, str], Check]:
    return {(c.check_id, c.host): c for c in checks}


ABSOLUTE = ("pairs.iperf3.line-rate", "pairs.allreduce.network-bound", "pairs.nccl.network-bound")


def bad(checks: list[Check]) -> list[tuple[str, str, str]]:
    """Non-passing checks of the relative analysis (the network references are tested apart)."""
    return sorted((c.status, c.check_id, c.host) for c in checks
                  if c.status != "pass" and c.check_id not in ABSOLUTE)  # fmt: skip


def flagged(checks: list[Check], kind: str = "iperf3") -> set[str]:
    return {c.host for c in checks if c.check_id == f"pairs.{kind}.node" and c.status == "fail"}


def test_healthy_cluster_flags_nothing() -> None:
    checks = pair_checks(cluster(lambda a, b: HEALTHY[a, b]))
    assert bad(checks) == []
    assert len([c for c in checks if c.check_id == "pairs.iperf3.node"]) == 4
    assert not [c for c in checks if c.check_id.startswith("pairs.iperf3.link.")]  # tables only
    node = by_id(checks)["pairs.iperf3.node", "node1"]
    assert "not flagged (0 of 3 low)" in node.reason and node.unit == "Gbit/s"
    # without the interfaces' speeds nothing is compared with the network: said, never passed
    absolute = by_id(checks)["pairs.iperf3.line-rate", CLUSTER]
    assert absolute.status == "unjudged" and "sysfs-net" in absolute.reason


def throttled(a: str, b: str) -> float:
    """tc tbf on node3's veth: traffic into node3 drops to ~0.96 Gbit/s."""
    into_node3 = {"node1": 0.95, "node2": 0.97, "node4": 0.96}
    return into_node3[a] if b == "node3" else HEALTHY[a, b]


def test_throttled_host_is_the_only_one_flagged_with_evidence() -> None:
    analysis = pair_analysis(cluster(throttled))
    checks = analysis.checks
    assert bad(checks) == [("fail", "pairs.iperf3.node", "node3")]
    node3 = by_id(checks)["pairs.iperf3.node", "node3"]
    assert node3.reason == (
        "iperf3 TCP: none of its pairs is healthy: node3: its pairs 0.95 (node1), 0.97 (node2), "
        "0.96 (node4) Gbit/s vs 14.7 Gbit/s that healthy pairs reach (7 %)"
    )
    assert (node3.measured, node3.reference) == (0.96, 14.7)
    explained = {(p.a, p.b): p for p in analysis.pairs if p.explained_by == "node3"}
    assert sorted(explained) == [("node1", "node3"), ("node2", "node3"), ("node3", "node4")]
    link = explained["node1", "node3"]
    assert link.status == "warn" and "explained by flagged node node3" in link.reason
    assert "node1->node3 passed on try 1" not in link.reason  # low: did not pass
    assert "node3->node1 passed on try 1" in link.reason


@pytest.mark.parametrize(
    ("count", "slow"), [(3, {"node2"}), (5, {"node5"}), (8, {"node3"}), (8, {"node1", "node6"})]
)
def test_only_the_slow_hosts_are_flagged_at_any_size(count: int, slow: set[str]) -> None:
    hosts = [f"node{i}" for i in range(1, count + 1)]
    checks = pair_checks(cluster(lambda a, b: 0.9 if b in slow else 14.0 + len(a + b) / 10, hosts))
    flagged = {c.host for c in checks if c.check_id == "pairs.iperf3.node" and c.status == "fail"}
    assert flagged == slow
    assert not [c for c in checks if c.status == "fail" and c.host == CLUSTER]


def test_bad_link_between_fine_hosts_is_a_link_not_a_node() -> None:
    def value(a: str, b: str) -> float:
        return 2.1 if {a, b} == {"node1", "node2"} else HEALTHY[a, b]

    checks = pair_checks(cluster(value))
    assert bad(checks) == [("fail", "pairs.iperf3.link.node1--node2", CLUSTER)]
    reason = by_id(checks)["pairs.iperf3.link.node1--node2", CLUSTER].reason
    assert reason.startswith(
        "iperf3 TCP: node1--node2: bad link (node1 and node2 are fine in their other pairs; "
        "below the 50 % floor): "
        "2.1 Gbit/s vs 14.6 Gbit/s that healthy pairs reach (14 %)"
    )


@pytest.mark.parametrize(
    ("count", "slow"),
    [
        (4, {"node3", "node4"}),  # the median of all pairs is a bad pair here
        (8, {"node2", "node5", "node7"}),
        (16, {"node1", "node4", "node6", "node9", "node12", "node15"}),
    ],
)
def test_many_bad_nodes_are_flagged_exactly(count: int, slow: set[str]) -> None:
    hosts = [f"node{i}" for i in range(1, count + 1)]
    checks = pair_checks(cluster(lambda a, b: 0.9 if {a, b} & slow else 14.5, hosts))
    assert flagged(checks) == slow
    assert not [c for c in checks if c.status == "fail" and c.host == CLUSTER]


def test_a_bad_node_and_a_bad_link_blame_the_node_and_the_link_only() -> None:
    def value(a: str, b: str) -> float:
        if "node3" in (a, b):
            return 0.9
        return 2.0 if {a, b} == {"node1", "node2"} else HEALTHY[a, b]

    checks = pair_checks(cluster(value))
    assert bad(checks) == [
        ("fail", "pairs.iperf3.link.node1--node2", CLUSTER),
        ("fail", "pairs.iperf3.node", "node3"),
    ]


def test_a_pair_that_needed_two_tries_says_so_with_its_spread() -> None:
    files = cluster(lambda a, b: 2.0 if (a, b) == ("node2", "node4") else HEALTHY[a, b])
    files.append(iperf3_file("node2", "node4", 14.5, round_number=1, attempt=2))
    analysis = pair_analysis(files)
    assert bad(analysis.checks) == [("warn", "pairs.iperf3.link.node2--node4", CLUSTER)]
    reason = by_id(analysis.checks)["pairs.iperf3.link.node2--node4", CLUSTER].reason
    assert "node2->node4 passed on try 2 (try 1: low, 2)" in reason
    assert "spread over 2 tries 2/8.25/14.5 (min/median/max, 152 %)" in reason
    (row,) = [r for r in analysis.to_dict()["pairs"] if (r["src"], r["dst"]) == ("node2", "node4")]
    assert (row["tries"], row["passed_on"], row["value"], row["spread_max"]) == (2, 2, 14.5, 14.5)


def test_timed_out_and_missing_pairs_fail_closed() -> None:
    files = [
        f for f in cluster(lambda a, b: HEALTHY[a, b])
        if "node1--node3" not in f.path and "node2--node4" not in f.path
    ]  # fmt: skip
    files.append(
        iperf3_file("node1", "node3", None, 2, exit_code=None, timed_out=True, timeout_s=60.0)
    )
    expected = {"node2": ["pair-iperf3-r3-node2--node4-try1", "nccl-all_reduce"]}
    checks = pair_checks(files, PairThresholds(), expected)
    assert bad(checks) == [
        ("fail", "pairs.iperf3.link.node1--node3", CLUSTER),
        ("fail", "pairs.iperf3.link.node2--node4", CLUSTER),
    ]  # one lost pair of three is no node's fault
    found = by_id(checks)
    timed_out = found["pairs.iperf3.link.node1--node3", CLUSTER]
    # the planning budget is no record of what the run was given: the tries made are counted
    assert "node1->node3 no passing try, 1 try made (try 1: timed out after 60 s)" in (
        timed_out.reason
    )
    assert "node3->node1 passed on try 1" in timed_out.reason
    missing = found["pairs.iperf3.link.node2--node4", CLUSTER]
    assert "node2->node4 no passing try, 1 try made (try 1: expected (run.json) but left no " in (
        missing.reason
    )
    assert missing.category == "completeness" and missing.measured is None


def test_a_host_whose_pairs_all_fail_is_flagged() -> None:
    checks = pair_checks(cluster(lambda a, b: None if "node4" in (a, b) else HEALTHY[a, b]))
    node4 = by_id(checks)["pairs.iperf3.node", "node4"]
    assert node4.status == "fail"
    assert "failed (node1), failed (node2), failed (node3)" in node4.reason
    assert [c.host for c in checks if c.check_id == "pairs.iperf3.node" and c.status == "fail"] == [
        "node4"
    ]


def test_verdicts_are_deterministic_whatever_the_file_order() -> None:
    files = cluster(throttled)
    first = pair_analysis(files)
    again = pair_analysis(list(reversed(files)))
    assert first.checks == again.checks
    assert json.dumps(first.to_dict(), sort_keys=True) == json.dumps(
        again.to_dict(), sort_keys=True
    )


def test_each_pair_file_is_one_typed_try_in_the_evidence() -> None:
    """The evidence reads a pair file once: its step, folder, how it ended and its records;
    run.json's expected pair steps beside them (its other steps are no pair's)."""
    cut = iperf3_file("node1", "node2", None, timed_out=True, timeout_s=60)
    measured = iperf3_file("node1", "node3", 14.8)
    other = sysfs_file("node1", 10000)
    expected = {"node2": ["sysfs-net", "pair-iperf3-r1-node2--node4-try1"]}
    folder = RunFolder(Path("."), {"expected": expected}, HOSTS, [], [cut, other, measured])
    evidence = pair_evidence(folder)
    first, second = evidence.pair_tries
    assert (first.step, first.host, first.path) == (
        PairStep("iperf3", 1, "node1", "node2", 1),
        "node1",
        cut.path,
    )
    assert first.ended == ("timed_out", " after 60 s") and not first.answered
    assert second.tool == "iperf3" and second.first_error is None and second.answered
    assert [type(run) for run in second.runs] == [Iperf3Run]
    assert [(e.host, e.name, e.step.dst) for e in evidence.expected_pair_steps] == [
        ("node2", "pair-iperf3-r1-node2--node4-try1", "node4")
    ]


def test_the_pair_analysis_judges_the_evidence_not_the_files() -> None:
    """Every pair file is read into the evidence once; the analysis never goes back to the run
    folder's files (judged with them gone, nothing changes)."""
    files = cluster(throttled)
    evidence = pair_evidence(RunFolder(Path("."), {}, HOSTS, [], list(files)))
    judged = analyse_pairs(evidence)
    evidence.folder.files.clear()
    again = analyse_pairs(evidence)
    assert again.checks == judged.checks and again.to_dict() == judged.to_dict()
    assert [c.host for c in again.checks if c.status == "fail"] == ["node3"]


def test_two_hosts_give_one_pair_and_no_node_verdict() -> None:
    checks = pair_checks(cluster(lambda a, b: 9.0, hosts=["node1", "node2"]))
    assert [(c.check_id, c.status) for c in checks] == [("pairs.iperf3.line-rate", "unjudged")]


def sysfs_file(host: str, speed_mbit: int) -> RawFile:
    text = f"/sys/class/net/eth0/speed:{speed_mbit}\n/sys/class/net/eth0/operstate:up\n"
    path = f"raw/{host}/sysfs-net.txt"
    side = Sidecar(name="sysfs-net", host=host, phase="preflight", raw="sysfs-net.txt",
                   tool="sysfs-net", exit_code=0)  # fmt: skip
    return RawFile(host, path, side, sysfs_net.parse(text, source=path))


def judged_with_line_rate(files: list[RawFile], hosts: list[str], speed_mbit: int) -> list[Check]:
    """The pair analysis with each host's interface speed, as the judge runs it."""
    files = files + [sysfs_file(h, speed_mbit) for h in hosts]
    return pair_analysis(files, PairThresholds.from_thresholds(DEFAULTS), with_hosts=True).checks


def test_two_hosts_both_slow_fail_against_the_line_rate() -> None:
    hosts = ["node1", "node2"]
    checks = judged_with_line_rate(cluster(lambda a, b: 0.94, hosts), hosts, 10000)
    line = by_id(checks)["pairs.iperf3.line-rate", CLUSTER]
    assert line.status == "fail" and line.reference == 10.0
    assert "node1--node2 0.94 Gbit/s = 9 %" in line.reason


def test_a_uniformly_slow_cluster_flags_no_node_but_fails_the_line_rate() -> None:
    checks = judged_with_line_rate(cluster(lambda a, b: 0.95), HOSTS, 10000)
    assert flagged(checks) == set()
    assert by_id(checks)["pairs.iperf3.line-rate", CLUSTER].status == "fail"


def test_healthy_pairs_pass_the_line_rate_and_a_flagged_node_does_not_fail_it_twice() -> None:
    checks = judged_with_line_rate(cluster(throttled), HOSTS, 25000)  # 14.7 of 25 Gb/s: 59 %
    assert flagged(checks) == {"node3"}
    assert by_id(checks)["pairs.iperf3.line-rate", CLUSTER].status == "pass"


def bench_file(a: str, b: str, busbw: float, correct: bool = True, attempt: int = 1) -> RawFile:
    name = f"pair-allreduce-r1-{a}--{b}-try{attempt}"
    document = {
        "schema_version": 1, "tool": "gpuval-allreduce-bench", "world_size": 2,
        "backend": "gloo", "hosts": [a, b], "wrong_total": 0 if correct else 5,
        "correct": correct,
        "rows": [{"size_bytes": 1 << 20, "count": 1 << 18, "time_us": 1.0,
                  "algbw_gbps": busbw, "busbw_gbps": busbw, "wrong": 0 if correct else 5}],
    }  # fmt: skip
    path = f"raw/{a}/{name}.json"
    side = Sidecar(name=name, host=a, phase="internode", raw=f"{name}.json",
                   tool="gpuval-allreduce-bench", exit_code=0 if correct else 1)  # fmt: skip
    return RawFile(a, path, side, gpuval_bench.parse(json.dumps(document), source=path))


def test_allreduce_pairs_slow_node_and_wrong_results() -> None:
    files = [
        bench_file(a, b, 0.12 if "node4" in (a, b) else 0.8)
        for pairs in circle_rounds(HOSTS)
        for a, b in pairs
    ]
    files.append(bench_file("node1", "node2", 0.8, correct=False, attempt=2))
    checks = pair_checks(files)
    gloo = by_id(checks)["pairs.allreduce.network-bound", CLUSTER]
    assert gloo.status == "unjudged" and "gloo" in gloo.reason
    assert [(c.check_id, c.host) for c in checks if c.status == "fail"] == [
        ("pairs.allreduce.link.node1--node2", CLUSTER),  # a good pair, but its repeat was wrong
        ("pairs.allreduce.node", "node4"),
    ]
    link = by_id(checks)["pairs.allreduce.link.node1--node2", CLUSTER]
    assert link.status == "fail" and link.unit == "GB/s"
    assert "node1--node2: wrong results on try 2" in link.reason
    assert "try 2: wrong results: 5 element(s) reduced wrongly" in link.reason


def test_allreduce_pairs_on_cpus_warn_when_a_little_low_and_fail_when_far_below() -> None:
    """gloo on CPUs measures the CPUs' reduction: a node at 75 % of the healthy pairs (a busy
    CPU does that) warns; at 15 % (test above) it fails. Wrong results always fail."""
    files = [
        bench_file(a, b, 0.6 if "node4" in (a, b) else 0.8)
        for pairs in circle_rounds(HOSTS)
        for a, b in pairs
    ]
    checks = pair_checks(files)
    assert [c for c in checks if c.status == "fail"] == []
    node = by_id(checks)["pairs.allreduce.node", "node4"]
    assert node.status == "warn" and "on CPUs (gloo)" in node.reason


def test_cpu_bound_pairs_are_tried_again_only_where_they_could_fail() -> None:
    """A repeat confirms a try the pair could fail on: on CPUs (gloo) below half of what the
    healthy pairs reach (busbw_fail_fraction), not a pair at 75 % that only warns."""

    def busbw(a: str, b: str) -> float:
        return 0.2 if (a, b) == ("node1", "node2") else 0.6 if "node4" in (a, b) else 0.8

    files = [bench_file(a, b, busbw(a, b)) for pairs in circle_rounds(HOSTS) for a, b in pairs]
    low = {(t.a, t.b) for t in pair_analysis(files).tries if t.low}
    assert low == {("node1", "node2")}


def test_pair_file_names() -> None:
    step = pair_step("pair-iperf3-r3-gpu-node-10--gpu-node-2-try2")
    assert step is not None
    assert (step.kind, step.round, step.src, step.dst, step.attempt) == (
        "iperf3", 3, "gpu-node-10", "gpu-node-2", 2,
    )  # fmt: skip
    assert pair_step("pair-iperf3-node1--node2-try1") is None  # round is required
    assert pair_step("nccl-all_reduce") is None
    assert parsed_files([iperf3_file("node1", "node2", 1.0)], Path())[0].is_pair_try


def preflight_file(text: str) -> RawFile:
    path = "raw/node1/mpi-preflight.txt"
    return RawFile("node1", path, None, gpuval_bench.parse(text, source=path, tool="mpi-preflight"))


def test_mpi_preflight_checks_name_the_failing_host() -> None:
    ok = (
        "gpuval-mpi-preflight rank 0/2 host node1\ngpuval-mpi-preflight rank 1/2 host node2\n"
        "gpuval-mpi-preflight alltoall pairs 2 bad 0\n"
        "gpuval-mpi-preflight allreduce sum 3 expected 3\n"
        "gpuval-mpi-preflight OK 2 ranks on 2 hosts\n"
    )
    (passed,) = mpi_preflight_checks(
        mpi_preflight_tries(parsed_files([preflight_file(ok)], Path()))
    )
    assert passed.status == "pass" and "(node1, node2)" in passed.reason
    unreachable = preflight_file("ssh: connect to host node7 port 22: No route to host\n")
    failed = mpi_preflight_checks(mpi_preflight_tries(parsed_files([unreachable], Path())))
    assert [(c.check_id, c.host, c.status) for c in failed] == [
        ("mpi-preflight", "node1", "fail"),
        ("mpi-preflight.host", "node7", "fail"),
    ]
    assert "host(s) node7" in failed[0].reason
    assert failed[1].source == "raw/node1/mpi-preflight.txt:1"


def test_all_nodes_benchmark_correctness() -> None:
    good, wrong = bench_file("node1", "node2", 0.8), bench_file("node1", "node2", 0.8, False)
    for raw in (good, wrong):  # as the all-nodes step, not a pair step
        raw.path = "raw/node1/allreduce-all.json"
        assert raw.sidecar is not None
        raw.sidecar.name = "allreduce-all"
    checks, _ = allnodes_bench_checks(
        all_nodes_runs(parsed_files([good, wrong], Path())), None, DEFAULTS
    )
    assert [(c.check_id.rsplit(".", 1)[1], c.status) for c in checks] == [
        ("correctness", "pass"), ("busbw", "unjudged"), ("correctness", "fail"),
        ("busbw", "unjudged"),
    ]  # fmt: skip
    assert "gloo on CPUs is bound by the CPUs' reduction" in checks[1].reason
    assert "5 element(s) reduced wrongly" in checks[2].reason


def test_a_pair_steps_bench_run_is_a_pair_try_not_an_all_nodes_run() -> None:
    """The pair analysis judges it with its pair's other tries; the all-nodes checks never do."""
    (pair,) = parsed_files([bench_file("node1", "node2", 0.8, False)], Path())
    assert pair.is_pair_try and pair.runs
    assert all_nodes_runs([pair]) == []


def pair_direction(name: str) -> tuple[str, str]:
    step = pair_step(name)
    assert step is not None
    return step.src, step.dst


def test_a_run_folder_on_disk_through_the_run_folder_reader(tmp_path: Path) -> None:
    """Sidecars as the capture module writes them; raw files named by the convention."""
    for raw in cluster(throttled):
        assert raw.sidecar is not None
        target = tmp_path / raw.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(iperf3_text(throttled(*pair_direction(raw.sidecar.name))))
        sidecar = {
            "schema_version": 1, "name": raw.sidecar.name, "host": raw.host, "phase": "network",
            "raw": target.name, "command": "iperf3 -c peer -J", "tool": "iperf3", "cwd": None,
            "env": {}, "exit_code": 0, "timed_out": False, "timeout_s": 60, "started_at": None,
            "ended_at": None, "duration_s": 5.1, "skipped": None,
        }  # fmt: skip
        target.with_name(f"{raw.sidecar.name}.meta.json").write_text(json.dumps(sidecar))
    folder = read_run_folder(tmp_path)
    assert not [d for d in folder.diagnostics if d.level == "error"]
    files = parsed_files(folder.files, folder.run_dir)
    assert len(files) == 12 and all(file.is_pair_try for file in files)
    checks = analyse_pairs(pair_evidence(folder)).checks
    assert [c.host for c in checks if c.status == "fail"] == ["node3"]


NCCL_SAMPLE = (
    Path(__file__).resolve().parents[1] / "data/sample-run/raw/lambda-4xh100/nccl-all_reduce.txt"
).read_text()


def nccl_file(a: str, b: str, text: str) -> RawFile:
    name = f"pair-nccl-r1-{a}--{b}-try1"
    path = f"raw/{a}/{name}.txt"
    side = Sidecar(name=name, host=a, phase="internode", raw=f"{name}.txt", tool="nccl-tests",
                   exit_code=0)  # fmt: skip
    return RawFile(a, path, side, nccl_tests.parse(text, source=path))


def test_nccl_pairs_take_the_best_busbw_and_fail_a_cut_run() -> None:
    (run,) = nccl_tests.parse(NCCL_SAMPLE).runs
    best = max(h.busbw_gbps or 0.0 for r in run.rows for h in (r.out_of_place, r.in_place) if h)
    cut = NCCL_SAMPLE[: len(NCCL_SAMPLE) // 2]
    files = [
        nccl_file(a, b, cut if (a, b) == ("node1", "node3") else NCCL_SAMPLE)
        for pairs in circle_rounds(HOSTS)
        for a, b in pairs
    ]
    analysis = pair_analysis(files)
    assert bad(analysis.checks) == [("fail", "pairs.nccl.link.node1--node3", CLUSTER)]
    (good,) = [p for p in analysis.pairs if (p.a, p.b) == ("node1", "node2")]
    assert (good.value, good.status) == (best, "pass")
    failed = by_id(analysis.checks)["pairs.nccl.link.node1--node3", CLUSTER]
    assert failed.measured is None and "try 1:" in failed.reason


@pytest.mark.parametrize("dead", HOSTS)
def test_a_host_dead_after_round_one_is_the_only_one_flagged_whatever_its_name(dead: str) -> None:
    """The two pairs of round 1 shared the simulator's two cores, unevenly: the dead host's pair
    got 90 % of the rate a pair gets alone, the other 70 % (low). After `dead` died its pairs
    left no number and the other pairs ran alone. Only `dead` is at fault, whatever its name:
    its partners' missing pairs are its doing, and one low pair flags no node."""
    first_round = circle_rounds(HOSTS)[0]

    def rate(a: str, b: str) -> float | None:
        pair = tuple(sorted((a, b), key=natural_key))
        if pair in first_round:
            return HEALTHY[a, b] * (0.9 if dead in pair else 0.7)
        return None if dead in pair else HEALTHY[a, b]

    assert flagged(pair_checks(cluster(rate))) == {dead}
