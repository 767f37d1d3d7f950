"""The reader of nccl-tests text output: walks the lines, cuts them into runs (several runs
printed one after another, NCCL_DEBUG lines between them) and hands each line to the reader of its
concern (header, table, footer)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, TextIO

from gpuval.parsers import nccl_debug, nccl_json
from gpuval.parsers.nccl_tests import footer, header
from gpuval.parsers.nccl_tests.table import (
    CLASSIC_METRICS,
    Layout,
    UnknownResult,
    group_halves,
    header_layout,
    infer_layout,
    integer,
    is_continuation,
    looks_like_row,
    parse_row,
    with_scale,
)
from gpuval.parsers.text import QUOTED_CHARS, clipped, quoted, strip_launcher_prefix
from gpuval.records.base import ParseResult
from gpuval.records.nccl import NcclDevice, NcclFailedLine, NcclRun

# Stages a run goes through; a marker of an earlier-or-equal stage than reached opens a new run.
_VERSION, _STARTING, _PARAMS, _DEVICES, _TABLE, _ROWS, _FOOTER = range(1, 8)

# A FAILED line is kept as printed, up to this many characters.
_FAILED_LINE_CHARS = 1000
# Characters of text split into lines at a time: a block, its lines and the next chunk are
# held at once (a 1 MiB block cost 4 MB of a 20 MB log's peak, this one 1 MB).
BLOCK = 1 << 18
_LAUNCHER_TAG = re.compile(r"\[\d+(?:,\d+)?\](?:<std(?:out|err)>:)?")


class _ColumnHeader(NamedTuple):
    """What one column header line says, read once per log however many runs print it."""

    layout: Layout | None
    problem: str | None
    columns: tuple[str, ...]
    extra_columns: tuple[str, ...]


def _read_column_header(body: str, halves_named: tuple[str, ...] | None) -> _ColumnHeader:
    words = body.split()
    layout, problem = header_layout(words, halves_named)
    extra: tuple[str, ...] = ()
    if layout is not None:
        extra = tuple(m for m in layout.metrics if m not in CLASSIC_METRICS)
        extra += ("timestamp",) if layout.timestamp else ()
    return _ColumnHeader(layout, problem, tuple(words), extra)


@dataclass(slots=True)
class _Builder:
    run: NcclRun
    # Made at the run's first NCCL_DEBUG line: most runs of a long log have none, and an empty
    # DebugFacts (six sets) weighs more than a short run's records.
    facts: nccl_debug.DebugFacts | None = None
    stage: int = 0
    layout: Layout | None = None
    group_halves: tuple[str, ...] | None = None
    time_scale: float | None = None
    partial: tuple[int, list[str]] | None = None
    row_width: int = 0
    last_line: int | None = None

    def debug_facts(self) -> nccl_debug.DebugFacts:
        if self.facts is None:
            self.facts = nccl_debug.DebugFacts()
        return self.facts


class TextReader:
    def __init__(self, result: ParseResult) -> None:
        self.result = result
        self.builders: list[_Builder] = []
        self.current: _Builder | None = None
        self.preamble = nccl_debug.DebugFacts()
        self.cut_line: int | None = None
        # One object per distinct key cell and column name of the whole log (see parse_row).
        self.shared: dict[str, int | str] = {}
        self.column_headers: dict[tuple[str, tuple[str, ...] | None], _ColumnHeader] = {}
        # Equal runs' headers and device lists, one object each (see _share_with_equal_runs).
        self.headers: dict[tuple[tuple[str, int | str | bool], ...], dict[str, int | str | bool]]
        self.headers = {}
        self.devices: dict[tuple[tuple[object, ...], ...], list[NcclDevice]] = {}

    # ---- driving -------------------------------------------------------------------------
    def run(self, blocks: Iterable[tuple[list[str], bool]]) -> None:
        """Read the lines of `blocks` (see line_blocks), numbered from 1."""
        # iter_lines' work inlined: this loop sees every line of 100 MB logs, and the launcher
        # prefix can only be there when a line starts with "[".
        is_debug, feed = nccl_debug.is_debug_line, nccl_debug.feed
        count = 0
        for lines, cut in blocks:
            first, count = count + 1, count + len(lines)
            if cut:  # its last row may lack digits (see _row)
                self.cut_line = count
            for number, raw in enumerate(lines, start=first):
                if raw[:1] == "[":
                    raw = strip_launcher_prefix(raw)
                # is_debug only where it can hold: its every test needs "NCCL" or a "Channel "
                # start.
                if "NCCL INFO" in raw or (
                    ("NCCL" in raw or raw[:8] == "Channel ") and is_debug(raw)
                ):
                    if raw[:1] in " \t" and self._in_table():
                        # NCCL_DEBUG lines start with their host; a leading blank: a row's start.
                        mixed = "row text mixed into an NCCL_DEBUG line: not recorded"
                        self.result.warn(mixed, number)
                    current = self.current
                    feed(current.debug_facts() if current else self.preamble, raw, number)
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
                    printed = clipped(raw.strip(), _FAILED_LINE_CHARS)
                    failed = NcclFailedLine(printed, number)
                    self._touch(number).run.failed_lines.append(failed)
                self._other_line(number, body, hashed)
        self._flush_partial()
        self._finish()

    def _other_line(self, number: int, body: str, hashed: bool) -> None:
        if footer.read_failure(body, number, lambda: self._touch(number).run):
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
        if self.current is not None:
            self._share_with_equal_runs(self.current.run)
            if self.current.facts is not None:
                # no more lines of its own: its kept lines need no keeping
                nccl_debug.read_kept(self.current.facts)
        self.current = _Builder(NcclRun(start_line=number), last_line=number)
        self.builders.append(self.current)
        return self.current

    def _share_with_equal_runs(self, run: NcclRun) -> None:
        """A run whose lines are all read: its header and device lines, which a log of many runs
        prints alike run after run, made one object with an equal earlier run's (a parsed run
        is never changed; they were a sixth of a long log's records)."""
        run.header = self.headers.setdefault(tuple(run.header.items()), run.header)
        devices = tuple((d.rank, d.group, d.pid, d.host, d.device, d.pci_bus, d.name)
                        for d in run.devices)  # fmt: skip
        run.devices = self.devices.setdefault(devices, run.devices)

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
        header.set_program(builder.run, body.split(":", 1)[1].strip() if ":" in body else "")

    def _concluded(self, number: int, body: str) -> None:
        builder = self._touch(number)
        if builder.run.program is None and ":" in body:
            header.set_program(builder.run, body.split(":", 1)[1].strip())

    def _tests_version(self, number: int, body: str) -> None:
        # nccl-tests print it first; rccl-tests print `rccl-tests: Version` after the params.
        known = self.current is not None and self.current.run.nccl_tests_version is not None
        if known or self._needs_new(_DEVICES):
            self._new_run(number)
        builder = self._touch(number)
        builder.stage = max(builder.stage, _VERSION)
        if body.startswith("rccl"):
            self.result.tool = "rccl-tests"
        header.read_tests_version(builder.run, body)

    def _params(self, number: int, body: str) -> None:
        builder = self._open(number, _PARAMS)
        builder.run.header.update(header.parse_params(body))

    def _device(self, number: int, body: str) -> None:
        device = header.read_device(body)
        if device is None:
            self.result.warn(f"unreadable device line: {quoted(body)}", number)
            return
        builder = self._open(number, _DEVICES) if self._needs_new(_ROWS) else self._touch(number)
        builder.run.devices.append(device)

    def _group_header(self, number: int, body: str) -> None:
        builder = self._open(number, _TABLE) if self._needs_new(_ROWS) else self._touch(number)
        builder.group_halves = group_halves(body)

    def _column_header(self, number: int, body: str) -> None:
        builder = self._open(number, _TABLE) if self._needs_new(_ROWS) else self._touch(number)
        builder.stage = max(builder.stage, _TABLE)
        key = (body, builder.group_halves)
        read = self.column_headers.get(key)
        if read is None:
            read = self.column_headers[key] = _read_column_header(body, builder.group_halves)
        layout = read.layout
        if read.problem:
            self.result.warn(read.problem, number)
        if layout is None:
            return
        if builder.time_scale is not None:
            layout = with_scale(layout, builder.time_scale)
        builder.layout = layout
        run = builder.run
        run.columns, run.extra_columns = read.columns, read.extra_columns
        run.time_column = "cputime" if "cputime" in run.columns else "time"
        if layout.time_scale != 1.0:
            self.result.warn("time column printed in ms (2017 builds); converted to us", number)

    def _units(self, number: int, body: str) -> None:
        if self.current is None or "(B)" not in body:
            return
        builder = self._touch(number)
        scale = 1000.0 if "(ms)" in body else 1.0
        builder.time_scale = scale
        if builder.layout is not None:
            builder.layout = with_scale(builder.layout, scale)

    def _out_of_bounds(self, number: int, body: str) -> None:
        builder = self._touch(number)
        builder.stage = _FOOTER
        out_of_bounds = footer.read_out_of_bounds(body)
        if out_of_bounds is None:
            self.result.warn(f"unreadable out-of-bounds line: {quoted(body)}", number)
            return
        builder.run.out_of_bounds = out_of_bounds

    def _avg_busbw(self, number: int, body: str) -> None:
        builder = self._touch(number)
        if not footer.read_avg_busbw(builder.run, body):
            self.result.warn(
                f"truncated or unreadable average bus bandwidth line: {quoted(body)}", number
            )
            return
        builder.stage = _FOOTER

    def _runtime_version(self, number: int, body: str) -> None:
        builder = self._touch(number)
        self.result.tool = "rccl-tests"
        header.read_runtime_version(builder.run, body)

    def _note(self, number: int, body: str) -> None:
        header.read_note(self._touch(number).run, body)

    def _flag(self, number: int, body: str) -> None:
        header.read_flag(self._touch(number).run, body)

    def _reported_error(self, number: int, body: str) -> None:
        self._touch(number).run.failures.append(footer.reported_error(body, number))

    def _structured_output(self, number: int, body: str) -> None:
        builder = self._touch(number)
        nccl_json.read_structured_output(body, builder.run, number, self.result)
        builder.stage = _FOOTER

    def _command(self, number: int, body: str) -> None:
        match = header.PROGRAM.search(body)
        if match is None:
            return
        current = self.current
        if current is None or current.stage >= _ROWS or current.run.command is not None:
            current = self._new_run(number)
        current.last_line = number
        current.run.command = sys.intern(body)
        if current.run.program is None:
            header.set_program(current.run, match.group(0))

    # ---- rows ----------------------------------------------------------------------------
    def _row_line(self, number: int, body: str) -> None:
        if "[" in body:
            body = _LAUNCHER_TAG.sub(" ", body)
        tokens = body.split()
        builder = self.current
        if builder is not None and builder.partial is not None:
            start, before = builder.partial
            if is_continuation(tokens):
                builder.partial = None
                self._row(start, before + tokens, builder)
                return
            self._flush_partial()
        if integer(tokens[0]) is None:
            if self._in_table() and is_continuation(tokens):
                self.result.warn(f"row fragment without its start: {quoted(body)}", number)
            return
        if builder is None or builder.stage >= _FOOTER:
            if not looks_like_row(tokens):
                return
            builder = self._open(number, _ROWS)
        elif builder.layout is None and not looks_like_row(tokens):
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
                understood = f"row without a column header, not understood: {_cells(tokens)}"
                self.result.warn(understood, number)
                return
            builder.run.extra_columns = ()
            self.result.warn(
                "no column header before this row; columns inferred as "
                f"{' '.join(builder.layout.keys + builder.layout.metrics)} "
                f"x{len(builder.layout.halves)}",
                number,
            )
        row, problem = parse_row(tokens, builder.layout, self.shared)
        width = sum(map(len, tokens))
        if number == self.cut_line and (problem is not None or width < builder.row_width):
            # The file ends inside this line, which is odd or narrower than the row before it.
            problem = "partial"
        builder.row_width = width
        if problem == "partial":
            builder.partial = (number, tokens)
            return
        if isinstance(problem, UnknownResult):  # a result the run printed as nan or inf
            self.result.error(f"{problem}: {quoted(' '.join(tokens))}", number)
            return
        if problem or row is None:
            self.result.warn(f"row not recorded: {problem}: {quoted(' '.join(tokens))}", number)
            return
        row.numbers[3] = number  # the line
        builder.run.rows.append_numbers(row.numbers, row.texts, builder.layout.table[0])

    def _flush_partial(self) -> None:
        builder = self.current
        if builder is None or builder.partial is None:
            return
        number, tokens = builder.partial
        builder.partial = None
        layout = builder.layout
        expected = f" of {len(layout.keys) + layout.cells}" if layout else ""
        self.result.warn(
            f"partial row (truncated output?) not recorded: {quoted(' '.join(tokens))} "
            f"({len(tokens)}{expected} cells)",
            number,
        )

    # ---- finishing -----------------------------------------------------------------------
    def _finish(self) -> None:
        if self.current is not None:
            self._share_with_equal_runs(self.current.run)
        for facts in [self.preamble, *(b.facts for b in self.builders if b.facts is not None)]:
            nccl_debug.digest(facts)
        builders = [b for b in self.builders if _has_content(b)]
        if not builders and footer.facts_present(self.preamble):
            builders = [_Builder(NcclRun())]
        if builders:
            builders[0].debug_facts().merge(self.preamble)
        for builder in builders:
            self.result.runs.append(
                footer.finish_run(
                    builder.run,
                    builder.facts or nccl_debug.DebugFacts(),
                    builder.last_line,
                    self.result,
                )
            )
        if not builders:
            self.result.error("no nccl-tests/rccl-tests output found")


