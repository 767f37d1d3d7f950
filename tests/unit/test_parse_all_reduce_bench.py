"""all_reduce_bench.py parser: real published outputs, each historic format, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval.parsers import all_reduce_bench
from gpuval.records.base import ParseResult
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs" / "all_reduce_bench"
REAL_FILES = sorted(p for p in DATA.iterdir() if p.name != "README.md")


def parse(text: str) -> ParseResult:
    result = all_reduce_bench.parse(text, source="test.txt")
    validate(result.to_dict(), "parse-result")
    return result


def parse_file(name: str) -> ParseResult:
    return parse((DATA / name).read_text())


def test_lambda_sweep_table_numbers_as_printed() -> None:
    result = parse_file("lambda-4xH100-sweep-table-2025.txt")
    assert not result.errors and not result.warnings
    (run,) = result.runs
    assert (run.format, run.collective, run.nranks, run.warmups, run.trials) == (
        "sweep-table",
        "all_reduce",
        4,
        5,
        20,
    )
    assert (run.environment.torch, run.environment.cuda, run.environment.nccl) == (
        "2.7.0",
        "12.8",
        "2.26.2",
    )
    assert run.environment.device_name == "NVIDIA H100 80GB HBM3"
    assert len(run.rows) == 20 and run.complete and run.bandwidth_scale == 1.0
    first, last = run.rows[0], run.rows[-1]
    assert (first.size, first.size_bytes, first.busbw_gbps, first.algbw_gbps) == (
        "32KiB",
        32768,
        1.18,
        0.79,
    )
    assert (last.size, last.size_bytes, last.busbw_gbps, last.algbw_gbps, last.line) == (
        "16GiB",
        17179869184,
        366.99,
        244.66,
        26,
    )


def test_2024_single_payload_behind_torchrun_tee_prefixes() -> None:
    result = parse_file("gke-a3-16ranks-single-payload-torchrun-tee.txt")
    (run,) = result.runs
    assert (run.format, run.nranks, run.trials, run.warmups) == ("single-payload", 16, 5, None)
    (row,) = run.rows
    # "4.0GB" is M*N*4/1e9 in the 2024 builds: decimal gigabytes
    assert (row.size, row.size_bytes, row.algbw_gbps, row.busbw_gbps) == (
        "4.0GB",
        4_000_000_000,
        44.947,
        84.275,
    )
    assert run.complete and not result.errors


def test_several_single_payload_blocks_in_markdown_with_std_field() -> None:
    result = parse_file("cscs-todi-readme-single-payload-blocks.md")
    assert [(r.nranks, r.rows[0].busbw_gbps) for r in result.runs] == [
        (4, 327.952),
        (8, 3.533),
        (8, 91.325),
        (16, 1.835),
        (16, 91.287),
    ]
    assert result.runs[2].rows[0].algbw_gbps == 52.186  # "52.186 GBps (std: 0.013) (417.5 Gbps)"


HEADER_2026 = (
    "The average bandwidth of all_reduce over 8 ranks "
    "(5 warmups / 20 trials, up to 10 queued calls per trial):"
)
SWEEP_2026 = f"""\
  32KiB: 1\r  32KiB: 2\r  32KiB: 20
    1GiB: 20

Environment:
- software: torch=2.9.1+cu130, cuda=13.0, nccl=(2, 27, 7)
- hardware: _CudaDeviceProperties(name='NVIDIA H200', major=9, minor=0, total_memory=143155MB)

{HEADER_2026}

| payload |    busbw   |    algbw   |
| ------: | ---------: | ---------: |
|   32KiB |   1.44GBps |   0.82GBps |
|    1GiB | 463.58GBps | 264.90GBps |
Legend: 1KiB = 2**10 Bytes, 1MiB = 2**20 Bytes, 1GiB = 2**30 Bytes
        1GBps = 10**9 Bytes per second (networking bw spec convention)
