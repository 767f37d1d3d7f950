"""nccl-tests / rccl-tests parser against real published outputs and source-derived formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuval import cli
from gpuval.parsers import nccl_tests
from gpuval.schemas.validation import validate

REPO = Path(__file__).resolve().parents[2]
# Copies of the shared samples, as bundled in the sample run (tests/data/sample-run/README.md).
SAMPLES = REPO / "tests" / "data" / "sample-run" / "raw"
REAL = REPO / "tests" / "data" / "outputs" / "nccl-tests"
LAMBDA = SAMPLES / "lambda-4xh100" / "nccl-all_reduce.txt"
CONDENSED = SAMPLES / "dgx-8xa100" / "nccl-all_reduce.txt"
REAL_FILES = sorted(REAL.glob("*.txt"))


def parsed(text: str) -> dict[str, Any]:
    document = nccl_tests.parse(text, source="test").to_dict()
    validate(document, "parse-result")
    return document


def parsed_file(path: Path) -> dict[str, Any]:
    return parsed(path.read_text(encoding="utf-8"))


def messages(document: dict[str, Any]) -> list[tuple[int | None, str]]:
    return [(d["line"], d["message"]) for d in document["warnings"] + document["errors"]]


def test_collects_ten_plus_real_outputs_with_sources() -> None:
    readme = (REAL / "README.md").read_text(encoding="utf-8")
    assert len(REAL_FILES) >= 10
    for path in REAL_FILES:
        assert path.name in readme, f"{path.name} has no source in README.md"


# ---- the samples of the brief -------------------------------------------------------------------
def test_lambda_h100_sample() -> None:
    document = parsed_file(LAMBDA)
    assert document["tool"] == "nccl-tests"
    (run,) = document["runs"]
    assert run["collective"] == "all_reduce" and not run["collective_inferred"]
    assert run["nranks"] == 4 and run["complete"] is True
    assert len(run["rows"]) == 28
    first, last = run["rows"][0], run["rows"][-1]
    assert first["size_bytes"] == 8 and first["out_of_place"]["time_us"] == 26.08
    assert last["size_bytes"] == 1073741824 and last["count"] == 268435456
    assert (last["dtype"], last["redop"], last["root"]) == ("float", "sum", -1)
    assert last["out_of_place"] == {
        "time_us": 4525.6, "algbw_gbps": 237.26, "busbw_gbps": 355.89, "wrong": 0,
        "error": None, "extra": {},
    }  # fmt: skip
    assert last["in_place"]["busbw_gbps"] == 353.40 and last["in_place"]["time_us"] == 4557.5
    assert run["avg_busbw_gbps"] == 98.414
    assert run["out_of_bounds"] == {"count": 0, "ok": True}
    assert run["nccl_version"] == "2.26.2+cuda12.8"
    assert run["nccl_versions_by_host"] == {"192-222-52-239": "2.26.2+cuda12.8"}
    assert "NET/Socket" in run["transports"]
    assert any(t.startswith("P2P") for t in run["transports"])
    assert run["devices"][0] == {
        "rank": 0, "group": 0, "pid": 16629, "host": "192-222-52-239", "device": 0,
        "pci_bus": "0000:06:00", "name": "NVIDIA H100 80GB HBM3",
    }  # fmt: skip
    assert run["header"]["warmup_iters"] == 1 and run["header"]["agg_iters"] == 1
    assert run["header"]["step"] == 2 and run["header"]["step_kind"] == "factor"
    assert (run["start_line"], run["end_line"]) == (1, 54)
    assert document["warnings"] == [] and document["errors"] == []


def test_condensed_a100_sample() -> None:
    document = parsed_file(CONDENSED)
    (run,) = document["runs"]
    assert len(run["rows"]) == 19 and run["complete"] is False
    last = run["rows"][-1]
    assert last["size_bytes"] == 8589934592 and last["count"] is None
    assert last["out_of_place"]["busbw_gbps"] == 234.61
    assert last["out_of_place"]["time_us"] == 64074
    assert last["out_of_place"]["wrong"] is None and last["in_place"] is None
    assert run["rows"][5]["size_bytes"] == 1048576  # printed `1048_576`
    assert run["collective"] is None


# ---- every real output --------------------------------------------------------------------------
@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_every_real_output_parses_and_validates(path: Path) -> None:
    document = parsed_file(path)
    assert document["runs"], messages(document)
    for run in document["runs"]:
        for row in run["rows"]:
            assert row["line"] is not None
            assert row["out_of_place"] is not None or row["in_place"] is not None


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_cli_parses_real_output(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["parse", str(path), "--indent", "0"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["tool"] in ("nccl-tests", "rccl-tests")


def test_cli_rejects_unrecognised_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("nothing to see here\njust prose\n", encoding="utf-8")
    assert cli.main(["parse", str(path)]) == 2


# ---- eras ---------------------------------------------------------------------------------------
def test_2017_era_bytes_N_columns_in_milliseconds() -> None:
    document = parsed_file(REAL / "nccl-issue123-2017-bytes-N-op-root-ms.txt")
    (run,) = document["runs"]
    assert len(run["rows"]) == 5
    row = run["rows"][0]
    assert (row["size_bytes"], row["count"], row["dtype"], row["redop"], row["root"]) == (
        10000000, 10000000, "char", "sum", 0,
    )  # fmt: skip
    assert row["out_of_place"]["time_us"] == 50.0  # printed 0.050 ms
    assert row["out_of_place"]["error"] == 0.0 and row["out_of_place"]["wrong"] is None
    assert row["in_place"]["algbw_gbps"] == 1674.48
    assert run["collective"] == "reduce" and run["collective_inferred"] is True
    assert (12, "partial row") in [(line, m[:11]) for line, m in messages(document)]


def test_2017_era_failure_without_host() -> None:
    document = parsed_file(REAL / "nccl-tests-issue5-nccl1-bytes-N-res-failure.txt")
    (run,) = document["runs"]
    assert run["header"]["compiled_with"] == "NCCL 1.0"
    assert run["header"]["n_gpus"] == 8 and run["nranks"] == 8
    assert run["devices"][7]["host"] == "node03" and run["devices"][7]["pid"] is None
    (failure,) = run["failures"]
    assert failure == {
        "host": None, "kind": "nccl", "file": "all_reduce.cu", "line": 95,
        "message": "unhandled cuda error", "pid": None, "trace": [], "log_line": 16,
    }  # fmt: skip
    assert run["complete"] is False and run["rows"] == []


def test_middle_era_error_magnitudes() -> None:
    document = parsed_file(REAL / "rccl-pr929-mi250x-error-era.txt")
    (run,) = document["runs"]
    assert len(run["rows"]) == 8
    row = run["rows"][-1]
    assert row["size_bytes"] == 1024 and row["root"] is None
    assert row["out_of_place"]["error"] == 4e-07 and row["out_of_place"]["wrong"] is None
    assert row["in_place"]["error"] == 2e-07 and row["in_place"]["time_us"] == 16.80
    assert (13, "partial row (truncated output?) not recorded: '2048' (1 of 12 cells)") in messages(
        document
    )


def test_blank_redop_alltoall_rows() -> None:
    document = parsed_file(REAL / "msccl-issue48-alltoall-blank-redop-error-era.txt")
    (run,) = document["runs"]
    assert len(run["rows"]) == 7
    row = run["rows"][5]
    assert row["redop"] is None and row["size_bytes"] == 33554432
    assert row["out_of_place"]["time_us"] == 14892
    assert row["in_place"]["algbw_gbps"] == 196339.57 and row["in_place"]["error"] == 1.0


def test_headerless_rows_then_second_run_named_by_command() -> None:
    document = parsed_file(REAL / "nccl-issue340-gtx-error-era-two-runs.txt")
    first, second = document["runs"]
    assert len(first["rows"]) == 12 and first["complete"] is True
    assert first["avg_busbw_gbps"] == 6.6972  # printed `6.6972 ` with a trailing space
    assert first["rows"][0]["redop"] is None and first["rows"][0]["out_of_place"]["error"] == 0.0
    assert first["collective"] == "all_gather" and first["collective_inferred"] is True
    assert second["collective"] == "broadcast" and second["program"] == "broadcast_perf"
    assert second["rows"] == [] and second["complete"] is False
    assert second["header"]["n_gpus"] == 2 and second["nranks"] == 2
    assert (second["start_line"], second["end_line"]) == (16, 17)
    assert any("columns inferred" in m for _, m in messages(document))


def test_markdown_stripped_hashes_and_single_test_header() -> None:
    document = parsed_file(REAL / "nccl-issue583-a100-markdown-stripped-single_test.txt")
    (run,) = document["runs"]
    assert run["header"]["single_test"] == 0 and run["header"]["test_buffer_kind"] == 2
    assert run["nranks"] == 8 and run["devices"][7]["pid"] == 1821223
    assert run["columns"][3] == "redop" and run["columns"][7] == "error"


def test_rccl_colon_header_and_failure_only() -> None:
    document = parsed_file(REAL / "rccl-tests-issue50-mi210-colon-header-failure.txt")
    assert document["tool"] == "rccl-tests"
    (run,) = document["runs"]
    assert run["header"]["n_thread"] == 1 and run["header"]["n_ranks"] == 1
    assert run["header"]["warmup_iters"] == 5
    assert run["devices"][0]["pci_bus"] == "0000:63:00.0"
    (failure,) = run["failures"]
    assert failure["kind"] == "nccl" and failure["line"] == 1285
    assert failure["pid"] == 117738 and failure["trace"] == ["common.cu:1161"]
    assert failure["message"].startswith("internal error")
    assert run["complete"] is False and run["rows"] == []


def test_rccl_version_block() -> None:
    document = parsed_file(REAL / "rccl-rocm-systems-pr3415-gfx1151-version-block.txt")
    assert document["tool"] == "rccl-tests"
    (run,) = document["runs"]
    assert run["nccl_version"] == "2.28.3-gfx1151-rccl:a188cf2"
    assert run["runtime_versions"]["HIP"] == "7.12.60430-713bdeef5b"
    assert run["runtime_versions"]["ROCm"] == "7.12.0.2-9999-713bdeef5b"
    assert run["nccl_tests_version"].startswith("2.17.9-")
    assert run["header"]["rccl_library"] == 22803
    assert run["collective"] == "all_reduce" and run["nranks"] == 1


def test_rccl_version_after_params_stays_in_the_run() -> None:
    document = parsed_file(REAL / "rccl-tests-hpc-ai-envs-pr30-mi300x.txt")
    (run,) = document["runs"]
    assert run["nccl_tests_version"] == "develop:83d38d9"
    assert run["header"]["n_gpus"] == 8 and run["nranks"] == 8
    assert run["rows"][0]["in_place"]["busbw_gbps"] == 154.63


def test_rccl_broadcast_footer_and_concluded() -> None:
    document = parsed_file(REAL / "rccl-issue2075-gfx1151-broadcast-asterisk-footer.txt")
    (run,) = document["runs"]
    assert run["collective"] == "broadcast" and run["collective_inferred"] is False
    assert len(run["rows"]) == 10 and run["complete"] is True
    assert run["avg_busbw_gbps"] == 3.41227
    assert run["rows"][-1]["root"] == 0 and run["rows"][-1]["redop"] == "none"


# ---- failures -----------------------------------------------------------------------------------
def test_rows_then_failures_from_several_hosts() -> None:
    document = parsed_file(REAL / "nccl-tests-issue322-h100-rows-then-nccl-failure.txt")
    (run,) = document["runs"]
    assert len(run["rows"]) == 5 and run["complete"] is False
    assert run["rows"][-1]["size_bytes"] == 17179869184
    assert [f["host"] for f in run["failures"]] == ["HCA-128", "HCA-108", "HCA-107", "HCA-108"]
    assert [f["pid"] for f in run["failures"]] == [757466, 2753866, 2750549, 2753874]
    assert run["failures"][0]["message"] == (
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details) /"
    )
    assert run["failures"][0]["log_line"] == 7


def test_cuda_invalid_device_ordinal_with_mpirun_tags() -> None:
    document = parsed_file(REAL / "nccl-issue348-tag-output-invalid-device-ordinal.txt")
    (run,) = document["runs"]
    assert run["header"]["min_bytes"] == 33554432 and run["header"]["step_kind"] == "bytes"
    assert len(run["failures"]) == 8
    assert {f["kind"] for f in run["failures"]} == {"cuda"}
    assert {f["message"] for f in run["failures"]} == {"invalid device ordinal"}
    assert run["hosts"] == ["192.168.0.138"] and run["complete"] is False


def test_failures_amid_nccl_info_and_warn() -> None:
    document = parsed_file(REAL / "nccl-tests-issue294-h100-failure-amid-nccl-info.txt")
    (run,) = document["runs"]
    assert [(f["pid"], f["line"]) for f in run["failures"]] == [(739791, 1057), (739787, 1057)]
    (warning,) = run["nccl_warnings"]
    assert warning["host"] == "h100-4" and warning["log_line"] == 9
    assert "NET/IB" in run["transports"]


def test_driver_too_old_failure() -> None:
    text = (
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n"
        "gpu-node-1: Test CUDA failure common.cu:892 "
        "'CUDA driver version is insufficient for CUDA runtime version'\n"
        " .. gpu-node-1 pid 4242: Test failure common.cu:842\n"
    )
    (run,) = parsed(text)["runs"]
    (failure,) = run["failures"]
    assert failure["message"] == "CUDA driver version is insufficient for CUDA runtime version"
    assert (failure["host"], failure["kind"], failure["pid"]) == ("gpu-node-1", "cuda", 4242)
    assert run["complete"] is False


# ---- format variations built from the printf formats of nccl-tests src/util.cu ---------------
def table_row(size: int, count: int, dtype: str, redop: str, root: int, *cells: str) -> str:
    """`%12li  %12li  %8s  %6s  %6s` then `  %7s  %6s  %6s  %6s` per half."""
    text = f"{size:12d}  {count:12d}  {dtype:>8}  {redop:>6}  {root:6d}"
    for at in range(0, len(cells), 4):
        time, algbw, busbw, wrong = cells[at : at + 4]
        text += f"  {time:>7}  {algbw:>6}  {busbw:>6}  {wrong:>6}"
    return text + "\n"


def column_header(*extra: str) -> str:
    keys = f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
    half = f"  {'time':>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}"
    return keys + half + half + "".join(extra) + "\n"


CURRENT = (
    "# nccl-tests version 2.18.0 nccl-headers=22602 nccl-library=22602\n"
    "# Collective test starting: alltoall_perf\n"
    "# nThread 1 nGpus 2 minBytes 0 maxBytes 1024 step: 1024(bytes) warmup iters: 1 iters: 5 "
    "agg iters: 1 validation: 1 graph: 0 unalign: 0\n"
    "#\n# Using devices\n"
    "#  Rank  0 Group  0 Pid   1234 on     node-a device  0 [0000:0c:00] NVIDIA H100 80GB HBM3\n"
    "#  Rank  1 Group  0 Pid   1234 on     node-a device  1 [0000:0d:00] NVIDIA H100 80GB HBM3\n"
    "#\n"
    "#            out-of-place                       in-place          \n"
    + column_header()
    + "#  (B)  (elements)  (us)  (GB/s)  (GB/s)  (us)  (GB/s)  (GB/s)\n"
    + table_row(
        0, 0, "float", "none", -1, "0.12", "0.00", "0.00", "0", "0.11", "0.00", "0.00", "N/A"
    )
    + table_row(
        1024, 128, "float", "none", -1, "10.50", "0.10", "0.05", "3", "10.40", "0.10", "0.05", "N/A"
    )
    + "# Out of bounds values : 3 FAILED\n"
    "# Avg bus bandwidth    : 0.025 \n"
    "#\n"
    "# Collective test concluded: alltoall_perf\n"
)


def test_current_era_wrong_counts_na_and_failed_bounds() -> None:
    document = parsed(CURRENT)
    (run,) = document["runs"]
    assert run["collective"] == "alltoall" and run["nccl_tests_version"] == "2.18.0"
    assert run["nccl_version"] == "2.26.2"  # from nccl-library=22602
    assert run["header"]["unalign"] == 0 and run["header"]["min_bytes"] == 0
    zero, full = run["rows"]
    assert zero["size_bytes"] == 0 and zero["in_place"]["wrong"] is None
    assert full["out_of_place"]["wrong"] == 3 and full["in_place"]["wrong"] is None
    assert run["out_of_bounds"] == {"count": 3, "ok": False}
    assert run["avg_busbw_gbps"] == 0.025 and run["complete"] is True
    assert run["devices"][1]["pci_bus"] == "0000:0d:00"


def test_several_runs_in_one_file() -> None:
    text = CURRENT + CURRENT.replace("alltoall", "all_gather")
    document = parsed(text)
    first, second = document["runs"]
    assert (first["collective"], second["collective"]) == ("alltoall", "all_gather")
    assert first["end_line"] < second["start_line"]
    assert len(first["rows"]) == len(second["rows"]) == 2


def test_truncated_copy_of_real_file_reports_partial_row() -> None:
    text = LAMBDA.read_text(encoding="utf-8") if LAMBDA.exists() else CURRENT
    lines = text.splitlines()
    cut = next(i for i, line in enumerate(lines) if line.startswith("1073741824"))
    truncated = "\n".join([*lines[:cut], lines[cut][:40]])
    document = parsed(truncated)
    (run,) = document["runs"]
    assert run["complete"] is False
    assert all(row["size_bytes"] != 1073741824 for row in run["rows"])
    assert any(line == cut + 1 and "partial row" in m for line, m in messages(document))


def test_per_iteration_and_timestamp_columns_follow_the_header() -> None:
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "    i_min    i_max    i_p99    i_cv%     time   algbw   busbw #wrong    i_min"
        "    i_max    i_p99    i_cv%            timestamp\n"
    )
    row = (
        "     1048576        262144     float     sum      -1    28.15   37.25   65.19      0"
        "    27.90    29.10    29.00     1.20    27.52   38.10   66.67      0    27.30"
        "    28.40    28.30     0.90  2026-06-08 10:11:12\n"
    )
    group = "#          out-of-place (+ per-iteration)             in-place (+ per-iteration)\n"
    document = parsed("# Collective test starting: all_reduce_perf\n" + group + header + row)
    (run,) = document["runs"]
    (parsed_row,) = run["rows"]
    assert parsed_row["timestamp"] == "2026-06-08 10:11:12"
    assert parsed_row["out_of_place"]["busbw_gbps"] == 65.19
    assert parsed_row["out_of_place"]["extra"] == {
        "i_min": 27.90, "i_max": 29.10, "i_p99": 29.00, "i_cv%": 1.20,
    }  # fmt: skip
    assert parsed_row["in_place"]["busbw_gbps"] == 66.67
    assert parsed_row["in_place"]["extra"]["i_cv%"] == 0.90
    assert run["extra_columns"] == ["i_min", "i_max", "i_p99", "i_cv%", "timestamp"]


def test_split_printf_tags_and_interleaved_info_inside_a_row() -> None:
    text = (
        "# Collective test starting: all_reduce_perf\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "        8             2     float     sum      -1[0]    26.08    0.00    0.00      0"
        "    24.37    0.00    0.00      0\n"
        "       16             4     float     sum      -1\n"
        "node:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
        "    24.02    0.00    0.00      0    23.59    0.00    0.00      0\n"
    )
    document = parsed(text)
    (run,) = document["runs"]
    assert [r["size_bytes"] for r in run["rows"]] == [8, 16]
    assert run["rows"][1]["out_of_place"]["time_us"] == 24.02 and run["rows"][1]["line"] == 4
    assert run["transports"] == ["P2P/IPC"]


def test_nccl_debug_facts_per_host() -> None:
    text = CURRENT.replace(
        "#\n#  ",
        "#\nnode-a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "node-b:2:2 [0] NCCL INFO NCCL version 2.19.3+cuda12.2\n"
        "node-a:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"
        "node-a:1:9 [0] NCCL INFO 32 coll channels, 32 collnet channels, 16 nvls channels, "
        "32 p2p channels, 32 p2p channels per peer\n"
        "node-a:1:9 [0] NCCL INFO NCCL_ALGO set by environment to NVLSTree\n#  ",
        1,
    )
    (run,) = parsed(text)["runs"]
    assert run["nccl_versions_by_host"] == {
        "node-a": "2.21.5+cuda12.4",
        "node-b": "2.19.3+cuda12.2",
    }
    assert run["nccl_version"] == "2.21.5+cuda12.4"
    assert run["transports"] == ["NET/IB/GDRDMA"]
    assert run["algorithms"] == ["NVLS", "NVLSTree"]  # collnet channels are no evidence
    assert run["hosts"] == ["node-a", "node-b"]


def test_lone_h100_recording_chose_sockets_and_no_collnet() -> None:
    """Recorded on a lent H100 with no InfiniBand: NCCL 2.28 prints "NET/IB : No device
    found.", then "NET/IB : Using [RO]; OOB eth0" and "Using network Socket", and "64 collnet
    channels" although CollNet cannot run: the run used sockets and no CollNet."""
    path = REPO / "tests/data/device/h100-x1-2026-11-22/nccl-tests-2.19.6-all_reduce-g1-debug.txt"
    (run,) = parsed(path.read_text())["runs"]
    assert run["transports"] == ["NET/Socket"]
    assert run["algorithms"] == []


