"""junit.xml: one testsuite per host (and one for `cluster`), one testcase per check.

CI systems show it natively. JUnit has no "warn": a warning passes, its reason in <system-out>.
Nor has it "unjudged" (measured, but nothing trustworthy to judge it against): such a check is
<skipped> with its reason, so CI shows it as neither passed nor failed; gpuval's own exit
status for it is 3 (0 with --fail-on fail).
"""

from __future__ import annotations

import re

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


# The document is written as text, exactly as ElementTree would write it (attribute order,
# escaping, `ET.indent` layout, " />" for empty elements): building and serialising an element
# tree took seconds for the fifty thousand checks of a thousand nodes.
INDENT = "  "


def _character_data(text: str) -> str:
    """Element text as ElementTree escapes it."""
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    return text


# What ElementTree escapes in an attribute value besides what it escapes in text, in its order.
_ATTRIBUTE_ONLY = (('"', "&quot;"), ("\r", "&#13;"), ("\n", "&#10;"), ("\t", "&#09;"))


def _attribute(text: str) -> str:
    """An attribute value as ElementTree escapes it."""
    text = _character_data(text)
    for character, reference in _ATTRIBUTE_ONLY:
        if character in text:
            text = text.replace(character, reference)
    return text


def _start(tag: str, attributes: dict[str, str]) -> str:
    listed = "".join(f' {name}="{_attribute(value)}"' for name, value in attributes.items())
    return f"<{tag}{listed}"


def _testcase(check: Check, depth: int) -> str:
    """One check's <testcase>, at `depth` (its own indentation is the caller's)."""
    case = _start(
        "testcase", {"classname": xml_text(check.host), "name": xml_text(check.check_id),
                     "time": "0"},
    )  # fmt: skip
    if check.status == "fail":
        attributes, tag = {"message": xml_text(check.reason), "type": "fail"}, "failure"
        text = _details(check)
    elif check.status == "error":
        attributes, tag = {"message": xml_text(check.reason), "type": "error"}, "error"
        text = _details(check)
    elif check.status == "unjudged":
        attributes, tag = {"message": xml_text(f"unjudged: {check.reason}")}, "skipped"
        text = _details(check)
    elif check.status == "warn":
        attributes, tag = {}, "system-out"
        text = xml_text(f"WARN: {check.reason}\n") + _details(check)
    else:
        return case + " />"
    inner, outer = "\n" + INDENT * (depth + 1), "\n" + INDENT * depth
    child = f"{_start(tag, attributes)}>{_character_data(text)}</{tag}>"
    return f"{case}>{inner}{child}{outer}</testcase>"


def _counts(checks: list[Check]) -> dict[str, str]:
    counts = status_counts(checks)
    return {
        "tests": str(len(checks)),
        "failures": str(counts["fail"]),
        "errors": str(counts["error"]),
        "skipped": str(counts["unjudged"]),
    }


def _testsuite(judgement: RunJudgement, host: str, checks: list[Check]) -> str:
    """One host's <testsuite> at depth 1: its counts, the run's properties, its checks."""
    attributes = {"name": xml_text(host), "timestamp": xml_text(judgement.generated_at)}
    properties = [
        _start("property", {"name": name, "value": xml_text(value)}) + " />"
        for name, value in (
            ("run_id", judgement.run_id),
            ("verdict", judgement.verdict),
            ("gpuval_version", judgement.gpuval_version),
        )
    ]
    at2, at3 = "\n" + INDENT * 2, "\n" + INDENT * 3
    children = [f"<properties>{at3}{at3.join(properties)}\n{INDENT * 2}</properties>"]
    children += [_testcase(check, 2) for check in checks]
    opening = _start("testsuite", attributes | _counts(checks))
    return f"{opening}>{at2}{at2.join(children)}\n{INDENT}</testsuite>"


def junit_xml(judgement: RunJudgement) -> bytes:
    """The document: one <testsuite> per host (then `cluster`'s), its checks worst first."""
    checks = sort_checks(judgement.checks)
    suites = list(judgement.host_names)
    per_host = checks_by_host(checks)
    if CLUSTER in per_host:
        suites.append(CLUSTER)
    root = _start(
        "testsuites", {"name": xml_text(f"gpuval {judgement.run_id}")} | _counts(judgement.checks)
    )
    at1 = "\n" + INDENT
    body = at1.join(_testsuite(judgement, host, per_host.get(host, [])) for host in suites)
    element = f"{root}>{at1}{body}\n</testsuites>" if suites else f"{root} />"
    document = f"<?xml version='1.0' encoding='utf-8'?>\n{element}"
    # as ElementTree writes what UTF-8 cannot hold (a lone surrogate from a JSON sidecar)
    return document.encode("utf-8", "xmlcharrefreplace")
