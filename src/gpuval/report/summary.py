"""summary.json: the small document a nightly job reads (schema: summary.schema.json).

Also the per-host key metrics and their outliers, which the HTML report's comparison table shows.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from gpuval.checks.health import HEALTH_SUBJECTS, health_subject, suggested_action
from gpuval.checks.model import CLUSTER, STATUS_ORDER, Check, Status, worst
from gpuval.checks.pairs import row_kind
from gpuval.checks.thresholds import DEFAULTS, Thresholds
from gpuval.figures import KeyFigure, figure_entry
from gpuval.records.base import Diagnostic, to_jsonable
from gpuval.report.charts import busbw_series, p2p_runs
from gpuval.report.figures import health_figures, pair_figures
from gpuval.results import RunResults

SCHEMA_VERSION = 1
P2P_METRIC = "p2p_min_unidirectional_gbps"


@dataclass(frozen=True)
class HostRow:
    """One host's status and key metrics; a metric is None where the host has no such run."""

    name: str
    status: Status
    counts: dict[Status, int]
    metrics: dict[str, float | None]


@dataclass(frozen=True)
class Outlier:
    host: str
    metric: str
    value: float
    median: float


BUSBW_PREFIX = "busbw_gbps "


def busbw_metric(key: str) -> str:
    return BUSBW_PREFIX + key


def status_counts(checks: list[Check]) -> dict[Status, int]:
    counted = Counter(check.status for check in checks)
    return {status: counted.get(status, 0) for status in STATUS_ORDER}


STATUS_RANK = {status: i for i, status in enumerate(STATUS_ORDER)}  # 0: the worst


def sort_checks(checks: list[Check]) -> list[Check]:
    """Worst status first, then host and check id, so failures lead every listing."""
    return sorted(checks, key=lambda c: (STATUS_RANK[c.status], c.host, c.check_id))


def checks_by_host(checks: list[Check]) -> dict[str, list[Check]]:
    """The checks of each host (and of CLUSTER), in their order: one pass, for any host count."""
    found: dict[str, list[Check]] = {}
    for check in checks:
        found.setdefault(check.host, []).append(check)
    return found


def host_names(results: RunResults) -> list[str]:
    """Inventory order first, then any other host that has checks or files."""
    names = [h.name for h in results.hosts]
    extra = {c.host for c in results.checks} | {f.host for f in results.files}
    return names + sorted(extra - set(names) - {CLUSTER})


def host_rows(results: RunResults, thresholds: Thresholds = DEFAULTS) -> list[HostRow]:
    """Status and key metrics per host. Several runs of one metric on a host: the lowest counts."""
    values: dict[tuple[str, str], list[float]] = {}
    metric_names: list[str] = []

    def add(host: str, metric: str, value: float | None) -> None:
        if metric not in metric_names:
            metric_names.append(metric)
        if value is not None:
            values.setdefault((host, metric), []).append(value)

    for series in busbw_series(results):
        add(
            series.host,
            busbw_metric(series.key),
            series.large_message_busbw(thresholds.large_message_min_bytes),
        )
    for run in p2p_runs(results):
        add(run.host, P2P_METRIC, run.min_unidirectional())

    rows = []
    per_host = checks_by_host(results.checks)
    for name in host_names(results):
        checks = per_host.get(name, [])
        rows.append(
            HostRow(
                name=name,
                status=worst([c.status for c in checks]),
                counts=status_counts(checks),
                metrics={
                    m: min(values[(name, m)]) if (name, m) in values else None for m in metric_names
                },
            )
        )
    return rows


def metric_figure_name(metric: str) -> str:
    """A host metric's name as a key figure: "busbw.all_reduce", "busbw.internode.all_reduce",
    "p2p.min"."""
    if metric == P2P_METRIC:
        return "p2p.min"
    return "busbw." + metric.removeprefix(BUSBW_PREFIX).replace(" ", ".")


def key_figures(
    results: RunResults, thresholds: Thresholds = DEFAULTS, rows: list[HostRow] | None = None
) -> list[KeyFigure]:
    """The run's key figures (gpuval.report.figures), host by host in host order."""
    rows = host_rows(results, thresholds) if rows is None else rows
    found = [
        KeyFigure(row.name, metric_figure_name(metric), value, "GB/s", True)
        for row in rows
        for metric, value in row.metrics.items()
        if value is not None
    ]
    found += pair_figures(results) + health_figures(results)
    order = {name: i for i, name in enumerate(host_names(results))}
    return sorted(found, key=lambda f: (order.get(f.host, len(order)), f.host, f.name))


