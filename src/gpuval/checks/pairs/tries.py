"""Each pair try as judged: its number, or why there is none. Read from the evidence's pair
tries (each file read once), plus the tries run.json or the rdma rails owed that left nothing,
which fail closed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from gpuval.checks.nccl import nccl_problems
from gpuval.checks.pairs.kinds import KINDS, Outcome, PairKind
from gpuval.evidence import ExpectedPairStep, PairTry, RunEvidence
from gpuval.plan.host_order import natural_key
from gpuval.plan.steps import PairStep, RdmaLane
from gpuval.records.collective_bench import CollectiveBenchRun
from gpuval.records.nccl import NcclRun
from gpuval.records.network import Iperf3Run, PerftestRun


@dataclass
class Try:
    """One run of one pair step: its number, or why there is none."""

    kind: str
    a: str  # the pair, in natural order
    b: str
    src: str | None  # iperf3: the direction measured; None for symmetric kinds
    dst: str | None
    round: int
    attempt: int
    host: str
    path: str
    outcome: Outcome
    value: float | None
    unit: str
    reason: str
    low: bool = False  # finished, but below low_fraction of the reference
    lane: RdmaLane | None = None  # rdma: rail and memory


Measured = tuple[Outcome, float | None, str]  # outcome, value, why there is no value


def _iperf3_value(runs: Sequence[object]) -> Measured:
    rates = []
    for run in runs:
        if isinstance(run, Iperf3Run) and run.complete:
            total = run.received or run.sent
            if total and total.bits_per_second is not None:
                rates.append(total.bits_per_second / 1e9)
    if not rates:
        return "failed", None, "no iperf3 totals (test cut short or failed)"
    return "ok", min(rates), ""


def _bench_value(runs: Sequence[object]) -> Measured:
    values = []
    for run in runs:
        if not isinstance(run, CollectiveBenchRun):
            continue
        if not run.correct:
            return "wrong", None, f"wrong results: {run.wrong_total} element(s) reduced wrongly"
        values += [r.busbw_gbps for r in run.rows if r.busbw_gbps is not None]
    return ("ok", max(values), "") if values else ("failed", None, "no busbw measured")


def _nccl_value(runs: Sequence[object]) -> Measured:
    """The best busbw, unless the run's own output says it went wrong (the one nccl-tests
    correctness rule, shared with the per-run checks)."""
    values = []
    for run in runs:
        if not isinstance(run, NcclRun):
            continue
        failing = [p for p in nccl_problems(run, across_nodes=True) if p.status == "fail"]
        if failing:
            wrong = failing[0].category == "correctness"
            return ("wrong" if wrong else "failed"), None, failing[0].reason
        values += [
            h.busbw_gbps for r in run.rows for h in (r.out_of_place, r.in_place)
            if h is not None and h.busbw_gbps is not None
        ]  # fmt: skip
    return ("ok", max(values), "") if values else ("failed", None, "no busbw measured")


def _rdma_value(runs: Sequence[object]) -> Measured:
    """The best average over the sizes of the test (one size unless swept with -a)."""
    values = [v for r in runs if isinstance(r, PerftestRun) and (v := r.best_average_gbit)]
    return ("ok", max(values), "") if values else ("failed", None, "no ib_write_bw result row")


VALUE_READERS: dict[str, Callable[[Sequence[object]], Measured]] = {
    "iperf3": _iperf3_value,
    "allreduce": _bench_value,
    "nccl": _nccl_value,
    "rdma": _rdma_value,
}


def _measured(found: PairTry, kind: PairKind) -> Measured:
    """Skipped, timed out or unfinished (the sidecar), else what the output shows; a non-zero
    exit status is judged from the output (wrong results stay wrong), then fails the try, unless
    Slurm says it lost a node from the step (then nothing was tested)."""
    problem, detail = found.ended or (None, "")
    if problem == "skipped":
        return "skipped", None, f"skipped: {detail}"
    if problem == "timed_out":
        return "failed", None, f"timed out{detail}"
    if problem == "unfinished":
        return "failed", None, f"did not finish (no exit status: {detail})"
    if problem == "exit_status" and found.lost_nodes:
        # Slurm ended the step because a node left it: a try of neither side.
        said = "; ".join(dict.fromkeys(found.lost_nodes.values()))
        return "skipped", None, f"not tested: Slurm lost {', '.join(found.lost_nodes)} ({said})"
    if found.tool is None:
        return "failed", None, "no output (missing, or not recognised as any tool's)"
    if found.tool not in kind.tools:
        return "failed", None, f"output is {found.tool}, expected {'/'.join(sorted(kind.tools))}"
    if found.first_error:
        at = f" (line {found.first_error.line})" if found.first_error.line else ""
        return "failed", None, f"{found.first_error.message}{at}"
    measured = VALUE_READERS[kind.name](found.runs)
    if measured[0] != "wrong" and problem == "exit_status":
        return "failed", None, f"exited with status {detail}"
    return measured


# Host names repeat in every try of their pairs: each is split into its natural key once.
natural = lru_cache(maxsize=1 << 16)(natural_key)


def _try(step: PairStep, host: str, path: str, outcome: Measured) -> Try:
    kind = KINDS[step.kind]
    a, b = sorted((step.src, step.dst), key=natural)  # the pair in natural order
    src, dst = (step.src, step.dst) if kind.directed else (None, None)
    return Try(
        step.kind, a, b, src, dst, step.round, step.attempt, host, path,
        outcome[0], outcome[1], kind.unit, outcome[2], lane=step.lane,
    )  # fmt: skip


def _sort_key(t: Try) -> tuple[object, ...]:
    return (
        t.kind, t.lane or RdmaLane(-1, ""), natural(t.a), natural(t.b), natural(t.src or ""),
        natural(t.dst or ""), t.attempt, t.round, t.path,
    )  # fmt: skip


def judged_tries(evidence: RunEvidence) -> list[Try]:
    """Every pair try of the run, plus the expected tries that left nothing (failed), sorted by
    kind, lane, pair, direction and try."""
    tries = [_try(f.step, f.host, f.path, _measured(f, KINDS[f.step.kind]))
             for f in evidence.pair_tries]  # fmt: skip
    present = {(f.host, f.name) for f in evidence.pair_tries}
    why = "expected (run.json) but left no output and no sidecar"
    tries += [
        _try(e.step, e.host, "run.json", ("failed", None, why))
        for e in evidence.expected_pair_steps
        if (e.host, e.name) not in present
    ]
    tries += _rdma_lanes_left_out(tries, evidence.expected_pair_steps)
    return sorted(tries, key=_sort_key)


def _rdma_lanes_left_out(tries: Sequence[Try], expected: Sequence[ExpectedPairStep]) -> list[Try]:
    """run.json cannot list the rdma steps (the rails are known only after preflight), so when
    the kind ran at all, every rail and memory it ran with is owed by every try of a pair that
    measured any of them, and by try 1 of every pair run.json expects (gpuval_pairs plans the
    rdma kind into each pair of a round): a lane left without a file fails closed."""
    lanes = {t.lane for t in tries if t.kind == "rdma" and t.lane}
    if not lanes:
        return []
    owed: dict[tuple[str, int, str, str, int], str] = {
        (t.host, t.round, t.a, t.b, t.attempt): f"raw/{t.host}" for t in tries if t.kind == "rdma"
    }
    for e in expected:
        if e.step.src == e.host and e.step.attempt == 1:
            owed.setdefault((e.host, e.step.round, e.host, e.step.dst, 1), "run.json")
    done = {(t.host, t.round, t.a, t.b, t.attempt, t.lane) for t in tries if t.kind == "rdma"}
    why = "planned (rdma rail and memory of a pair that ran) but left no output and no sidecar"
    return [
        _try(PairStep("rdma", r, a, b, attempt, lane), host, path, ("failed", None, why))
        for (host, r, a, b, attempt), path in owed.items()
        for lane in sorted(lanes)
        if (host, r, a, b, attempt, lane) not in done
    ]
