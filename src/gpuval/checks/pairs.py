"""Find the bad node: pair tests (iperf3, the all-reduce benchmark, nccl-tests between two
nodes) judged against what the healthy pairs reach, and against the network itself.

Step and file names are `gpuval.steps`' pair steps. For iperf3 the client x of the pair (x, y)
runs `iperf3 -c y -J` (x--y) and `iperf3 -c y -R -J` (y--x), both saved in raw/x/; the other
kinds lie in the folder of the rank-0 host. A failed, timed-out or low try is repeated up to the
configured number of tries; only try1 belongs in run.json `expected`.

Judgement (per kind; deterministic: everything sorted, medians exact):
- A pair's value is its best finished try; for iperf3 the weaker of its two directions.
- What healthy pairs reach (the reference) cannot be dragged down by bad nodes, however many:
  a node's best pair is bounded by the node itself, so the nodes whose best pair is within
  `low_fraction` of the best node's are the strong ones, and the reference is the median pair
  between strong nodes. With 4 hosts of which 2 are bad, the median of all pairs is a bad pair;
  the median between strong nodes is the one healthy pair.
- A pair is low below `low_fraction` of the reference (or when it produced no number).
- A node is flagged when none of its pairs is healthy (a healthy pair proves both its nodes
  healthy), or when most of its pairs are low and at least two of them cannot be put down to a
  flagged partner.
- A low pair of a flagged node is explained by it (the node's check lists it, so one slow node
  among 100 hosts is one failure, not 99); a low pair between two nodes that are fine elsewhere
  is a bad link (host `cluster`). A pair without a number fails whatever else is known.
- Every pair is also judged against the network: iperf3 against the TCP interface's line rate,
  nccl-tests and the NCCL all-reduce against the across-node bound of the nodes' RDMA ports. A
  uniformly slow cluster has no bad node but fails here; so does a two-host cluster, which has one
  pair and nothing to compare it with.
- A pair that passed only on a later try warns and says which try; the spread across its
  finished tries (min/median/max) is kept.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Literal

import pandas as pd

from gpuval.checks.model import CLUSTER, Check, Status, worst
from gpuval.checks.nccl import nccl_problems
from gpuval.checks.references import internode_reference
from gpuval.checks.thresholds import DEFAULTS, Thresholds
from gpuval.checks.wording import band_status, number_text
from gpuval.evidence import RunEvidence
from gpuval.records.collective_bench import CollectiveBenchRun
from gpuval.records.nccl import NcclRun
from gpuval.records.network import Iperf3Run, PerftestRun
from gpuval.runfolder import RawFile
from gpuval.schedule import natural_key, ordered_pair
from gpuval.steps import PairStep, RdmaLane, pair_step

Outcome = Literal["ok", "failed", "wrong", "skipped"]  # wrong: the results were wrong


@dataclass(frozen=True)
class PairKind:
    name: str
    tools: frozenset[str]
    unit: str
    directed: bool  # iperf3: each direction is its own measurement
    label: str
    lane: RdmaLane | None = None  # rdma: the rail and memory judged

    @property
    def check_name(self) -> str:
        return f"{self.name}.{self.lane.label}" if self.lane else self.name

    def on(self, lane: RdmaLane | None) -> PairKind:
        """This kind on one rdma lane (labelled with it); itself for the other kinds."""
        if lane is None:
            return self
        label = f"{self.label} rail {lane.rail} ({lane.memory} memory)"
        return replace(self, label=label, lane=lane)


KINDS = {
    "iperf3": PairKind("iperf3", frozenset({"iperf3"}), "Gbit/s", True, "iperf3 TCP"),
    "allreduce": PairKind(
        "allreduce", frozenset({"gpuval-allreduce-bench"}), "GB/s", False, "all-reduce busbw"
    ),
    "nccl": PairKind(
        "nccl", frozenset({"nccl-tests", "rccl-tests"}), "GB/s", False, "nccl-tests busbw"
    ),
    "rdma": PairKind("rdma", frozenset({"ib_write_bw"}), "Gb/s", False, "ib_write_bw"),
}


@dataclass(frozen=True)
class PairThresholds:
    """The suite's pair thresholds (reasoning in gpuval.checks.thresholds)."""

    low_fraction: float = DEFAULTS.pair_low_fraction  # below it of the reference: low
    max_tries: int = DEFAULTS.pair_max_tries
    line_rate_warn_fraction: float = DEFAULTS.pair_line_rate_warn_fraction
    line_rate_fail_fraction: float = DEFAULTS.pair_line_rate_fail_fraction
    busbw_pass_fraction: float = DEFAULTS.busbw_pass_fraction
    busbw_fail_fraction: float = DEFAULTS.busbw_fail_fraction
    rdma_line_rate_warn_fraction: float = DEFAULTS.pair_rdma_line_rate_warn_fraction
    rdma_line_rate_fail_fraction: float = DEFAULTS.pair_rdma_line_rate_fail_fraction

    @classmethod
    def from_thresholds(cls, thresholds: Thresholds) -> PairThresholds:
        return cls(
            thresholds.pair_low_fraction, thresholds.pair_max_tries,
            thresholds.pair_line_rate_warn_fraction, thresholds.pair_line_rate_fail_fraction,
            thresholds.busbw_pass_fraction, thresholds.busbw_fail_fraction,
            thresholds.pair_rdma_line_rate_warn_fraction,
            thresholds.pair_rdma_line_rate_fail_fraction,
        )  # fmt: skip


