"""`nvidia-smi topo -m` and `topo -p2p <cap>`: the device matrix, affinities and legends.

Raw output separates cells with tabs, but published copies come with spaces or collapsed
whitespace, so cells are whitespace tokens. The multi-word trailing columns are found by
their known names in the header, not by counting spaces; in a row, link cells are the leading
upper-case tokens ("X", "NV12", "PHB") and the affinity values follow them, so a short row
leaves None cells instead of moving an affinity into the matrix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuval.parsers.text import DETECT_WINDOW, Line, iter_lines
from gpuval.records.base import ParseResult
from gpuval.records.topology import TopologyRun

TOOL = "nvidia-smi-topo"
TOOLS = (TOOL,)

_KNOWN_COLUMNS = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID")
_COLUMN_FIELDS = {
    "CPU Affinity": "cpu_affinity",
    "NUMA Affinity": "numa_affinity",
    "GPU NUMA ID": "gpu_numa_id",
}
# GPUn, NICn, and the RDMA device names older drivers print instead of NICn (mlx5_0, hfi1_0).
_DEVICE_NAME = re.compile(r"^(?:GPU\d+|NIC\d+|[a-z][a-z0-9]*_[a-z0-9_]*\d)$")
# Link cells are upper-case codes; "N/A" is an affinity value, never a link.
_LINK_CELL = re.compile(r"^(?!N/A$)[A-Z][A-Za-z0-9#]*$")
_P2P_CODES = {"OK", "NS", "CNS", "GNS", "TNS", "DR", "U"}
_TOPOLOGY_CODES = {"NV#", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC"}
_LEGEND_ENTRY = re.compile(r"^\s*(\S+)\s*=\s*(.+?)\s*$")
_NIC_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_TOPO_CELL_AFTER_GPU0 = re.compile(r"GPU0\s+(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|OK|NS|CNS|GNS)\b")


def detect(text: str) -> tuple[str, int] | None:
    text = text[:DETECT_WINDOW]
    if "GPU0" not in text:
        return None
    if "CPU Affinity" in text or "= Self" in text:
        return TOOL, 85
    if _TOPO_CELL_AFTER_GPU0.search(text):
        return TOOL, 70
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult(tool=tool or TOOL, source=source)
    _Reader(result).read(iter_lines(text))
    if not result.runs:
        result.error("no `nvidia-smi topo` matrix found (no header row naming GPU0)")
    return result


@dataclass
class _Matrix:
    run: TopologyRun
    header_line: int
    rows: dict[str, list[str | None]] = field(default_factory=dict)


def _header(text: str) -> tuple[list[str], list[str], str] | None:
    """(devices, known trailing columns, unrecognised header text) of a matrix header row."""
    known = _KNOWN_COLUMNS.search(text)
    device_part = text[: known.start()] if known else text
    devices = device_part.split()
    if "GPU0" not in devices or not all(_DEVICE_NAME.match(d) for d in devices):
        return None
    rest = text[known.start() :] if known else ""
    columns = _KNOWN_COLUMNS.findall(rest)
    unknown = _KNOWN_COLUMNS.sub(" ", rest).strip()
    return devices, columns, unknown


class _Reader:
    def __init__(self, result: ParseResult) -> None:
        self.result = result
        self.matrix: _Matrix | None = None
        self.run: TopologyRun | None = None
        self.section = "matrix"  # or "legend", "nic-legend"

    def read(self, lines: Iterable[Line]) -> None:
        last = 0
        for line in lines:
            self.feed(line)
            last = line.number
        self.close_matrix(last)
        for run in self.result.runs:
            # A single GPU's matrix holds only "X": its legend tells which command printed it.
            if (
                run.matrix == "topology"
                and set(run.legend) & _P2P_CODES - {"X"}
                and not (set(run.legend) & _TOPOLOGY_CODES)
            ):
                run.matrix = "p2p-capability"

    def feed(self, line: Line) -> None:
        text = line.text
        stripped = text.strip()
        header = _header(text)
        if header is not None:
            self.close_matrix(line.number)
            self.open_matrix(line, *header)
            return
        if stripped.startswith("NIC Legend"):
            self.close_matrix(line.number)
            self.section = "nic-legend"
            return
        if stripped.startswith("Legend"):
            self.close_matrix(line.number)
            self.section = "legend"
            return
        if self.matrix is not None and stripped:
            if self.feed_row(line):
                return
            self.close_matrix(line.number)
        if self.run is None or not stripped:
            return
        if self.section == "legend":
            entry = _LEGEND_ENTRY.match(text)
            if entry:
                self.run.legend[entry.group(1)] = entry.group(2)
        elif self.section == "nic-legend":
            nic = _NIC_LEGEND_ENTRY.match(text)
            if nic:
                self.run.nic_legend[nic.group(1)] = nic.group(2)

    def open_matrix(self, line: Line, devices: list[str], columns: list[str], unknown: str) -> None:
        if unknown:
            self.result.warn(f"unrecognised header column text {unknown!r} ignored", line.number)
        if len(set(devices)) != len(devices):
            self.result.warn("header names a device twice", line.number)
        self.run = TopologyRun(devices=devices, columns=columns)
        self.result.runs.append(self.run)
        self.matrix = _Matrix(self.run, line.number)
        self.section = "matrix"

    def feed_row(self, line: Line) -> bool:
        """Read `line` as a matrix row; False when it is not one (the matrix ends)."""
        matrix = self.matrix
        assert matrix is not None
        tokens = line.text.split()
        name, cells = tokens[0], tokens[1:]
        if not _DEVICE_NAME.match(name):
            return False
        run = matrix.run
        if name not in run.devices:
            self.result.warn(f"row {name} is not a column of the header; ignored", line.number)
            return True
        if name in matrix.rows:
            self.result.warn(f"row {name} repeats; ignored", line.number)
            return True
        width = len(run.devices)
        links = list(_leading_links(cells))
        values = cells[len(links) :]
        if len(links) != width:
            self.result.warn(
                f"row {name} has {len(links)} link cells, expected {width}; "
                + ("missing ones left empty" if len(links) < width else "extra ones ignored"),
                line.number,
            )
            links = links[:width]
        matrix.rows[name] = list(links) + [None] * (width - len(links))
        self.read_columns(line, name, values)
        return True

    def read_columns(self, line: Line, name: str, values: list[str]) -> None:
        run = self.run
        assert run is not None
        if len(values) > len(run.columns):
            self.result.warn(
                f"row {name}: extra cells {values[len(run.columns) :]} after the known columns "
                "ignored",
                line.number,
            )
        elif (values and len(values) < len(run.columns)) or (
            not values and name.startswith("GPU") and run.columns
        ):
            self.result.warn(
                f"row {name} has {len(values)} of the {len(run.columns)} columns "
                f"{', '.join(run.columns)}",
                line.number,
            )
        for column, value in zip(run.columns, values, strict=False):
            target: dict[str, str | None] = getattr(run, _COLUMN_FIELDS[column])
            target[name] = None if value.upper() == "N/A" else value

    def close_matrix(self, line_number: int) -> None:
        matrix = self.matrix
        if matrix is None:
            return
        self.matrix = None
        run = matrix.run
        width = len(run.devices)
        missing = [d for d in run.devices if d not in matrix.rows]
        if missing:
            self.result.warn(
                f"rows {', '.join(missing)} missing (header at line {matrix.header_line}); "
                "left empty",
                line_number,
            )
        run.links = [matrix.rows.get(d, [None] * width) for d in run.devices]
        cells = {c for row in run.links for c in row if c not in {None, "X"}}
        if cells and cells <= _P2P_CODES:
            run.matrix = "p2p-capability"


def _leading_links(cells: list[str]) -> Iterable[str]:
    for cell in cells:
        if not _LINK_CELL.match(cell):
            return
        yield cell
