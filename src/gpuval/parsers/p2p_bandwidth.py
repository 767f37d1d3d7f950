"""cuda-samples p2pBandwidthLatencyTest: device list, peer access, connectivity and the matrices.

The program prints each matrix as a title line, a header row (`D\\D`, or `GPU`/`CPU` for the two
latency blocks) naming the columns, then one row per source device. Rows are placed by their
printed row label and cells by position, so a missing or short row becomes None cells (with a
warning naming the line) and never moves a value into another column.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuval.parsers.text import DETECT_WINDOW, Line, iter_lines
from gpuval.records.base import ParseResult
from gpuval.records.p2p import READS_SUFFIX, Matrix, P2PDevice, P2PRun, PeerAccess

TOOL = "p2pBandwidthLatencyTest"
TOOLS = (TOOL,)

_BANNER = "P2P (Peer-to-Peer) GPU Bandwidth Latency Test"
_END_NOTE = "NOTE: The CUDA Samples are not meant for performance measurements"
_DEVICE = re.compile(
    r"Device:\s*(\d+),\s*(.*?)(?:,\s*pciBusID:\s*(\w+))?(?:,\s*pciDeviceID:\s*(\w+))?"
    r"(?:,\s*pciDomainID:\s*(\w+))?\s*$"
)
_PEER = re.compile(r"Device=(\d+)\s+(CAN|CANNOT)\s+Access\s+Peer\s+Device=(\d+)")
_P2P_MODE = re.compile(r"P2P=(Enabled|Disabled)")
_DRIVER_RUNTIME = re.compile(r"CUDA Driver Version / Runtime Version\s+([\d.]+)\s*/\s*([\d.]+)")
_DRIVER = re.compile(r"CUDA Driver Version\s*[=:]\s*([\d.]+)")
_RUNTIME = re.compile(r"CUDA Runtime Version\s*[=:]\s*([\d.]+)")
_FAILURE = re.compile(
    r"CUDA error|cudaError\w*|code=\d+\(|Test failed|FAILED|[Ww]aiv(?:ed|ing)|Segmentation fault"
    r"|out of memory|no CUDA-capable device|invalid device ordinal"
)
_HEADER_LABELS = {"D\\D": "gpu", "GPU": "gpu", "CPU": "cpu"}
_ROW = re.compile(r"^(\d+)\s+(\S.*)$")
# The program prints every bandwidth and latency cell with "%6.02f": exactly two decimals. That
# fixed precision is what splits values that touch ("1581.48274.55") back into cells.
_VALUE = re.compile(r"-?\d+\.\d{2}")
_NOT_A_NUMBER = {"nan", "-nan", "inf", "-inf"}


@dataclass(frozen=True)
class _Title:
    """What a matrix title line announces."""

    kind: str  # "connectivity", "bandwidth" or "latency"
    direction: str | None = None  # "unidirectional" / "bidirectional" for bandwidth
    p2p: str | None = None  # "enabled" / "disabled"
    reads: bool = False


@dataclass
class _Block:
    """One matrix being read: its key, column count, prefix width, and the rows seen so far."""

    key: str
    columns: int
    prefix_tokens: int
    header_line: int
    integer_cells: bool
    rows: dict[int, tuple[list[float | None], int]] = field(default_factory=dict)


def detect(text: str) -> tuple[str, int] | None:
    text = text[:DETECT_WINDOW]
    if _BANNER in text:
        return TOOL, 95
    if ("P2P=Enabled" in text or "P2P=Disabled" in text) and "Matrix" in text:
        return TOOL, 90
    if "P2P Connectivity Matrix" in text:
        return TOOL, 90
    if "Access Peer Device=" in text:
        return TOOL, 80
    if "D\\D" in text and ("Bandwidth" in text or "Latency" in text):
        return TOOL, 60
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult(tool=tool or TOOL, source=source)
    _Reader(result).read(iter_lines(text))
    for run in result.runs:
        _settle_gpu_count(run, result)
    if not result.runs:
        result.error("no p2pBandwidthLatencyTest output found (no device list and no matrix)")
    return result


def _title_of(text: str) -> _Title | None:
    if "Connectivity Matrix" in text:
        return _Title("connectivity")
    mode = _P2P_MODE.search(text)
    if mode is None:
        return None
    p2p = mode.group(1).lower()
    reads = "P2P Reads" in text
    if "Latency" in text:
        return _Title("latency", p2p=p2p, reads=reads)
    if "Bandwidth" in text:
        direction = "bidirectional" if "Bidirectional" in text else None
        if "Unidirectional" in text:
            direction = "unidirectional"
        return _Title("bandwidth", direction=direction, p2p=p2p, reads=reads)
    return None


def _matrix_key(title: _Title, header_label: str) -> str | None:
    if title.kind == "connectivity":
        return "connectivity"
    suffix = READS_SUFFIX if title.reads else ""
    if title.kind == "latency":
        return f"latency_{_HEADER_LABELS[header_label]}_p2p_{title.p2p}{suffix}"
    if title.direction is None:
        return None
    return f"bandwidth_{title.direction}_p2p_{title.p2p}{suffix}"


def _header(text: str) -> tuple[str, int, int] | None:
    """(label, column count, prefix tokens) of a matrix header row such as `   D\\D     0      1`.

    Tokens before the label must be integers: editors and `cat -n` prefix line numbers, and
    the same count of leading tokens is then dropped from the block's rows.
    """
    tokens = text.split()
    for position, token in enumerate(tokens):
        if token in _HEADER_LABELS:
            prefix, columns = tokens[:position], tokens[position + 1 :]
            if not all(t.isdigit() for t in prefix):
                return None
            if not columns or columns != [str(i) for i in range(len(columns))]:
                return None
            return token, len(columns), position
        if not token.isdigit():
            return None
    return None


def _drop_prefix(text: str, tokens: int) -> str:
    if tokens == 0:
        return text.strip()
    parts = text.split(None, tokens)
    return parts[tokens].strip() if len(parts) > tokens else ""


def _float_cells(cells_text: str) -> tuple[list[float | None], list[str]]:
    """Cell values by position, splitting touching values at the two-decimal boundary."""
    values: list[float | None] = []
    unreadable: list[str] = []
    for token in cells_text.split():
        pieces = _VALUE.findall(token)
        if pieces and "".join(pieces) == token:
            values.extend(float(piece) for piece in pieces)
        else:
            values.append(None)
            if token.lower() not in _NOT_A_NUMBER:
                unreadable.append(token)
    return values, unreadable


def _int_cells(cells_text: str) -> tuple[list[float | None], list[str]]:
    values: list[float | None] = []
    unreadable: list[str] = []
    for token in cells_text.split():
        if token in {"0", "1"}:
            values.append(int(token))
        else:
            values.append(None)
            unreadable.append(token)
    return values, unreadable


class _Reader:
    """A line-by-line state machine over one file; it appends runs to the result."""

    def __init__(self, result: ParseResult) -> None:
        self.result = result
        self.run: P2PRun | None = None
        self.title: _Title | None = None
        self.block: _Block | None = None

    def read(self, lines: Iterable[Line]) -> None:
        last = 0
        for line in lines:
            self.feed(line)
            last = line.number
        self.close_block(last)

    def current_run(self) -> P2PRun:
        if self.run is None:
            self.run = P2PRun()
            self.result.runs.append(self.run)
        return self.run

    def new_run(self) -> None:
        self.run = None
        self.title = None

    def feed(self, line: Line) -> None:
        text = line.text
        if self.block is not None and self.feed_row(line):
            return
        self.close_block(line.number)
        if _BANNER in text:
            if self.run is not None:
                self.new_run()
            self.current_run()
            return
        if self.read_facts(line):
            return
        title = _title_of(text)
        if title is not None:
            self.title = title
            return
        header = _header(text)
        if header is not None:
            self.open_block(line, *header)
            return
        row = _ROW.match(text.strip())
        if row is not None and not _float_cells(row.group(2))[1]:
            self.result.warn(
                "matrix row outside any matrix (its title or header is missing)", line.number
            )

    def read_facts(self, line: Line) -> bool:
        """Device, peer-access, version, end and failure lines; True when the line was one."""
        text = line.text
        device = _DEVICE.search(text)
        if device is not None:
            index, name, bus, dev, domain = device.groups()
            self.current_run().devices.append(P2PDevice(int(index), name.strip(), bus, dev, domain))
            return True
        peer = _PEER.search(text)
        if peer is not None:
            src, verdict, dst = peer.groups()
            self.current_run().can_access_peer.append(
                PeerAccess(int(src), int(dst), verdict == "CAN")
            )
            return True
        if _END_NOTE in text:
            self.current_run().complete = True
            return True
        if self.read_versions(text):
            return True
        if _FAILURE.search(text):
            self.current_run().failures.append(text.strip())
            self.result.error(f"the test reported a failure: {text.strip()}", line.number)
            return True
        return False

    def read_versions(self, text: str) -> bool:
        both = _DRIVER_RUNTIME.search(text)
        driver = both.group(1) if both else _first_group(_DRIVER, text)
        runtime = both.group(2) if both else _first_group(_RUNTIME, text)
        if driver is None and runtime is None:
            return False
        run = self.current_run()
        run.cuda_driver_version = driver or run.cuda_driver_version
        run.cuda_runtime_version = runtime or run.cuda_runtime_version
        return True

    def open_block(self, line: Line, label: str, columns: int, prefix: int) -> None:
        if self.title is None:
            self.result.warn(f"matrix header '{label}' without a title line; skipped", line.number)
            return
        key = _matrix_key(self.title, label)
        if key is None:
            self.result.warn("bandwidth matrix title names no direction; skipped", line.number)
            return
        run = self.current_run()
        seen = run.connectivity is not None if key == "connectivity" else key in run.matrices
        if seen:
            self.result.warn(
                f"a second '{key}' matrix: read as the start of a new run", line.number
            )
            title = self.title
            self.new_run()
            self.title = title
        self.block = _Block(key, columns, prefix, line.number, key == "connectivity")

    def feed_row(self, line: Line) -> bool:
        """Take `line` as a row of the open block; False when it is not a row (block ends)."""
        block = self.block
        assert block is not None
        row = _ROW.match(_drop_prefix(line.text, block.prefix_tokens))
        if row is None:
            return False
        reader = _int_cells if block.integer_cells else _float_cells
        values, unreadable = reader(row.group(2))
        if len(unreadable) == len(values):
            return False
        label = int(row.group(1))
        if unreadable:
            self.result.warn(
                f"{block.key}: unreadable cell(s) {', '.join(unreadable)} in row {label}; "
                "left empty",
                line.number,
            )
        if label >= block.columns or label in block.rows:
            why = "repeats" if label in block.rows else f"is beyond the {block.columns} columns"
            self.result.warn(f"{block.key}: row {label} {why}; ignored", line.number)
            return True
        block.rows[label] = (values, line.number)
        return True

    def close_block(self, line_number: int) -> None:
        block = self.block
        if block is None:
            return
        self.block = None
        matrix: Matrix = []
        for index in range(block.columns):
            values, row_line = block.rows.get(index, ([], line_number))
            if index in block.rows and len(values) != block.columns:
                self.result.warn(
                    f"{block.key}: row {index} has {len(values)} cells, expected "
                    f"{block.columns}; "
                    + (
                        "missing cells left empty"
                        if len(values) < block.columns
                        else f"extra values {values[block.columns :]} ignored"
                    ),
                    row_line,
                )
            matrix.append((values + [None] * block.columns)[: block.columns])
        missing = [str(i) for i in range(block.columns) if i not in block.rows]
        if missing:
            self.result.warn(
                f"{block.key}: rows {', '.join(missing)} missing (header at line "
                f"{block.header_line}); left empty",
                line_number,
            )
        run = self.current_run()
        if block.key == "connectivity":
            run.connectivity = [[None if v is None else int(v) for v in row] for row in matrix]
        else:
            run.matrices[block.key] = matrix


def _first_group(pattern: re.Pattern[str], text: str) -> str | None:
    found = pattern.search(text)
    return found.group(1) if found else None


def _settle_gpu_count(run: P2PRun, result: ParseResult) -> None:
    sizes = {len(m) for m in run.matrices.values()}
    if run.connectivity is not None:
        sizes.add(len(run.connectivity))
    if run.devices:
        run.num_gpus = len(run.devices)
        if sizes - {run.num_gpus}:
            result.warn(
                f"{run.num_gpus} devices listed but matrices of size {sorted(sizes)} printed"
            )
    elif sizes:
        run.num_gpus = max(sizes)
