"""The long tables (measurements.csv) that the report's charts and notebooks read: every
measured number as printed, one row per size, matrix cell or pair try; and the JSON views of
parsed runs the charts draw from. Views only: nothing here judges.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from gpuval.checks.pairs import read_tries
from gpuval.evidence import Parsed
from gpuval.records.base import to_jsonable
from gpuval.runfolder import RawFile

NCCL_TOOLS = frozenset({"nccl-tests", "rccl-tests"})
P2P_TOOLS = frozenset({"p2pBandwidthLatencyTest"})
TOPO_TOOLS = frozenset({"nvidia-smi-topo"})
SMI_TOOLS = frozenset({"nvidia-smi", "nvidia-smi-xml", "nvidia-smi-csv", "nvidia-smi-nvlink"})
BENCH_TOOLS = frozenset({"all_reduce_bench"})
COLLECTIVE_BENCH_TOOLS = frozenset({"gpuval-allreduce-bench"})  # the suite's own node program
IB_TOOLS = frozenset({"ibstat", "ibv_devinfo"})
VERSION_TOOLS = frozenset({"nvcc-version", "mpirun-version", "nccl-version", "os-release"})
NVBANDWIDTH_TOOLS = frozenset({"nvbandwidth"})
# Tools whose runs are measurements; the others describe the hardware (inventory).
MEASURING_TOOLS = (
    NCCL_TOOLS | P2P_TOOLS | BENCH_TOOLS | COLLECTIVE_BENCH_TOOLS | NVBANDWIDTH_TOOLS | {"iperf3"}
)

# src/dst: GPU indices of matrix cells; host_a/host_b/try: pair tests (metric "pair_<kind>";
# iperf3: sender, receiver).
MEASUREMENT_COLUMNS = [
    "host", "file", "tool", "run", "collective", "nranks", "size_bytes", "count", "dtype",
    "redop", "placement", "time_us", "algbw_gbps", "busbw_gbps", "wrong", "metric", "src", "dst",
    "value", "unit", "line", "host_a", "host_b", "try",
]  # fmt: skip


@dataclass(frozen=True)
class ToolRun(Parsed[object]):
    """One parsed run of one raw file, with its JSON document (field names of the run schemas)
    for the tables and charts."""

    index: int  # position in the file's runs
    data: dict[str, Any]


def tool_runs(files: Iterable[RawFile], tools: frozenset[str] | None = None) -> Iterator[ToolRun]:
    """Every parsed run of the given tools (all tools when None), in file order."""
    for raw in files:
        if raw.parse is None or (tools is not None and raw.parse.tool not in tools):
            continue
        for index, run in enumerate(raw.parse.runs):
            data = to_jsonable(run)
            if isinstance(data, dict):
                yield ToolRun(raw, run, index, data)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# ---------------------------------------------------------------- tables


def _nccl_rows(run: ToolRun) -> Iterator[dict[str, Any]]:
    for row in as_list(run.data.get("rows")):
        row = as_dict(row)
        for placement in ("out_of_place", "in_place"):
            half = as_dict(row.get(placement))
            if not half:
                continue
            yield {
                "collective": run.data.get("collective"),
                "nranks": run.data.get("nranks"),
                "size_bytes": row.get("size_bytes"),
                "count": row.get("count"),
                "dtype": row.get("dtype"),
                "redop": row.get("redop"),
                "placement": placement,
                "time_us": half.get("time_us"),
                "algbw_gbps": half.get("algbw_gbps"),
                "busbw_gbps": half.get("busbw_gbps"),
                "wrong": half.get("wrong"),
                "line": row.get("line"),
            }


def _bench_rows(run: ToolRun) -> Iterator[dict[str, Any]]:
    """all_reduce_bench and gpuval-allreduce-bench (world_size, per-row time and #wrong)."""
    nranks = run.data.get("nranks", run.data.get("world_size"))
    for row in as_list(run.data.get("rows")):
        row = as_dict(row)
        yield {
            "collective": run.data.get("collective"),
            "nranks": nranks,
            "size_bytes": row.get("size_bytes"),
            "count": row.get("count"),
            "time_us": row.get("time_us"),
            "algbw_gbps": row.get("algbw_gbps"),
            "busbw_gbps": row.get("busbw_gbps"),
            "wrong": row.get("wrong"),
            "line": row.get("line"),
        }


def _matrix_rows(run: ToolRun) -> Iterator[dict[str, Any]]:
    for metric, matrix in sorted(as_dict(run.data.get("matrices")).items()):
        unit = "us" if metric.startswith("latency") else "GB/s"
        for src, cells in enumerate(as_list(matrix)):
            for dst, value in enumerate(as_list(cells)):
                yield {"metric": metric, "src": src, "dst": dst, "value": value, "unit": unit}


def _nvbandwidth_rows(run: ToolRun) -> Iterator[dict[str, Any]]:
    for test in as_list(run.data.get("tests")):
        test = as_dict(test)
        for matrix in as_list(test.get("matrices")):
            matrix = as_dict(matrix)
            rows, columns = as_list(matrix.get("row_labels")), as_list(matrix.get("column_labels"))
            for r, cells in enumerate(as_list(matrix.get("values"))):
                for c, value in enumerate(as_list(cells)):
                    yield {
                        "metric": test.get("name"),
                        "src": _label_number(rows[r] if r < len(rows) else None),
                        "dst": _label_number(columns[c] if c < len(columns) else None),
                        "value": value,
                        "unit": matrix.get("unit"),
                        "line": matrix.get("line"),
                    }


def _label_number(label: Any) -> int | None:
    text = str(label).strip() if label is not None else ""
    return int(text) if text.isdigit() else None


def _pair_rows(files: list[RawFile]) -> Iterator[dict[str, Any]]:
    """The number each pair try gave (the value the pair analysis judged), one row per try."""
    tools = {raw.path: raw.parse.tool for raw in files if raw.parse}
    for t in read_tries(files, None):
        if t.value is None:
            continue  # no number: the try's reason is in results.json `pairs.tries`
        yield {
            "host": t.host, "file": t.path, "tool": tools.get(t.path), "metric": f"pair_{t.kind}",
            "host_a": t.src or t.a, "host_b": t.dst or t.b, "try": t.attempt, "value": t.value,
            "unit": t.unit,
        }  # fmt: skip


def measurements(files: Iterable[RawFile]) -> pd.DataFrame:
    """Every measured number in long format, one row per (size, placement), matrix cell or
    pair try, exactly as printed (no averaging, no dropping)."""
    files = list(files)
    records: list[dict[str, Any]] = []
    for run in tool_runs(files, MEASURING_TOOLS):
        if run.tool in NCCL_TOOLS:
            rows: Iterable[dict[str, Any]] = _nccl_rows(run)
        elif run.tool in BENCH_TOOLS | COLLECTIVE_BENCH_TOOLS:
            rows = _bench_rows(run)
        elif run.tool in P2P_TOOLS:
            rows = _matrix_rows(run)
        elif run.tool in NVBANDWIDTH_TOOLS:
            rows = _nvbandwidth_rows(run)
        else:
            continue
        base = {"host": run.host, "file": run.file.path, "tool": run.tool, "run": run.index}
        records += [{**base, **row} for row in rows]
    records += _pair_rows(files)
    frame = pd.DataFrame.from_records(records, columns=MEASUREMENT_COLUMNS)
    for column in ("nranks", "size_bytes", "count", "wrong", "src", "dst", "line", "run", "try"):
        frame[column] = frame[column].astype("Int64")
    return frame


MEASUREMENTS_FILE = "measurements.csv"

# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, CSV injection):
# "=HYPERLINK(...)" as a host name would be live. Text cells that do get a leading "'", which
# the spreadsheet shows as the text as written; numbers (-3.5) stay numbers.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _inert_cell(value: Any) -> Any:
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every text cell that a spreadsheet would run as a formula made inert."""
    safe = frame.copy()
    for column in safe.columns:
        if not pd.api.types.is_numeric_dtype(safe[column]):  # text, whatever its dtype
            safe[column] = safe[column].map(_inert_cell)
    return safe


def measurements_csv(files: Iterable[RawFile]) -> str:
    """The content of measurements.csv, every text cell inert in a spreadsheet."""
    return str(spreadsheet_safe(measurements(files)).to_csv(index=False))
