"""The table of a nccl-tests run: its column header, mapped to a layout, and its rows."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import NamedTuple

from gpuval.parsers.text import parse_int, parse_number, quoted
from gpuval.records.nccl import HALVES, NONE_NUMBER, NcclTableLayout, table_layout

_HALF_NAMES = re.compile(r"out-of-place|in-place")
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
# The metrics every era prints; others (`-I 1` statistics) are a run's extra columns.
CLASSIC_METRICS = ("time", "algbw", "busbw", "wrong", "error")


@dataclass(frozen=True)
class Layout:
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

    @cached_property
    def places(self) -> tuple[dict[str, int], tuple[tuple[str, int], ...]]:
        """Where each classic metric sits in a half's cells, and each extra one (the last of a
        name printed twice, as a dict of the cells would keep)."""
        at = {name: index for index, name in enumerate(self.metrics)}
        classic = {name: index for name, index in at.items() if name in CLASSIC_METRICS}
        return classic, tuple((name, index) for name, index in at.items() if name not in classic)

    @cached_property
    def table(self) -> tuple[NcclTableLayout, tuple[int, ...]]:
        """The layout of the NcclTable of these rows, and which of `halves` it stores, in its
        order (the last of a half printed twice, as setting it twice on a row would keep)."""
        last = {name: index for index, name in enumerate(self.halves)}
        stored = tuple(name for name in HALVES if name in last)
        extra = tuple(name for name, _ in self.places[1])
        return table_layout(stored, extra), tuple(last[name] for name in stored)


@lru_cache(maxsize=256)  # one layout object for all the runs of a log, places read once
def with_scale(layout: Layout, scale: float) -> Layout:
    return Layout(layout.keys, layout.halves, layout.metrics, layout.timestamp, scale,
                  layout.inferred)  # fmt: skip


def group_halves(body: str) -> tuple[str, ...]:
    """`out-of-place  in-place` -> ("out_of_place", "in_place")."""
    return tuple(
        word.replace("-of-", "_of_").replace("-", "_") for word in _HALF_NAMES.findall(body)
    )


def header_layout(
    words: list[str], halves_named: tuple[str, ...] | None
) -> tuple[Layout | None, str | None]:
    """The layout a column header line describes, and a problem to report if any."""
    keys: list[str] = []
    at = 0
    while at < len(words) and words[at] not in _METRIC_NAMES:
        key = _KEY_COLUMNS.get(words[at].lower())
        if key is None:
            return None, f"unknown column {quoted(words[at])} in header"
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
    if halves_named and len(halves_named) == len(halves):
        names = halves_named
    elif len(halves) == 2:
        names = ("out_of_place", "in_place")
    else:
        names = ("out_of_place",)
        if len(halves) != 1:
            return None, f"{len(halves)} measurement groups in header"
        if halves_named is None:
            problem = "no out-of-place/in-place line: the one set of columns taken as out-of-place"
    scale = 1000.0 if keys[0] == "size" and words[0] == "bytes" else 1.0
    layout = Layout(tuple(keys), tuple(names), metrics, timestamp, scale)
    return layout, problem


def infer_layout(tokens: list[str]) -> Layout | None:
    """Columns of a row printed without its header, from the shape of its cells."""
    keys = ["size"]
    at = 1
    if len(tokens) > 2 and parse_int(tokens[1]) is not None and not is_number(tokens[2]):
        keys += ["count", "dtype"]
        at = 3
        if at < len(tokens) and not is_number(tokens[at]):
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
    return Layout(tuple(keys), halves, metrics, inferred=True)


class ParsedRow(NamedTuple):
    """A table row as NcclTable.append_numbers takes it."""

    numbers: list[float | int]
    texts: tuple[str | None, str | None, str | None]


def parse_row(
    tokens: list[str], layout: Layout, shared: dict[str, int | str]
) -> tuple[ParsedRow | None, str | None]:
    """A row (its line number not set), or the problem: "partial" (fewer cells than the
    header) or a description.

    `shared` maps the key cells read so far (size, count, type, redop) to their one value: a
    log repeats the same few sizes and names in every run, and one object each, rather than one
    per row, keeps a parsed log near its text's size."""
    size = _shared_integer(tokens[0], shared)
    if size is None:
        return None, "size is not an integer"
    numbers: list[float | int] = [size, NONE_NUMBER, NONE_NUMBER, NONE_NUMBER]
    dtype = redop = timestamp = None
    at = 1
    needed = layout.cells + (2 if layout.timestamp else 0)
    for key in layout.keys[1:]:
        if at >= len(tokens):
            return None, "partial"
        token = tokens[at]
        if key == "count":
            count = _shared_integer(token, shared)
            if count is None:
                return None, f"count {quoted(token)} is not an integer"
            numbers[1] = count
            at += 1
        elif key == "dtype":
            if is_number(token):
                return None, f"type {quoted(token)} is a number"
            dtype = _shared_text(token, shared)
            at += 1
        elif key == "redop":
            if not is_number(token):  # alltoall in 2020-era builds prints a blank redop
                redop = _shared_text(token, shared)
                at += 1
        elif key == "root":
            remaining = len(tokens) - at
            root = integer(token)
            if root is not None and remaining != needed:
                numbers[2] = root
                at += 1
    cells = tokens[at:]
    if layout.timestamp and len(cells) >= needed and _is_timestamp(cells[-2:]):
        timestamp = " ".join(cells[-2:])
        cells = cells[:-2]
    if len(cells) < layout.cells:
        return None, "partial"
    if len(cells) > layout.cells:
        return None, f"{len(cells)} measurement cells where the header has {layout.cells}"
    per = len(layout.metrics)
    halves = []
    for index in range(len(layout.halves)):
        half, problem = _half(cells[index * per : (index + 1) * per], layout)
        if half is None:
            return None, problem
        halves.append(half)
    for index in layout.table[1]:
        numbers += halves[index]
    return ParsedRow(numbers, (dtype, redop, timestamp)), None


