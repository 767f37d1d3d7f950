"""report.html: one self-contained page (Plotly embedded once, no network) a person can read
without having run anything: verdict, checks, per-host comparison, charts, provenance."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

import jinja2

from gpuval.checks.model import STATUS_ORDER, Check, Expectation, rank
from gpuval.judgement.model import (
    BUSBW_PREFIX,
    P2P_METRIC,
    BusbwSeries,
    HostFacts,
    Outlier,
    RunJudgement,
    TopoRun,
)
from gpuval.judgement.vocabulary import KINDS, PairKind, reference_name, row_kind, suggested_action
from gpuval.plan.host_order import natural_key
from gpuval.report import charts
from gpuval.report.findings import Finding, group_findings, overview, share
from gpuval.report.pages import environment as page_environment
from gpuval.report.pages import format_value
from gpuval.report.summary import (
    HostRow,
    PairNode,
    host_rows,
    node_health,
    pair_links,
    pair_nodes,
    run_diagnostics,
    sort_checks,
    status_counts,
)

# With more hosts than this, per-host charts are drawn only for the worst ones.
MAX_DETAIL_HOSTS = 8
# Passing checks are shown open up to this many; beyond it they fold away under the failures.
MAX_OPEN_PASSES = 60
# A finding's checks are written as table rows up to this many; beyond, as JSON the page turns
# into rows when the finding is opened (failing ones), or only its hosts are named (passing).
ROWS_INLINE = 64
# Findings shown open; with many checks not passing only the worst one.
OPEN_FINDINGS = 5
OPEN_FINDINGS_MANY = 1
MAX_OPEN_HOST_ROWS = 20
MAX_DIAGNOSTICS = 500
MAX_HOSTS_NAMED = 6
PHASE_ORDER = (
    "preflight",
    "mpi-preflight",
    "intranode",
    "internode",
    "network",
    "health",
)  # as run

FACT_FIELDS = (
    ("gpu_model", "GPU model"),
    ("gpu_count", "GPUs"),
    ("driver_version", "Driver"),
    ("cuda_version", "CUDA (driver)"),
    ("cuda_toolkit_version", "CUDA toolkit"),
    ("nccl_version", "NCCL"),
    ("mpi_version", "MPI"),
    ("nccl_tests_version", "nccl-tests"),
)

# The legend `nvidia-smi topo -m` prints under its matrix (shared/samples/lambda-4xH100-topo-m.txt).
TOPO_LEGEND = (
    ("X", "self", "Self"),
    ("NV#", "nv", "Connection traversing a bonded set of # NVLinks"),
    ("PIX", "pix", "Connection traversing at most a single PCIe bridge"),
    (
        "PXB",
        "pxb",
        "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    ),
    ("PHB", "phb", "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"),
    (
        "NODE",
        "node",
        "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
        "within a NUMA node",
    ),
    (
        "SYS",
        "sys",
        "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
        "(e.g., QPI/UPI)",
    ),
)

BUSBW_NOTE = (
    "busbw is judged at large message sizes against the per-direction (unidirectional) peak; "
    "the sweep-average footer is not used."
)


@dataclass
class ChartSet:
    """Figures of the page in order; sections refer to them by id."""

    specs: list[dict[str, Any]] = field(default_factory=list)

    def add(self, figure: charts.Figure) -> str:
        chart_id = f"chart-{len(self.specs) + 1}"
        self.specs.append({"id": chart_id, **figure})
        return chart_id


@dataclass(frozen=True)
class StepGroup:
    """One step as run on one or more hosts with the same command and environment."""

    name: str
    phase: str
    command: str | None
    env: tuple[tuple[str, str], ...]
    hosts: tuple[str, ...]
    outcomes: tuple[tuple[str, int], ...]  # ("exit 0", 3), ("unfinished", 1), ("skipped: ...", 1)
    duration_s: tuple[float, ...]


def metric_label(metric: str) -> str:
    """Column heading of a key metric of summary.json."""
    if metric == P2P_METRIC:
        return "min p2p (GB/s)"
    return metric.replace(BUSBW_PREFIX, "busbw ", 1) + " (GB/s)"


def link_class(cell: str | None) -> str:
    if not cell:
        return "none"
    cell = cell.strip().upper()
    if cell == "X":
        return "self"
    if cell.startswith("NV"):
        return "nv"
    if cell in ("SOC", "SYS"):  # SOC: the name of SYS in old drivers
        return "sys"
    return cell.lower() if cell in ("PIX", "PXB", "PHB", "NODE") else "other"


def name_hosts(hosts: list[str] | tuple[str, ...], total: int) -> str:
    if len(hosts) == total and total > 1:
        return f"all {total} hosts"
    shown = ", ".join(hosts[:MAX_HOSTS_NAMED])
    more = len(hosts) - MAX_HOSTS_NAMED
    return f"{shown} and {more} more" if more > 0 else shown


def detail_hosts(rows: list[HostRow], found: list[Outlier]) -> list[str]:
    """Every host when few; otherwise the worst: bad status first, then most outlying metrics."""
    if len(rows) <= MAX_DETAIL_HOSTS:
        return [r.name for r in rows]
    outlying = Counter(o.host for o in found)
    ordered = sorted(rows, key=lambda r: (rank(r.status), -outlying[r.name], r.name))
    return [r.name for r in ordered[:MAX_DETAIL_HOSTS]]


def split_host_rows(
    rows: list[HostRow], found: list[Outlier]
) -> tuple[list[HostRow], list[HostRow]]:
    """Worst first; with many hosts, the passing ones without an outlier fold away."""
    ordered = sorted(rows, key=lambda r: rank(r.status))
    if len(rows) <= MAX_OPEN_HOST_ROWS:
        return ordered, []
    outlying = {o.host for o in found}
    needs_a_look = [r for r in ordered if r.status != "pass" or r.name in outlying]
    return needs_a_look, [r for r in ordered if r not in needs_a_look]


def _outcome(sidecar: Any) -> str:
    if sidecar.skipped:
        return f"skipped: {sidecar.skipped}"
    if sidecar.timed_out:
        return f"timed out after {format_value(sidecar.timeout_s)} s"
    if sidecar.exit_code is None:
        return "unfinished"
    return f"exit {sidecar.exit_code}"


def step_groups(judgement: RunJudgement) -> list[StepGroup]:
    grouped: dict[tuple[Any, ...], list[Any]] = {}
    for file in judgement.files:
        if file.step is None:
            continue
        s = file.step
        key = (s.phase, s.name, s.command, tuple(sorted(s.env.items())))
        grouped.setdefault(key, []).append(s)
    steps = [
        StepGroup(
            name=name,
            phase=phase,
            command=command,
            env=env,
            hosts=tuple(s.host for s in sidecars),
            outcomes=tuple(Counter(_outcome(s) for s in sidecars).most_common()),
            duration_s=tuple(s.duration_s for s in sidecars if s.duration_s is not None),
        )
        for (phase, name, command, env), sidecars in grouped.items()
    ]
    order = {phase: i for i, phase in enumerate(PHASE_ORDER)}
    return sorted(steps, key=lambda s: (order.get(s.phase, len(order)), s.name))


def version_summary(hosts: list[HostFacts]) -> list[dict[str, Any]]:
    """Each fact with its distinct values across hosts; more than one value is worth a look."""
    summary = []
    for attribute, label in FACT_FIELDS:
        seen = Counter(format_value(getattr(h, attribute)) or "unknown" for h in hosts)
        summary.append(
            {
                "label": label,
                "values": seen.most_common(),
                "mixed": len([v for v in seen if v != "unknown"]) > 1,
            }
        )
    return summary


def metric_stats(rows: list[HostRow], metric: str) -> dict[str, float] | None:
    present = [v for r in rows if (v := r.metrics.get(metric)) is not None]
    if not present:
        return None
    return {"min": min(present), "median": statistics.median(present), "max": max(present)}


def _busbw_section(judgement: RunJudgement, chart_set: ChartSet) -> list[dict[str, Any]]:
    by_key: dict[str, list[BusbwSeries]] = {}
    for one in judgement.busbw_series:
        by_key.setdefault(one.key, []).append(one)
    sections = []
    for key, series in by_key.items():
        # Hosts judged against different peaks (mixed hardware) get a chart each.
        by_peak: dict[float | None, list[BusbwSeries]] = {}
        peaks: dict[float | None, Expectation | None] = {}
        for one in series:
            if one.sizes:
                peak = one.peak
                value = peak.per_direction_gbps if peak else None
                by_peak.setdefault(value, []).append(one)
                peaks[value] = peak
        groups = []
        for value, drawn in by_peak.items():
            title = f"{key}: busbw vs message size"
            if len(by_peak) > 1:
                title += f" ({value:g} GB/s hosts)" if value else " (hosts without a peak)"
            figure = charts.busbw_figure(
                title,
                drawn,
                peaks[value],
                judgement.thresholds.busbw_pass_fraction,
                judgement.outliers,
            )
            groups.append(
                {
                    "chart": chart_set.add(figure),
                    "runs": len(drawn),
                    "hosts": sorted({s.host for s in drawn}),
                    "aggregated": len(drawn) > charts.MAX_LINES_PER_CHART,
                    "peak": peaks[value],
                }
            )
        empty = [s for s in series if not s.sizes]
        sections.append({"key": key, "groups": groups, "empty": empty})
    return sections


def _p2p_section(
    judgement: RunJudgement, chart_set: ChartSet, hosts: list[str]
) -> list[dict[str, Any]]:
    sections = []
    for run in judgement.p2p_runs:
        if run.host not in hosts:
            continue
        figures = [
            chart_set.add(charts.heatmap_figure(title, run.matrices[name], unit))
            for name, title, unit in charts.P2P_MATRICES
            if name in run.matrices
        ]
        gpus = max((len(m) for m in run.matrices.values()), default=0)
        section = {
            "host": run.host,
            "source": run.source,
            "charts": figures,
            "min_width": charts.heatmap_size(gpus)[0],
        }
        sections.append((hosts.index(run.host), section))
    return [section for _, section in sorted(sections, key=lambda pair: pair[0])]


def _topology_groups(judgement: RunJudgement) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[TopoRun]] = {}
    for run in judgement.topo_runs:
        groups.setdefault(run.signature(), []).append(run)
    return [
        {
            "hosts": [r.host for r in runs],
            "run": runs[0],
            "sources": [r.source for r in runs],
        }
        for runs in sorted(groups.values(), key=len)
    ]


def _pair_cells(
    rows: list[dict[str, Any]], directed: bool
) -> tuple[dict[tuple[str, str], float | None], dict[tuple[str, str], str]]:
    """Matrix cells of one pair kind: directed (iperf3) row = sender, value of the direction;
    otherwise the pair's value in both cells. Pairs not passing are marked in both cells."""
    values: dict[tuple[str, str], float | None] = {}
    marked: dict[tuple[str, str], str] = {}
    for row in rows:
        a, b = str(row["a"]), str(row["b"])
        if directed and row["src"]:
            values[(str(row["src"]), str(row["dst"]))] = row["value"]
        else:
            values[(a, b)] = values[(b, a)] = row["pair_value"]
        if row["status"] != "pass":
            marked[(a, b)] = marked[(b, a)] = str(row["status"])
    return values, marked


