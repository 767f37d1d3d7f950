"""junit.xml: one testsuite per host (and one for `cluster`), one testcase per check.

CI systems show it natively. JUnit has no "warn": a warning passes, its reason in <system-out>.
Nor has it "unjudged" (measured, but nothing trustworthy to judge it against): such a check is
<skipped> with its reason, so CI shows it as neither passed nor failed; gpuval's own exit
status for it is 3 (0 with --fail-on fail).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from gpuval.checks.model import CLUSTER, Check
from gpuval.judgement.model import RunJudgement
from gpuval.judgement.vocabulary import reference_name, suggested_action
from gpuval.report.summary import checks_by_host, sort_checks, status_counts

# XML 1.0 forbids most control characters (ANSI colour codes in logs would make the file
# unreadable); ElementTree escapes markup but writes these through as they are.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def xml_text(text: object) -> str:
    return _NOT_XML.sub("\ufffd", str(text))


def _details(check: Check) -> str:
    parts = [
        f"status: {check.status}",
        f"category: {check.category}",
        f"measured: {check.measured} {check.unit or ''}".rstrip(),
        f"{reference_name(check)}: {check.reference} {check.unit or ''}".rstrip(),
        f"source: {check.source}",
    ]
    if action := suggested_action(check):
        parts.append(f"action: {action}")
    return xml_text("\n".join(parts))


def _testcase(suite: ET.Element, check: Check) -> None:
    case = ET.SubElement(
        suite, "testcase", classname=xml_text(check.host), name=xml_text(check.check_id), time="0"
    )
    if check.status == "fail":
        failure = ET.SubElement(case, "failure", message=xml_text(check.reason), type="fail")
        failure.text = _details(check)
    elif check.status == "error":
        error = ET.SubElement(case, "error", message=xml_text(check.reason), type="error")
        error.text = _details(check)
    elif check.status == "unjudged":
        skipped = ET.SubElement(case, "skipped", message=xml_text(f"unjudged: {check.reason}"))
        skipped.text = _details(check)
    elif check.status == "warn":
        ET.SubElement(case, "system-out").text = xml_text(f"WARN: {check.reason}\n") + _details(
            check
        )


def _set_counts(element: ET.Element, checks: list[Check]) -> None:
    counts = status_counts(checks)
    element.set("tests", str(len(checks)))
    element.set("failures", str(counts["fail"]))
    element.set("errors", str(counts["error"]))
    element.set("skipped", str(counts["unjudged"]))


def build_junit(judgement: RunJudgement) -> ET.ElementTree[ET.Element]:
    root = ET.Element("testsuites", name=xml_text(f"gpuval {judgement.run_id}"))
    _set_counts(root, judgement.checks)
    checks = sort_checks(judgement.checks)
    suites = list(judgement.host_names)
    per_host = checks_by_host(checks)
    if CLUSTER in per_host:
        suites.append(CLUSTER)
    for host in suites:
        host_checks = per_host.get(host, [])
        suite = ET.SubElement(
            root, "testsuite", name=xml_text(host), timestamp=xml_text(judgement.generated_at)
        )
        _set_counts(suite, host_checks)
        properties = ET.SubElement(suite, "properties")
        for name, value in (
            ("run_id", judgement.run_id),
            ("verdict", judgement.verdict),
            ("gpuval_version", judgement.gpuval_version),
        ):
            ET.SubElement(properties, "property", name=name, value=xml_text(value))
        for check in host_checks:
            _testcase(suite, check)
    ET.indent(root)
    return ET.ElementTree(root)


def junit_xml(judgement: RunJudgement) -> bytes:
    document: bytes = ET.tostring(
        build_junit(judgement).getroot(), encoding="utf-8", xml_declaration=True
    )
    return document
