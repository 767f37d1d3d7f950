"""ib_write_bw (perftest) text parser: published outputs (tests/data/outputs/ib_write_bw), the
MB/sec unit, failures and cut copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval import parsers
from gpuval.parsers import perftest
from gpuval.records.base import ParseResult
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs" / "ib_write_bw"


def parse(name: str) -> ParseResult:
    result = perftest.parse((DATA / name).read_text(), source=name)
    validate(result.to_dict(), "parse-result")
    return result


def test_duration_run_with_post_list_header() -> None:
    result = parse("perftest-issue273-postlist-duration-gbits.txt")
    assert not result.errors and not result.warnings
    (run,) = result.runs
    assert (run.test, run.device, run.qps, run.transport, run.link_type, run.gid_index) == (
        "RDMA_Write Post List BW Test", "ib0", 1, "IB", "Ethernet", 2,
    )  # fmt: skip
    assert (run.bidirectional, run.cuda_device, run.unit) == (False, None, "Gb/sec")
    (row,) = run.rows
    assert (row.size_bytes, row.iterations, row.peak_gbit, row.average_gbit) == (
        8, 224958464, 0.0, 0.48,
    )  # fmt: skip
    assert (row.msg_rate_mpps, row.line) == (7.498617, 18)


def test_use_cuda_sweep_keeps_every_size_and_names_the_gpu() -> None:
    result = parse("k8s-a100-use-cuda-sweep-2qps-client.txt")
    assert not result.errors and not result.warnings
    (run,) = result.runs
    assert (run.device, run.qps, run.link_type, run.gid_index) == ("mlx5_0", 2, "IB", None)
    assert run.cuda_device == "NVIDIA A100-SXM4-80GB"
    assert len(run.rows) == 23
    first, last = run.rows[0], run.rows[-1]
    assert (first.size_bytes, first.peak_gbit, first.average_gbit) == (2, 0.061867, 0.060962)
    assert (last.size_bytes, last.peak_gbit, last.average_gbit) == (8388608, 81.02, 80.96)
    assert run.best_average_gbit == 81.24  # the 65536-byte row


def test_bidirectional_24x_header_and_cpu_frequency_warning() -> None:
    result = parse("roce-100g-bidirectional-cpufreq-warning.txt")
    assert not result.errors
    (run,) = result.runs
    assert (run.test, run.bidirectional, run.device, run.gid_index) == (
        "RDMA_Write Bidirectional BW Test", True, "mlx5_0", 4,
    )  # fmt: skip
    (row,) = run.rows
    assert (row.size_bytes, row.iterations, row.average_gbit, row.line) == (
        65536,
        560845,
        98.02,
        26,
    )
    # perftest's own notes: no peak with -b (line 1), the CPU frequency (between header and row)
    assert [w.line for w in result.warnings] == [1, 25]
    assert "Conflicting CPU frequency" in result.warnings[1].message


def test_copy_cut_inside_the_row_is_an_error_not_a_number() -> None:
    result = parse("perftest-issue234-mbytes-server-cut-mid-row.txt")
    assert [(e.line, e.source) for e in result.errors] == [
        (26, "perftest-issue234-mbytes-server-cut-mid-row.txt")
    ]
    assert "cut short" in result.errors[0].message
    assert all(not run.rows for run in result.runs)


def test_connect_failure_is_an_error_naming_the_line() -> None:
    result = parse("perftest-pr228-connect-failure.txt")
    assert not result.runs
    assert [(e.line, e.message) for e in result.errors] == [
        (1, "Couldn't connect to 192.168.125.211:18515"),
        (2, "Unable to open file descriptor for socket connection Unable to init the socket "
            "connection"),
    ]  # fmt: skip


def test_mbytes_are_perftest_mebibytes_converted_to_gbit() -> None:
    # perftest divides by 0x100000 bytes for MB/sec (print_report_bw's format_factor).
    text = (
        "                    RDMA_Write BW Test\n"
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
        " 65536      5000             11800.00            11728.47            0.187655\n"
    )
    (run,) = perftest.parse(text).runs
    assert run.unit == "MB/sec"
    assert run.rows[0].average_gbit == pytest.approx(11728.47 * 0x100000 * 8 / 1e9)


def test_failed_qp_after_the_header_is_an_error() -> None:
    text = "                    RDMA_Write BW Test\n Failed to modify QP 0 to RTR\n"
    result = perftest.parse(text, source="x.txt")
    assert [(e.line, e.message) for e in result.errors] == [(2, "Failed to modify QP 0 to RTR")]
    assert [run.rows for run in result.runs] == [[]]


@pytest.mark.parametrize("path", sorted(p for p in DATA.iterdir() if p.suffix == ".txt"))
def test_every_published_output_is_detected_as_ib_write_bw(path: Path) -> None:
    assert parsers.detect(path.read_text()) == "ib_write_bw"
