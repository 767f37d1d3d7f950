"""NVIDIA nvbandwidth (github.com/NVIDIA/nvbandwidth): plain text and `-j` JSON output.

Text, from output.cpp / inline_common.h (v0.1-v0.8) and published v0.10 output:
header `nvbandwidth Version: v0.8`, `Built from Git version: ...`, `CUDA Runtime Version: 12040`,
`CUDA Driver Version: ...`, `Driver Version: 550.127.08`, then `Device 0: NAME (00000000:34:00)`
(multinode: `Process 0 (host): device 0: NAME (...)`). Per test: `Running NAME.`, a description
line such as `memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)`, a column label row, one row
per source (label then cells, `N/A` where not measured), a blank line, `SUM <key> <value>`
(`&&&& PERF <key> <value><unit>` with the perf formatter), v0.9+ `COEFFICIENT_OF_VARIATION <key>
<value>`; verbose runs add MIN/MAX/AVG. Bidirectional device-to-device tests (v0.6+) print three
matrices (Read1/Read2/Total). Waived tests: `Waiving NAME.` before v0.5, a bare `Waived:` after.
Failures: `ERROR: ...` / `Error: ...`, or an `ASSERT ...` line and no matrix.

JSON (json_output.cpp): {"nvbandwidth": {"version", "git_version", "CUDA Runtime Version",
"Driver Version", "GPU Device list": ["0: NAME (pci): (host)"], "testcases": [{"name",
"status": Passed|Waived|Error|Not Found|Running, "bandwidth_description", "bandwidth_matrix"
(rows of strings, "N/A"), "sum", "error"}], "error", "warning"}}.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from gpuval.parsers.text import Line, iter_lines, parse_int, parse_number
from gpuval.records.bandwidth import (
    NvbandwidthDevice,
    NvbandwidthMatrix,
    NvbandwidthRun,
    NvbandwidthStatus,
    NvbandwidthTest,
)
from gpuval.records.base import ParseResult

TOOLS = ("nvbandwidth",)

_VERSION = re.compile(r"^nvbandwidth Version:\s*(?P<value>.*)$")
_HEADER_FIELDS = {
    "Built from Git version": "git_version",
    "CUDA Runtime Version": "cuda_runtime_version",
    "CUDA Driver Version": "cuda_driver_version",
    "Driver Version": "driver_version",
}
_HEADER_FIELD = re.compile(r"^(?P<key>" + "|".join(_HEADER_FIELDS) + r"):\s*(?P<value>.*)$")
_DEVICE = re.compile(
    r"^(?:Process\s+\d+\s+\((?P<host>[^)]*)\):\s*device|Device)\s+(?P<index>\d+):\s*"
    r"(?P<name>.*?)(?:\s+\((?P<pci>[0-9a-fA-F]+:[0-9a-fA-F]+:[0-9a-fA-F.]+)\))?\s*$"
)
_JSON_DEVICE = re.compile(
    r"^(?P<index>\d+):\s*(?P<name>.*?)(?:\s+\((?P<pci>[0-9a-fA-F]+:[0-9a-fA-F]+:[0-9a-fA-F.]+)\))?"
    r"(?::\s*\((?P<host>[^)]*)\))?\s*$"
)
_RUNNING = re.compile(r"^Running\s+(?P<name>\S+?)\.?$")
_WAIVING = re.compile(r"^Waiving\s+(?P<name>\S+?)\.?$")
_WAIVED = re.compile(r"^Waived:?\s*(?P<message>.*)$")
_ERROR = re.compile(r"^(?:ERROR|Error):\s*(?P<message>.*)$")
_FAILURE = re.compile(r"ASSERT|CUDA_ERROR|Invalid value|failed", re.IGNORECASE)
_SUM = re.compile(r"^(?:SUM|&&&& PERF)\s+(?P<key>\S+)\s+(?P<value>[-+\d.eE]+)")
_CV = re.compile(r"^COEFFICIENT_OF_VARIATION\s+(?P<key>\S+)\s+(?P<value>[-+\d.eE]+)")
_STATISTIC = re.compile(r"^(?:MIN|MAX|AVG)\s+\S+\s+\S+$")
_UNIT = re.compile(r"\((?P<unit>GB/s|ns|us)\)\s*$")
_DESCRIPTION = re.compile(r"\((?:row|column)\)|^(?:memcpy|multicast|Bisect)\b|\((?:GB/s|ns)\)$")

_JSON_STATUS: dict[str, NvbandwidthStatus] = {
    "passed": "passed",
    "waived": "waived",
    "error": "error",
    "not found": "not_found",
    "running": "incomplete",
}


def detect(text: str) -> tuple[str, int] | None:
    head = text[:1_000_000]
    if "nvbandwidth Version:" in head:
        return "nvbandwidth", 95
    if '"nvbandwidth"' in head and ('"testcases"' in head or '"GPU Device list"' in head):
        return "nvbandwidth", 95
    if "Running " in head and ("SUM " in head or "Waived" in head) and "(row)" in head:
        return "nvbandwidth", 80
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult(tool="nvbandwidth", source=source)
    brace = text.find("{")
    if brace != -1 and '"nvbandwidth"' in text[brace : brace + 200]:
        _parse_json(text, brace, result)
    else:
        _parse_text(list(iter_lines(text)), result)
    if not result.runs:
        result.error("no nvbandwidth output (version header, test or JSON document) found")
    return result


# ---------------------------------------------------------------- text


class _TextReader:
    """Walks the lines once; `run` and `test` are the ones being filled."""

    def __init__(self, lines: Sequence[Line], result: ParseResult) -> None:
        self.lines = lines
        self.result = result
        self.run: NvbandwidthRun | None = None
        self.test: NvbandwidthTest | None = None

    def current_run(self, line: Line) -> NvbandwidthRun:
        if self.run is None:
            self.run = NvbandwidthRun(format="text", line=line.number)
            self.result.runs.append(self.run)
        return self.run

    def start_test(
        self, line: Line, name: str | None, status: NvbandwidthStatus
    ) -> NvbandwidthTest:
        self.finish_test()
        self.test = NvbandwidthTest(name=name, status=status, line=line.number)
        self.current_run(line).tests.append(self.test)
        return self.test

    def finish_test(self) -> None:
        test = self.test
        if test is not None and test.status == "incomplete":
            if test.matrices and all(m.sum is not None for m in test.matrices):
                test.status = "passed"
            else:
                self.result.warn(f"test {test.name} has no complete result matrix", test.line)
        self.test = None


def _parse_text(lines: Sequence[Line], result: ParseResult) -> None:
    reader = _TextReader(lines, result)
    index = 0
    while index < len(lines):
        index = _text_line(reader, index)
    reader.finish_test()


def _text_line(reader: _TextReader, index: int) -> int:
    """Read the line at `index` (and a whole matrix if one starts there); the next index."""
    line = reader.lines[index]
    text = line.text.strip()
    if not text or _STATISTIC.match(text):
        return index + 1
    if version := _VERSION.match(text):
        reader.finish_test()
        reader.run = None
        reader.current_run(line).version = version["value"].strip() or None
    elif field := _HEADER_FIELD.match(text):
        _set_header_field(reader.current_run(line), field["key"], field["value"].strip())
    elif device := _DEVICE.match(text):
        reader.current_run(line).devices.append(_device(device))
    elif running := _RUNNING.match(text):
        reader.start_test(line, running["name"], "incomplete")
    elif waiving := _WAIVING.match(text):
        reader.start_test(line, waiving["name"], "waived")
    elif _WAIVED.match(text):
        reader.start_test(line, None, "waived")
    elif error := _ERROR.match(text):
        _record_error(reader, line, error["message"])
    elif total := _SUM.match(text):
        _attach(reader, line, total["key"], total["value"], "sum")
    elif cv := _CV.match(text):
        _attach(reader, line, cv["key"], cv["value"], "coefficient_of_variation")
    elif _DESCRIPTION.search(text) and (reader.test is not None or _UNIT.search(text)):
        # a matrix whose `Running ...` line was cut off (elided copies) is named by its SUM line
        test = reader.test or reader.start_test(line, None, "incomplete")
        return _read_matrix(reader, test, index)
    elif reader.test is not None and reader.test.status == "incomplete" and _FAILURE.search(text):
        _record_error(reader, line, text)
    return index + 1


def _set_header_field(run: NvbandwidthRun, key: str, value: str) -> None:
    name = _HEADER_FIELDS[key]
    if name in ("cuda_runtime_version", "cuda_driver_version"):
        setattr(run, name, parse_int(value))
    else:
        setattr(run, name, value or None)


def _device(match: re.Match[str]) -> NvbandwidthDevice:
    return NvbandwidthDevice(
        index=int(match["index"]),
        name=match["name"].strip(),
        pci_bus_id=match["pci"],
        host=match["host"],
    )


def _record_error(reader: _TextReader, line: Line, message: str) -> None:
    if reader.test is not None:
        reader.test.status = "error"
        reader.test.error = reader.test.error or message
        reader.result.warn(f"test {reader.test.name} failed: {message}", line.number)
    else:
        reader.current_run(line).error = message
        reader.result.error(f"nvbandwidth error: {message}", line.number)


def _attach(reader: _TextReader, line: Line, key: str, value: str, attribute: str) -> None:
    matrices = reader.test.matrices if reader.test is not None else []
    if not matrices:
        reader.result.warn(f"{attribute} line for {key} without a matrix before it", line.number)
        return
    setattr(matrices[-1], attribute, parse_number(value))
    if attribute == "sum":
        matrices[-1].sum_key = key
        if reader.test is not None and reader.test.name is None:
            reader.test.name = key


def _read_matrix(reader: _TextReader, test: NvbandwidthTest, index: int) -> int:
    """A description line, the column labels, then rows until a blank or non-row line."""
    lines = reader.lines
    description = lines[index].text.strip()
    unit = _UNIT.search(description)
    matrix = NvbandwidthMatrix(
        description=description,
        unit=unit["unit"] if unit else None,
        row_labels=[],
        column_labels=[],
        values=[],
        sum=None,
        sum_key=None,
        coefficient_of_variation=None,
        line=lines[index].number,
    )
    test.matrices.append(matrix)
    index += 1
    if index >= len(lines) or not lines[index].text.strip():
        reader.result.warn(f"matrix {description!r} has no column labels", matrix.line)
        return index
    matrix.column_labels = lines[index].text.split()
    index += 1
    while index < len(lines):
        stripped = lines[index].text.strip()
        tokens = stripped.split()
        if len(tokens) < 2 or _is_statement(stripped):
            break
        cells = [parse_number(token) for token in tokens[1:]]
        unreadable = [t for t, c in zip(tokens[1:], cells, strict=True) if c is None and t != "N/A"]
        if len(cells) != len(matrix.column_labels) or unreadable:
            problem = f", unreadable {unreadable}" if unreadable else ""
            reader.result.warn(
                f"matrix row {tokens[0]!r} has {len(cells)} cells for "
                f"{len(matrix.column_labels)} columns{problem}",
                lines[index].number,
            )
            if len(cells) > len(matrix.column_labels) or not _is_label(tokens[0]):
                break
        matrix.row_labels.append(tokens[0])
        matrix.values.append(cells)
        index += 1
    return index


def _is_statement(text: str) -> bool:
    """Lines that end a matrix: the next test, a waiver, an error, a SUM or CV line."""
    return any(
        pattern.match(text)
        for pattern in (_SUM, _CV, _RUNNING, _WAIVING, _WAIVED, _ERROR, _VERSION)
    )


def _is_label(token: str) -> bool:
    return token.isdigit() or token.isidentifier()


# ---------------------------------------------------------------- JSON


def _parse_json(text: str, start: int, result: ParseResult) -> None:
    line = text.count("\n", 0, start) + 1
    try:
        document, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as problem:
        error_line = text.count("\n", 0, problem.pos) + 1
        result.error(f"nvbandwidth JSON cannot be read: {problem.msg}", error_line)
        return
    body = document.get("nvbandwidth") if isinstance(document, dict) else None
    if not isinstance(body, dict):
        result.error('JSON document has no "nvbandwidth" object', line)
        return
    run = NvbandwidthRun(
        format="json",
        version=_text(body.get("version")),
        git_version=_text(body.get("git_version")),
        cuda_runtime_version=_integer(body.get("CUDA Runtime Version")),
        cuda_driver_version=_integer(body.get("CUDA Driver Version")),
        driver_version=_text(body.get("Driver Version")),
        devices=_json_devices(body.get("GPU Device list"), line, result),
        error=_text(body.get("error")),
        line=line,
    )
    if run.error:
        result.error(f"nvbandwidth error: {run.error}", line)
    if body.get("warning"):
        result.warn(f"nvbandwidth warning: {body['warning']}", line)
    for entry in body.get("testcases") or []:
        run.tests.append(_json_test(entry, line, result))
    result.runs.append(run)


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None


def _integer(value: Any) -> int | None:
    return parse_int(str(value)) if value is not None else None


def _json_devices(entries: Any, line: int, result: ParseResult) -> list[NvbandwidthDevice]:
    devices = []
    for entry in entries if isinstance(entries, list) else []:
        match = _JSON_DEVICE.match(str(entry))
        if match is None:
            result.warn(f"unreadable device entry {entry!r}", line)
            continue
        devices.append(_device(match))
    return devices


def _json_test(entry: Any, line: int, result: ParseResult) -> NvbandwidthTest:
    if not isinstance(entry, dict):
        result.warn(f"testcase entry is not an object: {entry!r}", line)
        return NvbandwidthTest(name=None, status="incomplete", line=line)
    name = _text(entry.get("name"))
    status = _JSON_STATUS.get(str(entry.get("status", "")).lower(), "incomplete")
    test = NvbandwidthTest(name=name, status=status, error=_text(entry.get("error")), line=line)
    rows = entry.get("bandwidth_matrix")
    if isinstance(rows, list):
        values = [[_json_cell(cell, name, line, result) for cell in row] for row in rows]
        description = str(entry.get("bandwidth_description", ""))
        unit = _UNIT.search(description)
        width = max((len(row) for row in values), default=0)
        test.matrices.append(
            NvbandwidthMatrix(
                description=description,
                unit=unit["unit"] if unit else None,
                row_labels=[str(i) for i in range(len(values))],
                column_labels=[str(i) for i in range(width)],
                values=values,
                sum=parse_number(str(entry["sum"])) if entry.get("sum") is not None else None,
                sum_key=name,
                coefficient_of_variation=None,
                line=line,
            )
        )
    if test.status == "error":
        result.warn(f"test {name} failed: {test.error}", line)
    elif test.status == "incomplete":
        result.warn(f"test {name} has status {entry.get('status')!r}", line)
    return test


def _json_cell(cell: Any, name: str | None, line: int, result: ParseResult) -> float | None:
    value = parse_number(str(cell))
    if value is None and str(cell).strip().upper() != "N/A":
        result.warn(f"test {name}: unreadable matrix cell {cell!r}", line)
    return value
