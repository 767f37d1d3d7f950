"""Find the bad node: pair tests (iperf3, the all-reduce benchmark, nccl-tests between two nodes)
judged across the cluster, plus the MPI preflight and the all-nodes benchmark's correctness.

Step and file names (the playbooks follow this; `gpuval.schedule` gives the pairs and rounds):

    pair-<kind>-r<round>-<a>--<b>-try<k>

- kind: `iperf3` (tool iperf3, run with -J; Gbit/s), `allreduce` (tool gpuval-allreduce-bench,
  busbw GB/s), `nccl` (tool nccl-tests, e.g. all_reduce_perf over the two nodes; busbw GB/s).
- round: the schedule round (1-based); k: the try, 1 for the first run, 2.. for repeats.
- a--b: inventory names. For iperf3 it is the direction the data flowed, sender--receiver:
  for the pair (x, y) the client x runs `iperf3 -c y -J` (pair-iperf3-r1-x--y-try1) and
  `iperf3 -c y -R -J` (pair-iperf3-r1-y--x-try1), both saved in raw/x/. For allreduce and nccl
  the order does not matter; the file lies in the folder of the rank-0 host.
- The sidecar sits beside the raw file as usual: name = the step name above, phase "network"
  (iperf3) or "internode" (allreduce, nccl), tool "iperf3" / "gpuval-allreduce-bench" /
  "nccl-tests". Host names must not contain "--". The MPI preflight is any step with tool
  "mpi-preflight" (phase "mpi-preflight"), e.g. raw/<first host>/mpi-preflight.txt.
- Repeat to confirm: when a try fails (did not finish, failed, or measured low), run the
  same step again with try<k+1>, up to the configured number of tries. Only try1 belongs in
  run.json `expected`; a missing expected try fails its pair.

Judgement (per kind; deterministic: everything sorted, medians exact):
- A pair's value is its best finished try; for iperf3 the weaker of its two directions.
- The cluster median is the median pair between hosts that a first pass does not suspect (a
  host is suspect when most of its pairs are low against the median of the pairs without it),
  so one bad host cannot drag the reference down: with four hosts it is in half of all pairs.
- A node is flagged when more than half of its pairs are low (below `low_fraction` of the
  cluster median) or produced no number.
- A low pair whose two nodes are not flagged is a bad link; a low pair of a flagged node is
  explained by the node (warn in the pair table; no check of its own, the node's check lists it,
  so one slow node among 100 hosts is one failure, not 99 warnings). A pair without a number
  fails whatever else is known (fail closed).
- A pair that passed only on a later try warns and says which try; the spread across its
  finished tries (min/median/max) is kept. Two hosts give one pair: low cannot be judged and
  nothing can be pinned on a node.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Literal

import pandas as pd

from gpuval.analysis.model import CLUSTER, Check, RawFile, Status
from gpuval.analysis.thresholds import DEFAULTS, Thresholds
from gpuval.records.collective_bench import CollectiveBenchRun, MpiPreflightRun
from gpuval.records.nccl import NcclRun
from gpuval.records.network import Iperf3Run
from gpuval.schedule import natural_key, ordered_pair

Outcome = Literal["ok", "failed", "wrong", "skipped"]  # wrong: the results were wrong

PAIR_STEP = re.compile(
    r"^pair-(?P<kind>iperf3|allreduce|nccl)-r(?P<round>\d+)-(?P<a>.+?)--(?P<b>.+)-try(?P<try>\d+)$"
)


@dataclass(frozen=True)
class PairKind:
    name: str
    tools: frozenset[str]
    unit: str
    directed: bool  # iperf3: each direction is its own measurement
    label: str


KINDS = {
    "iperf3": PairKind("iperf3", frozenset({"iperf3"}), "Gbit/s", True, "iperf3 TCP"),
    "allreduce": PairKind(
        "allreduce", frozenset({"gpuval-allreduce-bench"}), "GB/s", False, "all-reduce busbw"
    ),
    "nccl": PairKind(
        "nccl", frozenset({"nccl-tests", "rccl-tests"}), "GB/s", False, "nccl-tests busbw"
    ),
}


@dataclass(frozen=True)
class PairThresholds:
    """The suite's pair thresholds (reasoning in gpuval.analysis.thresholds)."""

    low_fraction: float = DEFAULTS.pair_low_fraction  # below it of the cluster median: low
    max_tries: int = DEFAULTS.pair_max_tries

    @classmethod
    def from_thresholds(cls, thresholds: Thresholds | PairThresholds | None) -> PairThresholds:
        if isinstance(thresholds, PairThresholds):
            return thresholds
        if thresholds is None:
            return cls()
        return cls(thresholds.pair_low_fraction, thresholds.pair_max_tries)


