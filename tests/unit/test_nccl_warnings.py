"""NCCL WARN lines: real ones from public threads keep their host and full message in every
tool's records whose logs carry NCCL_DEBUG output (nccl-tests, all_reduce_bench, the suite's own
all-reduce benchmark), also when the benchmark died before printing a result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuval.parsers import all_reduce_bench, gpuval_bench, nccl_tests
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data"
WARN_LINES: list[dict[str, Any]] = json.loads(
    (DATA / "nccl-warn" / "nccl-warn-lines.json").read_text(encoding="utf-8")
)
SWEEP = DATA / "outputs" / "all_reduce_bench" / "lambda-4xH100-sweep-table-2025.txt"
WARN_TEXT = "".join(f"{entry['line']}\n" for entry in WARN_LINES)


def expected_warnings(first_line: int = 1) -> list[dict[str, Any]]:
    return [
        {"host": e["host"], "message": e["line"].split("NCCL WARN ", 1)[1], "log_line": n}
        for n, e in enumerate(WARN_LINES, start=first_line)
    ]


def test_collection_has_fifteen_plus_distinct_sourced_lines_fatal_and_benign() -> None:
    messages = {entry["line"].split("NCCL WARN", 1)[1] for entry in WARN_LINES}
    assert len(messages) >= 15
    assert {entry["outcome"] for entry in WARN_LINES} == {"fatal", "benign"}
    for entry in WARN_LINES:
        assert "NCCL WARN" in entry["line"]
        assert entry["source"].startswith("https://github.com/")


def test_nccl_tests_keeps_each_warning_whole_with_its_host() -> None:
    document = nccl_tests.parse(WARN_TEXT, source="warn.txt").to_dict()
    validate(document, "parse-result")
    (run,) = document["runs"]
    assert run["nccl_warnings"] == expected_warnings()


def test_cuda_failure_messages_keep_their_full_text() -> None:
    # NCCL's CUDACHECK prints WARN("Cuda failure '%s'", cudaGetErrorString(err)).
    line = "gpu-7:4242:4300 [3] enqueue.cc:1580 NCCL WARN Cuda failure 'unspecified launch failure'"
    (run,) = nccl_tests.parse(line + "\n").runs
    (found,) = run.nccl_warnings
    assert (found.host, found.message) == ("gpu-7", "Cuda failure 'unspecified launch failure'")


def test_all_reduce_bench_carries_the_warnings_printed_before_its_table() -> None:
    text = WARN_TEXT + SWEEP.read_text(encoding="utf-8")
    document = all_reduce_bench.parse(text, source="bench.txt").to_dict()
    validate(document, "parse-result")
    (run,) = document["runs"]
    assert run["format"] == "sweep-table" and run["rows"]
    assert run["nccl_warnings"] == expected_warnings()


def test_all_reduce_bench_that_died_keeps_its_warnings_in_a_no_result_run() -> None:
    text = "Environment:\n" + WARN_TEXT + "Traceback (most recent call last):\n"
    document = all_reduce_bench.parse(text, source="bench.txt").to_dict()
    validate(document, "parse-result")
    (run,) = document["runs"]
    assert (run["format"], run["collective"], run["rows"], run["complete"]) == (
        "no-result", None, [], False,
    )  # fmt: skip
    assert run["line"] == 2 and run["nccl_warnings"] == expected_warnings(first_line=2)
    assert document["errors"][0]["message"].startswith("no all_reduce_bench result block")


@pytest.mark.parametrize("with_document", [True, False])
def test_gpuval_allreduce_bench_carries_the_warnings(with_document: bool) -> None:
    tail = '{"schema_version": 1, "tool": "gpuval-allreduce-bench", "rows": []}\n'
    text = WARN_TEXT + (tail if with_document else "")
    document = gpuval_bench.parse(text, source="bench.txt").to_dict()
    validate(document, "parse-result")
    (run,) = document["runs"]
    assert run["nccl_warnings"] == expected_warnings()
    assert run["complete"] is False and run["rows"] == []
    assert run["line"] == (len(WARN_LINES) + 1 if with_document else 1)
