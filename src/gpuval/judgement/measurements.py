"""The rows of measurements.csv: every measured number as printed, one row per size and
placement, matrix cell or pair try (no averaging, no dropping)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpuval.checks.pairs import Try
from gpuval.evidence import ParsedFile
from gpuval.judgement.model import MeasurementRow
from gpuval.judgement.series import NCCL_TOOLS, ToolRun
from gpuval.records.nccl import NcclRun

P2P_TOOLS = frozenset({"p2pBandwidthLatencyTest"})
BENCH_TOOLS = frozenset({"all_reduce_bench"})
COLLECTIVE_BENCH_TOOLS = frozenset({"gpuval-allreduce-bench"})  # the suite's own node program
NVBANDWIDTH_TOOLS = frozenset({"nvbandwidth"})
# The runs whose numbers measurements.csv lists.
MEASURED_TOOLS = NCCL_TOOLS | BENCH_TOOLS | COLLECTIVE_BENCH_TOOLS | P2P_TOOLS | NVBANDWIDTH_TOOLS


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _nccl_rows(run: ToolRun) -> Iterator[MeasurementRow]:
    record = run.record
    if not isinstance(record, NcclRun):
        return
    host, file, tool, index = run.host, run.file.path, run.tool, run.index
    collective, nranks = record.collective, record.nranks
    for row in record.rows:
        for placement, half in (("out_of_place", row.out_of_place), ("in_place", row.in_place)):
            if half is None:
                continue
            yield MeasurementRow(
                host, file, tool, index, collective=collective, nranks=nranks,
                size_bytes=row.size_bytes, count=row.count, dtype=row.dtype, redop=row.redop,
                placement=placement, time_us=half.time_us, algbw_gbps=half.algbw_gbps,
                busbw_gbps=half.busbw_gbps, wrong=half.wrong, line=row.line,
            )  # fmt: skip


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


def _matrix_rows(run: ToolRun) -> Iterator[MeasurementRow]:
    for metric, matrix in sorted(_as_dict(run.data.get("matrices")).items()):
        unit = "us" if metric.startswith("latency") else "GB/s"
        for src, cells in enumerate(_as_list(matrix)):
            for dst, value in enumerate(_as_list(cells)):
                yield MeasurementRow(
                    run.host, run.file.path, run.tool, run.index,
                    metric=metric, src=src, dst=dst, value=value, unit=unit,
                )  # fmt: skip


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
) -> list[MeasurementRow]:
    """Every measured number of the run's files (`runs`: theirs), then every pair try's
    number."""
    found: list[MeasurementRow] = []
    for run in runs:
        if run.tool in NCCL_TOOLS:
            rows: Iterator[MeasurementRow] = _nccl_rows(run)
        elif run.tool in BENCH_TOOLS | COLLECTIVE_BENCH_TOOLS:
            rows = _bench_rows(run)
        elif run.tool in P2P_TOOLS:
            rows = _matrix_rows(run)
        elif run.tool in NVBANDWIDTH_TOOLS:
            rows = _nvbandwidth_rows(run)
        else:  # inventory tools describe the hardware; pair tests' numbers are their tries'
            continue
        found += rows
    return found + list(_pair_rows(files, tries))
