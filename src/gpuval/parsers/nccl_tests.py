"""nccl-tests / rccl-tests text output (and, via nccl_json, their `-J` JSON) to `NcclRun`s.

Formats by era, read from NVIDIA/nccl-tests and ROCm/rccl-tests sources (src/common.cu, util.cu):
- 2017: `# bytes N type op [root] time algbw busbw res`, time in ms, header lines without `#`;
- 2019-2022: `# size count type [redop] [root] time algbw busbw error` (per collective), time in us;
- 2022+: `# size count type redop root time algbw busbw #wrong` for every collective;
- 2026: `-I 1` adds `i_min i_max i_p99 i_cv%` to each half, `-S 1` a `timestamp` at the end.
Columns are mapped from the header line of each table, never counted from the end of a row.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuval.parsers import nccl_debug, nccl_json
from gpuval.parsers.text import parse_int, parse_number, strip_launcher_prefix
from gpuval.records.base import ParseResult
from gpuval.records.nccl import (
    NcclDevice,
    NcclFailedLine,
    NcclFailure,
    NcclHalf,
    NcclOutOfBounds,
    NcclRow,
    NcclRun,
)

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

# Stages a run goes through; a marker of an earlier-or-equal stage than reached opens a new run.
_VERSION, _STARTING, _PARAMS, _DEVICES, _TABLE, _ROWS, _FOOTER = range(1, 8)

_DEVICE = re.compile(
    r"Rank\s+(\d+)(?:\s+Group\s+(\d+))?(?:\s+Pid\s+(\d+))?(?:\s+on\s+(\S+))?"
    r"\s+(?:uses\s+)?device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$"
)
_FAILURE = re.compile(
    r"^(?:(?P<host>\S+): )?(?:Test )?(?P<kind>NCCL|CUDA|Cuda) failure "
    r"(?P<file>[^\s:]+):(?P<line>\d+)\s*:?\s*(?P<message>.*)$"
)
_TRACE = re.compile(
    r"^\.\. (?P<host>\S+?)(?: pid (?P<pid>\d+))?: Test failure (?P<file>[^\s:]+):(?P<line>\d+)"
)
_TIMEOUT = re.compile(
    r"^(?P<host>\S+): Test timeout \((?P<secs>\d+)s\) (?P<file>[^\s:]+):(?P<line>\d+)"
)
_OTHER_FAILURES = (
    "error while loading shared libraries",
    "Invalid number of GPUs",
    "The number of requested GPUs",
    "Incompatible NCCL versions",
)
_HALF_NAMES = re.compile(r"out-of-place|in-place")
_PROGRAM = re.compile(r"\b([a-z][a-z0-9_]*?)_perf(?:_mpi)?\b")
_LAUNCHER_TAG = re.compile(r"\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?")
_PARAM_VALUE = re.compile(r"^-?\d")
_PARAM_NAMES = {
    "nthread": "n_thread",
    "nthreads": "n_thread",
    "ngpus": "n_gpus",
    "nranks": "n_ranks",
    "minbytes": "min_bytes",
    "maxbytes": "max_bytes",
    "warmup_iters": "warmup_iters",
    "warmupiters": "warmup_iters",
    "agg_iters": "agg_iters",
}
_KEY_COLUMNS = {
    "size": "size",
    "bytes": "size",
    "count": "count",
    "n": "count",
    "type": "dtype",
    "redop": "redop",
    "op": "redop",
    "root": "root",
}
_METRIC_NAMES = {"time": "time", "cputime": "time", "algbw": "algbw", "busbw": "busbw"}
_WRONG_NAMES = {"#wrong": "wrong", "wrong": "wrong", "error": "error", "res": "error"}
_WORD_BYTES = {
    "int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
    "half": 2, "float16": 2, "bfloat16": 2, "bf16": 2,
    "int32": 4, "uint32": 4, "int": 4, "float": 4, "float32": 4,
    "int64": 8, "uint64": 8, "double": 8, "float64": 8,
}  # fmt: skip


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
    head = text[:_HEAD]
    start = head.lstrip()[:1]
    if start == "{" and nccl_json.looks_like_json_report(head):
        return nccl_json.parse_json(text, ParseResult(tool or "nccl-tests", source))
    if start in ("{", "[") and nccl_json.looks_like_result_records(head):
        return nccl_json.parse_result_records(text, ParseResult(tool or "rccl-tests", source))
    if tool is None:
        found = detect(text)
        tool = found[0] if found else "nccl-tests"
    result = ParseResult(tool, source)
    _TextParser(result).run(text)
    return result


@dataclass(frozen=True)
class _Layout:
    """How the cells of a table row map to fields, read from the table's header line."""

    keys: tuple[str, ...]
    halves: tuple[str, ...]
    metrics: tuple[str, ...]
    timestamp: bool = False
    time_scale: float = 1.0
    inferred: bool = False

    @property
    def cells(self) -> int:
        return len(self.halves) * len(self.metrics)


