"""junit.xml of a judged run: one suite per host plus `cluster`, one case per check; failures and
errors as CI systems read them, unjudged checks as skipped with their reason (never passed),
and well-formed XML whatever the logs contained.

The run is a real run folder judged by gpuval (tests/report_fixtures.py): node2's NIC is slow,
node3's collectives run at half speed, and no pair's interface speed was recorded.
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from tests.report_fixtures import (
    HOSTS,
    NCCL_STEP,
    RUN_ID,
    SLOW_COLLECTIVES,
    SLOW_NIC,
    judge,
    write_run,
)

from gpuval.judgement.model import RunJudgement
from gpuval.report.junit import junit_xml
from gpuval.report.writers import write_report_files


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> RunJudgement:
    return judge(write_run(tmp_path_factory.mktemp("run")))


def cases(root: ET.Element) -> dict[tuple[str | None, str | None], ET.Element]:
    return {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


def test_one_suite_per_host_and_cluster_with_counts(judged: RunJudgement, tmp_path: Path) -> None:
    write_report_files(judged, tmp_path)
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert root.tag == "testsuites"
    # two faults fail; the pairs' line rate is unjudged: skipped
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        str(len(judged.checks)), "2", "0", "1"
    )  # fmt: skip
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == [*HOSTS, "cluster"]
    for host in HOSTS:
        suite = suites[host]
        failed = "1" if host in (SLOW_NIC, SLOW_COLLECTIVES) else "0"
        assert (suite.get("failures"), suite.get("skipped")) == (failed, "0"), host
        assert suite.get("tests") == str(sum(c.host == host for c in judged.checks))
    assert suites["cluster"].get("skipped") == "1"
    for suite in suites.values():
        properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert (properties["run_id"], properties["verdict"]) == (RUN_ID, "fail")


def test_cases_carry_host_check_and_reason(judged: RunJudgement) -> None:
    found = cases(ET.fromstring(junit_xml(judged)))
    assert len(found) == len(judged.checks)
    check = next(c for c in judged.checks if (c.host, c.check_id) == (
        SLOW_COLLECTIVES, "nccl-tests.all_reduce.busbw"))  # fmt: skip
    failure = found[(SLOW_COLLECTIVES, "nccl-tests.all_reduce.busbw")].find("failure")
    assert failure is not None and failure.get("message") == check.reason
    assert f"measured: {check.measured} GB/s" in (failure.text or "")
    assert f"source: raw/{SLOW_COLLECTIVES}/{NCCL_STEP}.txt:" in (failure.text or "")
    warned = found[("node1", "p2p.complete")]
    assert warned.find("failure") is None and warned.find("skipped") is None
    assert (warned.findtext("system-out") or "").startswith("WARN: output ends before")
    passed = found[("node1", "nccl-tests.all_reduce.busbw")]
    assert list(passed) == []


def test_unjudged_checks_are_skipped_with_their_reason(judged: RunJudgement) -> None:
    found = cases(ET.fromstring(junit_xml(judged)))
    skipped = {key for key, case in found.items() if case.find("skipped") is not None}
    assert skipped == {("cluster", "pairs.iperf3.line-rate")}
    for key in skipped:
        (child,) = list(found[key])  # skipped alone: neither failed nor passed with output
        reason = next(c.reason for c in judged.checks if (c.host, c.check_id) == key)
        assert child.tag == "skipped" and child.get("message") == f"unjudged: {reason}"
        assert "status: unjudged" in (child.text or "")


def test_error_checks_become_errors(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    meta = json.loads((run / "run.json").read_text())
    meta["declared"]["node4"] = {"gpu_model": "H100 SMX"}  # a typo in the inventory
    (run / "run.json").write_text(json.dumps(meta))
    root = ET.fromstring(junit_xml(judge(run)))
    assert root.get("errors") == "1"
    node4 = next(s for s in root.iter("testsuite") if s.get("name") == "node4")
    assert node4.get("errors") == "1"
    error = node4.find("testcase[@name='hardware.gpu-model']/error")
    assert error is not None and "'H100 SMX'" in (error.get("message") or "")


def test_markup_and_control_characters_from_logs_stay_well_formed(tmp_path: Path) -> None:
    hostile = "<script>alert(1)<\\script>"
    run = write_run(tmp_path, hosts=["node1", hostile], slow_collectives=())
    log = run / "raw" / "node1" / f"{NCCL_STEP}.txt"
    log.write_text(log.read_text().replace(
        "NCCL INFO NCCL version",
        "NCCL WARN Cuda failure ']]> & \"quoted\" \x1b[31mred\x1b[0m'\n"
        "192-222-52-239:16629:16629 [0] NCCL INFO NCCL version", 1,
    ))  # fmt: skip
    root = ET.fromstring(junit_xml(judge(run)))  # raises if not well-formed
    assert hostile in [s.get("name") for s in root.iter("testsuite")]
    (message,) = [f.get("message") or "" for f in root.iter("failure")]  # the fatal WARN line
    assert "Cuda failure" in message and ']]> & "quoted"' in message and "\x1b" not in message


def test_it_is_the_text_elementtree_writes_for_it(judged: RunJudgement) -> None:
    # junit.xml is written as text for speed: read back and written again by ElementTree
    # (whose layout CI tools have read so far), it is the same bytes. Every status, and
    # markup, quotes, tabs and newlines in names and reasons.
    odd = 'a <b> & "c"\tand\nnext'
    checks = [
        dataclasses.replace(check, reason=f"{check.reason} {odd}", check_id=f"{check.check_id}&")
        for check in judged.checks
    ]
    checks[0] = dataclasses.replace(checks[0], status="error")
    statuses = {check.status for check in checks}
    assert statuses == {"error", "fail", "unjudged", "warn", "pass"}
    document = junit_xml(dataclasses.replace(judged, checks=checks, run_id=f"run {odd}"))
    written_again = ET.tostring(ET.fromstring(document), encoding="utf-8", xml_declaration=True)
    assert written_again == document


def test_a_run_without_hosts_or_checks_is_one_empty_element(judged: RunJudgement) -> None:
    document = junit_xml(dataclasses.replace(judged, checks=[], host_names=[]))
    assert document.decode().splitlines()[1].endswith(' skipped="0" />')
    written_again = ET.tostring(ET.fromstring(document), encoding="utf-8", xml_declaration=True)
    assert written_again == document
