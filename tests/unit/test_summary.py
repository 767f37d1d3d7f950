"""summary.json: valid against its schema, with the verdict, failures and per-host metrics a
nightly job needs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.report_fixtures import raw_file, realistic_results

from gpuval.report import write_report_files
from gpuval.report.summary import build_summary
from gpuval.schema import SchemaError, validate


def test_summary_of_a_realistic_run_matches_its_schema(tmp_path: Path) -> None:
    write_report_files(realistic_results(), tmp_path)
    document = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    validate(document, "summary")
    assert document["run_id"] == "20261121-0600-sample"
    assert document["verdict"] == "fail"
    assert document["counts"] == {"error": 0, "fail": 1, "warn": 1, "pass": 15}


def test_failing_checks_name_host_and_reason() -> None:
    summary = build_summary(realistic_results())
    assert [(c["check_id"], c["host"], c["status"]) for c in summary["failing_checks"]] == [
        ("nccl-tests.all_reduce.busbw", "node3", "fail")
    ]
    assert summary["failing_checks"][0]["reason"].startswith("all_reduce busbw 213.53 GB/s")
    assert [(c["check_id"], c["host"]) for c in summary["warning_checks"]] == [
        ("p2p.unidirectional.min", "node2")
    ]


def test_per_host_status_and_key_metrics() -> None:
    summary = build_summary(realistic_results())
    hosts = {h["name"]: h for h in summary["hosts"]}
    assert {name: h["status"] for name, h in hosts.items()} == {
        "node1": "pass", "node2": "warn", "node3": "fail", "node4": "pass"
    }  # fmt: skip
    assert hosts["node1"]["metrics"] == {
        "busbw_gbps all_reduce": 355.89,  # highest busbw at >= 256 MiB: the 1 GiB row
        "p2p_min_unidirectional_gbps": 363.43,  # lowest off-diagonal cell
    }
    assert hosts["node3"]["metrics"]["busbw_gbps all_reduce"] == 213.53
    one_pass = {"error": 0, "fail": 0, "warn": 0, "pass": 1}
    assert summary["cluster"] == {"status": "pass", "counts": one_pass}
    assert summary["diagnostics"] == {"errors": 0, "warnings": 2}


def test_outliers_are_hosts_well_below_the_median() -> None:
    outliers = build_summary(realistic_results())["outliers"]
    assert [(o["host"], o["metric"]) for o in outliers] == [
        ("node3", "busbw_gbps all_reduce"), ("node3", "p2p_min_unidirectional_gbps")
    ]  # fmt: skip
    assert outliers[0]["median"] == 355.89


def test_host_without_a_measurement_has_null_metrics_and_no_outliers_with_two_hosts() -> None:
    results = realistic_results(hosts=["node1", "node2"], degraded=("node2",))
    results.files = [f for f in results.files if not (f.host == "node2" and "p2p" in f.path)]
    summary = build_summary(results)
    validate(summary, "summary")
    node2 = next(h for h in summary["hosts"] if h["name"] == "node2")
    assert node2["metrics"]["p2p_min_unidirectional_gbps"] is None
    assert summary["outliers"] == []  # two hosts are too few to call one an outlier


def test_schema_rejects_an_unknown_status() -> None:
    summary = build_summary(realistic_results())
    summary["verdict"] = "ok"
    with pytest.raises(SchemaError, match="verdict"):
        validate(summary, "summary")


def test_all_reduce_bench_runs_are_a_metric_of_their_own() -> None:
    # lambda-4xH100-ml-engineering-all_reduce_bench.txt, the last three rows
    rows = [(4, 363.27), (8, 365.21), (16, 366.99)]
    bench = {
        "collective": "all_reduce",
        "nranks": 4,
        "rows": [{"size_bytes": gib * 2**30, "busbw_gbps": bw} for gib, bw in rows],
    }
    results = realistic_results()
    results.files.append(raw_file("node1", "all_reduce_bench", "all_reduce_bench", bench))
    summary = build_summary(results)
    validate(summary, "summary")
    metrics = {h["name"]: h["metrics"] for h in summary["hosts"]}
    assert metrics["node1"]["busbw_gbps all_reduce_bench all_reduce"] == 366.99
    assert metrics["node2"]["busbw_gbps all_reduce_bench all_reduce"] is None
    assert metrics["node1"]["busbw_gbps all_reduce"] == 355.89  # nccl-tests kept apart