# ------------------------------------------------------------------ reading tries


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


def _sidecar_problem(raw: RawFile) -> tuple[Outcome, str] | None:
    """Skipped, timed out or unfinished; a non-zero exit status is judged from the output."""
    problem = raw.sidecar.problem() if raw.sidecar else None
    if problem is None or problem[0] == "exit_status":
        return None
    kind, detail = problem
    if kind == "skipped":
        return "skipped", f"skipped: {detail}"
    if kind == "timed_out":
        return "failed", f"timed out{detail}"
    return "failed", f"did not finish (no exit status: {detail})"


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


VALUE_READERS = {
    "iperf3": _iperf3_value,
    "allreduce": _bench_value,
    "nccl": _nccl_value,
    "rdma": _rdma_value,
}


def _measured(raw: RawFile, kind: PairKind) -> Measured:
    problem = _sidecar_problem(raw)
    if problem:
        return problem[0], None, problem[1]
    parsed = raw.parse
    if parsed is None:
        return "failed", None, "no output (missing, or not recognised as any tool's)"
    if parsed.tool not in kind.tools:
        return "failed", None, f"output is {parsed.tool}, expected {'/'.join(sorted(kind.tools))}"
    if parsed.errors:
        first = parsed.errors[0]
        at = f" (line {first.line})" if first.line else ""
        return "failed", None, f"{first.message}{at}"
    measured = VALUE_READERS[kind.name](parsed.runs)
    if measured[0] != "wrong" and raw.sidecar and raw.sidecar.exit_code:
        return "failed", None, f"exited with status {raw.sidecar.exit_code}"
    return measured


def _try(step: PairStep, host: str, path: str, outcome: Measured) -> Try:
    kind = KINDS[step.kind]
    a, b = ordered_pair(step.src, step.dst)
    src, dst = (step.src, step.dst) if kind.directed else (None, None)
    return Try(
        step.kind, a, b, src, dst, step.round, step.attempt, host, path,
        outcome[0], outcome[1], kind.unit, outcome[2], lane=step.lane,
    )  # fmt: skip


def _sort_key(t: Try) -> tuple[object, ...]:
    return (
        t.kind, t.lane or RdmaLane(-1, ""), natural_key(t.a), natural_key(t.b),
        natural_key(t.src or ""),
        natural_key(t.dst or ""), t.attempt, t.round, t.path,
    )  # fmt: skip


def read_tries(files: Iterable[RawFile], expected: Mapping[str, Sequence[str]] | None) -> list[Try]:
    """Every pair try in the run folder, plus expected tries that left nothing (failed)."""
    tries: list[Try] = []
    present: set[tuple[str, str]] = set()
    for raw in files:
        step = pair_step(raw.step)
        if step is None:
            continue
        present.add((raw.host, raw.step))
        tries.append(_try(step, raw.host, raw.path, _measured(raw, KINDS[step.kind])))
    for host, names in sorted((expected or {}).items()):
        for name in names:
            step = pair_step(name)
            if step and (host, name) not in present:
                why = "expected (run.json) but left no output and no sidecar"
                tries.append(_try(step, host, "run.json", ("failed", None, why)))
    tries += _rdma_lanes_left_out(tries, expected or {})
    return sorted(tries, key=_sort_key)


def _rdma_lanes_left_out(tries: Sequence[Try], expected: Mapping[str, Sequence[str]]) -> list[Try]:
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
    for host, names in expected.items():
        for step in filter(None, map(pair_step, names)):
            if step.src == host and step.attempt == 1:
                owed.setdefault((host, step.round, host, step.dst, 1), "run.json")
    done = {(t.host, t.round, t.a, t.b, t.attempt, t.lane) for t in tries if t.kind == "rdma"}
    why = "planned (rdma rail and memory of a pair that ran) but left no output and no sidecar"
    return [
        _try(PairStep("rdma", r, a, b, attempt, lane), host, path, ("failed", None, why))
        for (host, r, a, b, attempt), path in owed.items()
        for lane in sorted(lanes)
        if (host, r, a, b, attempt, lane) not in done
    ]


