"""The pair analysis of a run: every kind (and rdma lane) found in the evidence's pair tries,
judged into per-pair and per-node verdicts and checks, with the tables results.json keeps."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from gpuval.checks.model import CLUSTER, Check
from gpuval.checks.pairs.kinds import KINDS, PairKind, PairThresholds
from gpuval.checks.pairs.network_bounds import NetworkReferences, absolute_check, measured_on_cpus
from gpuval.checks.pairs.rdma_lanes import kinds_and_lanes, note_gpudirect, rdma_whole_node_checks
from gpuval.checks.pairs.tries import Try, judged_tries, natural
from gpuval.checks.pairs.verdicts import (
    Absolute,
    Measurement,
    NodeVerdict,
    PairVerdict,
    confirmed_low,
    healthy_reference,
    measurements,
    node_check,
    node_verdicts,
    pair_values,
    pair_verdict,
)
from gpuval.evidence import RunEvidence
from gpuval.plan.steps import PAIRS_MODES, RdmaLane, pairs_mode_for

Row = dict[str, object]
TRY_COLUMNS = [f.name for f in fields(Try)]


@dataclass
class PairAnalysis:
    """Checks for the run, and the verdicts behind them for the report."""

    checks: list[Check]
    tries: list[Try]
    pairs: list[PairVerdict]
    nodes: list[NodeVerdict]

    def to_dict(self) -> dict[str, list[Row]]:
        """JSON-ready tables (None, never NaN): tries (one row per try), pairs (per pair and
        direction), nodes (per node and kind)."""
        return {
            "tries": [_try_row(t) for t in self.tries],
            "pairs": [_pair_row(p, m) for p in self.pairs for m in p.measurements],
            "nodes": [_node_row(n) for n in self.nodes],
        }


def _number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def _lane_row(lane: RdmaLane | None) -> Row | None:
    return {"rail": lane.rail, "memory": lane.memory} if lane else None


def _try_row(t: Try) -> Row:
    row: Row = {name: getattr(t, name) for name in TRY_COLUMNS}
    row["value"] = _number(t.value)
    row["lane"] = _lane_row(t.lane)
    return row


def _pair_row(p: PairVerdict, m: Measurement) -> Row:
    low, mid, high = m.spread or (None, None, None)
    return {
        "kind": p.kind, "lane": _lane_row(p.lane), "a": p.a, "b": p.b, "src": m.src,
        "dst": m.dst, "value": _number(m.value), "unit": KINDS[p.kind].unit,
        "tries": len(m.tries), "passed_on": m.passed_on, "spread_min": _number(low),
        "spread_median": _number(mid), "spread_max": _number(high),
        "pair_value": _number(p.value), "reference": _number(p.reference), "status": p.status,
        "reason": p.reason,
    }  # fmt: skip


def _node_row(n: NodeVerdict) -> Row:
    return {
        "kind": n.kind, "lane": _lane_row(n.lane), "node": n.node, "pairs": len(n.pairs),
        "low_pairs": len(n.low), "median": _number(n.median), "reference": _number(n.reference),
        "flagged": n.flagged, "low_with": ", ".join(n.low),
    }  # fmt: skip


def row_kind(row: Mapping[str, object]) -> PairKind:
    """The kind of a pairs or nodes table row, on its rdma lane where it has one."""
    lane = row.get("lane")
    on = RdmaLane(int(lane["rail"]), str(lane["memory"])) if isinstance(lane, Mapping) else None
    return KINDS[str(row["kind"])].on(on)


class PairRuns:
    """The parsed runs of a pair's tries, in the run folder's file order (the first nccl-tests
    run says how the pair was connected)."""

    def __init__(self, evidence: RunEvidence) -> None:
        self.by_path: dict[str, list[tuple[int, tuple[object, ...]]]] = {}
        for position, found in enumerate(evidence.pair_tries):
            self.by_path.setdefault(found.path, []).append((position, found.runs))

    def of(self, found: Sequence[Measurement]) -> list[object]:
        paths = {t.path for m in found for t in m.tries}
        files = sorted(entry for path in paths for entry in self.by_path.get(path, []))
        return [run for _, runs in files for run in runs]


def _first_sources(tries: Sequence[Try]) -> dict[tuple[str, str], str]:
    """(kind, node) -> the path of the kind's first try the node is in (any rdma lane)."""
    found: dict[tuple[str, str], str] = {}
    for t in tries:
        found.setdefault((t.kind, t.a), t.path)
        found.setdefault((t.kind, t.b), t.path)
    return found


