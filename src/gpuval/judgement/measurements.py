"""The rows of measurements.csv: every measured number as printed, one row per size and
placement, matrix cell or pair try (no averaging, no dropping)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuval.checks.pairs import Try
from gpuval.evidence import ParsedFile
from gpuval.judgement.model import Cell, MeasurementRow, Measurements
from gpuval.judgement.series import NCCL_TOOLS, ToolRun
from gpuval.records.nccl import HALVES, NcclRun, NcclTable

P2P_TOOLS = frozenset({"p2pBandwidthLatencyTest"})
BENCH_TOOLS = frozenset({"all_reduce_bench"})
COLLECTIVE_BENCH_TOOLS = frozenset({"gpuval-allreduce-bench"})  # the suite's own node program
NVBANDWIDTH_TOOLS = frozenset({"nvbandwidth"})
# The runs whose numbers measurements.csv lists.
MEASURED_TOOLS = NCCL_TOOLS | BENCH_TOOLS | COLLECTIVE_BENCH_TOOLS | P2P_TOOLS | NVBANDWIDTH_TOOLS
# What measurements.csv lists of an nccl-tests table: of each row, and of each of its halves.
ROW_FIELDS = ("size_bytes", "count", "dtype", "redop", "line")
HALF_FIELDS = ("time_us", "algbw_gbps", "busbw_gbps", "wrong")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _add_nccl(found: Measurements, run: ToolRun) -> None:
    """A run's table column by column: each row's out-of-place, then in-place half (those it
    shows), read from the table's columns, never a row object per row."""
    record = run.record
    if not isinstance(record, NcclRun):
        return
    table = record.rows
    shown = {half: _shown(table, half) for half in HALVES}
    entries = [(at, half) for at in range(len(table)) for half in HALVES if shown[half][at]]
    rows = [at for at, _ in entries]
    cells: dict[str, list[Cell]] = {
        name: [column[at] for at in rows]
        for name, column in ((name, table.column(name)) for name in ROW_FIELDS)
    }
    cells["placement"] = [half for _, half in entries]
    for name in HALF_FIELDS:
        by_half = {half: table.column(name, half) for half in HALVES}
        cells[name] = [by_half[half][at] for at, half in entries]
    same: dict[str, Cell] = {
        "host": run.host, "file": run.file.path, "tool": run.tool, "run": run.index,
        "collective": record.collective, "nranks": record.nranks,
    }  # fmt: skip
    found.add_columns(len(entries), cells, same)


def _shown(table: NcclTable, half: str) -> list[bool]:
    """Whether each row of `table` shows `half` (every row of a table kept as numbers shows
    the same halves)."""
    if table.kept is not None:
        return [getattr(row, half) is not None for row in table.kept]
    return [table.layout is not None and half in table.layout.halves] * len(table)


def _bench_rows(run: ToolRun) -> Iterator[MeasurementRow]:
    """all_reduce_bench and gpuval-allreduce-bench (world_size, per-row time and #wrong)."""
    nranks = run.data.get("nranks", run.data.get("world_size"))
    for row in _as_list(run.data.get("rows")):
        row = _as_dict(row)
        yield MeasurementRow(
            run.host, run.file.path, run.tool, run.index,
            collective=run.data.get("collective"), nranks=nranks,
            size_bytes=row.get("size_bytes"), count=row.get("count"),
            time_us=row.get("time_us"), algbw_gbps=row.get("algbw_gbps"),
            busbw_gbps=row.get("busbw_gbps"), wrong=row.get("wrong"), line=row.get("line"),
        )  # fmt: skip


def _add_matrices(found: Measurements, run: ToolRun) -> None:
    """Every cell of every matrix, row by row, metric by metric in name order."""
    for metric, matrix in sorted(_as_dict(run.data.get("matrices")).items()):
        cells: dict[str, list[Cell]] = {"src": [], "dst": [], "value": []}
        for src, row in enumerate(_as_list(matrix)):
            row = _as_list(row)
            cells["src"] += [src] * len(row)
            cells["dst"] += range(len(row))
            cells["value"] += row
        same: dict[str, Cell] = {
            "host": run.host, "file": run.file.path, "tool": run.tool, "run": run.index,
            "metric": metric, "unit": "us" if metric.startswith("latency") else "GB/s",
        }  # fmt: skip
        found.add_columns(len(cells["value"]), cells, same)


def _label_number(label: Any) -> int | None:
    text = str(label).strip() if label is not None else ""
    return int(text) if text.isdigit() else None


def _nvbandwidth_rows(run: ToolRun) -> Iterator[MeasurementRow]:
    for test in _as_list(run.data.get("tests")):
        test = _as_dict(test)
        for matrix in _as_list(test.get("matrices")):
            matrix = _as_dict(matrix)
            rows, columns = (
                _as_list(matrix.get("row_labels")),
                _as_list(matrix.get("column_labels")),
            )
            for r, cells in enumerate(_as_list(matrix.get("values"))):
                for c, value in enumerate(_as_list(cells)):
                    yield MeasurementRow(
                        run.host, run.file.path, run.tool, run.index, metric=test.get("name"),
                        src=_label_number(rows[r] if r < len(rows) else None),
                        dst=_label_number(columns[c] if c < len(columns) else None),
                        value=value, unit=matrix.get("unit"), line=matrix.get("line"),
                    )  # fmt: skip


def _pair_rows(files: list[ParsedFile], tries: list[Try]) -> Iterator[MeasurementRow]:
    """The number each pair try gave (the value the pair analysis judged), one row per try."""
    tools = {file.path: file.tool for file in files if file.tool is not None}
    for t in tries:
        if t.value is None:
            continue  # no number: the try's reason is in results.json `pairs.tries`
        yield MeasurementRow(
            host=t.host, file=t.path, tool=tools.get(t.path), metric=f"pair_{t.kind}",
            host_a=t.src or t.a, host_b=t.dst or t.b, attempt=t.attempt, value=t.value,
            unit=t.unit,
        )  # fmt: skip


def measurement_rows(
    runs: list[ToolRun], files: list[ParsedFile], tries: list[Try]
) -> Measurements:
    """Every measured number of the run's files (`runs`: theirs), then every pair try's
    number."""
    found = Measurements()
    for run in runs:
        if run.tool in NCCL_TOOLS:
            _add_nccl(found, run)
        elif run.tool in P2P_TOOLS:
            _add_matrices(found, run)
        elif run.tool in BENCH_TOOLS | COLLECTIVE_BENCH_TOOLS:
            for row in _bench_rows(run):
                found.add(row)
        elif run.tool in NVBANDWIDTH_TOOLS:
            for row in _nvbandwidth_rows(run):
                found.add(row)
        # else: inventory tools describe the hardware; pair tests' numbers are their tries'
    for row in _pair_rows(files, tries):
        found.add(row)
    return found
