"""The suite's own run on a lent H100 (tests/data/device/h100-x1-suite-2026-11-22): judged again
from its raw outputs, the verdict is what the outputs say (README there), nothing more."""

from __future__ import annotations

import json
from pathlib import Path

from gpuval.pipeline import report_run

RUN = Path(__file__).parents[1] / "data" / "device" / "h100-x1-suite-2026-11-22"
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "sendrecv")


def test_the_h100_suite_run_fails_on_its_mpi_preflight_alone(tmp_path: Path) -> None:
    assert report_run(RUN, out_dir=tmp_path, quiet=True) == 1
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["verdict"] == "fail"
    checks = {(c["host"], c["check_id"]): c for c in results["checks"]}
    failing = {key for key, c in checks.items() if c["status"] in {"fail", "error"}}
    assert failing == {
        ("localhost", "step.mpi-preflight"), ("localhost", "parse.error"),
        ("localhost", "mpi-preflight"),
    }  # fmt: skip
    for collective in COLLECTIVES:
        busbw = checks[("localhost", f"nccl-tests.{collective}.busbw")]
        assert busbw["status"] == "pass" and "one GPU" in busbw["reason"]
        assert checks[("localhost", f"nccl-tests.{collective}.correctness")]["status"] == "pass"
    p2p = checks[("localhost", "step.p2pBandwidthLatencyTest")]
    assert p2p["status"] == "warn" and "needs 2+ GPUs" in p2p["reason"]
    for subject in ("xid", "memory", "clocks"):
        assert checks[("localhost", f"health.{subject}")]["status"] == "pass"