def text_chunks(text: str) -> Iterator[str]:
    return (text[start : start + BLOCK] for start in range(0, len(text), BLOCK))


def stream_chunks(stream: TextIO) -> Iterator[str]:
    return iter(lambda: stream.read(BLOCK), "")


def line_blocks(chunks: Iterable[str]) -> Iterator[tuple[list[str], bool]]:
    """The lines of the text `chunks` make, as `text.splitlines()` cuts them, a block of about
    BLOCK characters at a time (a list of every line would cost twice the text), each block
    with whether it ends the text cut mid-line (a capture cut mid-write; copies pasted from web
    pages often lack the last newline too)."""
    pieces: list[str] = []
    for chunk in chunks:
        end = chunk.rfind("\n") + 1  # a block ends at a line's end
        if not end:  # no line ends here: joined once one does (no text copied again and again)
            pieces.append(chunk)
            continue
        pieces.append(chunk[:end])
        yield "".join(pieces).splitlines(), False
        pieces = [chunk[end:]] if end < len(chunk) else []
    rest = "".join(pieces)
    if rest:
        yield rest.splitlines(), rest[-1] != "\r"


def _has_content(builder: _Builder) -> bool:
    run = builder.run
    return bool(
        builder.stage > 0
        or run.rows
        or run.failures
        or run.devices
        or run.header
        or (builder.facts is not None and footer.facts_present(builder.facts))
    )


def _cells(tokens: list[str]) -> str:
    """The cells of a row as a list, of a row no longer than a quote."""
    return str(tokens) if sum(map(len, tokens)) <= QUOTED_CHARS else quoted(" ".join(tokens))