Elapsed time: 0:00:47
"""  # SYNTHETIC framing of values from ml-engineering results/all-reduce-8xH200.md


def test_current_header_notes_progress_counters_and_elapsed() -> None:
    result = parse(SWEEP_2026)
    (run,) = result.runs
    assert run.options == "up to 10 queued calls per trial"
    assert run.environment.nccl == "2.27.7" and run.environment.torch == "2.9.1+cu130"
    assert [(r.size_bytes, r.busbw_gbps) for r in run.rows] == [(32768, 1.44), (2**30, 463.58)]
    assert run.elapsed == "0:00:47" and run.complete


def test_january_2025_kb_tables_are_binary_and_gib_per_second() -> None:
    # SYNTHETIC, from commit 22087bf's prints: fmt_bytes(...)+"B" and busbw/2**30 labelled GBps
    text = """Device info: _CudaDeviceProperties(name='NVIDIA A100-SXM4-80GB', major=8)

The average bandwidth of all_reduce over 8 ranks (5 warmups / 20 trials):

| payload |    busbw   |    algbw   |
| ------: | ---------: | ---------: |
|    32KB | 100.00GBps |  50.00GBps |
Legend: 1KB = 2**10Bytes, 1MB = 2**20Bytes, 1GB = 2**30Bytes. 1Bps = 1Bytes per second
"""
    (run,) = parse(text).runs
    assert run.environment.device_name == "NVIDIA A100-SXM4-80GB"
    (row,) = run.rows
    assert row.size_bytes == 32 * 1024
    assert run.bandwidth_scale == 2**30 / 10**9
    assert row.busbw_gbps == pytest.approx(107.3741824)


def test_profile_stability_table_rows_are_trials_of_one_payload() -> None:
    text = """The 0.5GiB payload bandwidth of all_reduce over 8 ranks (5 warmups / 3 trials):

|    busbw   |    algbw   |
| ---------: | ---------: |
| 436.15GBps | 249.23GBps |
| 437.01GBps | 249.72GBps |
| 435.90GBps | 249.09GBps |
"""  # SYNTHETIC, from the --profile_stability print statements (2025-12)
    (run,) = parse(text).runs
    assert run.format == "profile-table"
    assert [(r.iteration, r.size_bytes, r.busbw_gbps) for r in run.rows] == [
        (1, 2**29, 436.15),
        (2, 2**29, 437.01),
        (3, 2**29, 435.90),
    ]


def test_identical_repeated_tables_are_kept_once_and_counted() -> None:
    result = parse(SWEEP_2026 + SWEEP_2026)
    assert len(result.runs) == 1 and result.runs[0].repeats == 2


def test_truncated_row_is_warned_with_its_line_and_marks_the_run_incomplete() -> None:
    text = (DATA / "lambda-4xH100-sweep-table-2025.txt").read_text()
    cut = text[: text.index("366.99") + 4]  # "| 16GiB | 366." : the last row cut mid-cell
    result = parse(cut)
    (run,) = result.runs
    assert len(run.rows) == 19 and not run.complete
    assert [w.line for w in result.warnings] == [26]


def test_header_without_table_is_an_error_naming_the_line() -> None:
    result = parse(
        "noise\nThe average bandwidth of all_reduce over 2 ranks (5 warmups / 20 trials):\n"
    )
    assert [e.line for e in result.errors] == [2]
    assert result.runs[0].rows == [] and not result.runs[0].complete


def test_single_payload_missing_busbw_is_reported() -> None:
    text = "The average bandwidth of all_reduce with a 4.0GB payload (5 trials, 2 ranks):\n"
    text += " algbw: 10.000 GBps (80.0 Gbps)\n"
    result = parse(text)
    assert not result.runs[0].complete and result.errors[0].line == 1


def test_legacy_per_trial_output_is_reported_unsupported() -> None:
    text = "node1:0 data size: 4.0 GB\n\n\n\n-----------trial-0----------------\nnode1:0:\n"
    text += " duration: 0.6024 sec\n algo throughput: 106.2494 Gbps\n busbw: 53.1247  Gbps\n"
    assert all_reduce_bench.detect(text) == ("all_reduce_bench", 50)
    result = parse(text)
    assert result.runs == [] and any("2023" in e.message and e.line == 5 for e in result.errors)


@pytest.mark.parametrize("text", ["", "\x00\x01garbage|||", "| payload | busbw |\n| x | y |"])
def test_garbage_never_raises(text: str) -> None:
    result = parse(text)
    assert result.runs == [] and result.errors
