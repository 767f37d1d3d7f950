"""measurements.csv: the long table that notebooks read, every measured number as printed, one
row per size, matrix cell or pair try (the judge's measurement rows). Views only: nothing here
judges.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import pandas as pd

from gpuval.judgement.model import MeasurementRow

# src/dst: GPU indices of matrix cells; host_a/host_b/try: pair tests (metric "pair_<kind>";
# iperf3: sender, receiver).
MEASUREMENT_COLUMNS = [
    "host", "file", "tool", "run", "collective", "nranks", "size_bytes", "count", "dtype",
    "redop", "placement", "time_us", "algbw_gbps", "busbw_gbps", "wrong", "metric", "src", "dst",
    "value", "unit", "line", "host_a", "host_b", "try",
]  # fmt: skip
# The row's attribute of each column: "try" is `attempt`.
ROW_FIELDS = [("attempt" if c == "try" else c) for c in MEASUREMENT_COLUMNS]
# A row's cells in column order, read in one call (a thousand nodes have millions of rows).
_row_cells = attrgetter(*ROW_FIELDS)
INTEGER_COLUMNS = ("nranks", "size_bytes", "count", "wrong", "src", "dst", "line", "run", "try")


def measurements(rows: list[MeasurementRow]) -> pd.DataFrame:
    """The measurement rows in long format, exactly as printed (no averaging, no dropping); a
    cell without a value is missing (empty in the CSV)."""
    frame = pd.DataFrame.from_records(
        [_row_cells(row) for row in rows], columns=MEASUREMENT_COLUMNS
    )
    for column in INTEGER_COLUMNS:
        frame[column] = frame[column].astype("Int64")
    return frame


MEASUREMENTS_FILE = "measurements.csv"

# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, CSV injection):
# "=HYPERLINK(...)" as a host name would be live. Text cells that do get a leading "'", which
# the spreadsheet shows as the text as written; numbers (-3.5) stay numbers.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _inert_cell(value: Any) -> Any:
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every text cell that a spreadsheet would run as a formula made inert."""
    safe = frame.copy()
    for column in safe.columns:
        values = safe[column]
        if pd.api.types.is_numeric_dtype(values):
            continue
        # Each distinct text once (a column holds few: hosts, files, tools, units), then the
        # cells that hold one by hash: a Python call per cell was seconds at a thousand nodes.
        risky_texts = [
            text
            for text in values.unique()
            if isinstance(text, str) and text.startswith(FORMULA_STARTS)
        ]
        if risky_texts:
            risky = values.isin(risky_texts)
            safe.loc[risky, column] = values[risky].map(_inert_cell)
    return safe


def measurements_csv(rows: list[MeasurementRow]) -> str:
    """The content of measurements.csv, every text cell inert in a spreadsheet."""
    return str(spreadsheet_safe(measurements(rows)).to_csv(index=False))
