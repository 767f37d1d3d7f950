"""ml-engineering's all_reduce_bench.py (github.com/stas00/ml-engineering, network/benchmarks/).

Formats by era (from the file's git history):
- 2024 (`multi-node/`, then `network/benchmarks/` until 2025-01): one 4 GB payload,
  `The average bandwidth of all_reduce with a 4.0GB payload (5 trials, 16 ranks):` then
  ` algbw: 44.947 GBps (359.6 Gbps)` / ` busbw: ...`. The payload is M*N*4/1e9, so GB = 10**9 B.
- 2025-01-15..22 (commits 20be3ff, 22087bf): a sweep table with sizes printed as KB/MB/GB and
  bandwidths divided by 2**30 while labelled `GBps` (legend: "1KB = 2**10Bytes, ... 1GB =
  2**30Bytes"); the sizes come from a 10-bit shift, so they are binary too.
- 2025-01-22 onwards: KiB/MiB/GiB sizes and `GBps` = 10**9 B/s (legend "1GBps = 10**9 Bytes
  per second"); 2025-07 adds an `Environment:` block (torch, cuda, nccl, hardware) before
  the table, earlier builds print `Device info: ...`; 2025-12 adds `--profile_stability`, a
  per-trial `| busbw | algbw |` table for one payload.
The 2023 builds printed every trial of every rank and are reported as unsupported.
Progress counters (`  32KiB: 7` or bare `3` lines) and launcher prefixes are ignored; identical
repeated blocks are kept once with `repeats` counting them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import astuple, dataclass

from gpuval.parsers import nccl_debug
from gpuval.parsers.text import Line, iter_lines, parse_int, parse_number
from gpuval.records.bandwidth import (
    AllReduceBenchRun,
    AllReduceEnvironment,
    AllReduceFormat,
    AllReduceRow,
)
from gpuval.records.base import ParseResult

TOOLS = ("all_reduce_bench",)

_TRIALS = r"\((?P<warmups>\d+) warmups / (?P<trials>\d+) trials(?:, (?P<options>[^)]*))?\):"
_SWEEP_HEADER = re.compile(
    r"The average bandwidth of (?P<collective>\w+) over (?P<ranks>\d+) ranks " + _TRIALS
)
_PROFILE_HEADER = re.compile(
    r"The (?P<payload>[\d.]+)GiB payload bandwidth of (?P<collective>\w+) "
    r"over (?P<ranks>\d+) ranks " + _TRIALS
)
_SINGLE_HEADER = re.compile(
    r"The average bandwidth of (?P<collective>\w+) with a (?P<payload>[\d.]+)\s*GB payload "
    r"\((?P<trials>\d+) trials, (?P<ranks>\d+) ranks\):"
)
# " algbw: 52.186 GBps (std: 0.013) (417.5 Gbps)": the first value and unit are the measurement
_SINGLE_VALUE = re.compile(r"^(?P<kind>algbw|busbw):\s*(?P<value>[\d.]+)\s*(?P<unit>GBps|Gbps)")
_HEADERS: tuple[tuple[re.Pattern[str], AllReduceFormat], ...] = (
    (_SWEEP_HEADER, "sweep-table"),
    (_PROFILE_HEADER, "profile-table"),
    (_SINGLE_HEADER, "single-payload"),
)
_SOFTWARE = re.compile(r"^-\s*software:\s*(?P<value>.*)$")
_HARDWARE = re.compile(r"^(?:-\s*hardware|Device info):\s*(?P<value>.*)$")
_SOFTWARE_ITEM = re.compile(r"(?P<key>torch|cuda|nccl)=(?P<value>\([^)]*\)|[^,\s]+)")
_DEVICE_NAME = re.compile(r"name='(?P<name>[^']*)'")
_SIZE = re.compile(r"^(?P<number>\d+)(?P<prefix>[KMGTPE]?)(?P<binary>i?)B$")
_BANDWIDTH = re.compile(r"^(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>GBps|Gbps)$")
_ELAPSED = re.compile(r"^Elapsed time:\s*(?P<value>\S+)")
_LEGACY_TRIAL = "-----------trial-"

_PREFIXES = "KMGTPE"
_GBITS_TO_GBYTES = 0.125
_GIB_TO_GB = 2**30 / 10**9


def detect(text: str) -> tuple[str, int] | None:
    if "bandwidth of all_reduce" in text or "payload bandwidth of " in text:
        return "all_reduce_bench", 90
    if "| payload |" in text and "busbw" in text:
        return "all_reduce_bench", 80
    if _LEGACY_TRIAL in text and "busbw:" in text:
        return "all_reduce_bench", 50
    return None


@dataclass
class _Header:
    format: AllReduceFormat
    collective: str
    nranks: int | None
    trials: int | None
    warmups: int | None
    options: str | None
    payload: str | None
    line: int


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult(tool="all_reduce_bench", source=source)
    lines = list(iter_lines(text))
    environment = AllReduceEnvironment()
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.text.strip()
        header = _read_header(line)
        if header is not None:
            run, index = _read_block(lines, index + 1, header, environment, result)
            _add_run(result, run)
            environment = AllReduceEnvironment()
            continue
        if not _read_environment(stripped, environment):
            _read_trailer(stripped, line, result)
        index += 1
    warnings = nccl_debug.warnings_in(lines)
    if not result.runs:
        result.error("no all_reduce_bench result block (`The average bandwidth of ...`) found")
        if warnings:
            result.runs.append(_no_result(warnings[0].log_line))
    nccl_debug.assign_warnings(warnings, result.runs)
    return result


def _no_result(line: int) -> AllReduceBenchRun:
    """The run of a log without a result block, to carry its NCCL warnings."""
    return AllReduceBenchRun(
        format="no-result",
        collective=None,
        nranks=None,
        trials=None,
        warmups=None,
        options=None,
        environment=AllReduceEnvironment(),
        bandwidth_scale=1.0,
        rows=[],
        complete=False,
        elapsed=None,
        line=line,
    )


def _read_header(line: Line) -> _Header | None:
    stripped = line.text.strip()
    for pattern, kind in _HEADERS:
        match = pattern.search(stripped)
        if match:
            fields = match.groupdict()
            return _Header(
                format=kind,
                collective=fields["collective"],
                nranks=parse_int(fields["ranks"]),
                trials=parse_int(fields["trials"]),
                warmups=parse_int(fields["warmups"]) if fields.get("warmups") else None,
                options=fields.get("options"),
                payload=fields.get("payload"),
                line=line.number,
            )
    return None


def _read_environment(stripped: str, environment: AllReduceEnvironment) -> bool:
    software = _SOFTWARE.match(stripped)
    if software:
        for item in _SOFTWARE_ITEM.finditer(software["value"]):
            value = item["value"]
            if value.startswith("("):  # torch prints nccl as a tuple: (2, 26, 2)
                value = ".".join(part.strip() for part in value.strip("()").split(","))
            setattr(environment, item["key"], value)
        return True
    hardware = _HARDWARE.match(stripped)
    if hardware:
        environment.hardware = hardware["value"]
        name = _DEVICE_NAME.search(hardware["value"])
        environment.device_name = name["name"] if name else None
        return True
    return False


def _read_trailer(stripped: str, line: Line, result: ParseResult) -> None:
    elapsed = _ELAPSED.match(stripped)
    if elapsed and result.runs and result.runs[-1].elapsed is None:
        result.runs[-1].elapsed = elapsed["value"]
    elif stripped.startswith(_LEGACY_TRIAL) and not any(
        "per-trial" in error.message for error in result.errors
    ):
        result.error(
            "per-trial, per-rank output of the 2023 all_reduce_bench builds is not read; "
            "rerun with a current build",
            line.number,
        )


def _read_block(
    lines: Sequence[Line],
    start: int,
    header: _Header,
    environment: AllReduceEnvironment,
    result: ParseResult,
) -> tuple[AllReduceBenchRun, int]:
    run = AllReduceBenchRun(
        format=header.format,
        collective=header.collective,
        nranks=header.nranks,
        trials=header.trials,
        warmups=header.warmups,
        options=header.options,
        environment=environment,
        bandwidth_scale=1.0,
        rows=[],
        complete=False,
        elapsed=None,
        line=header.line,
    )
    if header.format == "single-payload":
        return run, _read_single(lines, start, header, run, result)
    return run, _read_table(lines, start, header, run, result)


def _read_single(
    lines: Sequence[Line], start: int, header: _Header, run: AllReduceBenchRun, result: ParseResult
) -> int:
    values: dict[str, tuple[float, float, int]] = {}
    index = start
    while index < len(lines) and len(values) < 2:
        stripped = lines[index].text.strip()
        match = _SINGLE_VALUE.match(stripped)
        if match:
            number = float(match["value"])
            scale = _GBITS_TO_GBYTES if match["unit"] == "Gbps" else 1.0
            values[match["kind"]] = (number * scale, scale, lines[index].number)
        elif stripped:
            break
        index += 1
    payload = header.payload or ""
    # the 2024 builds print M*N*4/1e9: a decimal GB
    size_bytes = round(float(payload) * 10**9) if parse_number(payload) is not None else 0
    if len(values) < 2:
        missing = sorted({"algbw", "busbw"} - values.keys())
        result.error(f"result block lacks {' and '.join(missing)}", header.line)
    if values:
        run.bandwidth_scale = next(iter(values.values()))[1]
        run.rows.append(
            AllReduceRow(
                size=f"{payload}GB",
                size_bytes=size_bytes,
                busbw_gbps=values["busbw"][0] if "busbw" in values else None,
                algbw_gbps=values["algbw"][0] if "algbw" in values else None,
                line=min(found[2] for found in values.values()),
            )
        )
    run.complete = len(values) == 2
    return index


def _split_row(text: str) -> list[str]:
    return [cell.strip() for cell in text.strip().strip("|").split("|")]


def _read_table(
    lines: Sequence[Line], start: int, header: _Header, run: AllReduceBenchRun, result: ParseResult
) -> int:
    index = start
    while index < len(lines) and not lines[index].text.strip():
        index += 1
    if index >= len(lines) or not lines[index].text.strip().startswith("|"):
        result.error("result header is not followed by a `| ... |` table", header.line)
        return index
    columns = [cell.lower() for cell in _split_row(lines[index].text)]
    if "busbw" not in columns or "algbw" not in columns:
        result.error(f"table header lacks busbw/algbw columns: {columns}", lines[index].number)
        return index + 1
    index += 1
    malformed = False
    while index < len(lines) and lines[index].text.strip().startswith("|"):
        cells = _split_row(lines[index].text)
        if all(set(cell) <= set("-: ") for cell in cells):  # the |---:| separator
            index += 1
            continue
        row = _table_row(cells, columns, header, run, lines[index].number, result)
        if row is None:
            malformed = True
        else:
            run.rows.append(row)
        index += 1
    run.complete = bool(run.rows) and not malformed
    if not run.rows:
        result.error("result table has no rows", header.line)
    return index


def _table_row(
    cells: list[str],
    columns: list[str],
    header: _Header,
    run: AllReduceBenchRun,
    number: int,
    result: ParseResult,
) -> AllReduceRow | None:
    if len(cells) != len(columns):
        result.warn(f"table row has {len(cells)} cells, header has {len(columns)}", number)
        return None
    cell = dict(zip(columns, cells, strict=True))
    if "payload" in cell:
        size_label = cell["payload"]
        size = _size_bytes(size_label)
        if size is None:
            result.warn(f"unreadable payload size {size_label!r}", number)
            return None
        if "i" not in size_label:
            run.bandwidth_scale = _GIB_TO_GB  # the 2025-01 KB/MB/GB builds: GBps = 2**30 B/s
    elif header.payload is not None:
        size_label = f"{header.payload}GiB"
        size = int(float(header.payload) * 2**30)  # the script's own int(gib * 2**30)
    else:
        result.warn("table row without payload column or payload header", number)
        return None
    busbw = _bandwidth(cell["busbw"], run)
    algbw = _bandwidth(cell["algbw"], run)
    if busbw is None or algbw is None:
        result.warn(f"unreadable bandwidth in {cells}", number)
        return None
    iteration = None if "payload" in cell else len(run.rows) + 1
    return AllReduceRow(size_label, size, busbw, algbw, number, iteration)


def _size_bytes(label: str) -> int | None:
    """Sizes from the script's fmt_bytes: an integer and a 2**10-step prefix, "iB" or "B"."""
    match = _SIZE.match(label.replace(" ", ""))
    if match is None:
        return None
    power: int = _PREFIXES.index(match["prefix"]) + 1 if match["prefix"] else 0
    return int(match["number"]) << (10 * power)


def _bandwidth(cell: str, run: AllReduceBenchRun) -> float | None:
    match = _BANDWIDTH.match(cell.replace(" ", ""))
    if match is None:
        return None
    value = float(match["value"])
    if match["unit"] == "Gbps":
        run.bandwidth_scale = _GBITS_TO_GBYTES
    return value * run.bandwidth_scale if run.bandwidth_scale != 1.0 else value


def _identity(run: AllReduceBenchRun) -> tuple[object, ...]:
    rows = tuple((r.size, r.busbw_gbps, r.algbw_gbps, r.iteration) for r in run.rows)
    return (
        run.format,
        run.collective,
        run.nranks,
        run.trials,
        run.warmups,
        run.options,
        rows,
        astuple(run.environment),
    )


def _add_run(result: ParseResult, run: AllReduceBenchRun) -> None:
    """Keep a block once when the same block was captured again (several ranks, tee + stdout)."""
    for earlier in result.runs:
        if _identity(earlier) == _identity(run):
            earlier.repeats += 1
            return
    result.runs.append(run)
