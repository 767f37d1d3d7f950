"""summary.json: the small document a nightly job reads (schema: summary.schema.json).

Also the per-host status and key metrics, which the HTML report's comparison table shows. A view
of the RunJudgement: the metrics, figures and outliers are the judge's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from gpuval.checks.model import CLUSTER, STATUS_ORDER, Check, Status, rank, worst
from gpuval.judgement.model import RunJudgement
from gpuval.judgement.vocabulary import HEALTH_SUBJECTS, health_subject, row_kind, suggested_action
from gpuval.records.base import Diagnostic, to_jsonable
from gpuval.records.key_figures import figure_entry

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class HostRow:
    """One host's status and key metrics; a metric is None where the host has no such run."""

    name: str
    status: Status
    counts: dict[Status, int]
    metrics: dict[str, float | None]


def status_counts(checks: list[Check]) -> dict[Status, int]:
    counted = Counter(check.status for check in checks)
    return {status: counted.get(status, 0) for status in STATUS_ORDER}


def sort_checks(checks: list[Check]) -> list[Check]:
    """Worst status first, then host and check id, so failures lead every listing."""
    return sorted(checks, key=lambda c: (rank(c.status), c.host, c.check_id))


def checks_by_host(checks: list[Check]) -> dict[str, list[Check]]:
    """The checks of each host (and of CLUSTER), in their order: one pass, for any host count."""
    found: dict[str, list[Check]] = {}
    for check in checks:
        found.setdefault(check.host, []).append(check)
    return found


def host_rows(judgement: RunJudgement) -> list[HostRow]:
    """Status, check counts and key metrics per host, in host order."""
    rows = []
    per_host = checks_by_host(judgement.checks)
    for name in judgement.host_names:
        checks = per_host.get(name, [])
        rows.append(
            HostRow(
                name=name,
                status=worst([c.status for c in checks]),
                counts=status_counts(checks),
                metrics=judgement.host_metrics.of(name),
            )
        )
    return rows


@dataclass(frozen=True)
class PairNode:
    """One node's verdict from the pair tests of one kind (rdma: of one rail and memory, `lane`),
    with the evidence behind it."""

    kind: str
    lane: dict[str, object] | None
    node: str
    flagged: bool
    pairs: int
    low_pairs: int
    median: float | None
    reference: float | None  # what the healthy pairs reach
    unit: str | None
    reason: str  # the node check's reason: its pairs against what healthy pairs reach


def pair_nodes(judgement: RunJudgement) -> list[PairNode]:
    """Node verdicts of the pair analysis, per kind in natural host order."""
    checks = {(c.check_id, c.host): c for c in judgement.checks}
    found = []
    for row in judgement.pair_tables.get("nodes", []):
        check = checks.get((f"pairs.{row_kind(row).check_name}.node", str(row["node"])))
        found.append(
            PairNode(
                kind=str(row["kind"]),
                lane=row.get("lane"),
                node=str(row["node"]),
                flagged=bool(row["flagged"]),
                pairs=int(row["pairs"]),
                low_pairs=int(row["low_pairs"]),
                median=row["median"],
                reference=row["reference"],
                unit=check.unit if check else None,
                reason=check.reason if check else "",
            )
        )
    return found


PAIR_LINK_FIELDS = ("kind", "lane", "a", "b", "status", "pair_value", "reference", "unit", "reason")


def pair_links(judgement: RunJudgement, statuses: tuple[Status, ...]) -> list[dict[str, Any]]:
    """Pairs with one of `statuses`, once each (iperf3 has a row per direction), worst first."""
    links: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in judgement.pair_tables.get("pairs", []):
        if row["status"] in statuses:
            key = (row_kind(row).check_name, str(row["a"]), str(row["b"]))
            links.setdefault(key, {k: row[k] for k in PAIR_LINK_FIELDS})
    return sorted(links.values(), key=lambda link: rank(link["status"]))


def _pair_summary(judgement: RunJudgement) -> dict[str, Any]:
    nodes = pair_nodes(judgement)
    return {
        "nodes": [to_jsonable(n) for n in nodes],
        "flagged_nodes": sorted({n.node for n in nodes if n.flagged}),
        "flagged_links": pair_links(judgement, ("fail",)),
    }