# ------------------------------------------------------------------ judging


@dataclass
class Measurement:
    """One pair (one direction for iperf3) over its tries."""

    kind: str
    a: str
    b: str
    src: str | None
    dst: str | None
    tries: list[Try]
    value: float | None = None  # best finished try
    passed_on: int | None = None  # first try that finished and was not low
    spread: tuple[float, float, float] | None = None  # min, median, max of finished tries


@dataclass
class NodeVerdict:
    kind: str
    node: str
    pairs: list[tuple[str, float | None]]  # (other node, pair value), natural order
    reference: float | None  # what the healthy pairs reach
    low: list[str]  # other nodes of its low or failed pairs
    flagged: bool
    median: float | None = None  # of its finished pairs
    lane: RdmaLane | None = None  # rdma: the rail and memory judged


@dataclass(frozen=True)
class Absolute:
    """A pair's reference from the network itself, in the kind's unit."""

    value: float
    basis: str
    pass_fraction: float
    fail_fraction: float


@dataclass
class PairVerdict:
    kind: str
    a: str
    b: str
    value: float | None
    reference: float | None  # what the healthy pairs reach
    status: Status
    reason: str
    measurements: list[Measurement] = field(default_factory=list)
    category: str = "bandwidth"  # correctness: wrong results; completeness: no number
    explained_by: str | None = None  # the flagged node(s) a low pair is put down to
    absolute: Absolute | None = None
    absolute_status: Status = "unjudged"
    lane: RdmaLane | None = None  # rdma: the rail and memory judged


def reference_name(check: Check) -> str:
    """What a check's reference is: for the pair checks what healthy pairs reach, not a peak."""
    return "healthy pairs" if check.check_id.startswith("pairs.") else "reference"


def percent(value: float, reference: float) -> str:
    return f"{value / reference * 100:.0f} %" if reference else "n/a %"


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _is_low(value: float | None, reference: float | None, fraction: float) -> bool:
    return reference is not None and value is not None and value < fraction * reference


def _measurements(tries: list[Try]) -> list[Measurement]:
    grouped: dict[tuple[str, str, str, str | None, str | None], list[Try]] = {}
    for t in tries:
        grouped.setdefault((t.kind, t.a, t.b, t.src, t.dst), []).append(t)
    found = []
    for (kind, a, b, src, dst), group in grouped.items():
        values = sorted(t.value for t in group if t.value is not None)
        measurement = Measurement(kind, a, b, src, dst, group, max(values) if values else None)
        if len(values) > 1:
            measurement.spread = (values[0], statistics.median(values), values[-1])
        found.append(measurement)
    return found


PairValues = dict[tuple[str, str], float | None]


def _pair_values(measurements: list[Measurement]) -> PairValues:
    """A pair is as good as its weaker direction; without a number in one, it has none."""
    directions: dict[tuple[str, str], list[float | None]] = {}
    for m in measurements:
        directions.setdefault((m.a, m.b), []).append(m.value)
    return {
        pair: None if None in values else min(v for v in values if v is not None)
        for pair, values in directions.items()
    }


def _pairs_of(node: str, values: PairValues) -> list[tuple[str, float | None]]:
    """(other node, pair value) for each pair of `node`, in natural order."""
    mine = [(b if a == node else a, v) for (a, b), v in values.items() if node in (a, b)]
    return sorted(mine, key=lambda p: natural_key(p[0]))


def healthy_reference(values: PairValues, fraction: float) -> float | None:
    """What healthy pairs reach: the median pair between the strong nodes, those whose best pair
    is within `fraction` of the best node's. A node's best pair is bounded by the node itself,
    so however many nodes are bad, they cannot drag this down. One pair (two hosts) is no
    reference for comparing nodes."""
    finished = {pair: v for pair, v in values.items() if v is not None}
    if len(values) < 2 or not finished:
        return None
    nodes = {h for pair in values for h in pair}
    best = {n: max((v for p, v in finished.items() if n in p), default=0.0) for n in nodes}
    top = max(best.values())
    strong = {n for n, v in best.items() if v >= fraction * top}
    between = [v for (a, b), v in finished.items() if a in strong and b in strong]
    return statistics.median(between) if between else top


