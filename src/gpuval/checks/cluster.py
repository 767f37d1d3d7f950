"""Checks across the whole cluster at once: the MPI preflight (gpuval.checks.mpi_preflight) and
the all-nodes all-reduce benchmark (correct results, and busbw against the network's bound
across the nodes)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuval.checks.context import JudgeState
from gpuval.checks.model import CLUSTER, Check, Expectation
from gpuval.checks.mpi_preflight import mpi_preflight_checks
from gpuval.checks.pairs.network_bounds import ON_CPUS
from gpuval.checks.references import Reference, internode_reference
from gpuval.checks.thresholds import Thresholds
from gpuval.checks.wording import band_status, number_text, peak_sentence
from gpuval.evidence import Parsed, RunEvidence
from gpuval.plan.host_order import natural_key
from gpuval.records.collective_bench import CollectiveBenchRun


def slowest_link_reference(
    evidence: RunEvidence | None, hosts: Sequence[str], ranks: int | None
) -> tuple[Reference | None, str]:
    """The all-reduce bound of a run across `hosts` (as its output names them): every rank
    waits for the ring's slowest link, so the bound is the smallest of the nodes' own bounds,
    and unknown while one node's is (a node not in the evidence, or without a network speed).
    (reference, the slowest host where the nodes' bounds differ), or (None, why there is none)."""
    names = sorted(set(hosts), key=natural_key)
    found = {n: h for n in names if evidence and (h := evidence.host(n) or evidence.host(
        n.split(".")[0]))}  # fmt: skip
    missing = [n for n in names if n not in found]
    if missing or not names:
        return None, f"no evidence of the network of {', '.join(missing) or 'its hosts'}"
    peaks = {}
    for name, host in found.items():
        reference = internode_reference(host, "all_reduce", ranks, len(names), False)
        if reference.peak is None:
            return None, f"{name}: {reference.why_none}"
        peaks[name] = (reference.peak.per_direction_gbps, reference)
    slowest = min(names, key=lambda n: peaks[n][0])
    uniform = len({value for value, _ in peaks.values()}) == 1
    return peaks[slowest][1], "" if uniform else slowest


def _bench_bandwidth(
    parsed: Parsed[CollectiveBenchRun], evidence: RunEvidence | None, thresholds: Thresholds
) -> tuple[Check, Expectation | None]:
    file, run = parsed.file, parsed.record
    rows = [r for r in run.rows if r.busbw_gbps is not None]
    best = max(rows, key=lambda r: r.busbw_gbps or 0.0)
    value = best.busbw_gbps or 0.0
    hosts = sorted(set(run.hosts), key=natural_key)
    check = Check(
        check_id="gpuval-allreduce-bench.all_reduce.busbw",
        host=CLUSTER,
        category="bandwidth",
        status="unjudged",
        measured=value,
        unit="GB/s",
        source=f"{file.path}:{run.line}",
        reason="",
    )
    where = f"{run.world_size} ranks on {len(hosts)} host(s) ({run.backend})"
    if (run.backend or "").lower() == "gloo":
        check.reason = (
            f"{where}: busbw up to {number_text(value)} GB/s; unjudged: {ON_CPUS} (the pair "
            "tests' iperf3 judges the network)"
        )
        return check, None
    reference, slowest = slowest_link_reference(evidence, hosts, run.world_size)
    if reference is None or reference.peak is None:
        why = slowest if evidence else "no evidence of the host's network"
        check.reason = f"{where}: busbw up to {number_text(value)} GB/s; unjudged: {why}"
        return check, None
    peak = reference.peak
    check.status = band_status(value / peak.per_direction_gbps, thresholds.busbw_pass_fraction,
                               thresholds.busbw_fail_fraction)  # fmt: skip
    check.reference = round(peak.per_direction_gbps, 2)
    of_slowest = f", {slowest}'s link the slowest" if slowest else ""
    check.reason = (
        f"{where}: {peak_sentence(value, peak)} (best size {best.size_bytes} B{of_slowest})"
    )
    expectation = Expectation(CLUSTER, reference.subject, peak.per_direction_gbps,
                              peak.duplex_gbps, peak.basis, peak.source)  # fmt: skip
    return check, expectation


def allnodes_bench_checks(
    runs: Iterable[Parsed[CollectiveBenchRun]], evidence: RunEvidence | None,
    thresholds: Thresholds,
) -> tuple[list[Check], list[Expectation]]:  # fmt: skip
    """The all-nodes runs of gpuval-allreduce-bench (evidence.all_nodes_runs; pair runs are
    judged with their pairs): correctness, and busbw against the network's bound (unjudged
    without `evidence`)."""
    checks: list[Check] = []
    expectations: list[Expectation] = []
    for parsed in runs:
        file, run = parsed.file, parsed.record
        measured = any(r.busbw_gbps is not None for r in run.rows)
        hosts = ", ".join(sorted(set(run.hosts), key=natural_key))
        correct = run.correct is True and run.complete and measured
        checks.append(Check(
            check_id="gpuval-allreduce-bench.all_reduce.correctness", host=CLUSTER,
            category="correctness", status="pass" if correct else "fail",
            source=f"{file.path}:{run.line}",
            reason=f"{run.world_size} ranks on {hosts}: " + (
                "every size reduced correctly" if correct else
                f"{run.wrong_total} element(s) reduced wrongly" if run.correct is False else
                "no correct, complete measurement"
            ),
        ))  # fmt: skip
        if measured:
            check, expectation = _bench_bandwidth(parsed, evidence, thresholds)
            checks.append(check)
            expectations += [expectation] if expectation else []
    return checks, expectations


def cluster_checks(judge: JudgeState) -> None:
    judge.checks += mpi_preflight_checks(judge.evidence.mpi_preflights)
    checks, expectations = allnodes_bench_checks(
        judge.evidence.all_nodes_runs, judge.evidence, judge.thresholds
    )
    judge.checks += checks
    for expectation in expectations:
        judge.expectations.setdefault((expectation.host, expectation.subject), expectation)
