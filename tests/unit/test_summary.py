"""summary.json of a judged run: valid against its schema, with the verdict, what failed, what
could not be judged, and the per-host metrics a nightly job needs.

The run is a real run folder judged by gpuval (tests/report_fixtures.py); node2's NIC is slow
and node3's collectives run at half speed; no node has ibstat (the step is skipped) and no
pair's interface speed was recorded.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from tests.report_fixtures import (
    HALF,
    HOSTS,
    LAMBDA,
    P2P_LOWEST,
    P2P_STEP,
    PLATEAU_BUSBW,
    SLOW_COLLECTIVES,
    SLOW_NIC,
    THROTTLED_GBPS,
    judge,
    write_run,
)
from tests.run_folders import write_step

from gpuval.checks.model import STATUS_ORDER
from gpuval.judgement.model import RunJudgement
from gpuval.report.summary import build_summary
from gpuval.report.writers import write_report_files
from gpuval.schemas.validation import SchemaError, validate

BUSBW = "busbw_gbps all_reduce"
P2P_MIN = "p2p_min_unidirectional_gbps"


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> RunJudgement:
    return judge(write_run(tmp_path_factory.mktemp("run")))


@pytest.fixture(scope="module")
def summary(judged: RunJudgement) -> dict[str, object]:
    return build_summary(judged)


def test_summary_json_matches_its_schema_and_counts_every_status(
    judged: RunJudgement, tmp_path: Path
) -> None:
    write_report_files(judged, tmp_path)
    document = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    validate(document, "summary")
    assert document["run_id"] == "20261121-0600-acceptance"
    assert document["verdict"] == "fail"
    counted = Counter(c.status for c in judged.checks)
    assert document["counts"] == {status: counted[status] for status in STATUS_ORDER}
    # the two faults; the pairs' line rate could not be judged (no interface speed recorded)
    assert (document["counts"]["fail"], document["counts"]["unjudged"]) == (2, 1)


def test_failing_checks_name_host_measurement_and_reference(summary: dict[str, object]) -> None:
    failing = summary["failing_checks"]
    assert isinstance(failing, list)
    assert [(c["check_id"], c["host"], c["status"]) for c in failing] == [
        ("pairs.iperf3.node", SLOW_NIC, "fail"),
        ("nccl-tests.all_reduce.busbw", SLOW_COLLECTIVES, "fail"),
    ]
    pairs, busbw = failing
    assert (pairs["measured"], pairs["unit"]) == (THROTTLED_GBPS, "Gbit/s")  # its pairs' median
    assert busbw["measured"] == pytest.approx(PLATEAU_BUSBW * HALF, abs=0.01)
    assert (busbw["reference"], busbw["unit"]) == (450.0, "GB/s")
    assert all(c["reason"] for c in failing)


def test_unjudged_checks_are_listed_apart_and_never_as_passing(
    summary: dict[str, object],
) -> None:
    unjudged = summary["unjudged_checks"]
    assert isinstance(unjudged, list)
    assert [(c["check_id"], c["host"]) for c in unjudged] == [("pairs.iperf3.line-rate", "cluster")]
    assert {c["status"] for c in unjudged} == {"unjudged"}
    # nothing was measured to judge: no value, no reference, and a reason saying what is missing
    assert {(c["measured"], c["reference"]) for c in unjudged} == {(None, None)}
    assert "sysfs-net" in unjudged[0]["reason"]
    warned = summary["warning_checks"]
    assert isinstance(warned, list)
    assert not {c["check_id"] for c in warned} & {c["check_id"] for c in unjudged}


def test_warnings_are_what_the_outputs_show(summary: dict[str, object]) -> None:
    warned = summary["warning_checks"]
    assert isinstance(warned, list)
    per_host = {
        "p2p.complete",  # the published P2P output stops before its closing NOTE line
        "step.ibstat",  # skipped: ibstat is not installed
    }
    assert sorted((c["host"], c["check_id"]) for c in warned) == sorted(
        [(host, check) for host in HOSTS for check in per_host]
        + [(SLOW_COLLECTIVES, "nccl-tests.all_reduce.busbw.outlier")]  # half the others' busbw
    )


def test_per_host_status_and_key_metrics(summary: dict[str, object]) -> None:
    hosts = summary["hosts"]
    assert isinstance(hosts, list)
    by_name = {h["name"]: h for h in hosts}
    assert {name: h["status"] for name, h in by_name.items()} == {
        "node1": "warn", "node2": "fail", "node3": "fail", "node4": "warn",
    }  # fmt: skip
    assert [h["counts"]["unjudged"] for h in hosts] == [0, 0, 0, 0]
    assert by_name["node1"]["metrics"] == {
        BUSBW: PLATEAU_BUSBW,  # what the check judged: the floor of the plateau, 256 MiB
        P2P_MIN: P2P_LOWEST,  # lowest off-diagonal cell
    }
    assert by_name[SLOW_COLLECTIVES]["metrics"][BUSBW] == pytest.approx(
        PLATEAU_BUSBW * HALF, abs=0.01
    )
    cluster = summary["cluster"]
    assert isinstance(cluster, dict)
    assert cluster["status"] == "unjudged"  # the pairs' line rate; versions and models agree
    assert summary["diagnostics"] == {"errors": 0, "warnings": 0}


def test_outliers_are_hosts_well_below_the_median(summary: dict[str, object]) -> None:
    outliers = summary["outliers"]
    assert isinstance(outliers, list)
    assert [(o["host"], o["metric"], o["median"]) for o in outliers] == [
        (SLOW_COLLECTIVES, BUSBW, PLATEAU_BUSBW)
    ]


def test_the_pairs_name_the_slow_node_and_no_bad_link(summary: dict[str, object]) -> None:
    pairs = summary["pairs"]
    assert isinstance(pairs, dict)
    assert pairs["flagged_nodes"] == [SLOW_NIC]
    assert pairs["flagged_links"] == []  # node2's low pairs are explained by node2
    assert [(n["node"], n["flagged"], n["low_pairs"]) for n in pairs["nodes"]] == [
        (host, host == SLOW_NIC, 3 if host == SLOW_NIC else 1) for host in HOSTS
    ]


def test_host_without_a_measurement_has_null_metrics_and_no_outliers_with_two_hosts(
    tmp_path: Path,
) -> None:
    run = write_run(tmp_path, hosts=["node1", "node2"], slow_collectives=("node2",))
    for path in (run / "raw" / "node2").glob(f"{P2P_STEP}.*"):
        path.unlink()
    summary = build_summary(judge(run))
    validate(summary, "summary")
    node2 = next(h for h in summary["hosts"] if h["name"] == "node2")
    assert node2["metrics"][P2P_MIN] is None
    assert summary["outliers"] == []  # two hosts are too few to call one an outlier
    failing = {(c["check_id"], c["host"]) for c in summary["failing_checks"]}
    assert (f"step.{P2P_STEP}", "node2") in failing  # run.json expected it: missing fails


def test_schema_rejects_an_unknown_status(summary: dict[str, object]) -> None:
    with pytest.raises(SchemaError, match="verdict"):
        validate({**summary, "verdict": "ok"}, "summary")


def test_all_reduce_bench_runs_are_a_metric_of_their_own(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    write_step(run, "node1", "all_reduce_bench", (LAMBDA / "all_reduce_bench.txt").read_text(),
               tool="all_reduce_bench", command="python -u -m torch.distributed.run "
               "--nproc_per_node=4 all_reduce_bench.py")  # fmt: skip
    summary = build_summary(judge(run))
    validate(summary, "summary")
    metrics = {h["name"]: h["metrics"] for h in summary["hosts"]}
    # the floor of its plateau: 335.62 at 256 MiB (its best, 366.99, is at 16 GiB)
    assert metrics["node1"]["busbw_gbps all_reduce_bench all_reduce"] == 335.62
    assert metrics["node2"]["busbw_gbps all_reduce_bench all_reduce"] is None
    assert metrics["node1"][BUSBW] == PLATEAU_BUSBW  # nccl-tests kept apart
