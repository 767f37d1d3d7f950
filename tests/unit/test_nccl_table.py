"""nccl-tests tables stored as numbers (NcclTable): every row reads back as it was given, None,
NaN and infinities included; a row the numbers would not give back exactly is kept as it is."""

from __future__ import annotations

import json
import math
import pickle

import pytest

from gpuval.parsers.nccl_tests import parse
from gpuval.records.base import to_jsonable
from gpuval.records.nccl import NcclHalf, NcclRow, NcclRun, NcclTable


def _rows() -> list[NcclRow]:
    return [
        NcclRow(8, 2, "float", "sum", -1, NcclHalf(1.5, 0.0, None, 0, None),
                NcclHalf(float("nan"), float("inf"), -0.0, None, 1e-06), line=12),
        NcclRow(2**40, None, None, None, None, NcclHalf(None, None, None, None, None),
                NcclHalf(3.0, 4.0, 5.0, 7, None), "2026-11-26 12:00:00", 13),
    ]  # fmt: skip


def _same(a: object, b: object) -> bool:
    """Equal, a NaN equal to a NaN."""
    return json.dumps(to_jsonable(a)) == json.dumps(to_jsonable(b))


def test_rows_read_back_as_given() -> None:
    rows = _rows()
    table = NcclTable.of(rows)
    assert table.kept is None and len(table) == 2
    assert _same(list(table), rows) and _same(table[-1], rows[1]) and _same(table[:1], rows[:1])
    assert table[1] == rows[1] and table[0].in_place is not None
    assert math.isnan(table[0].in_place.time_us or 0.0) and table[0].out_of_place.busbw_gbps is None
    with pytest.raises(IndexError):
        table[2]


def test_a_table_is_written_as_the_list_of_its_rows() -> None:
    rows = _rows()
    assert json.dumps(to_jsonable(NcclRun(rows=rows))["rows"]) == json.dumps(to_jsonable(rows))


def test_columns_read_one_field_of_every_row() -> None:
    table = NcclTable.of(_rows())
    assert table.column("size_bytes") == [8, 2**40]
    assert table.column("count") == [2, None]
    assert table.column("dtype") == ["float", None]
    assert table.column("wrong", "in_place") == [None, 7]
    assert table.column("busbw_gbps", "out_of_place") == [None, None]
    assert table.column("i_min", "in_place") == [None, None]  # no such column


@pytest.mark.parametrize(
    "odd",
    [
        NcclRow(2**53 + 1, out_of_place=NcclHalf(1.0)),  # beyond what a double holds exactly
        NcclRow(8, out_of_place=NcclHalf(5)),  # an int where a float belongs (JSON reports)
        NcclRow(8),  # halves other than the first row's
        NcclRow(8, out_of_place=NcclHalf(1.0, extra={"i_min": 1.0})),  # other extra columns
    ],
)
def test_a_row_the_numbers_cannot_hold_makes_the_table_keep_its_rows(odd: NcclRow) -> None:
    rows = [NcclRow(4, out_of_place=NcclHalf(2.0)), odd]
    table = NcclTable.of(rows)
    assert table.kept == rows and list(table) == rows
    assert table.column("size_bytes") == [4, odd.size_bytes]


def test_a_table_equals_the_list_of_its_rows_and_pickles() -> None:
    rows = [NcclRow(8, out_of_place=NcclHalf(1.0, extra={"i_min": None})), NcclRow(16)]
    table = NcclTable.of(rows[:1])
    assert table == rows[:1] and table != rows and NcclRun(rows=[]).rows == []
    again = pickle.loads(pickle.dumps(table))
    assert again == table and again.layout is table.layout


def test_a_parsed_log_stores_numbers_with_its_rows_as_printed() -> None:
    text = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "           8             2     float     sum      -1    10.50    0.00    0.00    N/A"
        "    10.37    0.00    0.00      0\n"
        "99999999999999999999     2     float     sum      -1    10.50    0.00    0.00      0"
        "    10.37    0.00    0.00      0\n"
    )
    run = parse(text).runs[0]
    assert run.rows.kept is not None  # the second size is beyond a double's integers
    assert [r.size_bytes for r in run.rows] == [8, 99999999999999999999]
    first = parse(text.rsplit("\n", 2)[0] + "\n").runs[0].rows
    assert first.kept is None and first[0].out_of_place.wrong is None and first[0].line == 2