def _node_verdicts(
    kind: PairKind, values: PairValues, reference: float | None, fraction: float
) -> dict[str, NodeVerdict]:
    nodes = sorted({h for pair in values for h in pair}, key=natural_key)

    def low_partners(node: str) -> list[str]:
        return [
            o for o, v in _pairs_of(node, values) if v is None or _is_low(v, reference, fraction)
        ]

    flagged = {
        n for n in nodes
        if reference is not None and len(low_partners(n)) == len(_pairs_of(n, values))
    }  # fmt: skip

    def suspicion(node: str) -> tuple[int, int] | None:
        """Most pairs low, two or more not explained by a flagged partner: (how many are not,
        how many of those left no number at all); None when the node is not suspect."""
        low = low_partners(node)
        unexplained = [o for o in low if o not in flagged]
        if 2 * len(low) <= len(_pairs_of(node, values)) or len(unexplained) < 2:
            return None
        return len(unexplained), sum(1 for o, v in _pairs_of(node, values)
                                     if o in unexplained and v is None)  # fmt: skip

    # Explain away, the strongest suspects first: a host that died leaves its partners with one
    # missing pair each, which its flag explains. Flagging in name order would blame a partner
    # that merely comes first. Suspects equally strong are flagged together.
    while reference is not None:
        suspects = {n: s for n in nodes if n not in flagged and (s := suspicion(n)) is not None}
        if not suspects:
            break
        strongest = max(suspects.values())
        flagged |= {n for n, s in suspects.items() if s == strongest}
    return {
        node: NodeVerdict(
            kind.name, node, _pairs_of(node, values), reference, low_partners(node),
            node in flagged, _median(v for _, v in _pairs_of(node, values)), kind.lane,
        )
        for node in nodes
    }  # fmt: skip


def _try_problem(t: Try) -> str:
    return f"try {t.attempt}: {t.reason or f'low, {number_text(t.value or 0.0)}'}"


def _tries_text(m: Measurement, max_tries: int) -> str:
    problems = "; ".join(_try_problem(t) for t in m.tries if t.outcome != "ok" or t.low)
    spread = ""
    if m.spread:
        low, mid, high = m.spread
        spread = (
            f"; spread over {len(m.tries)} tries {number_text(low)}/{number_text(mid)}/"
            f"{number_text(high)} (min/median/max, {percent(high - low, mid)})"
        )
    if m.passed_on is None:
        return f"failed {len(m.tries)} of up to {max_tries} tries ({problems}){spread}"
    listed = f" ({problems})" if problems else ""
    return f"passed on try {m.passed_on}{listed}{spread}"


def _direction(m: Measurement) -> str:
    return f"{m.src}->{m.dst}" if m.src else f"{m.a}--{m.b}"


def _absolute_status(value: float | None, absolute: Absolute | None) -> Status:
    if absolute is None or value is None:
        return "unjudged"
    return band_status(value / absolute.value, absolute.pass_fraction, absolute.fail_fraction)


def _pair_verdict(
    kind: PairKind,
    pair: tuple[str, str],
    measurements: list[Measurement],
    value: float | None,
    reference: float | None,
    nodes: Mapping[str, NodeVerdict],
    thresholds: PairThresholds,
    absolute: Absolute | None,
    on_cpus: bool = False,
) -> PairVerdict:
    a, b = pair
    # A low try is one the pair could fail on, and what asks for another try: on CPUs that is
    # below busbw_fail_fraction, as above it the pair only warns (re-running a CPU-bound pair
    # measures how busy the cores were, and made a healthy simulated run three times longer).
    low_at = thresholds.busbw_fail_fraction if on_cpus else thresholds.low_fraction
    for m in measurements:
        for t in m.tries:
            t.low = _is_low(t.value, reference, low_at)
        passing = [t.attempt for t in m.tries if t.value is not None and not t.low]
        m.passed_on = min(passing) if passing else None
    details = "; ".join(
        f"{_direction(m)} {_tries_text(m, thresholds.max_tries)}" for m in measurements
    )
    flagged = " and ".join(h for h in pair if h in nodes and nodes[h].flagged)
    wrong = [t.attempt for m in measurements for t in m.tries if t.outcome == "wrong"]
    against = (
        f" vs {number_text(reference)} {kind.unit} that healthy pairs reach "
        f"({percent(value, reference)})"
        if reference and value is not None
        else ""
    )
    line_rate = (
        f"; {percent(value, absolute.value)} of {number_text(absolute.value)} {kind.unit} "
        f"({absolute.basis})"
        if absolute and value is not None
        else ""
    )
    measured = f"{number_text(value)} {kind.unit}{against}{line_rate}" if value is not None else ""
    absolute_status = _absolute_status(value, absolute)
    status: Status = "pass"
    explained_by = None
    if wrong:  # corrupted data is never repaired by a later try
        tries = ", ".join(map(str, sorted(set(wrong))))
        status, verdict = "fail", f"{a}--{b}: wrong results on try {tries}"
    elif value is None:
        blamed = f" (flagged node {flagged})" if flagged else ""
        status, verdict = "fail", f"{a}--{b}: no measurement{blamed}"
    elif flagged and (_is_low(value, reference, thresholds.low_fraction)
                      or absolute_status != "pass"):  # fmt: skip
        explained_by = flagged
        status, verdict = "warn", f"{a}--{b} low, explained by flagged node {flagged}"
    elif (
        on_cpus
        and _is_low(value, reference, thresholds.low_fraction)
        and not _is_low(value, reference, thresholds.busbw_fail_fraction)
    ):
        status, verdict = "warn", f"{a}--{b} low {CPU_BOUND_NOTE}"
    elif _is_low(value, reference, thresholds.low_fraction):
        status, verdict = (
            "fail",
            f"{a}--{b}: bad link ({a} and {b} are fine in their other pairs)",
        )
    else:
        verdict = f"{a}--{b}"
        if any(m.passed_on and m.passed_on > 1 for m in measurements):
            status = "warn"
    reason = f"{verdict}: {measured}; {details}" if value is not None else f"{verdict}; {details}"
    category = "correctness" if wrong else "completeness" if value is None else "bandwidth"
    return PairVerdict(
        kind.name, a, b, value, reference, status, reason, measurements, category, explained_by,
        absolute, absolute_status, kind.lane,
    )  # fmt: skip


