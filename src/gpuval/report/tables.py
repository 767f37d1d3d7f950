"""measurements.csv: the long table that notebooks read, every measured number as printed, one
row per size, matrix cell or pair try (the judge's measurement rows). Views only: nothing here
judges.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence

from gpuval.judgement.model import Cell, Measurements

# src/dst: GPU indices of matrix cells; host_a/host_b/try: pair tests (metric "pair_<kind>";
# iperf3: sender, receiver).
MEASUREMENT_COLUMNS = [
    "host", "file", "tool", "run", "collective", "nranks", "size_bytes", "count", "dtype",
    "redop", "placement", "time_us", "algbw_gbps", "busbw_gbps", "wrong", "metric", "src", "dst",
    "value", "unit", "line", "host_a", "host_b", "try",
]  # fmt: skip
# The row's attribute of each column: "try" is `attempt`.
ROW_FIELDS = [("attempt" if c == "try" else c) for c in MEASUREMENT_COLUMNS]
INTEGER_COLUMNS = frozenset(
    {"nranks", "size_bytes", "count", "wrong", "src", "dst", "line", "run", "try"}
)


MEASUREMENTS_FILE = "measurements.csv"

# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, CSV injection):
# "=HYPERLINK(...)" as a host name would be live. Text cells that do get a leading "'", which
# the spreadsheet shows as the text as written; numbers (-3.5) stay numbers.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _inert_cell(value: Cell) -> Cell:
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def column_cells(values: Sequence[Cell], integers: bool = False) -> Sequence[Cell]:
    """One column's cells as measurements.csv writes them (None and NaN: an empty cell): an
    integer column's numbers as integers (2**40, never 1.099511627776e+12); a column of numbers
    alone as floats when any is missing or fractional, else as integers, so a column is one type;
    text that a spreadsheet would run as a formula made inert (other text, and numbers among
    text, as they are). The cells' types are looked at once per column and a column that needs
    nothing is passed on as it is: a thousand nodes have millions of cells."""
    kinds = set(map(type, values))
    if float in kinds:
        values = [None if v != v else v for v in values]  # NaN: missing
    numbers = kinds - {type(None)}
    if integers:
        return values if numbers <= {int} else [None if v is None else int(v) for v in values]
    if numbers and numbers <= {int, float}:
        if int not in numbers or kinds == {int}:
            return values
        return [None if v is None else float(v) for v in values]
    # Each distinct risky text once (a column holds few: hosts, files, tools, units).
    inert = {
        text: _inert_cell(text)
        for text in set(values)
        if isinstance(text, str) and text.startswith(FORMULA_STARTS)
    }
    return [inert.get(v, v) if isinstance(v, str) else v for v in values] if inert else values


# The one-field rows that `_field_text` writes its cells into.
_FIELD = io.StringIO()
_FIELD_WRITER = csv.writer(_FIELD, lineterminator="\n")


def _field_text(value: Cell) -> str:
    """`value` as csv.writer writes it as a field of a row (quoted only when it must be)."""
    _FIELD.seek(0)
    _FIELD.truncate()
    _FIELD_WRITER.writerow((value, None))  # two fields: a lone empty one is written '""'
    return _FIELD.getvalue()[:-2]


_NONE_TEXT: dict[Cell, str] = {None: ""}


def column_texts(cells: Sequence[Cell]) -> Iterator[str]:
    """One column's cells (from `column_cells`) as the text csv.writer writes for them, each
    distinct text or integer written once (a column holds few: hosts, files, sizes, lines);
    floats each with repr, as csv.writer does (-0.0 equals 0.0, so they are not shared). Made
    as they are read: a thousand nodes' columns of text would be 100 MB more at the peak."""
    kinds = set(map(type, cells))
    if kinds <= {str, int, type(None)} and not {str, int} <= kinds:
        written = {value: _field_text(value) for value in set(cells)}
        return map(written.__getitem__, cells)
    if kinds <= {float, type(None)}:
        # repr of every cell, "" in place of a None's: C loops alone, no Python call per cell
        return map(_NONE_TEXT.get, cells, map(repr, cells))
    return map(_field_text, cells)


def measurements_csv(measurements: Measurements) -> str:
    """The content of measurements.csv: the measurement rows in long format, exactly as printed
    (no averaging, no dropping), every text cell inert in a spreadsheet; what csv.writer writes
    (None: an empty cell; a float: its repr), put together column by column."""
    texts = [
        column_texts(column_cells(measurements.columns[field], name in INTEGER_COLUMNS))
        for name, field in zip(MEASUREMENT_COLUMNS, ROW_FIELDS, strict=True)
    ]
    out = io.StringIO()
    out.write(",".join(MEASUREMENT_COLUMNS) + "\n")
    # line by line into the buffer (a list of a million lines would be 100 MB more at the
    # peak), each ended by its last cell
    texts[-1] = map("{}\n".format, texts[-1])
    out.writelines(map(",".join, zip(*texts, strict=True)))
    return out.getvalue()
