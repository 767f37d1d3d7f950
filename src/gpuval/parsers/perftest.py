"""perftest's ib_write_bw text output (perftest 4.x, 23.x, 24.x), client or server side.

Shape: with --use_cuda, CUDA set-up lines first (`[pid = N, dev = 0] device name = [NAME]`);
then a dashed rule, the test's title (`RDMA_Write BW Test`, `... Bidirectional BW Test`,
`... Post List BW Test`), `Key : value` header lines, two to a line separated by tabs or
spaces (`Dual-port : OFF    Device : mlx5_0`), the queue pairs' addresses, and the table:
`#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]` (MB/sec without
--report_gbits), one row per size (`-a` sweeps them), a dashed rule. Warnings such as
`Conflicting CPU frequency values detected` can land between the column header and the row.
Failures are lines like `Couldn't connect to HOST:PORT`, `Unable to ...`, `Failed to modify QP`,
`Completion with error`, usually with no table at all.
"""

from __future__ import annotations

import re

from gpuval.parsers.text import iter_lines, parse_int, parse_number
from gpuval.records.base import ParseResult
from gpuval.records.network import PerftestRow, PerftestRun

TOOLS = ("ib_write_bw",)

# perftest's units: MB/sec divides by 0x100000 bytes, Gb/sec by 125,000,000 bytes
# (format_factor in print_report_bw, https://github.com/linux-rdma/perftest).
GBIT_PER_UNIT = {"Gb/sec": 1.0, "MB/sec": 0x100000 * 8 / 1e9}

_TITLE = re.compile(r"^\s*(RDMA_Write\b.*\bBW Test)\s*$")
_COLUMNS = re.compile(r"#bytes\s+#?iterations\s+BW peak\[(?P<unit>Gb/sec|MB/sec)\]")
_ROW = re.compile(r"^\s*\d+\s+\d+(?:\s|$)")
_HEADER_FIELD = re.compile(r"([A-Za-z][A-Za-z .*/-]*?)\s*:\s*(\S+)")
_CUDA_NAME = re.compile(r"device name = \[(?P<name>[^\]]+)\]")
_FAILURE = re.compile(
    r"^\s*(?:Couldn't|Unable to|Failed to|Completion with error|Parser function exited|"
    r"ethernet_read_keys|Error\b|ERROR\b)"
)
_NOTICE = re.compile(r"^\s*(?:Conflicting CPU frequency|WARNING:)")


def detect(text: str) -> tuple[str, int] | None:
    head = text[:1_000_000]
    if "RDMA_Write" in head and "BW Test" in head:
        return "ib_write_bw", 90
    if "Couldn't connect to" in head and "socket connection" in head:
        return "ib_write_bw", 60
    return None


def _header(run: PerftestRun, text: str) -> None:
    for key, value in _HEADER_FIELD.findall(text):
        name = key.strip()
        if name == "Device":
            run.device = value
        elif name == "Number of qps":
            run.qps = parse_int(value)
        elif name == "Transport type":
            run.transport = value
        elif name == "Link type":
            run.link_type = value
        elif name == "GID index":
            run.gid_index = parse_int(value)


def _row(text: str, unit: str, number: int) -> PerftestRow | None:
    cells = text.split()
    if len(cells) < 4:
        return None
    size, iterations = parse_int(cells[0]), parse_int(cells[1])
    peak, average = parse_number(cells[2]), parse_number(cells[3])
    if size is None or iterations is None or average is None:
        return None
    factor = GBIT_PER_UNIT[unit]
    rate = parse_number(cells[4]) if len(cells) > 4 else None
    return PerftestRow(size, iterations, None if peak is None else round(peak * factor, 6),
                       round(average * factor, 6), rate, number)  # fmt: skip


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult(tool="ib_write_bw", source=source)
    cuda_device: str | None = None
    run: PerftestRun | None = None
    unit: str | None = None
    for line in iter_lines(text):
        stripped = line.text.strip()
        found = _CUDA_NAME.search(stripped)
        if found:
            cuda_device = found["name"]
            continue
        title = _TITLE.match(line.text)
        if title:
            name = title.group(1)
            run = PerftestRun(name, None, None, None, None, None, "Bidirectional" in name,
                              cuda_device, "Gb/sec", [], line.number)  # fmt: skip
            result.runs.append(run)
            unit = None
            continue
        if _FAILURE.match(stripped):
            result.error(stripped, line.number)
            continue
        if _NOTICE.match(stripped):
            result.warn(stripped, line.number)
            continue
        if run is None:
            continue
        columns = _COLUMNS.search(stripped)
        if columns:
            unit = run.unit = columns["unit"]
        elif unit is not None and _ROW.match(stripped):
            row = _row(stripped, unit, line.number)
            if row is None:
                result.error(f"result row cut short: {stripped!r}", line.number)
            else:
                run.rows.append(row)
        elif unit is None and ":" in stripped:
            _header(run, stripped)
    if not result.runs and not result.errors:
        result.error("no ib_write_bw test found (no 'RDMA_Write ... BW Test' title)")
    for run in result.runs:
        if not run.rows and not result.errors:
            result.error(f"{run.test}: no result row (the test did not finish)", run.line)
    return result
