"""nccl-tests / rccl-tests text output (and, via nccl_json, their `-J` JSON) to `NcclRun`s.

Formats by era, read from NVIDIA/nccl-tests and ROCm/rccl-tests sources (src/common.cu, util.cu):
- 2017: `# bytes N type op [root] time algbw busbw res`, time in ms, header lines without `#`;
- 2019-2022: `# size count type [redop] [root] time algbw busbw error` (per collective), time in us;
- 2022+: `# size count type redop root time algbw busbw #wrong` for every collective;
- 2026: `-I 1` adds `i_min i_max i_p99 i_cv%` to each half, `-S 1` a `timestamp` at the end.
Columns are mapped from the header line of each table, never counted from the end of a row.

The package reads one concern per module: `reader` walks the lines and cuts them into runs,
`header` reads the lines before the table (versions, parameters, devices, command), `table` the
column header and the rows, `footer` the footer, the failures and what a finished run infers.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from pathlib import Path

from gpuval.parsers import nccl_json, open_text
from gpuval.parsers.nccl_tests.reader import TextReader, line_blocks, stream_chunks, text_chunks
from gpuval.records.base import ParseResult

TOOLS = ("nccl-tests", "rccl-tests")

_HEAD = 65536
_STRONG_MARKERS = (
    "Collective test starting",
    "nccl-tests version",
    "rccl-tests",
    "Avg bus bandwidth",
    "Out of bounds values",
    "Test NCCL failure",
    "Test CUDA failure",
    nccl_json.STRUCTURED_OUTPUT,
)
_TABLE_MARKERS = ("redop", "(elements)", "#wrong", " res", " op ")
_RCCL_MARKERS = ("rccl-tests", "RCCL version", "rccl-headers", "+hip", "AMD Instinct")


def detect(text: str) -> tuple[str, int] | None:
    """nccl-tests or rccl-tests, by substring tests on the head (and a few on the whole text)."""
    head = text[:_HEAD]
    start = head.lstrip()[:1]
    if start in ("{", "[") and nccl_json.looks_like_result_records(head):
        return "rccl-tests", 95
    if start == "{":
        if nccl_json.looks_like_json_report(head):
            return "nccl-tests", 95
        return ("nccl-tests", 90) if nccl_json.STRUCTURED_OUTPUT in head else None
    tool = "rccl-tests" if any(m in head for m in _RCCL_MARKERS) else "nccl-tests"
    if any(m in head for m in _STRONG_MARKERS):
        return tool, 90
    if "algbw" in head and "busbw" in head and any(m in head for m in _TABLE_MARKERS):
        return tool, 85
    if "nThread" in head and "nGpus" in head and "minBytes" in head:
        return tool, 80
    if len(text) > _HEAD and any(m in text for m in _STRONG_MARKERS[:4]):
        return tool, 80
    if "Test failure" in head and " .. " in head:
        return tool, 60
    if "algbw" in head and "busbw" in head:
        return tool, 20
    if "NCCL INFO" in head:
        return tool, 5
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    """Never raises: what cannot be read becomes a warning or error naming the line."""
    json_result = _parse_json(text[:_HEAD], lambda: text, source, tool)
    if json_result is not None:
        return json_result
    if tool is None:
        found = detect(text)
        tool = found[0] if found else "nccl-tests"
    result = ParseResult(tool, source)
    TextReader(result).run(line_blocks(text_chunks(text)))
    return result


def parse_path(path: Path, source: str | None = None, tool: str = "nccl-tests") -> ParseResult:
    """parse(read_text(path), source, tool), the text read a block at a time: a log of many
    runs is kept as what its lines say, never as its whole text beside it (a JSON report is
    read whole, as parse reads it). Raises OSError when the file cannot be read."""
    with open_text(path) as stream:
        head = stream.read(_HEAD)
        json_result = _parse_json(head, lambda: head + stream.read(), source, tool)
        if json_result is not None:
            return json_result
        result = ParseResult(tool, source)
        TextReader(result).run(line_blocks(chain([head], stream_chunks(stream))))
    return result


def _parse_json(
    head: str, text: Callable[[], str], source: str | None, tool: str | None
) -> ParseResult | None:
    """A `-J` report or rccl-tests' result records, told by the head of the text; else None."""
    start = head.lstrip()[:1]
    if start == "{" and nccl_json.looks_like_json_report(head):
        return nccl_json.parse_json(text(), ParseResult(tool or "nccl-tests", source))
    if start in ("{", "[") and nccl_json.looks_like_result_records(head):
        return nccl_json.parse_result_records(text(), ParseResult(tool or "rccl-tests", source))
    return None
