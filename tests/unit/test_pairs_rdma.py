"""The rdma pair kind judged per rail: injected faults on a 4-node, 2-rail cluster (no evidence,
so no line rate: the relative analysis only)."""

from __future__ import annotations

from collections.abc import Callable

from tests.run_folders import pair_analysis

from gpuval.checks.model import CLUSTER, Check
from gpuval.checks.thresholds import DEFAULTS
from gpuval.judgement.figures import host_metrics, pair_figures
from gpuval.judgement.model import RunJudgement
from gpuval.parsers import perftest
from gpuval.plan.host_order import circle_rounds
from gpuval.plan.steps import RdmaLane, RunPlan, expected_steps, pair_step_name
from gpuval.report.html import build_context
from gpuval.report.results_json import results_document
from gpuval.report.summary import build_summary
from gpuval.runfolder import RawFile, Sidecar
from gpuval.schemas.validation import validate

HOSTS = ["n1", "n2", "n3", "n4"]
RAILS = 2
LANES = [RdmaLane(rail, memory) for rail in range(RAILS) for memory in ("host", "cuda")]


def output(gbit: float) -> str:
    return (
        "                    RDMA_Write BW Test\n"
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        f" 65536      100000           0.00               {gbit:.2f}             0.700000\n"
    )


def rdma_file(a: str, b: str, lane: RdmaLane, gbit: float | None, round_number: int) -> RawFile:
    name = pair_step_name("rdma", round_number, a, b, 1, lane)
    path = f"raw/{a}/{name}.txt"
    side = Sidecar(name=name, host=a, phase="network", raw=f"{name}.txt", tool="ib_write_bw")
    side.exit_code = 0
    parsed = perftest.parse(output(gbit), source=path) if gbit is not None else None
    return RawFile(a, path, side, parsed)


def cluster(rate: Callable[[str, str, RdmaLane], float | None]) -> list[RawFile]:
    return [
        rdma_file(a, b, lane, rate(a, b, lane), number)
        for number, pairs in enumerate(circle_rounds(HOSTS), start=1)
        for a, b in pairs
        for lane in LANES
    ]


def failing(checks: list[Check]) -> list[tuple[str, str]]:
    return sorted((c.check_id, c.host) for c in checks if c.status == "fail")


def test_one_rail_at_half_rate_on_one_node_names_that_rail_only() -> None:
    def rate(a: str, b: str, lane: RdmaLane) -> float:
        return 185.0 if "n3" in (a, b) and lane.rail == 1 else 370.0

    checks = pair_analysis(cluster(rate)).checks
    assert failing(checks) == [
        ("pairs.rdma.rail1-cuda.node", "n3"),
        ("pairs.rdma.rail1-host.node", "n3"),
    ]
    node = next(c for c in checks if c.check_id == "pairs.rdma.rail1-host.node" and c.host == "n3")
    assert node.reason.startswith("ib_write_bw rail 1 (host memory): none of its pairs is healthy")
    assert "n3 HCA (rail 1): its pairs" in node.reason


def test_a_node_low_on_every_rail_is_the_node() -> None:
    def rate(a: str, b: str, lane: RdmaLane) -> float:
        return 150.0 if "n2" in (a, b) else 370.0

    checks = pair_analysis(cluster(rate)).checks
    whole = [c for c in checks if c.check_id == "pairs.rdma.node"]
    assert [(c.host, c.status) for c in whole] == [("n2", "fail")]
    assert "all 2 rails of n2 low" in whole[0].reason


def test_a_rail_without_output_fails() -> None:
    def rate(a: str, b: str, lane: RdmaLane) -> float | None:
        return None if (a, b, lane) == ("n1", "n4", RdmaLane(0, "host")) else 370.0

    checks = pair_analysis(cluster(rate)).checks
    missing = [c for c in checks if c.status == "fail" and "n1--n4" in c.check_id]
    assert [c.check_id for c in missing] == ["pairs.rdma.rail0-host.link.n1--n4"]
    assert "no measurement" in missing[0].reason


