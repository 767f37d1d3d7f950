"""The Plotly figure specs of the report: what the judge measured (gpuval.judgement: busbw
series, P2P and pair matrices), drawn.

Figures are plain JSON-able dicts (`{"data": [...], "layout": {...}}`) rendered in the page by
`Plotly.newPlot`; nothing here needs the plotly Python API, and nothing here judges.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

from gpuval.checks.model import Expectation
from gpuval.judgement.model import BusbwSeries, Outlier, busbw_metric, off_diagonal
from gpuval.report.pages import plotly_text

Figure = dict[str, Any]

# "Expect 80-90 % of the per-direction spec at best in practice" (shared/notes/references.md,
# from the ml-engineering networking chapter): the top of the shaded band; its bottom is where a
# busbw check starts to pass.
PRACTICAL_CEILING = 0.90
# Above this many lines a chart stops being readable: draw median, min-max band and the worst.
MAX_LINES_PER_CHART = 8
WORST_SHOWN = 3
WORST_COLOURS = ("#dc2626", "#ea580c", "#9333ea")

P2P_MATRICES = (
    ("bandwidth_unidirectional_p2p_enabled", "Unidirectional bandwidth, P2P enabled", "GB/s"),
    ("bandwidth_bidirectional_p2p_enabled", "Bidirectional bandwidth, P2P enabled", "GB/s"),
    ("latency_gpu_p2p_enabled", "GPU latency, P2P enabled", "us"),
)

BANDWIDTH_COLOURS = [[0, "#f7fbff"], [0.5, "#6baed6"], [1, "#08306b"]]
LATENCY_COLOURS = [[0, "#fff5eb"], [1, "#e6550d"]]
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}


def format_bytes(size: float) -> str:
    """1024-based sizes as nccl-tests sweeps them: 8 B, 64 KiB, 1 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:g} {unit}" if unit == "B" else f"{size:.3g} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _size_axis(sizes: Iterable[int]) -> dict[str, Any]:
    """A log axis ticked at powers of two, labelled in KiB/MiB/GiB."""
    present = [s for s in sizes if s > 0]
    low = math.floor(math.log2(min(present))) if present else 0
    high = math.ceil(math.log2(max(present))) if present else 30
    step = max(1, math.ceil((high - low + 1) / 12))
    ticks = [2**e for e in range(low, high + 1, step)]
    return {
        "type": "log",
        "title": {"text": "message size"},
        "tickvals": ticks,
        "ticktext": [format_bytes(t) for t in ticks],
        "gridcolor": "#e5e7eb",
    }