def test_json_report() -> None:
    report = {
        "version": 1, "start_time": "2026-01-02 03:04:05",
        "args": ["./build/all_reduce_perf", "-b", "8", "-e", "16", "-J", "out.json"],
        "env": [], "nccl_version": 22803,
        "config": {
            "nthreads": 1, "ngpus": 2, "minimum_bytes": 8, "maximum_bytes": 16,
            "step_factor": 2, "warmup_iters": 5, "iterations": 20,
            "aggregated_iterations": 1, "validation": 1, "graph": 0,
            "blocking_collectives": "false", "parallel_init": "false",
            "devices": [
                {"rank": 0, "group": 0, "pid": 77, "hostname": "n1", "device": 0,
                 "device_hex": "0000:1b:00", "device_info": "NVIDIA H100 80GB HBM3"},
                {"rank": 1, "group": 0, "pid": 77, "hostname": "n1", "device": 1,
                 "device_hex": "0000:43:00", "device_info": "NVIDIA H100 80GB HBM3"},
            ],
        },
        "results": [
            {"size": 8, "count": 2, "type": "float", "redop": "sum", "root": "    -1",
             "out_of_place": {"time": 10.5, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0.0},
             "in_place": {"time": 10.25, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": None},
             "actual_iterations": 20, "experiment_name": "all_reduce_perf"},
        ],
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": 0.0, "okay": "unchecked"},
        "errors": [], "end_time": "2026-01-02 03:04:06",
    }  # fmt: skip
    text = json.dumps(report)
    assert nccl_tests.detect(text) == ("nccl-tests", 95)
    document = parsed(text)
    (run,) = document["runs"]
    assert run["collective"] == "all_reduce" and run["nccl_version"] == "2.28.3"
    assert run["nranks"] == 2 and run["complete"] is True
    assert run["header"]["step"] == 2 and run["header"]["blocking"] is False
    (row,) = run["rows"]
    assert row["root"] == -1 and row["out_of_place"]["wrong"] == 0
    assert row["in_place"]["wrong"] is None and row["in_place"]["time_us"] == 10.25
    assert run["out_of_bounds"] == {"count": 0, "ok": True}


def test_truncated_json_report_is_an_error_not_an_exception() -> None:
    document = parsed('{"version":1,"nccl_version":22803,"config":{"nthreads":1,"res')
    assert document["runs"] == [] and document["errors"][0]["line"] == 1


# ---- detection ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# Collective test starting: all_reduce_perf\n", ("nccl-tests", 90)),
        ("rccl-tests: Version develop:5272cd1\n# Avg bus bandwidth : 1\n", ("rccl-tests", 90)),
        ("h: Test NCCL failure common.cu:1 'x'\n", ("nccl-tests", 90)),
        ("| payload | busbw | algbw |\n", ("nccl-tests", 20)),
        ("plain text\n", None),
    ],
)
def test_detect(text: str, expected: tuple[str, int] | None) -> None:
    assert nccl_tests.detect(text) == expected