@dataclass(frozen=True)
class PairStep:
    kind: str
    round: int
    src: str  # as named: the iperf3 sender, or the first host
    dst: str
    attempt: int


def pair_step(name: str) -> PairStep | None:
    match = PAIR_STEP.match(name)
    if not match:
        return None
    kind, src, dst = match["kind"], match["a"], match["b"]
    return PairStep(kind, int(match["round"]), src, dst, int(match["try"]))


def step_name(raw: RawFile) -> str:
    return raw.sidecar.name if raw.sidecar else raw.path.rsplit("/", 1)[-1].split(".")[0]


def is_pair_file(raw: RawFile) -> bool:
    """Pair files are judged here, tries together: the generic per-step checks must skip them,
    or a first try that failed would fail the run although its repeat passed."""
    return pair_step(step_name(raw)) is not None


def reference_name(check: Check) -> str:
    """What a check's reference is: for the pair checks the cluster median, not a peak."""
    return "cluster median" if check.check_id.startswith("pairs.") else "reference"


def _try_of(step: PairStep) -> tuple[str, str, str, int]:
    return step.kind, step.src, step.dst, step.round


def without_superseded_tries(files: Iterable[RawFile]) -> list[RawFile]:
    """The files less the pair tries that a later try of the same step replaced: a tool's own
    checks (nccl-tests busbw against the peak, transport) judge only the try that counts."""
    files = list(files)
    last: dict[tuple[str, str, str, int], int] = {}
    for raw in files:
        step = pair_step(step_name(raw))
        if step:
            last[_try_of(step)] = max(step.attempt, last.get(_try_of(step), 0))
    return [
        raw for raw in files
        if (step := pair_step(step_name(raw))) is None or step.attempt == last[_try_of(step)]
    ]  # fmt: skip


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
    low: bool = False  # finished, but below low_fraction of the median of the other pairs


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
    values = []
    for run in runs:
        if not isinstance(run, NcclRun):
            continue
        halves = [h for r in run.rows for h in (r.out_of_place, r.in_place) if h is not None]
        wrong = sum(h.wrong or 0 for h in halves)
        if wrong:
            return "wrong", None, f"wrong results: {wrong} wrong element(s) (#wrong)"
        if not run.complete:
            return "failed", None, "nccl-tests run cut short (no final summary)"
        values += [h.busbw_gbps for h in halves if h.busbw_gbps is not None]
    return ("ok", max(values), "") if values else ("failed", None, "no busbw measured")


VALUE_READERS = {"iperf3": _iperf3_value, "allreduce": _bench_value, "nccl": _nccl_value}


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
        outcome[0], outcome[1], kind.unit, outcome[2],
    )  # fmt: skip


def _sort_key(t: Try) -> tuple[object, ...]:
    return (
        t.kind, natural_key(t.a), natural_key(t.b), natural_key(t.src or ""),
        natural_key(t.dst or ""), t.attempt, t.round, t.path,
    )  # fmt: skip


def read_tries(files: Iterable[RawFile], expected: Mapping[str, Sequence[str]] | None) -> list[Try]:
    """Every pair try in the run folder, plus expected tries that left nothing (failed)."""
    tries: list[Try] = []
    present: set[tuple[str, str]] = set()
    for raw in files:
        step = pair_step(step_name(raw))
        if step is None:
            continue
        present.add((raw.host, step_name(raw)))
        tries.append(_try(step, raw.host, raw.path, _measured(raw, KINDS[step.kind])))
    for host, names in sorted((expected or {}).items()):
        for name in names:
            step = pair_step(name)
            if step and (host, name) not in present:
                why = "expected (run.json) but left no output and no sidecar"
                tries.append(_try(step, host, "run.json", ("failed", None, why)))
    return sorted(tries, key=_sort_key)