def _peak_marks(peak: Expectation, low: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The per-direction peak line and the shaded expected band (layout shapes), and a label."""
    value, high = peak.per_direction_gbps, PRACTICAL_CEILING
    across = {"xref": "paper", "x0": 0, "x1": 1, "yref": "y"}
    band = {"type": "rect", **across, "y0": low * value, "y1": high * value, "layer": "below",
            "fillcolor": "rgba(22,163,74,0.10)", "line": {"width": 0}}  # fmt: skip
    line = {"type": "line", **across, "y0": value, "y1": value,
            "line": {"color": "#b91c1c", "width": 1.5, "dash": "dash"}}  # fmt: skip
    label = {
        "xref": "paper", "x": 0.01, "xanchor": "left", "yref": "y", "y": value,
        "yanchor": "bottom", "showarrow": False, "font": {"size": 11, "color": "#b91c1c"},
        "text": f"per-direction peak {value:g} GB/s; green: {low:.0%}-{high:.0%} of it",
    }  # fmt: skip
    return [band, line], label


def _line(
    label: str, sizes: Iterable[int], values: Iterable[float], **style: Any
) -> dict[str, Any]:
    name = plotly_text(label)  # a host or file name: the node chose it
    return {
        "type": "scatter",
        "mode": "lines+markers",
        "name": name,
        "x": list(sizes),
        "y": list(values),
        "marker": {"size": 4},
        "hovertemplate": "%{x:,} B: %{y:.2f} GB/s<extra>" + name + "</extra>",
        **style,
    }


def _aggregate_traces(series: list[BusbwSeries], found: list[Outlier]) -> list[dict[str, Any]]:
    """Median with a min-max band over all hosts, plus the lowest runs of the outlying hosts
    (the judge's outliers)."""
    by_size: dict[int, list[float]] = {}
    for one in series:
        for size, bw in zip(one.sizes, one.busbw_gbps, strict=True):
            by_size.setdefault(size, []).append(bw)
    sizes = sorted(by_size)
    outlying = {(o.host, o.metric) for o in found}
    low = [s for s in worst_series(series) if (s.host, busbw_metric(s.key)) in outlying]
    band = {"mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False}
    traces: list[dict[str, Any]] = [
        {"type": "scatter", "x": sizes, "y": [min(by_size[s]) for s in sizes], **band},
        {
            "type": "scatter",
            "x": sizes,
            "y": [max(by_size[s]) for s in sizes],
            **band,
            "fill": "tonexty",
            "fillcolor": "rgba(37,99,235,0.18)",
            "name": "min-max",
            "showlegend": True,
        },
        _line(
            f"median of {len(series)} runs",
            sizes,
            [statistics.median(by_size[s]) for s in sizes],
            line={"color": "#1d4ed8", "width": 2.5},
        ),
    ]
    for one, colour in zip(low, WORST_COLOURS, strict=False):
        traces.append(
            _line(one.host, one.sizes, one.busbw_gbps, line={"dash": "dot", "color": colour})
        )
    return traces


def worst_series(series: list[BusbwSeries]) -> list[BusbwSeries]:
    """Lowest large-message busbw first; runs without data first of all."""
    return sorted(series, key=lambda s: (s.large_message_gbps or -1.0, s.host))


def busbw_figure(
    title: str,
    series: list[BusbwSeries],
    peak: Expectation | None,
    pass_fraction: float,
    found: list[Outlier],
) -> Figure:
    """busbw against size, one line per run (or median and band when many), against `peak`;
    the band starts at `pass_fraction` of it; `found`: the run's outliers."""
    labels_taken = {s.host for s in series}
    if len(series) > MAX_LINES_PER_CHART:
        traces = _aggregate_traces(series, found)
    else:
        # A host with several runs of one collective gets its file name in the legend.
        several = len(labels_taken) < len(series)
        traces = [
            _line(f"{s.host} ({s.source})" if several else s.host, s.sizes, s.busbw_gbps)
            for s in series
        ]
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    if peak is not None:
        shapes, label = _peak_marks(peak, pass_fraction)
        notes.append(label)
    top = max(
        [bw for s in series for bw in s.busbw_gbps] + [peak.per_direction_gbps if peak else 1.0]
    )
    return {
        "data": traces,
        "layout": {
            "title": {"text": plotly_text(title)},
            "font": FONT,
            "height": 420,
            "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
            "xaxis": _size_axis(size for s in series for size in s.sizes),
            "yaxis": {
                "title": {"text": "busbw (GB/s)"},
                "range": [0, top * 1.08],
                "gridcolor": "#e5e7eb",
            },
            "shapes": shapes,
            "annotations": notes,
            "legend": {"orientation": "h", "y": -0.2, "traceorder": "normal"},
            "plot_bgcolor": "#ffffff",
        },
    }


def heatmap_size(gpus: int) -> tuple[int, int]:
    """(minimum width, height) in pixels that keep every annotated cell legible."""
    return max(400, 60 * gpus + 140), max(360, 38 * gpus + 110)


def heatmap_figure(title: str, matrix: list[list[float | None]], unit: str) -> Figure:
    """An annotated matrix; the colour scale ignores the diagonal (device-local copies)."""
    labels = [f"GPU{i}" for i in range(len(matrix))]
    peers = off_diagonal(matrix)
    is_latency = unit == "us"
    return {
        "data": [
            {
                "type": "heatmap",
                "z": matrix,
                "x": labels,
                "y": labels,
                "zmin": 0,
                "zmax": max(peers, default=1.0),
                # darker = more: bandwidth in blue, latency in orange
                "colorscale": LATENCY_COLOURS if is_latency else BANDWIDTH_COLOURS,
                "texttemplate": "%{z:.2f}" if is_latency else "%{z:.0f}",
                "hovertemplate": "%{y} / %{x}: %{z} " + unit + "<extra></extra>",
                "hoverongaps": False,
                "colorbar": {"title": {"text": unit}, "thickness": 12},
            }
        ],
        "layout": {
            "title": {"text": title, "font": {"size": 13}},
            "font": FONT,
            "height": heatmap_size(len(matrix))[1],
            "margin": {"l": 55, "r": 10, "t": 45, "b": 40},
            "yaxis": {"autorange": "reversed"},
            "xaxis": {"side": "bottom"},
        },
    }


# Pair matrices: cells shrink with the host count so 100+ hosts fit a page; values are written
# into the cells only while they stay legible.
PAIR_MATRIX_SPAN = 900  # pixels for all the cells of one axis, before margins
PAIR_CELL_PX = (6, 40)  # smallest and largest cell
PAIR_TEXT_MAX_HOSTS = 16


def pair_matrix_size(hosts: int) -> int:
    """Width (and height) in pixels of a hosts x hosts matrix, margins included."""
    low, high = PAIR_CELL_PX
    return max(360, hosts * max(low, min(high, PAIR_MATRIX_SPAN // max(hosts, 1))) + 160)


def pair_matrix_figure(
    title: str,
    hosts: list[str],
    values: dict[tuple[str, str], float | None],
    marked: dict[tuple[str, str], str],
    unit: str,
    directed: bool,
) -> Figure:
    """A hosts x hosts heatmap of pair values (directed: row = sender, column = receiver);
    cells in `marked` (cell -> status) carry a red cross, so a flagged node shows as a line."""
    z = [[values.get((row, column)) for column in hosts] for row in hosts]
    labels = [plotly_text(host) for host in hosts]  # host names are the node's to choose
    present = [v for v in values.values() if v is not None]
    heatmap: dict[str, Any] = {
        "type": "heatmap", "z": z, "x": labels, "y": labels, "zmin": 0,
        "zmax": max(present, default=1.0), "colorscale": BANDWIDTH_COLOURS,
        "hoverongaps": False, "colorbar": {"title": {"text": unit}, "thickness": 12},
        "hovertemplate": "%{y} → %{x}: %{z:.3g} " + unit + "<extra></extra>",
    }  # fmt: skip
    if len(hosts) <= PAIR_TEXT_MAX_HOSTS:
        heatmap["texttemplate"] = "%{z:.3g}"
    position = {host: i for i, host in enumerate(hosts)}
    cells = sorted(marked, key=lambda cell: (position[cell[0]], position[cell[1]]))
    crosses = {
        "type": "scatter", "mode": "markers", "name": "not passing",
        "x": [labels[position[column]] for _, column in cells],
        "y": [labels[position[row]] for row, _ in cells],
        "text": [marked[cell] for cell in cells],
        "marker": {"symbol": "x-thin", "color": "#dc2626", "line": {"width": 2, "color": "#dc2626"},
                   "size": max(4, min(14, PAIR_MATRIX_SPAN // max(len(hosts), 1) // 2))},
        "hovertemplate": "%{y} → %{x}: %{text}<extra></extra>",
    }  # fmt: skip
    size = pair_matrix_size(len(hosts))
    axis = {"type": "category", "tickfont": {"size": 10 if len(hosts) <= 40 else 7}}
    return {
        "data": [heatmap, crosses] if cells else [heatmap],
        "layout": {
            "title": {"text": title, "font": {"size": 13}},
            "font": FONT,
            "height": size,
            "margin": {"l": 110, "r": 10, "t": 45, "b": 100},
            "xaxis": {**axis, "title": {"text": "receiver" if directed else ""}},
            "yaxis": {**axis, "autorange": "reversed",
                      "title": {"text": "sender" if directed else ""}},
            "showlegend": False,
            "plot_bgcolor": "#ffffff",
        },
    }  # fmt: skip
