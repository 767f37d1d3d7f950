"""Records for nccl-tests / rccl-tests runs (schema: run-nccl-tests.schema.json).

Every number is kept as printed; a value the output does not show is None, never a guess.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from math import isnan
from typing import Any, overload

# The collectives nccl-tests and rccl-tests name in `# Collective test starting: X_perf`.
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
    "hypercube",
    "gather",
    "scatter",
)

# The `extra` of every half that has no extra columns: one shared empty mapping, where a dict
# per half was the largest part of a parsed log (two halves per row). Read-only by its type
# (Mapping); a plain dict so that the parse cache can pickle it (a MappingProxyType cannot be).
NO_EXTRA: Mapping[str, float | None] = {}


def _no_extra() -> Mapping[str, float | None]:
    return NO_EXTRA  # a factory: dataclasses refuse an unhashable default


@dataclass(slots=True)
class NcclHalf:
    """The out-of-place or the in-place half of one table row."""

    time_us: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    # Count of wrong elements (current builds); None where N/A or where only `error` is printed.
    wrong: int | None = None
    # Old builds print a maximum error magnitude (`0e+00`, `1e-06`) instead of a count.
    error: float | None = None
    # Columns beyond the classic four (`-I 1` per-iteration statistics: i_min, i_max, ...).
    extra: Mapping[str, float | None] = field(default_factory=_no_extra)


@dataclass(slots=True)
class NcclRow:
    size_bytes: int
    count: int | None = None
    dtype: str | None = None
    redop: str | None = None
    root: int | None = None
    out_of_place: NcclHalf | None = None
    in_place: NcclHalf | None = None
    # `-S 1` appends the wall-clock time the row was printed.
    timestamp: str | None = None
    line: int | None = None


HALVES = ("out_of_place", "in_place")
# The numbers of a row, in the order a table stores them; then, per half it has, HALF_NUMBERS
# and its extra columns.
ROW_NUMBERS = ("size_bytes", "count", "root", "line")
HALF_NUMBERS = ("time_us", "algbw_gbps", "busbw_gbps", "wrong", "error")
ROW_TEXTS = ("dtype", "redop", "timestamp")
# None in a table of numbers: a NaN no parser makes (float("nan") has no payload).
_NONE_BITS = struct.pack("<Q", 0x7FF8_4E6F_6E65_0000)
NONE_NUMBER: float = struct.unpack("<d", _NONE_BITS)[0]
# Integers a double holds exactly.
_EXACT = 2**53


class _Misfit(Exception):
    """A row that a table's numbers would not give back as it is."""


@dataclass(frozen=True, slots=True)
class NcclTableLayout:
    """What every row of a table has: its halves and their extra columns (one object for
    every table alike, see NcclTable.append)."""

    halves: tuple[str, ...]
    extra: tuple[str, ...]
    # The numbers each row stores: worked out once, read for every row and column of a table.
    width: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        width = len(ROW_NUMBERS) + len(self.halves) * (len(HALF_NUMBERS) + len(self.extra))
        object.__setattr__(self, "width", width)


_LAYOUTS: dict[tuple[tuple[str, ...], tuple[str, ...]], NcclTableLayout] = {}


def table_layout(halves: tuple[str, ...], extra: tuple[str, ...]) -> NcclTableLayout:
    """The one layout object of these halves (in HALVES order) and extra columns."""
    layout = _LAYOUTS.get((halves, extra))
    if layout is None:
        layout = _LAYOUTS[(halves, extra)] = NcclTableLayout(halves, extra)
    return layout


def _layout_of(row: NcclRow) -> NcclTableLayout:
    halves = tuple(name for name in HALVES if getattr(row, name) is not None)
    first = getattr(row, halves[0]) if halves else None
    return table_layout(halves, tuple(first.extra) if first is not None else ())


def _stored_int(value: int | None) -> float:
    if value is None:
        return NONE_NUMBER
    if type(value) is int and -_EXACT <= value <= _EXACT:
        return float(value)
    raise _Misfit


def _stored_float(value: float | None) -> float:
    if value is None:
        return NONE_NUMBER
    if type(value) is float and (value == value or struct.pack("<d", value) != _NONE_BITS):
        return value
    raise _Misfit