def pair_table(
    files: Iterable[RawFile], expected: Mapping[str, Sequence[str]] | None = None
) -> pd.DataFrame:
    """One row per try: kind, pair, direction, round, try, outcome, value, unit, reason."""
    return _frame(read_tries(files, expected))


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
    reference: float | None  # the cluster median (healthy part)
    low: list[str]  # other nodes of its low or failed pairs
    flagged: bool
    median: float | None = None  # of its finished pairs


@dataclass
class PairVerdict:
    kind: str
    a: str
    b: str
    value: float | None
    reference: float | None  # the cluster median (healthy part)
    status: Status
    reason: str
    measurements: list[Measurement] = field(default_factory=list)
    category: str = "bandwidth"  # correctness: wrong results; completeness: no number
    explained_by: str | None = None  # the flagged node(s) a low pair is put down to


def number_text(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


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


def _low_partners(
    node: str, values: PairValues, reference: float | None, fraction: float
) -> list[str]:
    return [
        other for other, v in _pairs_of(node, values)
        if v is None or _is_low(v, reference, fraction)
    ]  # fmt: skip


def _mostly_low(node: str, values: PairValues, reference: float | None, fraction: float) -> bool:
    low = _low_partners(node, values, reference, fraction)
    return reference is not None and 2 * len(low) > len(_pairs_of(node, values))


def cluster_reference(values: PairValues, fraction: float) -> float | None:
    """The median pair of the healthy part of the cluster. First pass: a host is suspect when
    most of its pairs are low against the median of the pairs without it (so one bad host
    cannot drag its own reference down: with four hosts it is in half of all pairs). The
    reference is then the median of the pairs between hosts not suspected. One pair (two
    hosts) is no reference."""
    if len(values) < 2:
        return None
    nodes = {h for pair in values for h in pair}
    suspects = {
        node for node in nodes
        if _mostly_low(node, values, _median(v for p, v in values.items() if node not in p),
                       fraction)
    }  # fmt: skip
    healthy = [v for pair, v in values.items() if not suspects & set(pair)]
    return _median(healthy) if any(v is not None for v in healthy) else _median(values.values())


def _node_verdicts(
    kind: str, values: PairValues, reference: float | None, fraction: float
) -> dict[str, NodeVerdict]:
    verdicts = {}
    for node in sorted({h for pair in values for h in pair}, key=natural_key):
        mine = _pairs_of(node, values)
        low = _low_partners(node, values, reference, fraction)
        flagged = _mostly_low(node, values, reference, fraction)
        median = _median(v for _, v in mine)
        verdicts[node] = NodeVerdict(kind, node, mine, reference, low, flagged, median)
    return verdicts


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


def _pair_verdict(
    kind: PairKind,
    pair: tuple[str, str],
    measurements: list[Measurement],
    value: float | None,
    reference: float | None,
    nodes: Mapping[str, NodeVerdict],
    thresholds: PairThresholds,
) -> PairVerdict:
    a, b = pair
    for m in measurements:
        for t in m.tries:
            t.low = _is_low(t.value, reference, thresholds.low_fraction)
        passing = [t.attempt for t in m.tries if t.value is not None and not t.low]
        m.passed_on = min(passing) if passing else None
    details = "; ".join(
        f"{_direction(m)} {_tries_text(m, thresholds.max_tries)}" for m in measurements
    )
    flagged = " and ".join(h for h in pair if h in nodes and nodes[h].flagged)
    wrong = [t.attempt for m in measurements for t in m.tries if t.outcome == "wrong"]
    against = (
        f" vs cluster median {number_text(reference)} {kind.unit} ({percent(value, reference)})"
        if reference and value is not None
        else ""
    )
    measured = f"{number_text(value)} {kind.unit}{against}" if value is not None else ""
    status: Status = "pass"
    explained_by = None
    if wrong:  # corrupted data is never repaired by a later try
        tries = ", ".join(map(str, sorted(set(wrong))))
        status, verdict = "fail", f"{a}--{b}: wrong results on try {tries}"
    elif value is None:
        blamed = f" (flagged node {flagged})" if flagged else ""
        status, verdict = "fail", f"{a}--{b}: no measurement{blamed}"
    elif _is_low(value, reference, thresholds.low_fraction):
        if flagged:
            explained_by = flagged
            status, verdict = "warn", f"{a}--{b} low, explained by flagged node {flagged}"
        else:
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
        kind.name, a, b, value, reference, status, reason, measurements, category, explained_by
    )


