"""Judging pairs and nodes against what the healthy pairs reach (the rules are in the package's
docstring): per-pair values over their tries, the healthy reference, which nodes are flagged,
each pair's verdict and each node's check. Every step indexes the pairs once, so the cost grows
with the number of tries, not with nodes x pairs."""

from __future__ import annotations

import statistics
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from gpuval.checks.model import Check, Status
from gpuval.checks.pairs.kinds import PairKind, PairThresholds
from gpuval.checks.pairs.tries import Try, natural
from gpuval.checks.wording import band_status, number_text, percent_of
from gpuval.plan.confirmation import confirmation_verdict
from gpuval.plan.steps import RdmaLane

# A CPU-bound pair measures how fast the two CPUs reduce, which a busy or shared CPU slows by a
# fifth or more; below low_fraction it warns, and fails only below busbw_fail_fraction.
CPU_BOUND_NOTE = "on CPUs (gloo), where a busy CPU slows it; iperf3 judges the network"
# One low try may be a hiccup (a busy switch, a neighbour's burst): it is flagged only when a
# repeat or a second partner agrees. Google's cluster health scanner pairs each node that failed
# its first pass with a node that passed before it fails it (run_nccl_random_pair_healthcheck in
# https://github.com/GoogleCloudPlatform/cluster-health-scanner/blob/main/src/health_runner/nccl_runner.py).
HOW_TO_CONFIRM = (
    "to confirm, run again with more tries (bench_pairs_max_tries) or against another partner"
)


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
    # Low, but not flagged: measured low with one partner only, or (a staged run's suspect)
    # low with some of its partners and not with others.
    unconfirmed: bool = False
    explained: tuple[str, ...] = ()  # partners of its low pairs that are flagged themselves


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


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def is_low(value: float | None, reference: float | None, fraction: float) -> bool:
    return reference is not None and value is not None and value < fraction * reference


def _repeated_low(m: Measurement, reference: float | None, fraction: float) -> bool:
    """A direction that came back low (or with no number) on two or more tries: a repeat
    agrees. A skipped try measured nothing and confirms nothing."""
    low = m.value is None or is_low(m.value, reference, fraction)
    return low and sum(1 for t in m.tries if t.outcome in ("ok", "failed")) >= 2


def confirmed_low(
    found: Iterable[Measurement],
    value: float | None,
    reference: float | None,
    thresholds: PairThresholds,
) -> bool:
    """Whether a low pair stands on its own: no number, below the floor, or repeated low."""
    return (
        value is None
        or is_low(value, reference, thresholds.floor_fraction)
        or any(_repeated_low(m, reference, thresholds.low_fraction) for m in found)
    )


def measurements(tries: Iterable[Try]) -> list[Measurement]:
    """The tries grouped by pair and direction, in the order first seen."""
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


def pair_values(found: list[Measurement]) -> PairValues:
    """A pair is as good as its weaker direction; without a number in one, it has none."""
    directions: dict[tuple[str, str], list[float | None]] = {}
    for m in found:
        directions.setdefault((m.a, m.b), []).append(m.value)
    return {
        pair: None if None in values else min(v for v in values if v is not None)
        for pair, values in directions.items()
    }


def _partners(values: PairValues) -> dict[str, list[tuple[str, float | None]]]:
    """Each node's (other node, pair value), in natural order of the other node."""
    found: dict[str, list[tuple[str, float | None]]] = {}
    for (a, b), v in values.items():
        found.setdefault(a, []).append((b, v))
        if b != a:
            found.setdefault(b, []).append((a, v))
    for mine in found.values():
        mine.sort(key=lambda p: natural(p[0]))
    return found