def _node_check(
    kind: PairKind,
    verdict: NodeVerdict,
    source: str | None,
    fails_below: float | None = None,
    named: str | None = None,
) -> Check:
    """`fails_below`: for CPU-bound kinds, the share of the reference under which a flagged
    node fails (above it, it warns). `named`: the node as its reason names it (an rdma rail:
    "<node> <hca> (rail i)")."""
    listed = ", ".join(
        f"{number_text(v)} ({other})" if v is not None else f"failed ({other})"
        for other, v in verdict.pairs
    )
    reference = verdict.reference or 0.0
    ratio = f" ({percent(verdict.median, reference)})" if verdict.median is not None else ""
    evidence = (
        f"{named or verdict.node}: its pairs {listed} {kind.unit} vs {number_text(reference)} "
        f"{kind.unit} that healthy pairs reach{ratio}"
    )
    if verdict.flagged:
        none_healthy = len(verdict.low) == len(verdict.pairs)
        why = (
            "none of its pairs is healthy"
            if none_healthy
            else (f"{len(verdict.low)} of its {len(verdict.pairs)} pairs low")
        )
        reason = f"{kind.label}: {why}: {evidence}"
        status: Status = "fail"
        if (fails_below is not None and verdict.median is not None
                and not _is_low(verdict.median, reference, fails_below)):  # fmt: skip
            status, reason = "warn", f"{reason}; low {CPU_BOUND_NOTE}"
    else:
        status = "pass"
        counted = f"{len(verdict.low)} of {len(verdict.pairs)} low"
        reason = f"{kind.label}: not flagged ({counted}); {evidence}"
    return Check(
        check_id=f"pairs.{kind.check_name}.node", host=verdict.node, category="bandwidth",
        status=status, reason=reason, measured=verdict.median,
        reference=verdict.reference, unit=kind.unit, source=source,
    )  # fmt: skip


def _absolute_check(kind: PairKind, verdicts: list[PairVerdict], why_none: str) -> Check:
    """The pairs against the network itself, less those a flagged node explains."""
    judged = [v for v in verdicts if v.absolute is not None and v.value is not None
              and v.explained_by is None]  # fmt: skip
    name = "line rate" if kind.name in ("iperf3", "rdma") else "network bound"
    if not judged:
        return Check(
            check_id=f"pairs.{kind.check_name}.{name.replace(' ', '-')}", host=CLUSTER,
            category="network", status="unjudged",
            reason=f"{kind.label}: pairs not compared with the network's {name}: {why_none}",
        )  # fmt: skip
    status = worst([v.absolute_status for v in judged])
    lowest = sorted(judged, key=lambda v: (v.value or 0.0) / (v.absolute.value if v.absolute
                                                             else 1.0))  # fmt: skip
    shown = "; ".join(
        f"{v.a}--{v.b} {number_text(v.value or 0.0)} {kind.unit} = "
        f"{percent(v.value or 0.0, v.absolute.value if v.absolute else 0.0)}"
        for v in lowest[:3]
    )
    low = [v for v in judged if v.absolute_status != "pass"]
    first = lowest[0].absolute
    bound = f"{number_text(first.value)} {kind.unit}" if first else "?"
    verdict = (
        f"{len(low)} of {len(judged)} pair(s) below "
        f"{first.pass_fraction * 100 if first else 0:.0f} % of the {bound} {name}"
        if low
        else f"all {len(judged)} pair(s) within the {bound} {name}"
    )
    return Check(
        check_id=f"pairs.{kind.check_name}.{name.replace(' ', '-')}", host=CLUSTER,
        category="network", status=status, measured=lowest[0].value,
        reference=round(first.value, 3) if first else None, unit=kind.unit,
        reason=f"{kind.label}: {verdict}; lowest {shown} ({first.basis if first else ''})",
    )  # fmt: skip