def _node_check(kind: PairKind, verdict: NodeVerdict, source: str | None) -> Check:
    listed = ", ".join(
        f"{number_text(v)} ({other})" if v is not None else f"failed ({other})"
        for other, v in verdict.pairs
    )
    reference = verdict.reference or 0.0
    ratio = f" ({percent(verdict.median, reference)})" if verdict.median is not None else ""
    evidence = (
        f"{verdict.node}: its pairs {listed} {kind.unit} vs cluster median "
        f"{number_text(reference)} {kind.unit}{ratio}"
    )
    if verdict.flagged:
        reason = (
            f"{kind.label}: {len(verdict.low)} of its {len(verdict.pairs)} pairs low: {evidence}"
        )
    else:
        counted = f"{len(verdict.low)} of {len(verdict.pairs)} low"
        reason = f"{kind.label}: not flagged ({counted}); {evidence}"
    return Check(
        check_id=f"pairs.{kind.name}.node", host=verdict.node, category="bandwidth",
        status="fail" if verdict.flagged else "pass", reason=reason, measured=verdict.median,
        reference=verdict.reference, unit=kind.unit, source=source,
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
                    "kind": p.kind, "a": p.a, "b": p.b, "src": m.src, "dst": m.dst,
                    "value": m.value, "unit": KINDS[p.kind].unit, "tries": len(m.tries),
                    "passed_on": m.passed_on, "spread_min": low, "spread_median": mid,
                    "spread_max": high, "pair_value": p.value, "reference": p.reference,
                    "status": p.status, "reason": p.reason,
                })  # fmt: skip
        nodes = [
            {
                "kind": n.kind, "node": n.node, "pairs": len(n.pairs), "low_pairs": len(n.low),
                "median": n.median, "reference": n.reference, "flagged": n.flagged,
                "low_with": ", ".join(n.low),
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
    "kind", "a", "b", "src", "dst", "value", "unit", "tries", "passed_on", "spread_min",
    "spread_median", "spread_max", "pair_value", "reference", "status", "reason",
]  # fmt: skip
NODE_COLUMNS = ["kind", "node", "pairs", "low_pairs", "median", "reference", "flagged", "low_with"]


def _frame(tries: Sequence[Try]) -> pd.DataFrame:
    return pd.DataFrame([asdict(t) for t in tries], columns=[f.name for f in fields(Try)])


def analyse_pairs(
    files: Iterable[RawFile],
    thresholds: PairThresholds | None = None,
    expected: Mapping[str, Sequence[str]] | None = None,
) -> PairAnalysis:
    """Every pair kind found: per-node verdicts, per-pair (link) verdicts, and their tables."""
    thresholds = thresholds or PairThresholds()
    tries = read_tries(files, expected)
    checks: list[Check] = []
    pair_verdicts: list[PairVerdict] = []
    node_verdicts: list[NodeVerdict] = []
    for name, kind in KINDS.items():
        measurements = _measurements([t for t in tries if t.kind == name])
        if not measurements:
            continue
        values = _pair_values(measurements)
        reference = cluster_reference(values, thresholds.low_fraction)
        nodes = _node_verdicts(name, values, reference, thresholds.low_fraction)
        by_pair: dict[tuple[str, str], list[Measurement]] = {}
        for m in measurements:  # grouped once: a 232-node cluster has 26,796 pairs
            by_pair.setdefault((m.a, m.b), []).append(m)
        for pair in sorted(values, key=lambda p: (natural_key(p[0]), natural_key(p[1]))):
            mine = by_pair[pair]
            verdict = _pair_verdict(kind, pair, mine, values[pair], reference, nodes, thresholds)
            pair_verdicts.append(verdict)
            if verdict.explained_by:
                continue  # judged in its node's check, which lists it: one bad node, one failure
            checks.append(Check(
                check_id=f"pairs.{name}.link.{pair[0]}--{pair[1]}", host=CLUSTER,
                category=verdict.category,
                status=verdict.status, reason=f"{kind.label}: {verdict.reason}",
                measured=verdict.value, reference=verdict.reference, unit=kind.unit,
                source=mine[0].tries[-1].path,
            ))  # fmt: skip
        for node in nodes.values():
            if node.reference is None:
                continue  # two hosts: one pair, nothing to compare a node with
            node_verdicts.append(node)
            source = next(
                (t.path for t in tries if t.kind == name and node.node in (t.a, t.b)), None
            )
            checks.append(_node_check(kind, node, source))
    return PairAnalysis(checks, tries, pair_verdicts, node_verdicts)


def pair_checks(
    files: Iterable[RawFile],
    thresholds: Thresholds | PairThresholds | None = None,
    expected: Mapping[str, Sequence[str]] | None = None,
) -> list[Check]:
    """The checks of `analyse_pairs`, with thresholds read from the suite's Thresholds."""
    return analyse_pairs(files, PairThresholds.from_thresholds(thresholds), expected).checks


# ------------------------------------------------------------------ preflight and all-nodes bench


def mpi_preflight_checks(files: Iterable[RawFile]) -> list[Check]:
    """One check per MPI preflight, and one per host it names as failing."""
    checks = []
    for raw in files:
        if raw.parse is None or raw.parse.tool != "mpi-preflight":
            continue
        for run in raw.parse.runs:
            if isinstance(run, MpiPreflightRun):
                checks += _preflight_checks(raw, run)
    return checks


def _preflight_checks(raw: RawFile, run: MpiPreflightRun) -> list[Check]:
    hosts = sorted({r.host for r in run.ranks}, key=natural_key)
    if run.ok and run.complete:
        return [Check(
            check_id="mpi-preflight", host=raw.host, category="completeness", status="pass",
            reason=f"{run.world_size} ranks on {len(hosts)} host(s) ({', '.join(hosts)}) "
            f"answered; all-to-all between {run.alltoall_pairs} rank pairs and the allreduce "
            f"({run.allreduce_sum}) correct", measured=run.world_size, source=raw.path,
        )]  # fmt: skip
    named = sorted({p.host for p in run.problems if p.host}, key=natural_key)
    missing = (
        f"; rank(s) {', '.join(map(str, run.missing_ranks))} never reported"
        if run.missing_ranks
        else ""
    )
    first = run.problems[0].message if run.problems else "no OK line (did not finish)"
    summary = Check(
        check_id="mpi-preflight", host=raw.host, category="completeness", status="fail",
        reason=f"MPI preflight failed: host(s) {', '.join(named) or 'unknown'}; {first}"
        f"{missing} (run no long benchmark until this passes)",
        measured=len(run.ranks), reference=run.world_size, source=raw.path,
    )  # fmt: skip
    per_host = [
        Check(
            check_id="mpi-preflight.host", host=host, category="completeness", status="fail",
            reason="named by the MPI preflight: " + "; ".join(
                p.message for p in run.problems if p.host == host
            )[:300], source=f"{raw.path}:{next(p.line for p in run.problems if p.host == host)}",
        )
        for host in named
    ]  # fmt: skip
    return [summary, *per_host]


def collective_bench_checks(files: Iterable[RawFile]) -> list[Check]:
    """Correctness and best busbw of gpuval-allreduce-bench runs outside pair steps (the
    all-nodes test of staged mode). Peaks are not judged here."""
    checks = []
    for raw in files:
        if is_pair_file(raw) or raw.parse is None or raw.parse.tool != "gpuval-allreduce-bench":
            continue
        for run in raw.parse.runs:
            if not isinstance(run, CollectiveBenchRun):
                continue
            rows = [r for r in run.rows if r.busbw_gbps is not None]
            best = max(rows, key=lambda r: r.busbw_gbps or 0.0) if rows else None
            hosts = ", ".join(sorted(set(run.hosts), key=natural_key))
            where = f"{run.world_size} ranks on {hosts} ({run.backend})"
            if not run.correct or best is None:
                status: Status = "fail"
                reason = f"{where}: " + (
                    f"{run.wrong_total} element(s) reduced wrongly"
                    if run.correct is False
                    else "no correct, complete measurement"
                )
            else:
                status = "pass"
                reason = (
                    f"{where}: busbw up to {number_text(best.busbw_gbps or 0.0)} GB/s at "
                    f"{best.size_bytes} B; every size reduced correctly"
                )
            checks.append(Check(
                check_id="gpuval-allreduce-bench.all_reduce", host=raw.host,
                category="correctness" if status == "fail" else "bandwidth", status=status,
                reason=reason, measured=best.busbw_gbps if best else None, unit="GB/s",
                source=f"{raw.path}:{run.line}",
            ))  # fmt: skip
    return checks