def outliers(rows: list[HostRow], thresholds: Thresholds = DEFAULTS) -> list[Outlier]:
    """Hosts below host_outlier_fraction of the median of the hosts that have the metric
    (the same rule as the checks' host-consistency judgement)."""
    found = []
    metrics = rows[0].metrics if rows else {}
    for metric in metrics:
        present = {r.name: v for r in rows if (v := r.metrics.get(metric)) is not None}
        if len(present) < thresholds.host_outlier_min_hosts:
            continue
        median = statistics.median(present.values())
        for host, value in present.items():
            if value < thresholds.host_outlier_fraction * median:
                found.append(Outlier(host, metric, value, median))
    return found


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


def pair_nodes(results: RunResults) -> list[PairNode]:
    """Node verdicts of the pair analysis, per kind in natural host order."""
    checks = {(c.check_id, c.host): c for c in results.checks}
    found = []
    for row in results.pairs.get("nodes", []):
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


def pair_links(results: RunResults, statuses: tuple[Status, ...]) -> list[dict[str, Any]]:
    """Pairs with one of `statuses`, once each (iperf3 has a row per direction), worst first."""
    links: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in results.pairs.get("pairs", []):
        if row["status"] in statuses:
            key = (row_kind(row).check_name, str(row["a"]), str(row["b"]))
            links.setdefault(key, {k: row[k] for k in PAIR_LINK_FIELDS})
    return sorted(links.values(), key=lambda link: STATUS_RANK[link["status"]])


def _pair_summary(results: RunResults) -> dict[str, Any]:
    nodes = pair_nodes(results)
    return {
        "nodes": [to_jsonable(n) for n in nodes],
        "flagged_nodes": sorted({n.node for n in nodes if n.flagged}),
        "flagged_links": pair_links(results, ("fail",)),
    }


def run_diagnostics(results: RunResults) -> list[Diagnostic]:
    """Run-folder problems, then every parser warning and error, errors first."""
    parsed = [d for f in results.files if f.parse for d in f.parse.errors + f.parse.warnings]
    return sorted(results.diagnostics + parsed, key=lambda d: d.level != "error")


def _check_entry(check: Check) -> dict[str, Any]:
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


def node_health(results: RunResults) -> tuple[list[tuple[str, str]], list[HealthRow]]:
    """The node health table: the subjects some host has a check of (key, title), and per host
    the worst check of each subject, worst hosts first."""
    grouped: dict[tuple[str, str], list[Check]] = {}
    for check in results.checks:
        subject = health_subject(check.check_id)
        if subject and check.host != CLUSTER:
            grouped.setdefault((check.host, subject), []).append(check)
    subjects = [(key, title) for key, title in HEALTH_SUBJECTS
                if any(s == key for _, s in grouped)]  # fmt: skip
    rows = []
    for host in host_names(results):
        cells: dict[str, HealthCell | None] = {}
        for key, _ in subjects:
            checks = sort_checks(grouped.get((host, key), []))
            cells[key] = HealthCell(checks[0].status, checks[0].check_id, checks[0].reason,
                                    checks[0].source, suggested_action(checks[0]),
                                    len(checks)) if checks else None  # fmt: skip
        judged = [c.status for c in cells.values() if c]
        if judged:
            rows.append(HealthRow(host, worst(judged), cells))
    return subjects, sorted(rows, key=lambda r: STATUS_RANK[r.status])


def _health_summary(results: RunResults) -> dict[str, Any]:
    subjects, rows = node_health(results)
    return {
        "subjects": [{"key": key, "title": title} for key, title in subjects],
        "hosts": [
            {"host": r.host, "status": r.status,
             "cells": {k: to_jsonable(c) for k, c in r.cells.items()}}
            for r in rows
        ],
    }  # fmt: skip


def build_summary(results: RunResults, thresholds: Thresholds = DEFAULTS) -> dict[str, Any]:
    rows = host_rows(results, thresholds)
    checks = sort_checks(results.checks)
    cluster_checks = [c for c in checks if c.host == CLUSTER]
    parse_problems = [
        d for f in results.files if f.parse for d in f.parse.warnings + f.parse.errors
    ]
    diagnostics = results.diagnostics + parse_problems
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": results.run_id,
        "generated_at": results.generated_at,
        "gpuval_version": results.gpuval_version,
        "verdict": results.verdict,
        "counts": status_counts(checks),
        "failing_checks": [_check_entry(c) for c in checks if c.status in ("error", "fail")],
        "unjudged_checks": [_check_entry(c) for c in checks if c.status == "unjudged"],
        "warning_checks": [_check_entry(c) for c in checks if c.status == "warn"],
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
        "outliers": [to_jsonable(o) for o in outliers(rows, thresholds)],
        "figures": [figure_entry(f) for f in key_figures(results, thresholds, rows)],
        "profile": results.profile,
        "baseline": results.baseline,
        "pairs": _pair_summary(results),
        "node_health": _health_summary(results),
        "diagnostics": {
            "errors": sum(d.level == "error" for d in diagnostics),
            "warnings": sum(d.level == "warning" for d in diagnostics),
        },
    }