def healthy_reference(values: PairValues, fraction: float) -> float | None:
    """What healthy pairs reach: the median pair between the strong nodes, those whose best pair
    is within `fraction` of what the better half of the nodes reach (the median of their best
    pairs). A node's best pair is bounded by the node itself, so bad nodes, fewer than half,
    cannot drag this down; nor can one pair that ran fast (alone, while the other pairs of its
    round shared the switches or the CPUs) lift it so that every other pair reads low: the
    fastest node alone is no measure of the healthy ones. One pair (two hosts) is no reference
    for comparing nodes."""
    finished = {pair: v for pair, v in values.items() if v is not None}
    if len(values) < 2 or not finished:
        return None
    best: dict[str, float] = {}
    for pair, v in finished.items():
        for node in set(pair):
            best[node] = max(best[node], v) if node in best else v
    nodes = {h for pair in values for h in pair}
    bests = sorted(best.get(n, 0.0) for n in nodes)
    better_half = statistics.median(bests[len(bests) // 2 :])
    strong = {n for n in nodes if best.get(n, 0.0) >= fraction * better_half}
    between = [v for (a, b), v in finished.items() if a in strong and b in strong]
    return statistics.median(between) if between else better_half


def _flagged_by_search(
    nodes: list[str],
    partners: Mapping[str, list[tuple[str, float | None]]],
    low: Mapping[str, list[str]],
) -> set[str]:
    """The search's rule on every node, a flagged node's pairs explained by it: a pair with a
    node already flagged says nothing of its partner, which is judged by its other partners
    alone (a partner that confirmed the slow node, with one low pair besides, is unconfirmed,
    not flagged). The nodes most partners measured low are flagged first; nodes equally so
    together. A partner is paired with each suspect it confirms: its low pairs are the
    suspects' when every one of them is with a node the rule flags (never flagged for them)."""
    flagged: set[str] = set()
    while True:
        ruled = {
            n for n in nodes if n not in flagged and confirmation_verdict(
                o not in low[n] for o, _ in partners[n] if o not in flagged
            ) == "flagged"
        }  # fmt: skip
        standing = {
            n: len([o for o in low[n] if o not in flagged])
            for n in ruled if not all(o in ruled or o in flagged for o in low[n])
        }  # fmt: skip
        if not standing:
            return flagged
        strongest = max(standing.values())
        flagged |= {n for n, count in standing.items() if count == strongest}


def node_verdicts(
    kind: PairKind,
    values: PairValues,
    reference: float | None,
    fraction: float,
    confirmed: Collection[tuple[str, str]] = (),
    by_search: bool = False,
) -> dict[str, NodeVerdict]:
    """`confirmed`: the low pairs that stand on their own (see `confirmed_low`). A node none of
    whose pairs is healthy is flagged when two distinct partners agree, or its low pair is
    confirmed; measured once against one partner, it is low but unconfirmed. `by_search`: the
    pairs are a staged search's confirmations, judged by the search's own rule
    (gpuval.plan.confirmation): flagged only when every partner, two or more, measured it low;
    low with some and not others, it is unconfirmed."""
    partners = _partners(values)
    nodes = sorted(partners, key=natural)
    low = {n: [o for o, v in partners[n] if v is None or is_low(v, reference, fraction)]
           for n in nodes}  # fmt: skip

    def verdicts(flagged: set[str], suspect: Collection[str]) -> dict[str, NodeVerdict]:
        """Each node's verdict; `suspect`: nodes that are unconfirmed where a low pair of theirs
        is not explained by a flagged partner."""
        return {
            node: NodeVerdict(
                kind.name, node, partners[node], reference, low[node], node in flagged,
                _median(v for _, v in partners[node]), kind.lane,
                node in suspect and any(o not in flagged for o in low[node]),
                tuple(o for o in low[node] if o in flagged),
            )
            for node in nodes
        }  # fmt: skip

    if by_search:
        flagged = _flagged_by_search(nodes, partners, low) if reference is not None else set()
        return verdicts(flagged, set(nodes) - flagged)
    sure = set(confirmed) | {(b, a) for a, b in confirmed}
    none_healthy = {
        n for n in nodes if reference is not None and len(low[n]) == len(partners[n])
    }  # fmt: skip
    flagged = {n for n in none_healthy
               if len(low[n]) >= 2 or any((n, o) in sure for o in low[n])}  # fmt: skip

    def suspicion(node: str) -> tuple[int, int] | None:
        """Most pairs low, two or more not explained by a flagged partner: (how many are not,
        how many of those left no number at all); None when the node is not suspect."""
        unexplained = [o for o in low[node] if o not in flagged]
        if 2 * len(low[node]) <= len(partners[node]) or len(unexplained) < 2:
            return None
        named = set(unexplained)
        return len(unexplained), sum(1 for o, v in partners[node] if o in named and v is None)

    # Explain away, the strongest suspects first: a host that died leaves its partners with one
    # missing pair each, which its flag explains. Flagging in name order would blame a partner
    # that merely comes first. Suspects equally strong are flagged together.
    while reference is not None:
        suspects = {n: s for n in nodes if n not in flagged and (s := suspicion(n)) is not None}
        if not suspects:
            break
        strongest = max(suspects.values())
        flagged |= {n for n, s in suspects.items() if s == strongest}
    return verdicts(flagged, none_healthy)


def _try_problem(t: Try) -> str:
    return f"try {t.attempt}: {t.reason or f'low, {number_text(t.value or 0.0)}'}"


def tries_made(made: int, configured: int | None) -> str:
    """How many tries were made, against the configured number where the run recorded it."""
    if configured is None:
        return f"{made} {'try' if made == 1 else 'tries'} made"
    return f"{made} of {configured} configured {'try' if configured == 1 else 'tries'} made"


def _tries_text(m: Measurement, configured: int | None) -> str:
    problems = "; ".join(_try_problem(t) for t in m.tries if t.outcome != "ok" or t.low)
    spread = ""
    if m.spread:
        low, mid, high = m.spread
        spread = (
            f"; spread over {len(m.tries)} tries {number_text(low)}/{number_text(mid)}/"
            f"{number_text(high)} (min/median/max, {percent_of(high - low, mid)})"
        )
    if m.passed_on is None:
        return f"no passing try, {tries_made(len(m.tries), configured)} ({problems}){spread}"
    listed = f" ({problems})" if problems else ""
    return f"passed on try {m.passed_on}{listed}{spread}"


def _direction(m: Measurement) -> str:
    return f"{m.src}->{m.dst}" if m.src else f"{m.a}--{m.b}"


def _absolute_status(value: float | None, absolute: Absolute | None) -> Status:
    if absolute is None or value is None:
        return "unjudged"
    return band_status(value / absolute.value, absolute.pass_fraction, absolute.fail_fraction)


def pair_verdict(
    kind: PairKind,
    pair: tuple[str, str],
    found: list[Measurement],
    value: float | None,
    reference: float | None,
    nodes: Mapping[str, NodeVerdict],
    thresholds: PairThresholds,
    absolute: Absolute | None,
    on_cpus: bool = False,
    configured_tries: int | None = None,
) -> PairVerdict:
    """`configured_tries`: run.json's bench_pairs_max_tries, None where it is not recorded."""
    a, b = pair
    # A low try is one the pair could fail on, and what asks for another try: on CPUs that is
    # below busbw_fail_fraction, as above it the pair only warns (re-running a CPU-bound pair
    # measures how busy the cores were, and made a healthy simulated run three times longer).
    low_at = thresholds.busbw_fail_fraction if on_cpus else thresholds.low_fraction
    for m in found:
        for t in m.tries:
            t.low = is_low(t.value, reference, low_at)
        passing = [t.attempt for t in m.tries if t.value is not None and not t.low]
        m.passed_on = min(passing) if passing else None
    details = "; ".join(f"{_direction(m)} {_tries_text(m, configured_tries)}" for m in found)
    flagged = " and ".join(h for h in pair if h in nodes and nodes[h].flagged)
    wrong = [t.attempt for m in found for t in m.tries if t.outcome == "wrong"]
    against = (
        f" vs {number_text(reference)} {kind.unit} that healthy pairs reach "
        f"({percent_of(value, reference)})"
        if reference and value is not None
        else ""
    )
    line_rate = (
        f"; {percent_of(value, absolute.value)} of {number_text(absolute.value)} {kind.unit} "
        f"({absolute.basis})"
        if absolute and value is not None
        else ""
    )
    measured = f"{number_text(value)} {kind.unit}{against}{line_rate}" if value is not None else ""
    absolute_status = _absolute_status(value, absolute)
    status: Status = "pass"
    explained_by = None
    advice = ""
    floor = f"{thresholds.floor_fraction * 100:.0f} %"
    if wrong:  # corrupted data is never repaired by a later try
        tries = ", ".join(map(str, sorted(set(wrong))))
        status, verdict = "fail", f"{a}--{b}: wrong results on try {tries}"
    elif value is None and all(t.outcome == "skipped" for m in found for t in m.tries):
        # Nothing was tried (a host it needs was unreachable, or Slurm lost a node from the
        # step): the link is not tested, neither passed nor failed; the host's own checks say why.
        status, verdict = "unjudged", f"{a}--{b}: not tested"
    elif value is None:
        blamed = f" (flagged node {flagged})" if flagged else ""
        status, verdict = "fail", f"{a}--{b}: no measurement{blamed}"
    elif flagged and (is_low(value, reference, thresholds.low_fraction)
                      or absolute_status != "pass"):  # fmt: skip
        explained_by = flagged
        status, verdict = "warn", f"{a}--{b} low, explained by flagged node {flagged}"
    elif (
        on_cpus
        and is_low(value, reference, thresholds.low_fraction)
        and not is_low(value, reference, thresholds.busbw_fail_fraction)
    ):
        status, verdict = "warn", f"{a}--{b} low {CPU_BOUND_NOTE}"
    elif (
        is_low(value, reference, thresholds.low_fraction)
        and absolute_status != "fail"
        and confirmed_low(found, value, reference, thresholds)
        and (alone := next((h for h in pair if h in nodes and nodes[h].unconfirmed), None))
    ):
        # A search's suspect measured against one partner, or low with only some of them (only a
        # staged run leaves a confirmed low pair unflagged): the pair alone cannot tell the
        # node, its partner and the link apart, so none is blamed. Below the network's fail band
        # it still fails, below.
        why = "has no other pair" if len(nodes[alone].pairs) == 1 else "is fine with another"
        status, verdict = "warn", f"{a}--{b}: low, unconfirmed ({alone} {why})"
        advice = f"; {HOW_TO_CONFIRM}"
    elif is_low(value, reference, thresholds.low_fraction) and (
        absolute_status == "fail" or confirmed_low(found, value, reference, thresholds)
    ):
        repeated = any(_repeated_low(m, reference, thresholds.low_fraction) for m in found)
        why = (
            "low again on a repeat" if repeated
            else f"below the {floor} floor" if is_low(value, reference, thresholds.floor_fraction)
            else "below the network's fail band"
        )  # fmt: skip
        status, verdict = (
            "fail",
            f"{a}--{b}: bad link ({a} and {b} are fine in their other pairs; {why})",
        )
    elif is_low(value, reference, thresholds.low_fraction):
        status, verdict = (
            "warn",
            (
                f"{a}--{b}: low, unconfirmed (one try below {thresholds.low_fraction * 100:.0f} % "
                f"of what healthy pairs reach, above the {floor} floor)"
            ),
        )
        advice = f"; {HOW_TO_CONFIRM}"
    else:
        verdict = f"{a}--{b}"
        if any(m.passed_on and m.passed_on > 1 for m in found):
            status = "warn"
    reason = (f"{verdict}: {measured}; {details}{advice}" if value is not None
              else f"{verdict}; {details}")  # fmt: skip
    category = "correctness" if wrong else "completeness" if value is None else "bandwidth"
    return PairVerdict(
        kind.name, a, b, value, reference, status, reason, found, category, explained_by,
        absolute, absolute_status, kind.lane,
    )  # fmt: skip


def node_check(
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
    ratio = f" ({percent_of(verdict.median, reference)})" if verdict.median is not None else ""
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
                and not is_low(verdict.median, reference, fails_below)):  # fmt: skip
            status, reason = "warn", f"{reason}; low {CPU_BOUND_NOTE}"
    elif verdict.unconfirmed:
        status = "warn"
        low = [other for other in verdict.low if other not in verdict.explained]
        fine = [other for other, _ in verdict.pairs if other not in verdict.low]
        measured = (
            f"measured low with {', '.join(low)} but not with {', '.join(fine)}" if fine
            else f"measured low with one partner only ({', '.join(low)})"
        )  # fmt: skip
        if len(verdict.explained) == 1:
            (other,) = verdict.explained
            measured += f"; its low pair with {other} is {other}'s (flagged)"
        elif verdict.explained:
            measured += f"; its low pairs with {', '.join(verdict.explained)} are theirs (flagged)"
        reason = f"{kind.label}: low, unconfirmed: {measured}: {evidence}; {HOW_TO_CONFIRM}"
    else:
        status = "pass"
        counted = f"{len(verdict.low)} of {len(verdict.pairs)} low"
        reason = f"{kind.label}: not flagged ({counted}); {evidence}"
    return Check(
        check_id=f"pairs.{kind.check_name}.node", host=verdict.node, category="bandwidth",
        status=status, reason=reason, measured=verdict.median,
        reference=verdict.reference, unit=kind.unit, source=source,
    )  # fmt: skip
