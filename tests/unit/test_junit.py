"""junit.xml: one suite per host plus `cluster`, one case per check, failures and errors as CI
systems read them, and well-formed XML whatever the logs contained."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from tests.report_fixtures import realistic_results

from gpuval.analysis.model import Check
from gpuval.report import write_report_files
from gpuval.report.junit import junit_xml


def parse(results_xml: bytes) -> ET.Element:
    return ET.fromstring(results_xml)


def test_one_suite_per_host_and_cluster_with_counts(tmp_path: Path) -> None:
    write_report_files(realistic_results(), tmp_path)
    root = ET.parse(tmp_path / "junit.xml").getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("17", "1", "0")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["node1", "node2", "node3", "node4", "cluster"]
    assert suites["node3"].get("failures") == "1" and suites["node3"].get("tests") == "4"
    assert suites["cluster"].get("tests") == "1"
    for suite in suites.values():
        properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert properties["run_id"] == "20261121-0600-sample"


def test_cases_carry_host_check_and_reason() -> None:
    root = parse(junit_xml(realistic_results()))
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    assert len(cases) == 17
    failed = cases[("node3", "nccl-tests.all_reduce.busbw")]
    failure = failed.find("failure")
    assert failure is not None
    assert (failure.get("message") or "").startswith("all_reduce busbw 213.53 GB/s")
    assert "measured: 213.53 GB/s" in (failure.text or "")
    warned = cases[("node2", "p2p.unidirectional.min")]
    assert warned.find("failure") is None
    assert (warned.findtext("system-out") or "").startswith("WARN: lowest GPU pair")
    passed = cases[("node1", "topology.nvlink")]
    assert list(passed) == []


def test_error_checks_become_errors() -> None:
    results = realistic_results()
    results.checks.append(
        Check(
            "nccl-tests.all_gather.busbw",
            "node4",
            "completeness",
            "error",
            "no output: the step never finished (exit code unknown)",
        )
    )
    root = parse(junit_xml(results))
    assert root.get("errors") == "1"
    node4 = next(s for s in root.iter("testsuite") if s.get("name") == "node4")
    assert node4.get("errors") == "1"
    error = node4.find("testcase[@name='nccl-tests.all_gather.busbw']/error")
    assert error is not None and "never finished" in (error.get("message") or "")


def test_markup_and_control_characters_from_logs_stay_well_formed() -> None:
    hostile = "<script>alert(1)</script>"
    results = realistic_results(hosts=[hostile, "node2"], degraded=(hostile,),
                                reason_extra=' ]]> & "quoted" \x1b[31mred\x1b[0m')  # fmt: skip
    root = parse(junit_xml(results))  # raises if not well-formed
    assert hostile in [s.get("name") for s in root.iter("testsuite")]
    failure = next(root.iter("failure"))
    assert ']]> & "quoted"' in (failure.get("message") or "")
    assert "\x1b" not in (failure.get("message") or "")