def configured_tries(evidence: RunEvidence) -> int | None:
    """run.json's `config.bench_pairs_max_tries`: the tries per measurement the run was given;
    None where run.json does not record it (the messages then count the tries made)."""
    config = evidence.folder.meta.get("config")
    value = config.get("bench_pairs_max_tries") if isinstance(config, Mapping) else None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def searched_by_groups(evidence: RunEvidence) -> bool:
    """Whether the run's pairs come from a group-testing search (run.json's
    `config.bench_pairs_mode`, auto deciding by host count): they are then its confirmations,
    each suspect against partners that passed a group test, judged by the search's own rule
    (gpuval.plan.confirmation: flagged only where every partner, two or more, measured it low)."""
    config = evidence.folder.meta.get("config")
    mode = config.get("bench_pairs_mode") if isinstance(config, Mapping) else None
    return mode in PAIRS_MODES and pairs_mode_for(str(mode), len(evidence.folder.hosts)) == "staged"


def analyse_pairs(evidence: RunEvidence, thresholds: PairThresholds | None = None) -> PairAnalysis:
    """Every pair kind found: per-node verdicts, per-pair (link) verdicts, and the pairs against
    the network."""
    thresholds = thresholds or PairThresholds()
    network = NetworkReferences(evidence, thresholds)
    runs = PairRuns(evidence)
    tries = judged_tries(evidence)
    given = configured_tries(evidence)
    by_groups = searched_by_groups(evidence)
    sources = _first_sources(tries)
    by_lane: dict[tuple[str, RdmaLane | None], list[Try]] = {}
    for t in tries:
        by_lane.setdefault((t.kind, t.lane), []).append(t)
    checks: list[Check] = []
    pair_verdicts: list[PairVerdict] = []
    node_verdict_list: list[NodeVerdict] = []
    flagged_rails: dict[str, set[int]] = {}  # rdma: node -> rails flagged with host memory
    host_values: dict[tuple[int, str, str], float | None] = {}  # rdma: (rail, a, b) -> Gb/s
    for name, lane, kind in kinds_and_lanes(tries):
        found = measurements(by_lane.get((name, lane), []))
        if not found:
            continue
        values = pair_values(found)
        reference = healthy_reference(values, thresholds.low_fraction)
        by_pair: dict[tuple[str, str], list[Measurement]] = {}
        for m in found:
            by_pair.setdefault((m.a, m.b), []).append(m)
        confirmed = {pair for pair, mine in by_pair.items()
                     if confirmed_low(mine, values[pair], reference, thresholds)}  # fmt: skip
        nodes = node_verdicts(kind, values, reference, thresholds.low_fraction,
                              () if by_groups else confirmed, by_search=by_groups)  # fmt: skip
        kind_verdicts = []
        why_none = ""
        all_on_cpus = name not in ("iperf3", "rdma")
        for pair in sorted(values, key=lambda p: (natural(p[0]), natural(p[1]))):
            mine = by_pair[pair]
            pair_runs = runs.of(mine) if name not in ("iperf3", "rdma") else []
            on_cpus = name not in ("iperf3", "rdma") and measured_on_cpus(pair_runs)
            all_on_cpus = all_on_cpus and on_cpus
            reached = (
                network.iperf3(pair) if name == "iperf3"
                else network.rdma(pair, lane.rail) if lane
                else network.busbw(pair, pair_runs)
            )  # fmt: skip
            absolute = reached if isinstance(reached, Absolute) else None
            why_none = reached if isinstance(reached, str) else why_none
            verdict = pair_verdict(kind, pair, mine, values[pair], reference, nodes,
                                   thresholds, absolute, on_cpus, given)  # fmt: skip
            if lane and lane.memory == "host":
                host_values[(lane.rail, *pair)] = verdict.value
            if lane and lane.memory == "cuda":
                note_gpudirect(verdict, host_values.get((lane.rail, *pair)), thresholds)
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
        checks.append(absolute_check(kind, kind_verdicts, why_none))
        for node in nodes.values():
            if node.reference is None:
                continue  # two hosts: one pair, nothing to compare a node with
            node_verdict_list.append(node)
            named = None
            if lane:
                hca = network.rail_hca(node.node, lane.rail) or "HCA"
                named = f"{node.node} {hca} (rail {lane.rail})"
                if node.flagged and lane.memory == "host":
                    flagged_rails.setdefault(node.node, set()).add(lane.rail)
            checks.append(node_check(
                kind, node, sources.get((name, node.node)),
                thresholds.busbw_fail_fraction if all_on_cpus else None, named,
            ))  # fmt: skip
    checks += rdma_whole_node_checks(tries, flagged_rails)
    return PairAnalysis(checks, tries, pair_verdicts, node_verdict_list)