def _stored_text(value: str | None) -> str | None:
    if value is None or type(value) is str:
        return value
    raise _Misfit


def _read_float(value: float | int) -> float | None:
    if value == value or struct.pack("<d", value) != _NONE_BITS:
        return value
    return None


def _read_int(value: float | int) -> int | None:
    return int(value) if value == value else None  # the only NaN of an integer column is None


@dataclass(slots=True, eq=False, repr=False)
class NcclTable(Sequence["NcclRow"]):
    """The rows of a run's table, stored as numbers: a row object per row and a half object
    per half weighed four times the text of a log of many short runs. Reads as the sequence of
    its rows (NcclRow, made on demand: changing one changes nothing here); `column` reads one
    field of every row at once. A row whose values the numbers would not give back exactly
    (an integer beyond 2**53, an int where a float belongs, halves or extra columns that
    differ from the first row's) makes the table keep its rows as they are."""

    layout: NcclTableLayout | None = None
    # Row after row: ROW_NUMBERS, then per half of the layout HALF_NUMBERS and its extra.
    numbers: array[float] = field(default_factory=lambda: array("d"))
    texts: list[str | None] = field(default_factory=list)  # ROW_TEXTS of each row
    kept: list[NcclRow] | None = None  # the rows as they are, when the numbers cannot hold them

    @classmethod
    def of(cls, rows: Iterable[NcclRow]) -> NcclTable:
        table = cls()
        for row in rows:
            table.append(row)
        return table

    def append(self, row: NcclRow) -> None:
        if self.kept is None:
            layout = self.layout or _layout_of(row)
            try:
                numbers = _row_numbers(row, layout)
                texts = (_stored_text(row.dtype), _stored_text(row.redop),
                         _stored_text(row.timestamp))  # fmt: skip
            except _Misfit:
                self.kept = list(self)
                self.layout, self.numbers, self.texts = None, array("d"), []
            else:
                self.layout = layout
                self.numbers.extend(numbers)
                self.texts += texts
                return
        self.kept.append(row)

    def append_numbers(
        self,
        numbers: list[float | int],
        texts: tuple[str | None, str | None, str | None],
        layout: NcclTableLayout,
    ) -> None:
        """A row given as the numbers (None as NONE_NUMBER) and texts it is stored as, of a
        parser that reads cells straight into them: a row object made to be taken apart cost
        a fifth of the time of a log of many runs."""
        size, count, root = numbers[:3]
        exact = all(type(n) is float or -_EXACT <= n <= _EXACT for n in (size, count, root))
        if self.kept is None and self.layout in (None, layout) and exact:
            self.layout = layout
            self.numbers.extend(numbers)
            self.texts += texts
        else:  # `numbers` holds the integers as printed: the row is made exactly
            self.append(_row(numbers, texts, layout))

    def __len__(self) -> int:
        if self.kept is not None:
            return len(self.kept)
        return len(self.numbers) // self.layout.width if self.layout is not None else 0

    @overload
    def __getitem__(self, index: int) -> NcclRow: ...
    @overload
    def __getitem__(self, index: slice) -> list[NcclRow]: ...
    def __getitem__(self, index: int | slice) -> NcclRow | list[NcclRow]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if self.kept is not None:
            return self.kept[index]
        count = len(self)
        if not -count <= index < count:
            raise IndexError("table row index out of range")
        index %= count
        assert self.layout is not None  # a table with rows has its layout
        width = self.layout.width
        texts = self.texts[index * 3 : index * 3 + 3]
        return _row(self.numbers[index * width : (index + 1) * width], texts, self.layout)

    def __iter__(self) -> Iterator[NcclRow]:
        if self.kept is not None:
            yield from self.kept
            return
        layout = self.layout
        if layout is None:
            return
        numbers, texts, width = self.numbers, self.texts, layout.width
        for at in range(len(self)):
            yield _row(numbers[at * width : (at + 1) * width], texts[at * 3 : at * 3 + 3], layout)

    def column(self, name: str, half: str | None = None) -> list[Any]:
        """One field of every row: a name of ROW_NUMBERS or ROW_TEXTS, or with `half`
        ("out_of_place", "in_place") one of HALF_NUMBERS or an extra column; None where a row
        does not show it."""
        if self.kept is not None or self.layout is None:
            rows = self.kept or []
            if half is None:
                return [getattr(row, name) for row in rows]
            halves = [getattr(row, half) for row in rows]
            return [_half_field(h, name) if h is not None else None for h in halves]
        layout, count = self.layout, len(self)
        if half is None and name in ROW_TEXTS:
            return self.texts[ROW_TEXTS.index(name) :: 3]
        offset = _offset(layout, name, half)
        if offset is None:
            return [None] * count
        cells = self.numbers[offset :: layout.width]
        # A column without NaN (most are: NaN stands for None, or a printed nan) is read in C.
        if not any(map(isnan, cells)):
            return list(map(int, cells)) if name in ROW_NUMBERS or name == "wrong" else list(cells)
        if name in ROW_NUMBERS or name == "wrong":
            return [_read_int(cell) for cell in cells]
        return [_read_float(cell) for cell in cells]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as the list it replaces

    def __repr__(self) -> str:
        return f"NcclTable({list(self)!r})"

    def __getstate__(self) -> tuple[Any, ...]:
        # The numbers as bytes: the parse cache builds nothing but records and plain values.
        return (self.layout, self.numbers.tobytes(), tuple(self.texts), self.kept)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        layout, numbers, texts, kept = state
        if layout is not None:  # the one object of its kind, as every table made here shares
            halves, extra = layout.halves, layout.extra
            if not set(halves) <= set(HALVES) or not all(type(e) is str for e in extra):
                raise ValueError("nccl-tests table of unknown columns")
            layout = table_layout(tuple(halves), tuple(extra))
        self.layout, self.numbers, self.texts, self.kept = layout, array("d"), list(texts), kept
        self.numbers.frombytes(numbers)
        width = layout.width if layout is not None else 0
        rows = len(self.numbers) // width if width else 0
        if len(self.numbers) != rows * width or len(self.texts) != rows * 3:
            raise ValueError("nccl-tests table of inconsistent sizes")


