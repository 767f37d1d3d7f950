"""nvbandwidth parser: real text outputs of v0.6-v0.10, the -j JSON layout, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval.parsers import nvbandwidth
from gpuval.records.base import ParseResult
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs" / "nvbandwidth"
REAL_FILES = sorted(p for p in DATA.iterdir() if p.name != "README.md")


def parse(text: str) -> ParseResult:
    result = nvbandwidth.parse(text, source="test.txt")
    validate(result.to_dict(), "parse-result")
    return result


def parse_file(name: str) -> ParseResult:
    return parse((DATA / name).read_text())


def test_v08_matrix_with_na_diagonal_and_elided_running_line() -> None:
    result = parse_file("issue50-v0.8-6xA6000-d2d-read-elided.txt")
    assert not result.warnings and not result.errors
    (run,) = result.runs
    assert (run.version, run.git_version, run.cuda_runtime_version, run.driver_version) == (
        "v0.8",
        "v0.8",
        13000,
        "580.95.05",
    )
    (test,) = run.tests
    assert (test.name, test.status) == ("device_to_device_memcpy_read_ce", "passed")
    (matrix,) = test.matrices
    assert matrix.unit == "GB/s" and matrix.column_labels == ["0", "1", "2", "3", "4", "5"]
    assert matrix.values[0] == [None, 26.34, 26.35, 21.95, 22.64, 21.80]
    assert matrix.values[5][5] is None and len(matrix.values) == 6
    assert matrix.sum == 715.53


def test_v07_device_list_and_failed_test_without_matrix() -> None:
    result = parse_file("issue34-v0.7-8xA100-d2d-read-assert.txt")
    (run,) = result.runs
    assert len(run.devices) == 8
    last = run.devices[7]
    assert (last.index, last.name, last.pci_bus_id) == (
        7,
        "NVIDIA A100-SXM4-80GB",
        "00000000:9e:00",
    )
    (test,) = run.tests
    assert test.status == "error" and test.matrices == []
    assert test.error is not None and "Invalid value" in test.error
    assert [w.line for w in result.warnings] == [18]


def test_bare_waived_lines_and_a_matrix_without_sum() -> None:
    result = parse_file("superbench-pr669-v0.6-example-waived.txt")
    (run,) = result.runs
    assert run.git_version is None  # "Built from Git version:" printed empty
    assert [(t.name, t.status) for t in run.tests] == [
        ("host_to_device_memcpy_ce", "passed"),
        ("device_to_host_memcpy_ce", "passed"),
        (None, "waived"),
        (None, "waived"),
        (None, "waived"),
        ("host_to_device_bidirectional_memcpy_ce", "incomplete"),
        (None, "waived"),
    ]
    assert run.tests[1].matrices[0].values == [[295.23, 241.2, 254.0], [241.2, 295.2, 254.0]]
    assert [w.line for w in result.warnings] == [29]


def test_v010_coefficient_of_variation_and_no_header() -> None:
    result = parse_file("azure-nhc-v0.10-headerless-cv.txt")
    (run,) = result.runs
    assert run.version is None
    assert [
        (t.name, t.matrices[0].sum, t.matrices[0].coefficient_of_variation) for t in run.tests
    ] == [
        ("host_to_device_memcpy_ce", 51.97, 0.01),
        ("device_to_host_memcpy_ce", 51.97, 0.02),
        ("device_to_device_memcpy_read_ce", 552.26, 0.01),
    ]
    assert (
        run.tests[1].matrices[0].description == "memcpy CE GPU(row) -> CPU(column) bandwidth (GB/s)"
    )


def test_json_output_layout() -> None:
    result = parse_file("SYNTHETIC-v0.8-json-2gpu.json")
    (run,) = result.runs
    assert run.format == "json" and run.version == "v0.8" and run.cuda_runtime_version == 12040
    assert [(d.index, d.pci_bus_id, d.host) for d in run.devices] == [
        (0, "00000000:1b:00", "node-a"),
        (1, "00000000:43:00", "node-a"),
    ]
    assert [(t.name, t.status) for t in run.tests] == [
        ("host_to_device_memcpy_ce", "passed"),
        ("device_to_device_memcpy_read_ce", "passed"),
        ("host_to_device_memcpy_sm", "waived"),
        ("all_to_host_memcpy_ce", "error"),
    ]
    d2d = run.tests[1].matrices[0]
    assert d2d.values == [[None, 389.24], [389.51, None]] and d2d.sum == 778.75
    assert run.tests[3].error == "Test failed: CUDA_ERROR_OUT_OF_MEMORY"


def test_truncated_json_is_an_error_naming_the_line() -> None:
    result = parse_file("pr54-v0.8-multinode-json-truncated-excerpt.txt")
    assert result.runs == []
    assert result.errors[0].line == 9  # the annotation the poster typed into the document


def test_pre_v05_waiving_names_the_test() -> None:
    text = "nvbandwidth Version: v0.2\nWaiving host_to_device_memcpy_sm.\n\n"
    (run,) = parse(text).runs
    assert [(t.name, t.status) for t in run.tests] == [("host_to_device_memcpy_sm", "waived")]


BIDIRECTIONAL = """\
Running device_to_device_bidirectional_memcpy_read_ce.
memcpy CE GPU(row) <-> GPU(column) Read1 bandwidth (GB/s)
           0         1
 0       N/A    365.12
 1    365.40       N/A

SUM device_to_device_bidirectional_memcpy_read_ce_read1 730.52
memcpy CE GPU(row) <-> GPU(column) Read2 bandwidth (GB/s)
           0         1
 0       N/A    364.90
 1    365.01       N/A

SUM device_to_device_bidirectional_memcpy_read_ce_read2 729.91
memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)
           0         1
 0       N/A    730.02
 1    730.41       N/A

SUM device_to_device_bidirectional_memcpy_read_ce_total 1460.43
"""  # SYNTHETIC: descriptions from testcases_ce.cpp (v0.6+), values invented


def test_bidirectional_test_keeps_its_three_matrices() -> None:
    (run,) = parse(BIDIRECTIONAL).runs
    (test,) = run.tests
    assert test.status == "passed"
    assert [(m.sum_key, m.sum) for m in test.matrices] == [
        ("device_to_device_bidirectional_memcpy_read_ce_read1", 730.52),
        ("device_to_device_bidirectional_memcpy_read_ce_read2", 729.91),
        ("device_to_device_bidirectional_memcpy_read_ce_total", 1460.43),
    ]


def test_multinode_process_lines_are_devices() -> None:
    text = (
        "nvbandwidth Version: v0.7\nProcess 0 (node-a): device 0: NVIDIA GB200 (00000008:06:00)\n"
    )
    (run,) = parse(text).runs
    (device,) = run.devices
    assert (device.host, device.index, device.name) == ("node-a", 0, "NVIDIA GB200")


def test_short_row_is_warned_and_the_test_left_incomplete() -> None:
    cut = BIDIRECTIONAL.split(" 1    365.40")[0] + " 1    365.40"
    result = parse(cut)
    test = result.runs[0].tests[0]
    assert test.status == "incomplete"
    assert [w.line for w in result.warnings] == [5, 1]  # the short row, then the test
    assert test.matrices[0].values[1] == [365.40]


@pytest.mark.parametrize("text", ["", "Running x.\n", '{"nvbandwidth": 3}', "{broken"])
def test_bad_input_never_raises(text: str) -> None:
    result = parse(text)
    assert result.errors or result.warnings