def test_garbage_never_raises() -> None:
    for text in ["", "\x00\x01", "# size count type\n1 2 3 4 5", "8 2 float sum -1 x y z w"]:
        nccl_tests.parse(text, source="x").to_dict()


def test_row_cut_without_newline_is_not_recorded() -> None:
    text = CURRENT.split("# Out of bounds")[0].rstrip("\n")[:-1]  # `... 0.05  N/` cut
    document = parsed(text)
    (run,) = document["runs"]
    assert [r["size_bytes"] for r in run["rows"]] == [0]
    cut = text.count("\n") + 1
    assert any(line == cut and "partial row" in m for line, m in messages(document))
    complete_looking = CURRENT.split("# Out of bounds")[0].rstrip("\n")
    # a pasted copy without its final newline keeps a full-width last row
    assert [r["size_bytes"] for r in parsed(complete_looking)["runs"][0]["rows"]] == [0, 1024]


def test_row_glued_to_an_nccl_info_line_is_reported() -> None:
    text = (
        column_header()
        + "           8             2     float     sum      -1node:1:2 [0] NCCL INFO Connected\n"
        + "    26.08    0.00    0.00      0    24.37    0.00    0.00      0\n"
    )
    document = parsed(text)
    assert document["runs"][0]["rows"] == []
    found = {line for line, m in messages(document) if "row" in m}
    assert found == {2, 3}
