"""AMD GPU topology: `rocm-smi --showtopo` and `amd-smi topology` (text and `--json`).

- rocm-smi (ROCm 5/6): `=== Weight between two GPUs ===`, `Hops ...`, `Link Type ...` and
  `Link accessibility ...` matrices with `GPU0 GPU1 ...` headers and rows, then `Numa Nodes`
  lines `GPU[0] : (Topology) Numa Node: 0` (older: `GPU 0 : ...`); an unreadable cell is N/A
  and an error line `GPU[0] : Cannot read ...` says why.
- amd-smi (ROCm 6.1+): `ACCESS TABLE:`, `WEIGHT TABLE:`, `HOPS TABLE:`, `LINK TYPE TABLE:`,
  `NUMA BW TABLE:` (and with -c/-n/-d/-z CACHE COHERANCY, ATOMICS, DMA, BI-DIRECTIONAL)
  with BDF headers, then a `Legend:`.
- amd-smi --json: a list with one object per GPU, either {"gpu", "bdf", "links": [{"gpu",
  "bdf", "weight", "link_status", "link_type", "num_hops", "bandwidth", ...}]} or the first
  format {"gpu", "link_accessibility": {"gpu_0": ...}, "weight", "hops", "link_type",
  "numa_bandwidth"}.
Columns are split on whitespace: no cell of these tables holds a space.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpuval.parsers.text import DETECT_WINDOW, iter_lines, parse_int
from gpuval.records.base import ParseResult
from gpuval.records.topology import AmdMatrix, AmdTopologyRun

ROCM, AMD = "rocm-smi-topo", "amd-smi-topo"
TOOLS = (ROCM, AMD)

_ROCM_TITLE = re.compile(r"^=+\s*(.*?)\s*=+$")
_AMD_TITLE = re.compile(r"^([A-Z][A-Z -]*?) TABLE:\s*$")
_NUMA = re.compile(r"^GPU\s*\[?(\d+)\]?\s*:\s*\(Topology\) Numa (Node|Affinity):\s*(\S+)")
_ERROR = re.compile(r"^GPU\s*\[?\d+\]?\s*:\s*(Cannot .*)$")
_AMD_TABLE_LINE = re.compile(
    r"^(?:ACCESS|WEIGHT|HOPS|LINK TYPE|NUMA BW|CACHE COHERANCY|ATOMICS|DMA|BI-DIRECTIONAL) TABLE:",
    re.MULTILINE,
)
# Printed titles -> the record's matrices; other titles are kept in `tables`.
_MATRICES = {
    "link accessibility between two gpus": "access",
    "weight between two gpus": "weights",
    "hops between two gpus": "hops",
    "link type between two gpus": "link_types",
    "access": "access",
    "weight": "weights",
    "hops": "hops",
    "link type": "link_types",
    "numa bw": "bandwidth",
    # JSON keys
    "link_accessibility": "access",
    "link_status": "access",
    "num_hops": "hops",
    "link_type": "link_types",
    "numa_bandwidth": "bandwidth",
    "bandwidth": "bandwidth",
}
_INTEGER_MATRICES = {"weights", "hops"}
_ABSENT = {"N/A", ""}


def detect(text: str) -> tuple[str, int] | None:
    head = text[:DETECT_WINDOW]
    if head.lstrip().startswith("[") and '"link_type"' in head:
        return AMD, 90
    if " between two GPUs" in head or "(Topology) Numa Node" in head:
        return ROCM, 90
    if _AMD_TABLE_LINE.search(head):
        return AMD, 90
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    chosen = tool or (detect(text) or (ROCM, 0))[0]
    result = ParseResult(tool=chosen, source=source)
    if text.lstrip().startswith("["):
        run = _read_json(text, result)
    else:
        run = _read_text(text, result, "amd-smi" if chosen == AMD else "rocm-smi")
    if run is not None:
        result.runs.append(run)
    return result


@dataclass
class _Table:
    """One printed matrix: its title, column labels and rows by label."""

    title: str
    line: int
    columns: list[str] = field(default_factory=list)
    rows: dict[str, dict[str, str]] = field(default_factory=dict)


def _read_text(text: str, result: ParseResult, form: str) -> AmdTopologyRun | None:
    run = AmdTopologyRun(format=form)
    tables: list[_Table] = []
    table: _Table | None = None
    for line in iter_lines(text):
        body = line.text.strip()
        title = _ROCM_TITLE.match(body) or _AMD_TITLE.match(body)
        if title:
            # Matrices: every amd-smi `X TABLE:`, rocm-smi's `... between two GPUs`.
            is_matrix = body.endswith("TABLE:") or "between two GPUs" in body
            table = _Table(title.group(1), line.number) if is_matrix else None
            if table is not None:
                tables.append(table)
            continue
        if body == "Legend:":
            table = None
            continue
        if not body:
            continue
        numa = _NUMA.match(body)
        error = _ERROR.match(body)
        if numa:
            device, kind, value = numa.groups()
            target = run.numa_node if kind == "Node" else run.numa_affinity
            target[f"GPU{device}"] = parse_int(value)
        elif error:
            result.warn(error.group(1), line.number)
        elif table is not None:
            _table_line(table, body.split(), line.number, result)
    if not tables and not run.numa_node:
        result.error(f"no {form} topology table found")
        return None
    run.devices = _devices(tables)
    for table in tables:
        _store(run, table.title, _matrix(run.devices, table.rows))
    return run


def _table_line(table: _Table, cells: list[str], number: int, result: ParseResult) -> None:
    if not table.columns:
        table.columns = cells
        return
    label, values = cells[0], cells[1:]
    if len(values) != len(table.columns):
        result.warn(
            f"{table.title}: row {label} has {len(values)} cells for {len(table.columns)} "
            "columns; missing cells unknown",
            number,
        )
    table.rows[label] = dict(zip(table.columns, values, strict=False))


def _devices(tables: list[_Table]) -> list[str]:
    """Every device a table names, in the order first printed."""
    devices: dict[str, None] = {}
    for table in tables:
        devices.update(dict.fromkeys(table.columns))
        devices.update(dict.fromkeys(table.rows))
    return list(devices)


def _matrix(devices: list[str], rows: dict[str, Any]) -> AmdMatrix:
    """Cells [row][column] in `devices` order; None where N/A or not printed."""
    return [[_cell(rows.get(src, {}).get(dst)) for dst in devices] for src in devices]


def _cell(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None if value is None else str(value)
    printed = str(value).strip()
    return None if printed.upper() in _ABSENT else printed


def _store(run: AmdTopologyRun, title: str, matrix: AmdMatrix) -> None:
    name = _MATRICES.get(title.lower())
    if name is None:
        run.tables[title] = matrix
    elif name in _INTEGER_MATRICES:
        setattr(run, name, [[parse_int(c) if c is not None else None for c in r] for r in matrix])
    else:
        setattr(run, name, matrix)


def _read_json(text: str, result: ParseResult) -> AmdTopologyRun | None:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as problem:
        result.error(f"unreadable JSON: {problem.msg} at column {problem.colno}", problem.lineno)
        return None
    entries = document if isinstance(document, list) else []
    gpus = [entry for entry in entries if isinstance(entry, dict)]
    if not gpus:
        result.error("JSON is not a list of amd-smi topology entries", 1)
        return None
    run = AmdTopologyRun(format="amd-smi-json")
    names: dict[Any, str] = {entry.get("gpu"): _json_name(entry) for entry in gpus}
    run.devices = list(names.values())
    tables: dict[str, dict[str, dict[str, Any]]] = {}
    for entry in gpus:
        source = names[entry.get("gpu")]
        for link in entry.get("links", []) if isinstance(entry.get("links"), list) else []:
            if not isinstance(link, dict):
                continue
            target = names.get(link.get("gpu"), _json_name(link))
            for key, value in link.items():
                if key not in ("gpu", "bdf"):
                    tables.setdefault(key, {}).setdefault(source, {})[target] = value
        for key, per_gpu in entry.items():
            if isinstance(per_gpu, dict):  # first format: {"gpu_1": value, ...}
                for name, value in per_gpu.items():
                    peer = names.get(parse_int(str(name).removeprefix("gpu_")), str(name))
                    tables.setdefault(key, {}).setdefault(source, {})[peer] = value
    for key, rows in tables.items():
        _store(run, key, _matrix(run.devices, rows))
    return run


def _json_name(entry: dict[str, Any]) -> str:
    bdf = entry.get("bdf")
    return bdf if isinstance(bdf, str) else f"gpu_{entry.get('gpu')}"