def split_pair_nodes(nodes: list[PairNode]) -> tuple[list[PairNode], list[PairNode]]:
    """Flagged first, then nodes with a low pair; with many hosts the others fold away."""
    ordered = sorted(nodes, key=lambda n: (not n.flagged, n.low_pairs == 0))
    if len(nodes) <= MAX_OPEN_HOST_ROWS:
        return ordered, []
    shown = [n for n in ordered if n.flagged or n.low_pairs]
    return shown, ordered[len(shown) :]


def _kind_order(kind: PairKind) -> tuple[int, int, bool]:
    """The kinds in KINDS' order; rdma rails in order, host memory before GPU memory."""
    rail, gpu_memory = kind.lane.order if kind.lane else (-1, False)
    return list(KINDS).index(kind.name), rail, gpu_memory


def _pairs_section(judgement: RunJudgement, chart_set: ChartSet) -> list[dict[str, Any]]:
    """Per pair kind: node verdicts, the hosts x hosts matrix, links not passing, retries."""
    nodes = pair_nodes(judgement)
    not_passing = pair_links(judgement, ("error", "fail", "warn"))
    sections = []
    by_kind: dict[PairKind, list[dict[str, Any]]] = {}
    for row in judgement.pair_tables.get("pairs", []):
        by_kind.setdefault(row_kind(row), []).append(row)
    for kind, rows in sorted(by_kind.items(), key=lambda item: _kind_order(item[0])):
        hosts = sorted({str(r[end]) for r in rows for end in ("a", "b")}, key=natural_key)
        values, marked = _pair_cells(rows, kind.directed)
        title = f"{kind.label} per pair ({kind.unit})"
        shown, folded = split_pair_nodes([n for n in nodes if row_kind(asdict(n)) == kind])
        sections.append(
            {
                "kind": kind.check_name,
                "label": kind.label,
                "unit": kind.unit,
                "directed": kind.directed,
                "reference": rows[0]["reference"],
                "hosts": len(hosts),
                "nodes_shown": shown,
                "nodes_folded": folded,
                "chart": chart_set.add(
                    charts.pair_matrix_figure(
                        title, hosts, values, marked, kind.unit, kind.directed
                    )
                ),
                "chart_size": charts.pair_matrix_size(len(hosts)),
                "links": [link for link in not_passing if row_kind(link) == kind],
                "retries": [r for r in rows if r["tries"] > 1],
            }
        )
    return sections