def test_gpudirect_far_below_host_memory_points_at_peermem_and_acs() -> None:
    def rate(a: str, b: str, lane: RdmaLane) -> float:
        return 120.0 if (a, b) == ("n1", "n2") and lane == RdmaLane(0, "cuda") else 370.0

    verdicts = pair_analysis(cluster(rate)).pairs
    (cuda,) = [v for v in verdicts if (v.a, v.b) == ("n1", "n2") and v.value == 120.0]
    assert cuda.status == "fail"
    assert "nvidia_peermem" in cuda.reason and "ACS" in cuda.reason


def test_planned_rails_that_left_no_file_fail_closed() -> None:
    """run.json lists iperf3's pairs, not the rails: a lane missing beside its pair's other lanes,
    and a pair of the rounds with no rdma file at all, are both failed tries."""
    files = [
        f
        for f in cluster(lambda a, b, lane: 370.0)
        if f.step != pair_step_name("rdma", 1, "n1", "n4", 1, RdmaLane(1, "cuda"))
        and not f.step.endswith("-n2--n3-try1")
    ]
    expected = expected_steps(HOSTS, RunPlan(), phases=["pairs"])
    tries = pair_analysis(files, expected=expected).tries
    left_out = [t for t in tries if t.kind == "rdma" and t.outcome == "failed"]
    assert sorted((t.a, t.b, t.lane, t.path) for t in left_out) == [
        ("n1", "n4", RdmaLane(1, "cuda"), "raw/n1"),
        *[("n2", "n3", lane, "run.json") for lane in sorted(LANES)],
    ]
    assert all(t.reason.startswith("planned (rdma rail and memory") for t in left_out)


def test_without_any_rdma_file_no_rail_is_owed() -> None:
    expected = expected_steps(HOSTS, RunPlan(), phases=["pairs"])
    assert [t for t in pair_analysis([], expected=expected).tries if t.kind == "rdma"] == []


def test_each_rail_and_memory_has_its_own_rows_figures_and_report_section() -> None:
    """n3's rail 1 at half rate: its figures per rail are 370 and 185 Gb/s (not one rail
    overwriting the other), the summary names the rail, and the report draws one matrix per
    rail and memory, in rail order, host memory first."""

    def rate(a: str, b: str, lane: RdmaLane) -> float:
        return 185.0 if "n3" in (a, b) and lane.rail == 1 else 370.0

    analysis = pair_analysis(cluster(rate))
    worst_status = "fail" if any(c.status == "fail" for c in analysis.checks) else "pass"
    tables = analysis.to_dict()
    results = RunJudgement(
        run_id="rails", generated_at="2026-11-23T00:00:00+00:00", gpuval_version="test",
        verdict=worst_status, meta={}, hosts=[],
        host_names=sorted({c.host for c in analysis.checks} - {CLUSTER}), files=[],
        checks=analysis.checks, expectations=[], diagnostics=[], pairs=analysis,
        pair_tables=tables, thresholds=DEFAULTS, profile=None, baseline=None,
        host_metrics=host_metrics([], []), figures=pair_figures(tables["pairs"]), outliers=[],
        busbw_series=[], p2p_runs=[], topo_runs=[], measurements=[],
    )  # fmt: skip
    validate(results_document(results), "results")
    summary = build_summary(results)
    validate(summary, "summary")
    flagged = [(n["lane"], n["node"]) for n in summary["pairs"]["nodes"] if n["flagged"]]
    assert flagged == [({"rail": 1, "memory": "host"}, "n3"), ({"rail": 1, "memory": "cuda"}, "n3")]
    figures = {(f["name"], f["host"]): f["value"] for f in summary["figures"]}
    assert figures["pair.rdma.rail0-host", "n3"] == 370.0
    assert figures["pair.rdma.rail1-host", "n3"] == 185.0
    assert figures["pair.rdma.rail1-cuda", "n1"] == 370.0
    sections = build_context(results)["pairs"]
    assert [s["kind"] for s in sections] == [
        "rdma.rail0-host", "rdma.rail0-cuda", "rdma.rail1-host", "rdma.rail1-cuda",
    ]  # fmt: skip
    rail1 = sections[2]
    assert rail1["label"] == "ib_write_bw rail 1 (host memory)"
    assert [n.node for n in rail1["nodes_shown"] + rail1["nodes_folded"] if n.flagged] == ["n3"]
