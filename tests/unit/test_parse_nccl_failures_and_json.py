"""nccl-tests / rccl-tests: FAILED lines, the JSON outputs (rccl-tests records, the PR 318
structured output, the 2.19.6 -J report recorded on an H100) and rank-prefixed launchers."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.test_parse_nccl_tests import messages, parsed, parsed_file

from gpuval.parsers import nccl_tests

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = DATA / "outputs" / "nccl-tests"
DEVICE = DATA / "device" / "h100-x1-2026-11-22"


# ---- FAILED lines -------------------------------------------------------------------------------
def test_min_bw_check_failure_is_a_failed_line_with_its_number() -> None:
    # NCCL_TESTS_MIN_BW=100 on one GPU: busbw is 0 by definition, nccl-tests prints FAILED, exit 7.
    for version in ("2.18.3", "2.19.6"):
        path = DEVICE / f"nccl-tests-{version}-all_reduce-min-bw-100-fails.txt"
        (run,) = parsed_file(path)["runs"]
        lines = path.read_text(encoding="utf-8").splitlines()
        number = 1 + next(i for i, text in enumerate(lines) if "Avg bus bandwidth" in text)
        assert run["failed_lines"] == [
            {"text": "# Avg bus bandwidth    : 0 FAILED", "line": number}
        ]
        assert run["avg_busbw_check"] == "FAILED" and run["complete"] is True
        assert run["out_of_bounds"] == {"count": 0, "ok": True}


def test_every_failed_verdict_of_the_footer_is_kept() -> None:
    # The footer lines as src/util.cu prints them; the bitwise line as NVIDIA/nccl-tests PR 388
    # (collective bitwise repeatability checks, `-B`) prints it.
    text = (
        "# Collective test starting: all_reduce_perf\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "     1048576        262144     float     sum      -1    10.00  104.86  183.50      3"
        "    10.00  104.86  183.50      0\n"
        "# Out of bounds values : 3 FAILED\n"
        "# Bitwise mismatches   : 2 FAILED\n"
        "# Avg bus bandwidth    : 183.5 OK\n"
    )
    (run,) = parsed(text)["runs"]
    assert run["failed_lines"] == [
        {"text": "# Out of bounds values : 3 FAILED", "line": 4},
        {"text": "# Bitwise mismatches   : 2 FAILED", "line": 5},
    ]
    assert run["out_of_bounds"] == {"count": 3, "ok": False}


def test_a_healthy_run_has_no_failed_line() -> None:
    (run,) = parsed_file(DEVICE / "nccl-tests-2.19.6-all_reduce-g1-8G.txt")["runs"]
    assert run["failed_lines"] == [] and run["complete"] is True


# ---- the -J report of nccl-tests 2.19.6, recorded on one H100 ----------------------------------
def test_nccl_tests_2_19_6_json_report_parses_fully() -> None:
    document = parsed_file(DEVICE / "nccl-tests-2.19.6-all_reduce-g1-J.json")
    assert document["tool"] == "nccl-tests" and document["warnings"] == []
    assert document["errors"] == []
    (run,) = document["runs"]
    assert run["collective"] == "all_reduce" and run["program"] == "all_reduce_perf"
    assert run["command"].endswith("all_reduce_perf -b 1M -e 64M -f 2 -g 1 -J "
                                   "/tmp/cap/nccl-2.19.6-all_reduce.json")  # fmt: skip
    assert run["nranks"] == 1 and run["hosts"] == ["vm"]
    assert run["nccl_version"] == "2.28.9"  # "nccl_version": 22809, the library
    assert run["header"]["json_format_version"] == 3
    assert run["header"]["min_bytes"] == 1048576 and run["header"]["max_bytes"] == 67108864
    # 1M to 64M by a factor 2: seven sizes, as the text output of the same run shows.
    assert [row["size_bytes"] for row in run["rows"]] == [2**p for p in range(20, 27)]
    first = run["rows"][0]
    assert first["out_of_place"]["time_us"] == 6.2096
    assert first["out_of_place"]["busbw_gbps"] == 0.0 and first["out_of_place"]["wrong"] == 0
    assert run["out_of_bounds"] == {"count": 0, "ok": True}
    assert run["avg_busbw_gbps"] == 0.0 and run["avg_busbw_check"] is None  # "unchecked"
    assert run["complete"] is True and run["failures"] == []
    sendrecv = parsed_file(DEVICE / "nccl-tests-2.19.6-sendrecv-g1-J.json")["runs"][0]
    assert sendrecv["collective"] == "sendrecv" and len(sendrecv["rows"]) == 7


def test_a_json_cell_without_a_number_is_an_error_naming_its_key_and_the_row_is_not_kept(
    tmp_path: Path,
) -> None:
    """The recorded -J report with two cells as nccl-tests writes a NaN and an infinity (the
    string "nan", a bare inf: its doubles go through printf): those rows are not recorded and
    each is an error naming the key; the others are read as before."""
    text = (DEVICE / "nccl-tests-2.19.6-all_reduce-g1-J.json").read_text()
    document = json.loads(text)
    document["results"][2]["in_place"]["bus_bw"] = "nan"
    document["results"][4]["out_of_place"]["nwrong"] = "nan"
    edited = json.dumps(document, indent=1).replace('"alg_bw": 3197.365452', '"alg_bw": inf', 1)
    path = tmp_path / "nccl-all_reduce.json"
    path.write_text(edited)
    parsed_report = parsed_file(path)
    (run,) = parsed_report["runs"]
    assert [row["size_bytes"] for row in run["rows"]] == [2**21, 2**23, 2**25, 2**26]
    assert [e["message"] for e in parsed_report["errors"]] == [
        "results[0]: in_place.alg_bw inf is not a measurement; row not recorded",
        "results[2]: in_place.bus_bw 'nan' is not a measurement; row not recorded",
        "results[4]: out_of_place.nwrong 'nan' is unknown, never taken as 0 errors; row not "
        "recorded",
    ]


# ---- rccl-tests result records ------------------------------------------------------------------
def test_rccl_tests_json_lines_records() -> None:
    path = REAL / "rccl-tests-pr93-json-lines-allreduce-4gpu-cut.json"
    text = path.read_text(encoding="utf-8")
    assert nccl_tests.detect(text) == ("rccl-tests", 95)
    document = parsed(text)
    assert document["tool"] == "rccl-tests"
    (run,) = document["runs"]
    assert run["collective"] == "all_reduce" and run["program"] == "AllReduce"
    assert run["nranks"] == 4 and run["header"] == {"gpus": 4}
    assert [row["size_bytes"] for row in run["rows"]] == [1024, 2048, 4096]
    first = run["rows"][0]
    assert (first["dtype"], first["redop"], first["line"]) == ("float", "sum", 1)
    assert first["out_of_place"]["busbw_gbps"] == 0.08006609623048194
    assert first["in_place"]["time_us"] == 19.897650000000002
    assert first["in_place"]["wrong"] == 0
    assert run["rows"][2]["in_place"] is None  # its record is the cut sixth line
    # Records are written one by one: nothing says the run finished.
    assert run["complete"] is False
    assert (6, "result record is not JSON (cut short?): Unterminated string starting at") in (
        messages(document)
    )


def test_rccl_tests_json_list_of_records_with_mpi_fields() -> None:
    # The list form of ROCm/rccl-tests PR 140 (written at the end of the test) with the MPI
    # build's fields; values in the shape of the PR 93 example.
    records = [
        {"#wrong": "0", "algBw": 140.2, "busBw": 262.9, "inPlace": inplace, "name": "AllReduce",
         "nodes": 2, "ranks": 16, "ranksPerNode": 8, "gpusPerRank": 1, "numCycle": 0,
         "redop": "sum", "size": 1 << 30, "time": 7658.1, "type": "float"}
        for inplace in (0, 1)
    ] + [
        {"#wrong": "N/A", "algBw": 40.0, "busBw": 37.5, "inPlace": 1, "name": "AlltoAll",
         "nodes": 2, "ranks": 16, "ranksPerNode": 8, "gpusPerRank": 1, "numCycle": 0,
         "redop": "none", "size": 1 << 30, "time": 26843.5, "type": "float"},
    ]  # fmt: skip
    document = parsed(json.dumps(records, indent=1))
    assert document["tool"] == "rccl-tests" and document["errors"] == []
    reduce, alltoall = document["runs"]
    assert reduce["collective"] == "all_reduce" and reduce["nranks"] == 16
    assert reduce["header"] == {
        "nodes": 2, "ranks_per_node": 8, "gpus_per_rank": 1, "num_cycle": 0,
    }  # fmt: skip
    assert reduce["complete"] is True and len(reduce["rows"]) == 1
    assert reduce["rows"][0]["out_of_place"]["busbw_gbps"] == 262.9
    assert alltoall["collective"] == "alltoall"
    assert alltoall["rows"][0]["in_place"]["wrong"] is None
    assert alltoall["rows"][0]["out_of_place"] is None


# ---- nccl-tests PR 318 structured output --------------------------------------------------------
def test_structured_output_cut_short_is_an_error_naming_the_line() -> None:
    document = parsed_file(REAL / "nccl-tests-pr318-structured-output-alltoall-cut.txt")
    (run,) = document["runs"]
    assert run["collective"] == "alltoall" and run["program"] == "nccl_alltoall_perf"
    assert run["nccl_version"] == "2.26.6+cudaCUDA_MAJOR.CUDA_MINOR"
    assert run["rows"] == [] and run["complete"] is False
    ((line, message),) = [(d["line"], d["message"]) for d in document["errors"]]
    assert line == 10 and message.startswith("structured output cut short or malformed")


def test_structured_output_rows_come_from_its_size_keys() -> None:
    # The line as the PR's common.cu builds it: sizes are the keys of each cycle's object.
    line = json.dumps({
        "identifier": "nccl-tests structured output", "version": "2.26.6",
        "benchmark": [{
            "33554432": {"count": 1048576, "type": "float", "redop": "none", "root": "-1",
                         "oop_time": 1494.278386, "oop_algbw": 22.455275,
                         "oop_busbw": 19.648366, "oop_error": 0.0, "ip_time": 1459.561667,
                         "ip_algbw": 22.98939, "ip_busbw": 20.115716, "ip_error": "N/A"},
        }],
        "out_of_bounds_value": 0, "out_of_bounds_value_status": "OK",
        "avg_bus_bw": 19.88, "avg_bus_bw_status": "OK",
    })  # fmt: skip
    text = f"$ ./alltoall_perf -b 32M -e 32M --json\n{line}\n"
    assert nccl_tests.detect(line) == ("nccl-tests", 90)
    document = parsed(text)
    (run,) = document["runs"]
    assert run["collective"] == "alltoall" and run["complete"] is True
    (row,) = run["rows"]
    assert (row["size_bytes"], row["count"], row["root"], row["line"]) == (33554432, 1048576, -1, 2)
    assert row["out_of_place"]["wrong"] == 0 and row["in_place"]["wrong"] is None
    assert row["in_place"]["busbw_gbps"] == 20.115716
    assert run["out_of_bounds"] == {"count": 0, "ok": True} and run["avg_busbw_gbps"] == 19.88


# ---- launchers that prefix every line with the rank ---------------------------------------------
def test_prepended_rank_prefixes_are_removed_from_nccl_debug_lines() -> None:
    (run,) = parsed_file(REAL / "nccl-issue1232-prepend-rank-nccl-info-socket.txt")["runs"]
    assert run["hosts"] == ["node0", "node2"]
    assert run["transports"] == ["NET/Socket", "SHM/direct/direct"]


def test_intel_mpi_prepend_rank_table_with_a_row_split_by_another_rank() -> None:
    # `mpirun -prepend-rank` (Intel MPI, MPICH) puts "[rank] " before every line; rank 1's
    # NCCL_DEBUG output lands between the two halves of a row rank 0 printed in two writes.
    text = (
        "[0] # Collective test starting: all_reduce_perf\n"
        "[0] # nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20"
        " agg iters: 1 validation: 1 graph: 0\n"
        "[0] #\n"
        "[0] # Using devices\n"
        "[0] #  Rank  0 Group  0 Pid   1000 on     node-a device  0 [0x1b] NVIDIA A100-SXM4-80GB\n"
        "[0] #  Rank  1 Group  0 Pid   2000 on     node-b device  0 [0x1b] NVIDIA A100-SXM4-80GB\n"
        "[1] node-b:2000:2000 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
        "[0] #                                                              out-of-place"
        "                       in-place          \n"
        "[0] #       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "[0]            8             2     float     sum      -1\n"
        "[1] node-b:2000:2010 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0\n"
        "[0]    30.10    0.00    0.00      0    29.90    0.00    0.00      0\n"
        "[0]           16             4     float     sum      -1    30.50    0.00    0.00      0"
        "    30.20    0.00    0.00      0\n"
        "[0] # Out of bounds values : 0 OK\n"
        "[0] # Avg bus bandwidth    : 0 \n"
    )
    document = parsed(text)
    (run,) = document["runs"]
    assert run["nranks"] == 2 and run["hosts"] == ["node-a", "node-b"]
    assert [(row["size_bytes"], row["line"]) for row in run["rows"]] == [(8, 10), (16, 13)]
    assert run["rows"][0]["in_place"]["time_us"] == 29.90
    assert run["transports"] == ["NET/IB"] and run["complete"] is True
    assert document["warnings"] == []