@dataclass
class PairAnalysis:
    """Checks for the run, and the tables behind them for the report."""

    checks: list[Check]
    tries: list[Try]
    pairs: list[PairVerdict]
    nodes: list[NodeVerdict]

    def tables(self) -> dict[str, pd.DataFrame]:
        """tries (one row per try), pairs (per pair and direction), nodes (per node and kind)."""
        rows = []
        for p in self.pairs:
            for m in p.measurements:
                low, mid, high = m.spread or (None, None, None)
                rows.append({
                    "kind": p.kind, "lane": _lane_row(p.lane), "a": p.a, "b": p.b,
                    "src": m.src, "dst": m.dst, "value": m.value, "unit": KINDS[p.kind].unit,
                    "tries": len(m.tries), "passed_on": m.passed_on, "spread_min": low,
                    "spread_median": mid, "spread_max": high, "pair_value": p.value,
                    "reference": p.reference, "status": p.status, "reason": p.reason,
                })  # fmt: skip
        nodes = [
            {
                "kind": n.kind, "lane": _lane_row(n.lane), "node": n.node,
                "pairs": len(n.pairs), "low_pairs": len(n.low), "median": n.median,
                "reference": n.reference, "flagged": n.flagged, "low_with": ", ".join(n.low),
            }
            for n in self.nodes
        ]  # fmt: skip
        return {
            "tries": _frame(self.tries),
            "pairs": pd.DataFrame(rows, columns=PAIR_COLUMNS),
            "nodes": pd.DataFrame(nodes, columns=NODE_COLUMNS),
        }

    def to_dict(self) -> dict[str, list[dict[str, object]]]:
        """JSON-ready tables (None, never NaN)."""
        return {
            name: [
                {str(k): (None if pd.isna(v) else v) for k, v in row.items()}
                for row in frame.astype(object).to_dict(orient="records")
            ]
            for name, frame in self.tables().items()
        }


PAIR_COLUMNS = [
    "kind", "lane", "a", "b", "src", "dst", "value", "unit", "tries", "passed_on", "spread_min",
    "spread_median", "spread_max", "pair_value", "reference", "status", "reason",
]  # fmt: skip
NODE_COLUMNS = [
    "kind", "lane", "node", "pairs", "low_pairs", "median", "reference", "flagged", "low_with",
]  # fmt: skip


def _lane_row(lane: RdmaLane | None) -> dict[str, object] | None:
    return asdict(lane) if lane else None


def row_kind(row: Mapping[str, object]) -> PairKind:
    """The kind of a pairs or nodes table row, on its rdma lane where it has one."""
    lane = row.get("lane")
    on = RdmaLane(int(lane["rail"]), str(lane["memory"])) if isinstance(lane, Mapping) else None
    return KINDS[str(row["kind"])].on(on)


def _frame(tries: Sequence[Try]) -> pd.DataFrame:
    return pd.DataFrame([asdict(t) for t in tries], columns=[f.name for f in fields(Try)])


# ------------------------------------------------------------------ references from the network

ON_CPUS = "gloo on CPUs is bound by the CPUs' reduction, not the NIC"


def measured_on_cpus(runs: Iterable[object]) -> bool:
    """Whether a pair's all-reduce ran on CPUs (gloo): it then measures the CPUs, not the NIC."""
    bench = [r for r in runs if isinstance(r, CollectiveBenchRun)]
    return bool(bench) and all((r.backend or "").lower() == "gloo" for r in bench)


# A CPU-bound pair measures how fast the two CPUs reduce, which a busy or shared CPU slows by a
# fifth or more; below low_fraction it warns, and fails only below busbw_fail_fraction.
CPU_BOUND_NOTE = "on CPUs (gloo), where a busy CPU slows it; iperf3 judges the network"


