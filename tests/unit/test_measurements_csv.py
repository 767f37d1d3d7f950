"""measurements.csv: every measurement row's cells as printed, empty where a row has no value,
text a spreadsheet would run made inert."""

from __future__ import annotations

import csv
import io

from gpuval.evidence import ParsedFile
from gpuval.judgement.measurements import measurement_rows
from gpuval.judgement.model import MeasurementRow, Measurements
from gpuval.judgement.series import ToolRun
from gpuval.records.nccl import NcclHalf, NcclRow, NcclRun
from gpuval.report.tables import MEASUREMENT_COLUMNS, column_cells, measurements_csv


def _table(rows: list[MeasurementRow]) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(measurements_csv(Measurements.of(rows)))))


def test_cells_as_printed_and_empty_where_a_row_has_none():
    rows = [
        MeasurementRow("n1", "raw/n1/nccl.txt", "nccl-tests", run=0, size_bytes=2**40,
                       placement="out_of_place", busbw_gbps=187.5, wrong=0, line=12),
        MeasurementRow("n1", "raw/n1/p2p.txt", "p2pBandwidthLatencyTest", run=0,
                       metric="latency_gpu", src=0, dst=1, value=2.5, unit="us"),
    ]  # fmt: skip
    table = _table(rows)
    assert list(table[0]) == MEASUREMENT_COLUMNS
    assert table[0]["size_bytes"] == "1099511627776"  # an integer, not 1.099511627776e+12
    assert (table[0]["busbw_gbps"], table[0]["wrong"], table[0]["line"]) == ("187.5", "0", "12")
    assert (table[1]["src"], table[1]["dst"], table[1]["value"]) == ("0", "1", "2.5")
    # host_a, host_b, try: no row has one; time_us, value: one row has none
    assert {table[0][c] for c in ("host_a", "host_b", "try", "value", "time_us")} == {""}
    assert table[1]["busbw_gbps"] == ""


def test_no_rows_is_the_header_alone():
    assert measurements_csv(Measurements()).splitlines() == [",".join(MEASUREMENT_COLUMNS)]


def test_formula_text_is_made_inert_in_a_column_of_numbers_and_text():
    column = ["=x", 1.5, None, "=x", 2, "-2", "a", True, "+1e3"]
    assert list(column_cells(column)) == [
        "'=x", 1.5, None, "'=x", 2, "-2", "a", True, "+1e3",
    ]  # fmt: skip


def test_a_column_of_numbers_is_one_type_and_a_missing_number_an_empty_cell():
    assert list(column_cells([1, 2])) == [1, 2]
    assert list(column_cells([1, None, 2.5])) == [1.0, None, 2.5]  # "1.0", "", "2.5"
    assert list(column_cells([1.5, float("nan")])) == [1.5, None]
    assert list(column_cells([3.0, None, 2**40], integers=True)) == [3, None, 2**40]
    assert list(column_cells([None, None])) == [None, None]


def test_a_formula_in_a_row_s_text_is_inert_in_the_file():
    rows = [
        MeasurementRow("=HYPERLINK(1)", "raw/x", "iperf3", metric="pair_tcp", value=-3.5,
                       host_a="@a", host_b="node2", unit="Gbit/s"),
    ]  # fmt: skip
    row = _table(rows)[0]
    assert (row["host"], row["host_a"], row["host_b"]) == ("'=HYPERLINK(1)", "'@a", "node2")
    assert row["value"] == "-3.5"


def _nccl_run(rows: list[NcclRow]) -> ToolRun:
    file = ParsedFile("n1", "raw/n1/nccl.txt", "nccl", "nccl-tests")
    return ToolRun(file, NcclRun(collective="all_reduce", nranks=8, rows=rows), 0)


def _row(size: int, *halves: NcclHalf | None) -> NcclRow:
    return NcclRow(size, count=size // 4, dtype="float", redop="sum", out_of_place=halves[0],
                   in_place=halves[1] if len(halves) > 1 else None, line=size % 97)  # fmt: skip


def _expected(size: int, placement: str, half: NcclHalf) -> MeasurementRow:
    return MeasurementRow(
        "n1", "raw/n1/nccl.txt", "nccl-tests", 0, collective="all_reduce", nranks=8,
        size_bytes=size, count=size // 4, dtype="float", redop="sum", placement=placement,
        time_us=half.time_us, algbw_gbps=half.algbw_gbps, busbw_gbps=half.busbw_gbps,
        wrong=half.wrong, line=size % 97,
    )  # fmt: skip


def test_an_nccl_table_gives_a_row_per_half_it_shows_out_of_place_first():
    a, b = NcclHalf(10.5, 0.1, 0.2, 0), NcclHalf(11.0, 0.09, 0.18, None)
    stored = [_row(1024, a, b), _row(2048, b, a)]  # kept as numbers: every row both halves
    table = _nccl_run(stored).record.rows
    assert table.kept is None
    assert list(measurement_rows([_nccl_run(stored)], [], []).rows()) == [
        _expected(1024, "out_of_place", a), _expected(1024, "in_place", b),
        _expected(2048, "out_of_place", b), _expected(2048, "in_place", a),
    ]  # fmt: skip


def test_a_table_kept_as_rows_gives_the_halves_each_row_shows():
    a, b = NcclHalf(10.5, 0.1, 0.2, 0), NcclHalf(11.0, 0.09, 0.18, 3)
    huge = 2**60  # beyond a double's exact integers: the table keeps its rows as they are
    kept = [_row(huge, a, b), _row(4096, None, a), _row(8192, b)]
    assert _nccl_run(kept).record.rows.kept is not None
    found = list(measurement_rows([_nccl_run(kept)], [], []).rows())
    assert found == [
        _expected(huge, "out_of_place", a), _expected(huge, "in_place", b),
        _expected(4096, "in_place", a), _expected(8192, "out_of_place", b),
    ]  # fmt: skip