def _row_numbers(row: NcclRow, layout: NcclTableLayout) -> list[float]:
    numbers = [_stored_int(row.size_bytes), _stored_int(row.count), _stored_int(row.root),
               _stored_int(row.line)]  # fmt: skip
    for name in HALVES:
        half: NcclHalf | None = getattr(row, name)
        if (half is None) != (name not in layout.halves):
            raise _Misfit
        if half is None:
            continue
        if tuple(half.extra) != layout.extra:
            raise _Misfit
        numbers += (_stored_float(half.time_us), _stored_float(half.algbw_gbps),
                    _stored_float(half.busbw_gbps), _stored_int(half.wrong),
                    _stored_float(half.error))  # fmt: skip
        numbers += map(_stored_float, half.extra.values())
    return numbers


def _row(
    numbers: Sequence[float | int], texts: Sequence[str | None], layout: NcclTableLayout
) -> NcclRow:
    size, count, root, line = numbers[:4]
    row = NcclRow(int(size), _read_int(count), texts[0], texts[1], _read_int(root),
                  timestamp=texts[2], line=_read_int(line))  # fmt: skip
    at, extra = 4, layout.extra
    for name in layout.halves:
        time, algbw, busbw, wrong, error = numbers[at : at + 5]
        half = NcclHalf(_read_float(time), _read_float(algbw), _read_float(busbw),
                        _read_int(wrong), _read_float(error))  # fmt: skip
        if extra:
            half.extra = dict(zip(extra, map(_read_float, numbers[at + 5 : at + 5 + len(extra)]),
                                  strict=True))  # fmt: skip
        setattr(row, name, half)
        at += 5 + len(extra)
    return row


def _offset(layout: NcclTableLayout, name: str, half: str | None) -> int | None:
    if half is None:
        return ROW_NUMBERS.index(name) if name in ROW_NUMBERS else None
    if half not in layout.halves:
        return None
    start = len(ROW_NUMBERS) + layout.halves.index(half) * (len(HALF_NUMBERS) + len(layout.extra))
    if name in HALF_NUMBERS:
        return start + HALF_NUMBERS.index(name)
    if name in layout.extra:
        return start + len(HALF_NUMBERS) + layout.extra.index(name)
    return None