@dataclass(frozen=True)
class NetworkReferences:
    """Each pair's reference from the network, read from the run's evidence."""

    evidence: RunEvidence | None
    thresholds: PairThresholds

    def iperf3(self, pair: tuple[str, str]) -> Absolute | str:
        hosts = [self.evidence.host(h) if self.evidence else None for h in pair]
        interfaces = [h.tcp_interface() if h else None for h in hosts]
        speeds = [i.speed_mbit / 1000 for i in interfaces if i and i.speed_mbit and
                  i.speed_mbit > 0]  # fmt: skip
        if len(speeds) < len(pair):
            return ("the TCP interface's speed is unknown (add the sysfs-net preflight step, or "
                    "declare network_interface)")  # fmt: skip
        line = min(speeds)
        named = ", ".join(
            f"{h}: {i.name} {i.speed_mbit / 1000:g} Gb/s"
            for h, i in zip(pair, interfaces, strict=True)
            if i and i.speed_mbit
        )
        return Absolute(line, f"line rate, {named}", self.thresholds.line_rate_warn_fraction,
                        self.thresholds.line_rate_fail_fraction)  # fmt: skip

    def rail_hca(self, node: str, rail: int) -> str | None:
        host = self.evidence.host(node) if self.evidence else None
        hcas = host.rail_hcas() if host else []
        return hcas[rail] if rail < len(hcas) else None

    def rdma(self, pair: tuple[str, str], rail: int) -> Absolute | str:
        """The rail's line rate: the slower of the two ports' rates (ibstat / sysfs), else the
        declared gpuval_nic_rate_gbit. InfiniBand rates are per direction (HDR 200, NDR 400)."""
        rates, named = [], []
        for node in pair:
            host = self.evidence.host(node) if self.evidence else None
            hca = self.rail_hca(node, rail)
            ports = [p for p in (host.ib_ports if host else []) if p.device == hca and p.rate_gbit]
            rate = ports[0].rate_gbit if ports else (host.declared.nic_rate_gbit if host else None)
            if rate:
                rates.append(rate)
                named.append(f"{node}: {hca or f'rail {rail}'} {rate:g} Gb/s"
                             f"{'' if ports else ' (declared)'}")  # fmt: skip
        if len(rates) < len(pair):
            return ("the rail's port rate is unknown (add the ibstat preflight step, or declare "
                    "gpuval_nic_rate_gbit)")  # fmt: skip
        return Absolute(min(rates), f"line rate, {', '.join(named)}",
                        self.thresholds.rdma_line_rate_warn_fraction,
                        self.thresholds.rdma_line_rate_fail_fraction)  # fmt: skip

    def busbw(self, pair: tuple[str, str], runs: list[object]) -> Absolute | str:
        nccl = [r for r in runs if isinstance(r, NcclRun)]
        bench = [r for r in runs if isinstance(r, CollectiveBenchRun)]
        if measured_on_cpus(runs):
            return ON_CPUS
        host = self.evidence.host(pair[0]) if self.evidence else None
        if host is None:
            return "the pair's first host has no evidence"
        ranks = (nccl[0].nranks if nccl else None) or (bench[0].world_size if bench else None)
        collective = (nccl[0].collective if nccl else None) or "all_reduce"
        over_sockets = (
            bool(nccl)
            and any("socket" in t.lower() for t in nccl[0].transports)
            and not any(t.upper().startswith("NET/IB") for t in nccl[0].transports)
        )
        reference = internode_reference(host, collective, ranks, 2, over_sockets)
        if reference.peak is None:
            return reference.why_none
        return Absolute(reference.peak.per_direction_gbps, reference.peak.basis,
                        self.thresholds.busbw_pass_fraction,
                        self.thresholds.busbw_fail_fraction)  # fmt: skip


def _runs_of(files: Iterable[RawFile], paths: set[str]) -> list[object]:
    return [run for raw in files if raw.path in paths and raw.parse for run in raw.parse.runs]