@dataclass
class _Builder:
    run: NcclRun
    facts: nccl_debug.DebugFacts = field(default_factory=nccl_debug.DebugFacts)
    stage: int = 0
    layout: _Layout | None = None
    group_halves: tuple[str, ...] | None = None
    time_scale: float | None = None
    partial: tuple[int, list[str]] | None = None
    row_width: int = 0
    last_line: int | None = None


class _TextParser:
    def __init__(self, result: ParseResult) -> None:
        self.result = result
        self.builders: list[_Builder] = []
        self.current: _Builder | None = None
        self.preamble = nccl_debug.DebugFacts()
        self.cut_line: int | None = None

    # ---- driving -------------------------------------------------------------------------
    def run(self, text: str) -> None:
        # iter_lines' work inlined: this loop sees every line of 100 MB logs, and the launcher
        # prefix can only be there when a line starts with "[".
        is_debug, feed = nccl_debug.is_debug_line, nccl_debug.feed
        lines = text.splitlines()
        # A capture cut mid-write ends without a newline: its last row may lack digits.
        # (Copies pasted from web pages often lack it too, hence the width test in _row.)
        self.cut_line = len(lines) if text and text[-1] not in "\r\n" else None
        for number, raw in enumerate(lines, start=1):
            if raw[:1] == "[":
                raw = strip_launcher_prefix(raw)
            if "NCCL INFO" in raw or is_debug(raw):
                if raw[:1] in " \t" and self._in_table():
                    # NCCL_DEBUG lines start with their host; a leading blank is a row's start.
                    self.result.warn("row text mixed into an NCCL_DEBUG line: not recorded", number)
                feed(self.current.facts if self.current else self.preamble, raw, number)
                continue
            body = raw.strip()
            if not body:
                continue
            hashed = body[0] == "#"
            if hashed:
                body = body[1:].strip()
                if not body:
                    continue
            if body[0].isdigit() and "Test" not in body:
                self._row_line(number, body)
                continue
            self._flush_partial()
            if "FAILED" in body:
                self._touch(number).run.failed_lines.append(NcclFailedLine(raw.strip(), number))
            self._other_line(number, body, hashed)
        self._flush_partial()
        self._finish()

    def _other_line(self, number: int, body: str, hashed: bool) -> None:
        if self._failure_line(number, body):
            return
        handler = self._dispatch(body, hashed)
        if handler is not None:
            handler(number, body)
        elif not hashed and "_perf" in body:
            self._command(number, body)

    def _dispatch(self, body: str, hashed: bool) -> Callable[[int, str], None] | None:
        starts = body.startswith
        if starts("Collective test starting"):
            return self._starting
        if starts("Collective test concluded"):
            return self._concluded
        if starts(("nccl-tests version", "rccl-tests version", "rccl-tests: Version")):
            return self._tests_version
        if starts("nThread"):
            return self._params
        if starts("Rank") and "device" in body:
            return self._device
        if starts(("size", "bytes")) and ("algbw" in body or "busbw" in body):
            return self._column_header
        if "out-of-place" in body or body == "in-place" or starts("in-place"):
            return self._group_header
        if starts("("):
            return self._units
        if starts("Out of bounds values"):
            return self._out_of_bounds
        if starts("Avg bus"):
            return self._avg_busbw
        if starts(("RCCL version", "HIP version", "ROCm version")):
            return self._runtime_version
        if starts(("Reducing maxBytes", "Writing JSON output", "NCCL Tests compiled with")):
            return self._note
        if starts(("Blocking Enabled", "Parallel Init Enabled", "Per-Iteration Report")):
            return self._flag
        if hashed and starts("error:"):
            return self._reported_error
        if starts("{") and nccl_json.STRUCTURED_OUTPUT in body:
            return self._structured_output
        return None

    # ---- runs ----------------------------------------------------------------------------
    def _new_run(self, number: int) -> _Builder:
        self._flush_partial()
        self.current = _Builder(NcclRun(start_line=number), last_line=number)
        self.builders.append(self.current)
        return self.current

    def _open(self, number: int, stage: int) -> _Builder:
        """The run a marker of `stage` belongs to: the current one, or a new one when the
        current run already went past that stage (several runs printed one after another)."""
        if self._needs_new(stage):
            self._new_run(number)
        builder = self._touch(number)
        builder.stage = max(builder.stage, stage)
        return builder

    def _needs_new(self, stage: int) -> bool:
        return self.current is None or self.current.stage >= stage

    def _touch(self, number: int) -> _Builder:
        builder = self.current if self.current is not None else self._new_run(number)
        builder.last_line = number
        return builder

    # ---- markers -------------------------------------------------------------------------
    def _starting(self, number: int, body: str) -> None:
        builder = self._open(number, _STARTING)
        self._set_program(builder.run, body.split(":", 1)[1].strip() if ":" in body else "")

    def _concluded(self, number: int, body: str) -> None:
        builder = self._touch(number)
        if builder.run.program is None and ":" in body:
            self._set_program(builder.run, body.split(":", 1)[1].strip())

    def _tests_version(self, number: int, body: str) -> None:
        # nccl-tests print it first; rccl-tests print `rccl-tests: Version` after the params.
        known = self.current is not None and self.current.run.nccl_tests_version is not None
        if known or self._needs_new(_DEVICES):
            self._new_run(number)
        builder = self._touch(number)
        builder.stage = max(builder.stage, _VERSION)
        if body.startswith("rccl"):
            self.result.tool = "rccl-tests"
        words = body.split()
        lowered = [w.lower() for w in words]
        if "version" in lowered and lowered.index("version") + 1 < len(words):
            builder.run.nccl_tests_version = words[lowered.index("version") + 1]
        for word in words:
            name, sep, value = word.partition("=")
            if sep and name.endswith(("-headers", "-library")) and parse_int(value) is not None:
                builder.run.header[name.replace("-", "_")] = int(value)

    def _params(self, number: int, body: str) -> None:
        builder = self._open(number, _PARAMS)
        builder.run.header.update(parse_params(body))

    def _device(self, number: int, body: str) -> None:
        match = _DEVICE.match(body)
        if match is None:
            self.result.warn(f"unreadable device line: {body!r}", number)
            return
        builder = self._open(number, _DEVICES) if self._needs_new(_ROWS) else self._touch(number)
        rank, group, pid, host, device, pci, name = match.groups()
        builder.run.devices.append(
            NcclDevice(
                rank=int(rank),
                group=int(group) if group is not None else None,
                pid=int(pid) if pid is not None else None,
                host=host,
                device=int(device),
                pci_bus=pci or None,
                name=name.strip() or None,
            )
        )

    def _group_header(self, number: int, body: str) -> None:
        builder = self._open(number, _TABLE) if self._needs_new(_ROWS) else self._touch(number)
        builder.group_halves = tuple(
            word.replace("-of-", "_of_").replace("-", "_") for word in _HALF_NAMES.findall(body)
        )

    def _column_header(self, number: int, body: str) -> None:
        builder = self._open(number, _TABLE) if self._needs_new(_ROWS) else self._touch(number)
        builder.stage = max(builder.stage, _TABLE)
        layout, problem = header_layout(body.split(), builder.group_halves)
        if problem:
            self.result.warn(problem, number)
        if layout is None:
            return
        if builder.time_scale is not None:
            layout = _with_scale(layout, builder.time_scale)
        builder.layout = layout
        run = builder.run
        run.columns = body.split()
        run.time_column = "cputime" if "cputime" in run.columns else "time"
        run.extra_columns = [m for m in layout.metrics if m not in _CLASSIC] + (
            ["timestamp"] if layout.timestamp else []
        )
        if layout.time_scale != 1.0:
            self.result.warn("time column printed in ms (2017 builds); converted to us", number)

    def _units(self, number: int, body: str) -> None:
        if self.current is None or "(B)" not in body:
            return
        builder = self._touch(number)
        scale = 1000.0 if "(ms)" in body else 1.0
        builder.time_scale = scale
        if builder.layout is not None:
            builder.layout = _with_scale(builder.layout, scale)

    def _out_of_bounds(self, number: int, body: str) -> None:
        builder = self._touch(number)
        builder.stage = _FOOTER
        words = body.split(":", 1)[1].split() if ":" in body else []
        count = parse_int(words[0]) if words else None
        if count is None:
            self.result.warn(f"unreadable out-of-bounds line: {body!r}", number)
            return
        verdict = words[1] if len(words) > 1 else None
        builder.run.out_of_bounds = NcclOutOfBounds(
            count, verdict == "OK" if verdict else count == 0
        )

    def _avg_busbw(self, number: int, body: str) -> None:
        builder = self._touch(number)
        words = body.split(":", 1)[1].split() if ":" in body else []
        value = parse_number(words[0]) if words else None
        if value is None:
            self.result.warn(
                f"truncated or unreadable average bus bandwidth line: {body!r}", number
            )
            return
        builder.stage = _FOOTER
        builder.run.avg_busbw_gbps = value
        builder.run.avg_busbw_check = words[1] if len(words) > 1 else None
        builder.run.complete = True

    def _runtime_version(self, number: int, body: str) -> None:
        builder = self._touch(number)
        self.result.tool = "rccl-tests"
        name, _, value = body.partition(":")
        if value.strip():
            builder.run.runtime_versions[name.split()[0]] = value.strip()

    def _note(self, number: int, body: str) -> None:
        builder = self._touch(number)
        words = body.split()
        if body.startswith("Reducing maxBytes") and len(words) > 3:
            reduced = parse_int(words[3])
            if reduced is not None:
                builder.run.header["max_bytes_reduced_to"] = reduced
        elif body.startswith("Writing JSON output"):
            builder.run.json_output = body.split(" to ", 1)[-1].strip()
        elif body.startswith("NCCL Tests compiled with"):
            builder.run.header["compiled_with"] = body.split("with", 1)[1].strip()

    def _flag(self, number: int, body: str) -> None:
        builder = self._touch(number)
        key = {"Blocking": "blocking", "Parallel": "parallel_init", "Per-Iteration": "per_iter"}
        builder.run.header[key[body.split()[0]]] = True

    def _reported_error(self, number: int, body: str) -> None:
        builder = self._touch(number)
        message = body.split(":", 1)[1].strip()
        builder.run.failures.append(NcclFailure(None, "nccl", None, None, message, log_line=number))

    def _structured_output(self, number: int, body: str) -> None:
        builder = self._touch(number)
        nccl_json.read_structured_output(body, builder.run, number, self.result)
        builder.stage = _FOOTER

    def _command(self, number: int, body: str) -> None:
        match = _PROGRAM.search(body)
        if match is None:
            return
        current = self.current
        if current is None or current.stage >= _ROWS or current.run.command is not None:
            current = self._new_run(number)
        current.last_line = number
        current.run.command = body
        if current.run.program is None:
            self._set_program(current.run, match.group(0))

    def _set_program(self, run: NcclRun, program: str) -> None:
        run.program = program or None
        run.collective = nccl_json.collective_of_program(program) or run.collective

    # ---- failures ------------------------------------------------------------------------
    def _failure_line(self, number: int, body: str) -> bool:
        if "failure" not in body and "Test timeout" not in body:
            if not any(marker in body for marker in _OTHER_FAILURES):
                return False
            failure = NcclFailure(None, "other", None, None, body, log_line=number)
            self._touch(number).run.failures.append(failure)
            return True
        trace = _TRACE.match(body)
        if trace:
            self._trace(number, trace)
            return True
        match = _FAILURE.match(body)
        if match:
            kind = "nccl" if match["kind"] == "NCCL" else "cuda"
            message = match["message"].strip()
            if len(message) >= 2 and message[0] == "'" and message[-1] == "'":
                message = message[1:-1].rstrip()
            self._touch(number).run.failures.append(
                NcclFailure(match["host"], kind, match["file"], int(match["line"]), message,
                            log_line=number)
            )  # fmt: skip
            return True
        timeout = _TIMEOUT.match(body)
        if timeout:
            message = f"Test timeout ({timeout['secs']}s)"
            self._touch(number).run.failures.append(
                NcclFailure(timeout["host"], "other", timeout["file"], int(timeout["line"]),
                            message, log_line=number)
            )  # fmt: skip
            return True
        return False

    def _trace(self, number: int, match: re.Match[str]) -> None:
        run = self._touch(number).run
        where = f"{match['file']}:{match['line']}"
        pid = int(match["pid"]) if match["pid"] else None
        for failure in reversed(run.failures):
            if failure.host == match["host"] and failure.pid in (None, pid):
                failure.pid = pid
                failure.trace.append(where)
                return
        run.failures.append(
            NcclFailure(match["host"], "other", match["file"], int(match["line"]),
                        "Test failure", pid=pid, trace=[where], log_line=number)
        )  # fmt: skip

    # ---- rows ----------------------------------------------------------------------------
    def _row_line(self, number: int, body: str) -> None:
        if "[" in body:
            body = _LAUNCHER_TAG.sub(" ", body)
        tokens = body.split()
        builder = self.current
        if builder is not None and builder.partial is not None:
            start, before = builder.partial
            if _is_continuation(tokens):
                builder.partial = None
                self._row(start, before + tokens, builder)
                return
            self._flush_partial()
        if _integer(tokens[0]) is None:
            if self._in_table() and _is_continuation(tokens):
                self.result.warn(f"row fragment without its start: {body!r}", number)
            return
        if builder is None or builder.stage >= _FOOTER:
            if not _looks_like_row(tokens):
                return
            builder = self._open(number, _ROWS)
        elif builder.layout is None and not _looks_like_row(tokens):
            return
        self._row(number, tokens, builder)

    def _in_table(self) -> bool:
        builder = self.current
        return builder is not None and builder.layout is not None and builder.stage < _FOOTER

    def _row(self, number: int, tokens: list[str], builder: _Builder) -> None:
        builder.last_line = max(builder.last_line or number, number)
        builder.stage = max(builder.stage, _ROWS)
        if builder.layout is None:
            builder.layout = infer_layout(tokens)
            if builder.layout is None:
                self.result.warn(f"row without a column header, not understood: {tokens}", number)
                return
            builder.run.extra_columns = []
            self.result.warn(
                "no column header before this row; columns inferred as "
                f"{' '.join(builder.layout.keys + builder.layout.metrics)} "
                f"x{len(builder.layout.halves)}",
                number,
            )
        row, problem = parse_row(tokens, builder.layout)
        width = sum(map(len, tokens))
        if number == self.cut_line and (problem is not None or width < builder.row_width):
            # The file ends inside this line, which is odd or narrower than the row before it.
            problem = "partial"
        builder.row_width = width
        if problem == "partial":
            builder.partial = (number, tokens)
            return
        if problem or row is None:
            self.result.warn(f"row not recorded: {problem}: {' '.join(tokens)!r}", number)
            return
        row.line = number
        builder.run.rows.append(row)

    def _flush_partial(self) -> None:
        builder = self.current
        if builder is None or builder.partial is None:
            return
        number, tokens = builder.partial
        builder.partial = None
        layout = builder.layout
        expected = f" of {len(layout.keys) + layout.cells}" if layout else ""
        self.result.warn(
            f"partial row (truncated output?) not recorded: {' '.join(tokens)!r} "
            f"({len(tokens)}{expected} cells)",
            number,
        )

    # ---- finishing -----------------------------------------------------------------------
    def _finish(self) -> None:
        for facts in [self.preamble, *(b.facts for b in self.builders)]:
            nccl_debug.digest(facts)
        builders = [b for b in self.builders if _has_content(b)]
        if not builders and _facts_present(self.preamble):
            builders = [_Builder(NcclRun())]
        if builders:
            builders[0].facts.merge(self.preamble)
        for builder in builders:
            self.result.runs.append(self._finish_run(builder))
        if not builders:
            self.result.error("no nccl-tests/rccl-tests output found")

    def _finish_run(self, builder: _Builder) -> NcclRun:
        run, facts = builder.run, builder.facts
        run.end_line = builder.last_line
        run.nccl_version = (
            facts.version or run.runtime_versions.get("RCCL") or _library_version(run)
        )
        run.nccl_versions_by_host = dict(sorted(facts.versions_by_host.items()))
        run.transports = sorted(facts.transports)
        run.algorithms = sorted(facts.algorithms)
        run.nccl_warnings = facts.warnings
        hosts = {d.host for d in run.devices if d.host} | facts.hosts
        hosts |= {f.host for f in run.failures if f.host}
        run.hosts = sorted(hosts)
        run.nranks = _nranks(run, facts)
        for number, message in facts.version_conflicts:
            self.result.warn(message, number)
        if run.collective is None and run.rows:
            inferred = infer_collective(run)
            if inferred is not None:  # the judge decides, with the sidecar's command
                run.collective, run.collective_inferred = inferred, True
        if run.rows and not run.complete:
            self.result.warn(
                "run ended without its footer (# Avg bus bandwidth): incomplete", run.end_line
            )
        if not run.rows and not run.failures and run.header:
            self.result.warn("run printed its header but no result rows", run.start_line)
        return run


