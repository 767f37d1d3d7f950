"""`dcgmi diag -r <level> -j`: DCGM's diagnostics as JSON, each test's status per GPU.

DCGM 3.x puts everything under "DCGM GPU Diagnostic" with one result per GPU (`gpu_id` or
`gpu_ids`, a string); DCGM 4.x under "DCGM Diagnostic" with `entity_group`/`entity_id` results,
a `test_summary` per test and a top-level `metadata` (version, driver); 4.x documents may also
carry a `runtime_error` instead of tests (the shape is NVIDIA's own schema,
github.com/NVIDIA/DCGM testing/python3/dcgm_diag_schema.json). Warnings are objects with
`warning` and `error_id`, or plain strings in older releases. A line such as "Successfully ran
diagnostic for group." may precede the document.
"""

from __future__ import annotations

import json
from typing import Any

from gpuval.records.base import ParseResult
from gpuval.records.health import DcgmDiagRun, DcgmResult, DcgmTest

TOOLS = ("dcgmi-diag",)
_ROOTS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
# Worst first: a test's status when it has no summary is the worst of its results.
STATUS_ORDER = ("fail", "warn", "skip", "pass")


def detect(text: str) -> tuple[str, int] | None:
    head = text[:4096]
    if any(f'"{root}"' in head for root in _ROOTS):
        return ("dcgmi-diag", 90)
    return None


def _texts(value: Any) -> list[str]:
    """Strings from a string, a list of strings, or objects with `warning`/`info`/`msg`."""
    items = value if isinstance(value, list) else [value] if value else []
    found = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("warning") or item.get("info") or item.get("msg")
        if isinstance(item, str) and item.strip():
            found.append(" ".join(item.split()))
    return found


def _entity(result: dict[str, Any]) -> str:
    if "entity_id" in result:
        group = str(result.get("entity_group") or "GPU")
        return f"{group}{result['entity_id']}"
    gpu = result.get("gpu_id", result.get("gpu_ids"))
    return f"GPU{gpu}" if isinstance(gpu, (str, int)) and str(gpu).isdigit() else str(gpu or "All")


def _result(entry: Any) -> DcgmResult | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("status"), str):
        return None
    warnings = entry.get("warnings")
    error_ids = [
        w["error_id"] for w in (warnings if isinstance(warnings, list) else [])
        if isinstance(w, dict) and isinstance(w.get("error_id"), int)
    ]  # fmt: skip
    return DcgmResult(_entity(entry), entry["status"], _texts(warnings), error_ids)


def worst_status(statuses: list[str]) -> str | None:
    known = [s for s in statuses if s.lower() in STATUS_ORDER]
    if not known:
        return statuses[0] if statuses else None
    return min(known, key=lambda s: STATUS_ORDER.index(s.lower()))


def _test(category: str | None, entry: Any, result: ParseResult) -> DcgmTest | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        result.warn(f"a test without a name in category {category!r}; ignored")
        return None
    results = [r for r in map(_result, entry.get("results") or []) if r is not None]
    summary = entry.get("test_summary")
    status = summary.get("status") if isinstance(summary, dict) else None
    info = _texts(summary.get("info")) if isinstance(summary, dict) else []
    info += [text for r in entry.get("results") or [] if isinstance(r, dict)
             for text in _texts(r.get("info"))]  # fmt: skip
    if not isinstance(status, str):
        status = worst_status([r.status for r in results])
    return DcgmTest(category, entry["name"], status, results, info)


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult("dcgmi-diag", source)
    start = text.find("{")
    if start < 0:
        message = " ".join(text.split())[:200]
        result.error(f"no JSON document (dcgmi printed: {message!r})" if message
                     else "empty output: dcgmi printed nothing")  # fmt: skip
        return result
    try:
        document = json.loads(text[start:])
    except json.JSONDecodeError as problem:
        line = text.count("\n", 0, start) + problem.lineno
        result.error(f"dcgmi JSON cut short or malformed: {problem.msg} (column {problem.colno})",
                     line)  # fmt: skip
        return result
    root_key = next((k for k in _ROOTS if isinstance(document, dict) and k in document), None)
    if root_key is None or not isinstance(document[root_key], dict):
        result.error(f"no {' or '.join(repr(k) for k in _ROOTS)} object in the document")
        return result
    root = document[root_key]
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    run = DcgmDiagRun(
        dcgm_version=metadata.get("version") or root.get("version"),
        driver_version=metadata.get("Driver Version Detected")
        or document.get("Driver Version Detected"),
        runtime_error=root.get("runtime_error") or None,
    )
    for category in root.get("test_categories") or []:
        if not isinstance(category, dict):
            continue
        name = category.get("category") if isinstance(category.get("category"), str) else None
        run.tests += [t for e in category.get("tests") or [] if (t := _test(name, e, result))]
    if run.runtime_error:
        result.error(f"DCGM could not run the diagnostic: {run.runtime_error}")
    elif not run.tests:
        result.error("the diagnostic lists no test (nothing was run)")
    result.runs.append(run)
    return result