def analyse_pairs(
    files: Iterable[RawFile],
    thresholds: PairThresholds | None = None,
    expected: Mapping[str, Sequence[str]] | None = None,
    evidence: RunEvidence | None = None,
) -> PairAnalysis:
    """Every pair kind found: per-node verdicts, per-pair (link) verdicts, the pairs against
    the network, and their tables."""
    thresholds = thresholds or PairThresholds()
    files = list(files)
    network = NetworkReferences(evidence, thresholds)
    tries = read_tries(files, expected)
    checks: list[Check] = []
    pair_verdicts: list[PairVerdict] = []
    node_verdicts: list[NodeVerdict] = []
    flagged_rails: dict[str, set[int]] = {}  # rdma: node -> rails flagged with host memory
    host_values: dict[tuple[int, str, str], float | None] = {}  # rdma: (rail, a, b) -> Gb/s
    for name, lane, kind in _kinds_and_lanes(tries):
        measurements = _measurements([t for t in tries if t.kind == name and t.lane == lane])
        if not measurements:
            continue
        values = _pair_values(measurements)
        reference = healthy_reference(values, thresholds.low_fraction)
        nodes = _node_verdicts(kind, values, reference, thresholds.low_fraction)
        by_pair: dict[tuple[str, str], list[Measurement]] = {}
        for m in measurements:  # grouped once: a 232-node cluster has 26,796 pairs
            by_pair.setdefault((m.a, m.b), []).append(m)
        kind_verdicts = []
        why_none = ""
        all_on_cpus = name not in ("iperf3", "rdma")
        for pair in sorted(values, key=lambda p: (natural_key(p[0]), natural_key(p[1]))):
            mine = by_pair[pair]
            runs = _runs_of(files, {t.path for m in mine for t in m.tries})
            on_cpus = name not in ("iperf3", "rdma") and measured_on_cpus(runs)
            all_on_cpus = all_on_cpus and on_cpus
            found = (
                network.iperf3(pair) if name == "iperf3"
                else network.rdma(pair, lane.rail) if lane
                else network.busbw(pair, runs)
            )  # fmt: skip
            absolute = found if isinstance(found, Absolute) else None
            why_none = found if isinstance(found, str) else why_none
            verdict = _pair_verdict(kind, pair, mine, values[pair], reference, nodes,
                                    thresholds, absolute, on_cpus)  # fmt: skip
            if lane and lane.memory == "host":
                host_values[(lane.rail, *pair)] = verdict.value
            if lane and lane.memory == "cuda":
                _note_gpudirect(verdict, host_values.get((lane.rail, *pair)), thresholds)
            kind_verdicts.append(verdict)
            if verdict.explained_by or verdict.status == "pass":
                continue  # a flagged node's pairs are listed in its check; healthy pairs in tables
            checks.append(Check(
                check_id=f"pairs.{kind.check_name}.link.{pair[0]}--{pair[1]}", host=CLUSTER,
                category=verdict.category,  # type: ignore[arg-type]
                status=verdict.status, reason=f"{kind.label}: {verdict.reason}",
                measured=verdict.value, reference=verdict.reference, unit=kind.unit,
                source=mine[0].tries[-1].path,
            ))  # fmt: skip
        pair_verdicts += kind_verdicts
        checks.append(_absolute_check(kind, kind_verdicts, why_none))
        for node in nodes.values():
            if node.reference is None:
                continue  # two hosts: one pair, nothing to compare a node with
            node_verdicts.append(node)
            source = next(
                (t.path for t in tries if t.kind == name and node.node in (t.a, t.b)), None
            )
            named = None
            if lane:
                hca = network.rail_hca(node.node, lane.rail) or "HCA"
                named = f"{node.node} {hca} (rail {lane.rail})"
                if node.flagged and lane.memory == "host":
                    flagged_rails.setdefault(node.node, set()).add(lane.rail)
            checks.append(_node_check(
                kind, node, source, thresholds.busbw_fail_fraction if all_on_cpus else None, named
            ))  # fmt: skip
    checks += _rdma_whole_node_checks(tries, flagged_rails)
    return PairAnalysis(checks, tries, pair_verdicts, node_verdicts)


def _kinds_and_lanes(tries: Sequence[Try]) -> list[tuple[str, RdmaLane | None, PairKind]]:
    """Each kind, and for rdma each rail and memory found (host memory first on each rail, so
    GPUDirect can be held against it)."""
    lanes = sorted({t.lane for t in tries if t.kind == "rdma" and t.lane}, key=lambda ln: ln.order)
    return [
        (name, lane, kind.on(lane))
        for name, kind in KINDS.items()
        for lane in (lanes if name == "rdma" else [None])
    ]


def _note_gpudirect(
    verdict: PairVerdict, host_value: float | None, thresholds: PairThresholds
) -> None:
    """GPUDirect far below host memory on the same rail and pair: the NIC and cable are fine,
    the GPU-NIC path is not (nvidia_peermem not loaded, or PCIe ACS routing peer traffic
    through the CPU)."""
    if _is_low(verdict.value, host_value, thresholds.low_fraction):
        verdict.reason += (
            f"; GPUDirect {percent(verdict.value or 0.0, host_value or 0.0)} of host memory "
            f"({number_text(host_value or 0.0)} Gb/s) on the same rail: check that "
            "nvidia_peermem is loaded and that PCIe ACS does not route GPU-NIC traffic "
            "through the CPU"
        )
        if verdict.status == "pass":
            verdict.status = "warn"


def _rdma_whole_node_checks(tries: Sequence[Try], flagged: Mapping[str, set[int]]) -> list[Check]:
    """A node flagged on every rail it has is the node itself (its PCIe, CPU or software), not
    one HCA or cable."""
    rails: dict[str, set[int]] = {}
    for t in tries:
        if t.kind == "rdma" and t.lane:
            for node in (t.a, t.b):
                rails.setdefault(node, set()).add(t.lane.rail)
    return [
        Check(
            check_id="pairs.rdma.node",
            host=node,
            category="bandwidth",
            status="fail",
            reason=(
                f"ib_write_bw: all {len(rails[node])} rails of {node} low with host memory: "
                "the node, not one HCA or cable"
            ),
        )
        for node in sorted(flagged, key=natural_key)
        if flagged[node] == rails.get(node)
    ]