def build_context(judgement: RunJudgement) -> dict[str, Any]:
    thresholds = judgement.thresholds
    rows = host_rows(judgement)
    found = judgement.outliers
    detailed = detail_hosts(rows, found)
    chart_set = ChartSet()
    busbw = _busbw_section(judgement, chart_set)
    p2p = _p2p_section(judgement, chart_set, detailed)
    checks: list[Check] = sort_checks(judgement.checks)
    findings = group_findings(checks)
    shown, folded = split_host_rows(rows, found)
    metrics = list(rows[0].metrics) if rows else []
    diagnostics = run_diagnostics(judgement)
    health_subjects, health_rows = node_health(judgement)
    # Many hosts: the healthy ones fold away under those with something to say.
    health_open = [r for r in health_rows if r.status != "pass"]
    if len(health_rows) <= MAX_OPEN_HOST_ROWS:
        health_open = health_rows
    return {
        "judgement": judgement,
        "statuses": STATUS_ORDER,
        "counts": status_counts(checks),
        "failing_hosts": [r.name for r in rows if r.status in ("error", "fail")],
        "open_findings": [f for f in findings if f.status != "pass"],
        "open_findings_shown": OPEN_FINDINGS
        if sum(len(f.checks) for f in findings if f.status != "pass") <= ROWS_INLINE * OPEN_FINDINGS
        else OPEN_FINDINGS_MANY,
        "open_count": sum(c.status != "pass" for c in checks),
        "pass_findings": [f for f in findings if f.status == "pass"],
        "passed_count": sum(c.status == "pass" for c in checks),
        "rows_inline": ROWS_INLINE,
        "max_open_passes": MAX_OPEN_PASSES,
        "overview": overview(judgement.checks, [r.name for r in rows]).document(),
        "rows": rows,
        "rows_shown": shown,
        "rows_folded": folded,
        "metrics": metrics,
        "metric_stats": {m: metric_stats(rows, m) for m in metrics},
        "outlying": {(o.host, o.metric) for o in found},
        "outliers": found,
        "detailed": detailed,
        "busbw": busbw,
        "busbw_note": BUSBW_NOTE,
        "band": (thresholds.busbw_pass_fraction, charts.PRACTICAL_CEILING),
        "large_message": charts.format_bytes(thresholds.large_message_min_bytes),
        "p2p": p2p,
        "pairs": _pairs_section(judgement, chart_set),
        "health_subjects": health_subjects,
        "health_shown": health_open,
        "health_folded": [r for r in health_rows if r not in health_open],
        "pair_low_fraction": thresholds.pair_low_fraction,
        "topology": _topology_groups(judgement),
        "topo_legend": TOPO_LEGEND,
        "versions": version_summary(judgement.hosts),
        "fact_fields": FACT_FIELDS,
        "steps": step_groups(judgement),
        "diagnostics": diagnostics[:MAX_DIAGNOSTICS],
        "diagnostics_left_out": max(0, len(diagnostics) - MAX_DIAGNOSTICS),
        "superseded": judgement.superseded[:MAX_DIAGNOSTICS],
        "superseded_left_out": max(0, len(judgement.superseded) - MAX_DIAGNOSTICS),
        "host_total": len(rows),
        "charts": chart_set.specs,
        "outlier_drop": 1 - thresholds.host_outlier_fraction,
        "worst_shown": charts.WORST_SHOWN,
    }