def _half(cells: list[str], layout: Layout) -> tuple[list[float | int] | None, str | None]:
    """HALF_NUMBERS and the extra columns of one half (None as NONE_NUMBER), or the problem."""
    values: Sequence[float | None]
    try:  # most cells are plain numbers: one pass of float() over them, _number on the others
        floats = list(map(float, cells))
        plain = math.isfinite(sum(floats))  # a NaN or an infinity makes the sum one
        values = floats
    except ValueError:
        values = [_number(cell) for cell in cells]
        plain = False
    if not plain:
        for name, cell, value in zip(layout.metrics, cells, values, strict=True):
            if value is None:
                if not _is_na(cell):
                    return None, f"{name} cell {quoted(cell)} is not a number"
            elif not math.isfinite(value) and name in CLASSIC_METRICS:
                return None, _unknown_result(name, cell)
    classic, extra = layout.places
    at = classic.get
    time = _at(values, at("time"))
    if time is not None and layout.time_scale != 1.0:
        time = round(time * layout.time_scale, 6)
    error, wrong = _at(values, at("error")), None
    if "wrong" in classic:
        printed = values[classic["wrong"]]
        if printed is not None and printed == int(printed):
            wrong = int(printed)
        else:  # a magnitude under a #wrong header: keep it, but it is no count
            error = printed
    numbers = [time, _at(values, at("algbw")), _at(values, at("busbw")), wrong, error]
    numbers += [values[index] for _, index in extra]
    return [NONE_NUMBER if value is None else value for value in numbers], None


class UnknownResult(str):
    """A row's problem that leaves its result unknown, not merely unread: an error of the
    output, never a row skipped while the others pass."""


def _unknown_result(name: str, cell: str) -> UnknownResult:
    """nccl-tests prints `nan`, `-nan` or `inf` (printf of a NaN or infinity) where a time was
    0 or a result broke: no measurement, and a #wrong or error so printed is no count of 0."""
    if name in ("wrong", "error"):
        printed = "#wrong" if name == "wrong" else name
        return UnknownResult(
            f"{printed} cell {quoted(cell)} is not a count: whether the results were right is "
            "unknown, never taken as 0 errors; row not recorded"
        )
    return UnknownResult(f"{name} cell {quoted(cell)} is not a measurement; row not recorded")


def _at(values: Sequence[float | None], index: int | None) -> float | None:
    return values[index] if index is not None else None


def _shared_integer(cell: str, shared: dict[str, int | str]) -> int | None:
    value = shared.get(cell)
    if type(value) is int:
        return value
    number = integer(cell)
    if number is not None:
        shared[cell] = number
    return number


def _shared_text(cell: str, shared: dict[str, int | str]) -> str:
    value = shared.get(cell)
    if type(value) is str:
        return value
    shared[cell] = cell
    return cell


def _number(cell: str) -> float | None:
    """parse_number with float() tried first: rows are most of a log, and most cells are plain."""
    try:
        return float(cell)
    except ValueError:
        return parse_number(cell.rstrip("*"))  # rccl marks errors over threshold with "*"


def integer(cell: str) -> int | None:
    try:
        return int(cell)
    except ValueError:
        return parse_int(cell)


def is_number(token: str) -> bool:
    return not token[:1].isalpha() and _number(token) is not None


def _is_na(token: str) -> bool:
    return token.upper() in ("N/A", "NA", "-", "NAN")


def _is_timestamp(cells: list[str]) -> bool:
    return len(cells) == 2 and cells[0].count("-") == 2 and cells[1].count(":") == 2


def is_continuation(tokens: list[str]) -> bool:
    """The rest of a row split by an interleaved line: numeric cells only."""
    return all(is_number(t.rstrip("*")) or _is_na(t) for t in tokens)


def looks_like_row(tokens: list[str]) -> bool:
    return len(tokens) >= 4 and parse_number(tokens[1]) is not None
