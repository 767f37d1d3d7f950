"""nccl-tests rows whose result cells print as `nan`, `-nan` or `inf`.

The truth, from NVIDIA/nccl-tests src/common.cu (https://github.com/NVIDIA/nccl-tests/blob/master/
src/common.cu, BenchTime and Reporter::result): algbw and busbw are printed with `%6.2f` from a
division by the measured time, the middle era's `error` column with `%5.0le` from the largest
difference found, #wrong with `%5g`/`%5li`; glibc's printf writes a NaN as `nan` or `-nan` and
an infinity as `inf`; nccl-tests' own check of that era (`maxDelta > deltaMaxValue(...)`) is
false for a NaN, so it counts no error. Such a cell is no measurement and no count: a #wrong
that is not a number is not 0 errors, so the row is never taken as a correct result; the parser
reports an error on the file and line (a failed `parse.error` check, a failed pair try), never
a crash.

DERIVED data: the real output nccl-tests-issue287-rtx5090-single-rank.txt
(https://github.com/NVIDIA/nccl-tests/issues/287) with one cell of its 32-byte row (line 12)
replaced, right-aligned to the printed width, as `_with_cell` names it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.run_folders import write_run_json, write_step

from gpuval.checks import judge_run
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.parsers.nccl_tests import parse
from gpuval.runfolder import read_run_folder

REAL = (
    Path(__file__).parents[1]
    / "data/outputs/nccl-tests/nccl-tests-issue287-rtx5090-single-rank.txt"
).read_text()
ROW = "          32             8     float     sum      -1     5.30    0.01    0.00      0"
LINE = 12  # the line of ROW in REAL
COLUMNS = ("time", "algbw", "busbw", "#wrong")  # the out-of-place half: cells 6 to 9 of ROW


def _with_cell(column: str, printed: str) -> str:
    """REAL with the out-of-place `column` cell of line 12 printed as `printed`, right-aligned
    where the printed cell ends (printf pads on the left)."""
    cell = list(re.finditer(r"\S+", ROW))[5 + COLUMNS.index(column)]
    start = min(cell.start(), cell.end() - len(printed))
    edited = ROW[:start] + printed.rjust(cell.end() - start) + ROW[cell.end() :]
    assert REAL.count(ROW) == 1 and len(edited.split()) == len(ROW.split())
    return REAL.replace(ROW, edited)


@pytest.mark.parametrize("printed", ["nan", "-nan", "inf"])
def test_a_wrong_count_that_is_not_a_number_is_an_error_on_its_line(printed: str) -> None:
    result = parse(_with_cell("#wrong", printed), "raw/n1/ar.txt")
    assert [(d.line, "#wrong" in d.message, printed in d.message) for d in result.errors] == [
        (LINE, True, True)
    ]
    (run,) = result.runs
    assert 32 not in run.rows.column("size_bytes")  # never a row with 0 errors


@pytest.mark.parametrize(
    ("column", "printed"),
    [("busbw", "nan"), ("busbw", "-nan"), ("algbw", "inf"), ("time", "nan")],
)
def test_a_bandwidth_or_time_that_is_not_a_number_is_no_measurement(
    column: str, printed: str
) -> None:
    result = parse(_with_cell(column, printed), "raw/n1/ar.txt")
    assert [(d.line, column in d.message) for d in result.errors] == [(LINE, True)]
    (run,) = result.runs
    assert 32 not in run.rows.column("size_bytes")


def test_the_middle_era_error_magnitude_printed_as_nan_is_an_error() -> None:
    header = "#       size         count      type   redop     time   algbw   busbw  error"
    header += "     time   algbw   busbw  error"
    row = "        1024           256     float     sum    10.00    0.10    0.10   -nan"
    row += "    10.00    0.10    0.10  0e+00"
    result = parse(f"{header}\n{row}\n# Out of bounds values : 0 OK\n")
    assert [(d.line, "error" in d.message) for d in result.errors] == [(2, True)]


def test_a_run_with_a_nan_wrong_count_fails_naming_the_file_and_line(tmp_path: Path) -> None:
    write_run_json(tmp_path, "r", ["n1"])
    write_step(tmp_path, "n1", "nccl-all_reduce", _with_cell("#wrong", "-nan"), tool="nccl-tests")
    checks = judge_run(build_evidence(read_run_folder(tmp_path)), DEFAULTS).checks
    errors = [c for c in checks if c.check_id == "parse.error"]
    assert [(c.status, c.source) for c in errors] == [
        ("fail", f"raw/n1/nccl-all_reduce.txt:{LINE}")
    ]
    assert not any("crashed" in c.reason for c in checks)