def finding_rows(finding: Finding) -> list[list[str | None]]:
    """A finding's checks as the page's script draws them: status, host, check, reason (None:
    the headline's), measured, reference and what it is, unit, source, how much was reached."""
    rows = []
    for check in finding.checks:
        reached = share(check)
        label = reference_name(check)
        rows.append(
            [
                check.status, check.host, check.check_id,
                None if check.reason == finding.example.reason else check.reason,
                format_value(check.measured), format_value(check.reference),
                label if check.reference is not None and label != "reference" else None,
                check.unit or "", check.source or "",
                f"{round(reached[0] * 100)} %" if reached else "",
                reached[1] if reached else None,
            ]
        )  # fmt: skip
    return rows


@cache
def _environment() -> jinja2.Environment:
    env = page_environment().overlay()
    env.globals.update(
        link_class=link_class,
        metric_label=metric_label,
        name_hosts=name_hosts,
        reference_name=reference_name,
        suggested_action=suggested_action,
        share=share,
        finding_rows=finding_rows,
    )
    return env


def render_report(judgement: RunJudgement) -> str:
    """The page. Rendered as Template.render does, but its context emptied after: the page's
    macros hold the context that holds them, a cycle that kept the whole judgement (millions
    of objects at a thousand nodes) alive until the cycle collector walked all of it."""
    template = _environment().get_template("report.html.j2")
    context = template.new_context(build_context(judgement))
    try:
        return template.environment.concat(template.root_render_func(context))
    except Exception:
        template.environment.handle_exception()
    finally:
        context.vars.clear()
        context.parent.clear()