_CLASSIC = ("time", "algbw", "busbw", "wrong", "error")


def _with_scale(layout: _Layout, scale: float) -> _Layout:
    return _Layout(layout.keys, layout.halves, layout.metrics, layout.timestamp, scale,
                   layout.inferred)  # fmt: skip


def _has_content(builder: _Builder) -> bool:
    run = builder.run
    return bool(
        builder.stage > 0
        or run.rows
        or run.failures
        or run.devices
        or run.header
        or _facts_present(builder.facts)
    )


def _facts_present(facts: nccl_debug.DebugFacts) -> bool:
    return bool(facts.version or facts.transports or facts.warnings or facts.algorithms)


def _library_version(run: NcclRun) -> str | None:
    """`# nccl-tests version 2.18.0 nccl-headers=22602 nccl-library=22602` -> `2.26.2`."""
    code = _int(run.header.get("nccl_library")) or _int(run.header.get("rccl_library"))
    return nccl_json.version_string(code) if code is not None else None


def _nranks(run: NcclRun, facts: nccl_debug.DebugFacts) -> int | None:
    """Device lines, else nThread x nGpus x processes (rccl's nRanks, or 1 when the command
    line shows no MPI launcher), else what NCCL_DEBUG said."""
    if run.devices:
        return len({(d.rank, d.host) for d in run.devices})
    threads, gpus = _int(run.header.get("n_thread")), _int(run.header.get("n_gpus"))
    procs = _int(run.header.get("n_ranks"))
    if procs is None and run.command is not None and not _launched_by_mpi(run.command):
        procs = 1
    if threads is not None and gpus is not None and procs is not None:
        return threads * gpus * procs
    return facts.nranks


