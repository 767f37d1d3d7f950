"""Parser of the suite's own node programs: the all-reduce benchmark JSON and the MPI preflight
lines, including cut, garbage and launcher-failure input; and a real MPI preflight run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpuval import cli, parsers
from gpuval.nodebench import source_path
from gpuval.parsers import gpuval_bench
from gpuval.records.base import ParseResult
from gpuval.schemas.validation import validate


def bench_document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "schema_version": 1, "tool": "gpuval-allreduce-bench", "collective": "all_reduce",
        "world_size": 2, "backend": "gloo", "device_type": "cpu", "dtype": "float32",
        "hosts": ["node1", "node2"], "devices": ["x86_64", "x86_64"],
        "torch_version": "2.13.0+cpu", "cuda_version": None, "nccl_version": None,
        "warmup": 2, "iterations": 5, "started_at": "2026-11-21T06:02:11+00:00",
        "duration_s": 0.297,
        "rows": [
            {"size_bytes": 1024, "count": 256, "time_us": 4496.833, "algbw_gbps": 0.000228,
             "busbw_gbps": 0.000228, "wrong": 0},
            {"size_bytes": 1048576, "count": 262144, "time_us": 2391.9,
             "algbw_gbps": 0.43838, "busbw_gbps": 0.43838, "wrong": 0},
        ],
        "wrong_total": 0, "correct": True,
    }  # fmt: skip
    document.update(changes)
    return document


def parse(text: str, tool: str | None = None) -> ParseResult:
    result = gpuval_bench.parse(text, source="test.txt", tool=tool)
    validate(result.to_dict(), "parse-result")
    return result


def test_bench_document_numbers_as_printed_among_launcher_noise() -> None:
    text = (
        "W1121 06:02:06.531000 29670 torch/distributed/run.py:874] *****\n"
        f"[default0]:{json.dumps(bench_document())}\n"
    )
    assert parsers.detect(text) == "gpuval-allreduce-bench"
    result = parse(text)
    assert not result.errors and not result.warnings
    (run,) = result.runs
    assert (run.world_size, run.backend, run.hosts, run.correct, run.complete, run.line) == (
        2, "gloo", ["node1", "node2"], True, True, 2,
    )  # fmt: skip
    assert [(r.size_bytes, r.time_us, r.algbw_gbps, r.busbw_gbps, r.wrong) for r in run.rows] == [
        (1024, 4496.833, 0.000228, 0.000228, 0),
        (1048576, 2391.9, 0.43838, 0.43838, 0),
    ]


def test_wrong_result_is_kept_as_printed() -> None:
    document = bench_document(wrong_total=3, correct=False)
    document["rows"][1]["wrong"] = 3
    (run,) = parse(json.dumps(document)).runs
    assert (run.correct, run.wrong_total, run.rows[1].wrong, run.complete) == (False, 3, 3, True)


def test_cut_short_document_is_an_error_naming_its_line() -> None:
    text = "starting\n" + json.dumps(bench_document())[:150] + "\n"
    result = parse(text)
    assert not result.runs
    assert result.errors[0].line == 2 and "cut short" in result.errors[0].message


@pytest.mark.parametrize(
    "text",
    ["", "garbage\n\x00\x01 not json {", "Traceback (most recent call last):\n  RuntimeError\n"],
)
def test_no_document_is_an_error(text: str) -> None:
    result = parse(text, tool="gpuval-allreduce-bench")
    assert not result.runs and "did not finish" in result.errors[0].message


def test_rows_without_sizes_or_correctness_fields_are_errors_not_dropped_silently() -> None:
    document = bench_document(rows=[{"size_bytes": "big"}, {"size_bytes": 8}])
    del document["correct"]
    result = parse(json.dumps(document))
    (run,) = result.runs
    assert [r.size_bytes for r in run.rows] == [8] and not run.complete
    messages = [e.message for e in result.errors]
    assert any("row 1 has no byte size" in m for m in messages)
    assert any("correctness fields" in m for m in messages)
    assert any("row 2 (8 B) lacks time_us" in w.message for w in result.warnings)


def test_empty_rows_and_unknown_schema_version() -> None:
    result = parse(json.dumps(bench_document(rows=[], schema_version=7)))
    assert "no rows" in result.errors[0].message
    assert "schema_version 7" in result.warnings[0].message


PREFLIGHT_OK = """\
gpuval-mpi-preflight rank 1/3 host node2
gpuval-mpi-preflight rank 0/3 host node1
gpuval-mpi-preflight rank 2/3 host node3
gpuval-mpi-preflight library Open MPI v4.1.4, package: Debian OpenMPI
gpuval-mpi-preflight alltoall pairs 6 bad 0
gpuval-mpi-preflight allreduce sum 6 expected 6
gpuval-mpi-preflight OK 3 ranks on 3 hosts
"""


def test_preflight_ok() -> None:
    assert parsers.detect(PREFLIGHT_OK) == "mpi-preflight"
    result = parse(PREFLIGHT_OK)
    assert not result.errors and not result.warnings
    (run,) = result.runs
    assert (run.world_size, run.ok, run.complete, run.missing_ranks) == (3, True, True, [])
    assert [(r.rank, r.host) for r in run.ranks] == [(1, "node2"), (0, "node1"), (2, "node3")]
    assert (run.alltoall_pairs, run.alltoall_bad, run.allreduce_sum) == (6, 0, 6)
    assert run.library == "Open MPI v4.1.4, package: Debian OpenMPI"


def test_preflight_failure_lines_name_the_hosts() -> None:
    text = (
        PREFLIGHT_OK.replace("OK 3 ranks on 3 hosts", "FAILED: 2 problem(s)")
        .replace("bad 0", "bad 2")
        .replace(
            "gpuval-mpi-preflight alltoall",
            "gpuval-mpi-preflight FAILED rank 0 host node1: received nothing from rank 2 host "
            "node3 in the all-to-all\ngpuval-mpi-preflight FAILED rank 1 host node2: received "
            "nothing from rank 2 host node3 in the all-to-all\ngpuval-mpi-preflight alltoall",
        )
    )
    (run,) = parse(text).runs
    assert (run.ok, run.complete, run.alltoall_bad) == (False, True, 2)
    assert [(p.rank, p.host) for p in run.problems] == [(0, "node1"), (1, "node2")]
    assert "from rank 2 host node3" in run.problems[0].message


def test_launcher_failure_without_any_preflight_line_names_the_host() -> None:
    text = (
        "ssh: Could not resolve hostname node9: Name or service not known\n"
        "--------------------------------------------------------------------------\n"
        "ORTE was unable to reliably start one or more daemons.\n"
    )
    result = parse(text, tool="mpi-preflight")
    (run,) = result.runs
    assert [(p.host, p.line) for p in run.problems] == [("node9", 1), (None, 3)]
    assert not run.ok and not run.complete
    assert "did not finish" in result.errors[0].message


def test_tcp_connection_failure_and_missing_rank() -> None:
    text = (
        "gpuval-mpi-preflight rank 0/2 host node1\n"
        "A process or daemon was unable to complete a TCP connection\n"
        "  Local host:    node1\n"
        "  Remote host:   node2\n"
    )
    result = parse(text)
    (run,) = result.runs
    assert run.missing_ranks == [1]
    assert [(p.host, p.message) for p in run.problems] == [
        ("node2", "a TCP connection to node2 failed")
    ]
    assert not run.complete and result.errors


def test_ok_line_contradicted_by_the_output_is_not_ok() -> None:
    text = PREFLIGHT_OK.replace("sum 6 expected 6", "sum 5 expected 6")
    result = parse(text)
    assert not result.runs[0].ok
    assert "read as failed" in result.warnings[0].message


def test_garbage_is_not_a_preflight() -> None:
    result = parse("\x00\x01 garbage", tool="mpi-preflight")
    assert result.runs[0].ranks == [] and "never started" in result.errors[0].message


def test_cli_parses_both_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, text, tool in (
        ("bench.json", json.dumps(bench_document()), "gpuval-allreduce-bench"),
        ("preflight.txt", PREFLIGHT_OK, "mpi-preflight"),
    ):
        path = tmp_path / name
        path.write_text(text)
        assert cli.main(["parse", str(path)]) == 0
        document = json.loads(capsys.readouterr().out)
        validate(document, "parse-result")
        assert document["tool"] == tool


def test_real_mpi_preflight_compiles_runs_and_parses(tmp_path: Path) -> None:
    binary = tmp_path / "mpi_preflight"
    subprocess.run(
        [
            "mpicc",
            "-O2",
            "-Wall",
            "-Werror",
            "-o",
            str(binary),
            str(source_path("mpi_preflight.c")),
        ],
        check=True,
    )
    command = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3", str(binary)]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    result = parse(finished.stdout + finished.stderr)
    assert not result.errors, result.errors
    (run,) = result.runs
    assert (run.ok, run.world_size, sorted(r.rank for r in run.ranks)) == (True, 3, [0, 1, 2])
    assert (run.alltoall_pairs, run.alltoall_bad, run.allreduce_sum) == (6, 0, 6)
    assert run.library and "Open MPI" in run.library
