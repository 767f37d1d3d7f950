"""`gpuval history`: the key figures per host across the last runs of a reports folder, as a
table in the terminal and as an HTML page with one trend chart per figure.

Reads only the history database (gpuval.history.store) and imports nothing heavy: hundreds of
runs answer in well under a second.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuval.files.archive import Archive
from gpuval.history.store import connect
from gpuval.report.pages import plotly_text, render_page

# More hosts than this on one chart: the median, the min-max band and the worst few instead.
MAX_LINES = 8
WORST_SHOWN = 3
MAX_TABLE_ROWS = 2000  # the page's table; the charts show every host
STATUS_COLOURS = {
    "pass": "#15803d", "warn": "#a16207", "unjudged": "#0369a1", "fail": "#b91c1c",
    "error": "#7e22ce",
}  # fmt: skip


@dataclass(frozen=True)
class RunRow:
    run_id: str
    run_dir: str
    started_at: str
    verdict: str
    profile: str | None
    baseline: str | None
    host_count: int
    failing: int


@dataclass(frozen=True)
class Trend:
    """One figure of one host across the runs (None where the run did not measure it)."""

    host: str
    figure: str
    unit: str
    higher_is_better: bool
    values: tuple[float | None, ...]

    def last_change(self) -> float | None:
        """Signed fraction between the last two runs that have the figure (worse is negative
        for bandwidth), or None."""
        known = [v for v in self.values if v is not None]
        if len(known) < 2 or known[-2] == 0:
            return None
        return (known[-1] - known[-2]) / abs(known[-2])


@dataclass(frozen=True)
class History:
    runs: list[RunRow]
    trends: list[Trend]

    def figures(self) -> list[str]:
        return list(dict.fromkeys(t.figure for t in self.trends))


def load_history(
    archive: Archive, last: int = 20, host: str | None = None, figure: str | None = None
) -> History:
    """The last `last` runs (oldest first) and every figure's trend, optionally one host's or
    figures matching a glob (`busbw.*`)."""
    with connect(archive.history_path) as connection:
        rows = connection.execute(
            "SELECT run_id, run_dir, started_at, verdict, profile, baseline, host_count, failing"
            " FROM runs ORDER BY started_at DESC, run_id DESC LIMIT ?",
            (last,),
        ).fetchall()
        runs = [RunRow(*row) for row in reversed(rows)]
        where, parameters = ["run_id IN (SELECT value FROM json_each(?))"], [_json_list(runs)]
        if host:
            where.append("host = ?")
            parameters.append(host)
        if figure:
            where.append("figure GLOB ?")
            parameters.append(figure)
        found = connection.execute(
            "SELECT run_id, host, figure, value, unit, higher_is_better FROM measurements"
            f" WHERE {' AND '.join(where)} ORDER BY figure, host",
            parameters,
        ).fetchall()
    position = {run.run_id: i for i, run in enumerate(runs)}
    series: dict[tuple[str, str], list[float | None]] = {}
    meta: dict[tuple[str, str], tuple[str, bool]] = {}
    for run_id, host_name, name, value, unit, higher in found:
        key = (name, host_name)
        if key not in series:
            series[key] = [None] * len(runs)
            meta[key] = (unit, bool(higher))
        series[key][position[run_id]] = value
    trends = [
        Trend(host, name, meta[(name, host)][0], meta[(name, host)][1], tuple(values))
        for (name, host), values in series.items()
    ]
    return History(runs, trends)


def _json_list(runs: Sequence[RunRow]) -> str:
    return json.dumps([run.run_id for run in runs])


# ---------------------------------------------------------------------------------- terminal


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if abs(value) < 10000 else f"{value:.0f}"


def _change(trend: Trend) -> str:
    change = trend.last_change()
    if change is None:
        return ""
    worse = change < 0 if trend.higher_is_better else change > 0
    return f"{change * 100:+.0f} %" + (" worse" if worse and abs(change) >= 0.05 else "")


def history_table(history: History, max_rows: int = 60) -> list[str]:
    """The runs (numbered, oldest first), then one line per figure and host."""
    if not history.runs:
        return ["no runs in the history yet: `gpuval report RUN_DIR` or `gpuval run` adds them"]
    lines = ["runs, oldest first:"]
    for i, run in enumerate(history.runs, 1):
        extra = "".join(
            f", {label} {value}"
            for label, value in (("profile", run.profile), ("baseline", run.baseline))
            if value
        )
        lines.append(
            f"  #{i:<3} {run.run_id}  {run.started_at}  {run.verdict.upper()}"
            f" ({run.host_count} host(s), {run.failing} failing check(s){extra})"
        )
    if not history.trends:
        lines.append("no key figures measured in these runs")
        return lines
    width = max(len(t.figure) for t in history.trends) + 2
    host_width = max(len(t.host) for t in history.trends) + 2
    header = f"{'figure':<{width}}{'host':<{host_width}}{'unit':<8}"
    header += "".join(f"{'#' + str(i):>9}" for i in range(1, len(history.runs) + 1))
    lines += ["", header + "  last change"]
    for trend in history.trends[:max_rows]:
        cells = "".join(f"{_number(v):>9}" for v in trend.values)
        lines.append(
            f"{trend.figure:<{width}}{trend.host:<{host_width}}{trend.unit:<8}{cells}"
            f"  {_change(trend)}".rstrip()
        )
    if len(history.trends) > max_rows:
        lines.append(f"... and {len(history.trends) - max_rows} more rows (--host, --figure)")
    return lines


# ------------------------------------------------------------------------------------- page


def _label(run: RunRow) -> str:
    return run.started_at


def _last(trend: Trend) -> float | None:
    return next((v for v in reversed(trend.values) if v is not None), None)


def _trend_figure(name: str, trends: list[Trend], runs: list[RunRow]) -> dict[str, Any]:
    x = [_label(run) for run in runs]
    ids = [run.run_id for run in runs]
    data: list[dict[str, Any]] = []
    unit = trends[0].unit
    line = {"mode": "lines+markers", "type": "scatter", "x": x, "customdata": ids}
    hover = "%{fullData.name}<br>run %{customdata}<br>%{y} " + unit + "<extra></extra>"
    if len(trends) <= MAX_LINES:
        data = [
            {**line, "name": plotly_text(t.host), "y": list(t.values), "hovertemplate": hover}
            for t in trends
        ]
    else:
        columns = list(zip(*(t.values for t in trends), strict=True))
        present = [[v for v in column if v is not None] for column in columns]

        def stat(pick: Any) -> list[float | None]:
            return [pick(values) if values else None for values in present]

        data = [
            {**line, "name": "min", "y": stat(min), "line": {"width": 0}, "showlegend": False},
            {
                **line, "name": f"min-max of {len(trends)} hosts", "y": stat(max),
                "fill": "tonexty", "line": {"width": 0}, "fillcolor": "rgba(29,78,216,0.15)",
            },
            {**line, "name": "median", "y": stat(statistics.median), "hovertemplate": hover},
        ]  # fmt: skip
        last = {t.host: v for t in trends if (v := _last(t)) is not None}
        worst = sorted(
            (t for t in trends if t.host in last),
            key=lambda t: last[t.host] if t.higher_is_better else -last[t.host],
        )[:WORST_SHOWN]
        data += [
            {
                **line,
                "name": plotly_text(f"{t.host} (worst)"),
                "y": list(t.values),
                "hovertemplate": hover,
            }
            for t in worst
        ]
    return {
        "data": data,
        "layout": {
            "title": {"text": plotly_text(f"{name} ({unit})"), "font": {"size": 14}},
            "height": 320,
            "margin": {"l": 60, "r": 20, "t": 40, "b": 60},
            "xaxis": {"type": "category", "title": {"text": "run start"}},
            "yaxis": {"title": {"text": unit}, "rangemode": "tozero"},
            "legend": {"orientation": "h"},
        },
    }


def _verdict_figure(runs: list[RunRow]) -> dict[str, Any]:
    return {
        "data": [
            {
                "type": "bar",
                "x": [_label(run) for run in runs],
                "y": [max(run.failing, 0.3) for run in runs],
                "marker": {"color": [STATUS_COLOURS.get(run.verdict, "#6b7280") for run in runs]},
                "text": [run.verdict.upper() for run in runs],
                "customdata": [run.run_id for run in runs],
                "hovertemplate": "run %{customdata}: %{text}<br>%{y:.0f} failing check(s)"
                "<extra></extra>",
            }
        ],
        "layout": {
            "title": {"text": "verdict and failing checks per run", "font": {"size": 14}},
            "height": 240,
            "margin": {"l": 60, "r": 20, "t": 40, "b": 60},
            "xaxis": {"type": "category"},
            "yaxis": {"title": {"text": "failing checks"}},
        },
    }


def _report_link(run: RunRow, page_dir: Path) -> str | None:
    report = Path(run.run_dir) / "report.html"
    if not report.is_file():
        return None
    try:
        return report.relative_to(page_dir.resolve()).as_posix()
    except ValueError:
        return report.as_uri()


def render_history(history: History, page_dir: Path, title: str) -> str:
    charts = [{"id": "chart-verdicts", **_verdict_figure(history.runs)}] if history.runs else []
    for i, name in enumerate(history.figures(), 1):
        trends = [t for t in history.trends if t.figure == name]
        charts.append(
            {"id": f"chart-{i}", "name": name, **_trend_figure(name, trends, history.runs)}
        )
    return render_page(
        "history.html.j2",
        {
            "title": title,
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "runs": [(run, _report_link(run, page_dir)) for run in history.runs],
            "charts": charts,
            "trends": history.trends[:MAX_TABLE_ROWS],
            "trends_left_out": max(0, len(history.trends) - MAX_TABLE_ROWS),
            "change": _change,
        },
    )