def _int(value: int | str | bool | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _launched_by_mpi(command: str) -> bool:
    return any(word in command for word in ("mpirun", "mpiexec", "srun", "orterun", "prterun"))


def parse_params(body: str) -> dict[str, int | str | bool]:
    """`nThread 1 nGpus 4 ... step: 2(factor) warmup iters: 5` (or rccl's `nThreads: 1 ...`)."""
    params: dict[str, int | str | bool] = {}
    name: list[str] = []
    for word in body.split():
        if not _PARAM_VALUE.match(word):
            name.append(word.rstrip(":"))
            continue
        key = "_".join(name).lower()
        name = []
        if not key:
            continue
        key = _PARAM_NAMES.get(key, key)
        if key == "step" and "(" in word:
            word, _, kind = word.partition("(")
            params["step_kind"] = kind.rstrip(")")
        value = parse_int(word)
        params[key] = value if value is not None else word
    return params


def header_layout(
    words: list[str], group_halves: tuple[str, ...] | None
) -> tuple[_Layout | None, str | None]:
    """The layout a column header line describes, and a problem to report if any."""
    keys: list[str] = []
    at = 0
    while at < len(words) and words[at] not in _METRIC_NAMES:
        key = _KEY_COLUMNS.get(words[at].lower())
        if key is None:
            return None, f"unknown column {words[at]!r} in header"
        keys.append(key)
        at += 1
    if not keys or keys[0] != "size":
        return None, "column header does not start with size"
    halves: list[list[str]] = []
    timestamp = False
    for word in words[at:]:
        if word == "timestamp":
            timestamp = True
        elif word in ("time", "cputime"):
            halves.append(["time"])
        elif halves:
            halves[-1].append(_METRIC_NAMES.get(word) or _WRONG_NAMES.get(word.lower(), word))
    if not halves:
        return None, "column header has no time column"
    metrics = tuple(halves[0])
    if any(tuple(h) != metrics for h in halves[1:]):
        return None, f"halves of the header differ: {halves}"
    problem = None
    if group_halves and len(group_halves) == len(halves):
        names = group_halves
    elif len(halves) == 2:
        names = ("out_of_place", "in_place")
    else:
        names = ("out_of_place",)
        if len(halves) != 1:
            return None, f"{len(halves)} measurement groups in header"
        if group_halves is None:
            problem = "no out-of-place/in-place line: the one set of columns taken as out-of-place"
    scale = 1000.0 if keys[0] == "size" and words[0] == "bytes" else 1.0
    layout = _Layout(tuple(keys), tuple(names), metrics, timestamp, scale)
    return layout, problem


def infer_layout(tokens: list[str]) -> _Layout | None:
    """Columns of a row printed without its header, from the shape of its cells."""
    keys = ["size"]
    at = 1
    if len(tokens) > 2 and parse_int(tokens[1]) is not None and not _is_number(tokens[2]):
        keys += ["count", "dtype"]
        at = 3
        if at < len(tokens) and not _is_number(tokens[at]):
            keys.append("redop")
            at += 1
    rest = tokens[at:]
    if len(rest) % 4 == 1 and len(rest) > 4 and parse_int(rest[0]) is not None and len(keys) > 1:
        keys.append("root")
        rest = rest[1:]
    if len(rest) in (4, 8):
        last = "error" if "e" in rest[3].lower() and "." not in rest[3] else "wrong"
        metrics: tuple[str, ...] = ("time", "algbw", "busbw", last)
        per = 4
    elif len(rest) in (3, 6):
        metrics, per = ("time", "algbw", "busbw"), 3
    else:
        return None
    halves = ("out_of_place", "in_place")[: len(rest) // per]
    return _Layout(tuple(keys), halves, metrics, inferred=True)


def parse_row(tokens: list[str], layout: _Layout) -> tuple[NcclRow | None, str | None]:
    """A row, or the problem: "partial" (fewer cells than the header) or a description."""
    size = _integer(tokens[0])
    if size is None:
        return None, "size is not an integer"
    row = NcclRow(size_bytes=size)
    at = 1
    needed = layout.cells + (2 if layout.timestamp else 0)
    for key in layout.keys[1:]:
        if at >= len(tokens):
            return None, "partial"
        token = tokens[at]
        if key == "count":
            row.count = _integer(token)
            if row.count is None:
                return None, f"count {token!r} is not an integer"
            at += 1
        elif key == "dtype":
            if _is_number(token):
                return None, f"type {token!r} is a number"
            row.dtype = token
            at += 1
        elif key == "redop":
            if not _is_number(token):  # alltoall in 2020-era builds prints a blank redop
                row.redop = token
                at += 1
        elif key == "root":
            remaining = len(tokens) - at
            if _integer(token) is not None and remaining != needed:
                row.root = _integer(token)
                at += 1
    cells = tokens[at:]
    if layout.timestamp and len(cells) >= needed and _is_timestamp(cells[-2:]):
        row.timestamp = " ".join(cells[-2:])
        cells = cells[:-2]
    if len(cells) < layout.cells:
        return None, "partial"
    if len(cells) > layout.cells:
        return None, f"{len(cells)} measurement cells where the header has {layout.cells}"
    per = len(layout.metrics)
    for index, half_name in enumerate(layout.halves):
        half, problem = _half(cells[index * per : (index + 1) * per], layout)
        if problem:
            return None, problem
        setattr(row, half_name, half)
    return row, None


def _half(cells: list[str], layout: _Layout) -> tuple[NcclHalf | None, str | None]:
    values = [_number(cell) for cell in cells]
    if None in values:
        for name, cell, value in zip(layout.metrics, cells, values, strict=True):
            if value is None and not _is_na(cell):
                return None, f"{name} cell {cell!r} is not a number"
    named = dict(zip(layout.metrics, values, strict=True))
    time = named.pop("time", None)
    if time is not None and layout.time_scale != 1.0:
        time = round(time * layout.time_scale, 6)
    half = NcclHalf(time, named.pop("algbw", None), named.pop("busbw", None))
    half.error = named.pop("error", None)
    if "wrong" in named:
        wrong = named.pop("wrong")
        if wrong is not None and wrong == int(wrong):
            half.wrong = int(wrong)
        else:  # a magnitude under a #wrong header: keep it, but it is no count
            half.error = wrong
    half.extra = named
    return half, None


def infer_collective(run: NcclRun) -> str | None:
    """The collective a table must come from, when no line names it (None if ambiguous).

    nccl-tests prints count = paramCount, size = max(send, recv) bytes: size/(count*word) is 1
    for all_reduce, broadcast, reduce, sendrecv and nranks for all_gather, reduce_scatter,
    alltoall (src/*.cu getCollByteCount)."""
    row = next((r for r in run.rows if r.count and r.dtype in _WORD_BYTES), None)
    if row is None or row.count is None or row.dtype is None:
        return None
    ratio = row.size_bytes / (row.count * _WORD_BYTES[row.dtype])
    reduces = row.redop not in (None, "none")
    if row.root is not None and row.root >= 0:
        if reduces:
            return "reduce"
        return "broadcast" if ratio == 1 else None
    if reduces:
        return "all_reduce" if ratio == 1 else "reduce_scatter"
    if ratio == 1:
        return "sendrecv"
    in_place, out_of_place = row.in_place, row.out_of_place
    if (
        in_place
        and out_of_place
        and in_place.wrong is None
        and in_place.error is None
        and out_of_place.wrong is not None
    ):
        return "alltoall"  # in-place alltoall prints #wrong N/A
    return "all_gather"


def _number(cell: str) -> float | None:
    """parse_number with float() tried first: rows are most of a log, and most cells are plain."""
    try:
        return float(cell)
    except ValueError:
        return parse_number(cell.rstrip("*"))  # rccl marks errors over threshold with "*"


def _integer(cell: str) -> int | None:
    try:
        return int(cell)
    except ValueError:
        return parse_int(cell)


def _is_number(token: str) -> bool:
    return not token[:1].isalpha() and _number(token) is not None


def _is_na(token: str) -> bool:
    return token.upper() in ("N/A", "NA", "-", "NAN")


def _is_timestamp(cells: list[str]) -> bool:
    return len(cells) == 2 and cells[0].count("-") == 2 and cells[1].count(":") == 2


def _is_continuation(tokens: list[str]) -> bool:
    """The rest of a row split by an interleaved line: numeric cells only."""
    return all(_is_number(t.rstrip("*")) or _is_na(t) for t in tokens)


def _looks_like_row(tokens: list[str]) -> bool:
    return len(tokens) >= 4 and parse_number(tokens[1]) is not None