def _half_field(half: NcclHalf, name: str) -> Any:
    return getattr(half, name) if name in HALF_NUMBERS else half.extra.get(name)


@dataclass(slots=True)
class NcclDevice:
    rank: int
    group: int | None = None
    pid: int | None = None
    host: str | None = None
    device: int | None = None
    pci_bus: str | None = None
    name: str | None = None


@dataclass(slots=True)
class NcclFailure:
    """`HOST: Test NCCL failure common.cu:1204 'msg'` and kin; `line`: the source line named."""

    host: str | None
    kind: str  # "nccl" | "cuda" | "other"
    file: str | None
    line: int | None
    message: str
    pid: int | None = None
    # ` .. HOST pid N: Test failure common.cu:915` lines that propagated this failure.
    trace: list[str] = field(default_factory=list)
    log_line: int | None = None


@dataclass(slots=True)
class NcclWarning:
    """One `NCCL WARN` line of NCCL_DEBUG output."""

    host: str | None
    message: str
    log_line: int


@dataclass(slots=True)
class NcclFailedLine:
    """A line of the text output that says FAILED, as printed (launcher prefix removed):
    `# Out of bounds values : 3 FAILED`, `# Avg bus bandwidth : 0 FAILED` (the
    NCCL_TESTS_MIN_BW check), `# Bitwise mismatches : 2 FAILED` (builds with `-B`)."""

    text: str
    line: int


@dataclass(slots=True)
class NcclOutOfBounds:
    count: int
    ok: bool


# The one empty mapping of every parsed run that has none: a dict, so that it pickles into the
# parse cache (as one object), read-only by its type.
NO_MAPPING: Mapping[str, Any] = {}


@dataclass(slots=True)
class NcclRun:
    """One run of one nccl-tests / rccl-tests binary, as far as the output shows it."""

    collective: str | None = None
    collective_inferred: bool = False
    program: str | None = None
    command: str | None = None
    nranks: int | None = None
    complete: bool = False
    rows: NcclTable = field(default_factory=NcclTable)
    avg_busbw_gbps: float | None = None
    avg_busbw_check: str | None = None
    out_of_bounds: NcclOutOfBounds | None = None
    devices: list[NcclDevice] = field(default_factory=list)
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    runtime_versions: dict[str, str] = field(default_factory=dict)
    header: dict[str, int | str | bool] = field(default_factory=dict)
    # Tuples: the runs of a log that print the same column header share them.
    columns: tuple[str, ...] = ()
    extra_columns: tuple[str, ...] = ()
    time_column: str = "time"
    # Read-only once parsed and empty in most runs of a long log: as tuples, and the mappings
    # as NO_MAPPING when empty, such a run's cost nothing.
    hosts: tuple[str, ...] = ()
    nccl_versions_by_host: Mapping[str, str] = field(default_factory=dict)
    transports: tuple[str, ...] = ()
    # What `Channel ... via X` lines named (the data's paths), and whether NCCL said the run
    # used multi-node NVLink (None: not said); both from NCCL_DEBUG=INFO.
    channel_transports: tuple[str, ...] = ()
    mnnvl: bool | None = None
    # Per host, the HCA ports (`mlx5_0:1`) its NCCL listed in `NET/IB : Using` (NCCL_DEBUG=INFO)
    ib_hcas_by_host: Mapping[str, list[str]] = field(default_factory=dict)
    algorithms: tuple[str, ...] = ()
    nccl_warnings: list[NcclWarning] = field(default_factory=list)
    failures: list[NcclFailure] = field(default_factory=list)
    # Every line that says FAILED (text output; a -J report's verdicts are out_of_bounds.ok
    # and avg_busbw_check).
    failed_lines: list[NcclFailedLine] = field(default_factory=list)
    json_output: str | None = None
    start_line: int | None = None
    end_line: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rows, NcclTable):  # a list of rows (tests, dataclasses.replace)
            self.rows = NcclTable.of(self.rows)