def run_diagnostics(judgement: RunJudgement) -> list[Diagnostic]:
    """Run-folder problems, then every parser warning and error, errors first."""
    found = judgement.diagnostics + judgement.parse_problems
    return sorted(found, key=lambda d: d.level != "error")


def check_entry(check: Check) -> dict[str, Any]:
    return {
        "check_id": check.check_id,
        "host": check.host,
        "status": check.status,
        "reason": check.reason,
        "measured": check.measured,
        "reference": check.reference,
        "unit": check.unit,
        "action": suggested_action(check),
    }


@dataclass(frozen=True)
class HealthCell:
    """The worst check of one node health subject on one host: what was found, where, and
    what to do; `checks` is how many checks the cell stands for."""

    status: Status
    check_id: str
    reason: str
    source: str | None
    action: str | None
    checks: int


@dataclass(frozen=True)
class HealthRow:
    host: str
    status: Status
    cells: dict[str, HealthCell | None]  # subject -> worst check, None: nothing judged


def node_health(judgement: RunJudgement) -> tuple[list[tuple[str, str]], list[HealthRow]]:
    """The node health table: the subjects some host has a check of (key, title), and per host
    the worst check of each subject, worst hosts first."""
    grouped: dict[tuple[str, str], list[Check]] = {}
    subjects_of: dict[str, str | None] = {}  # by check id: a thousand hosts share them
    for check in judgement.checks:
        if check.check_id not in subjects_of:
            subjects_of[check.check_id] = health_subject(check.check_id)
        subject = subjects_of[check.check_id]
        if subject and check.host != CLUSTER:
            grouped.setdefault((check.host, subject), []).append(check)
    subjects = [(key, title) for key, title in HEALTH_SUBJECTS
                if any(s == key for _, s in grouped)]  # fmt: skip
    rows = []
    for host in judgement.host_names:
        cells: dict[str, HealthCell | None] = {}
        for key, _ in subjects:
            checks = sort_checks(grouped.get((host, key), []))
            cells[key] = HealthCell(checks[0].status, checks[0].check_id, checks[0].reason,
                                    checks[0].source, suggested_action(checks[0]),
                                    len(checks)) if checks else None  # fmt: skip
        judged = [c.status for c in cells.values() if c]
        if judged:
            rows.append(HealthRow(host, worst(judged), cells))
    return subjects, sorted(rows, key=lambda r: rank(r.status))


def _health_summary(judgement: RunJudgement) -> dict[str, Any]:
    subjects, rows = node_health(judgement)
    return {
        "subjects": [{"key": key, "title": title} for key, title in subjects],
        "hosts": [
            {"host": r.host, "status": r.status,
             "cells": {k: to_jsonable(c) for k, c in r.cells.items()}}
            for r in rows
        ],
    }  # fmt: skip


def build_summary(judgement: RunJudgement) -> dict[str, Any]:
    j = judgement
    rows = host_rows(j)
    checks = sort_checks(j.checks)
    cluster_checks = [c for c in checks if c.host == CLUSTER]
    diagnostics = j.diagnostics + j.parse_problems
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": j.run_id,
        "generated_at": j.generated_at,
        "gpuval_version": j.gpuval_version,
        "verdict": j.verdict,
        "counts": status_counts(checks),
        "failing_checks": [check_entry(c) for c in checks if c.status in ("error", "fail")],
        "unjudged_checks": [check_entry(c) for c in checks if c.status == "unjudged"],
        "warning_checks": [check_entry(c) for c in checks if c.status == "warn"],
        "hosts": [
            {"name": r.name, "status": r.status, "counts": r.counts, "metrics": r.metrics}
            for r in rows
        ],
        "cluster": {
            "status": worst([c.status for c in cluster_checks]),
            "counts": status_counts(cluster_checks),
        }
        if cluster_checks
        else None,
        "outliers": [to_jsonable(o) for o in j.outliers],
        "figures": [figure_entry(f) for f in j.figures],
        "profile": j.profile_name,
        "baseline": j.baseline_name,
        "pairs": _pair_summary(j),
        "node_health": _health_summary(j),
        "diagnostics": {
            "errors": sum(d.level == "error" for d in diagnostics),
            "warnings": sum(d.level == "warning" for d in diagnostics),
        },
    }
