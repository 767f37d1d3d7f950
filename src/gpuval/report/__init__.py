"""The report writers: report.html, summary.json and junit.xml from a judged run."""

from __future__ import annotations

import json
from pathlib import Path

from gpuval.checks.thresholds import DEFAULTS, Thresholds
from gpuval.report.html import render_report
from gpuval.report.junit import junit_xml
from gpuval.report.summary import build_summary
from gpuval.results import RunResults

__all__ = ["write_report_files"]


def write_report_files(
    results: RunResults, out_dir: Path, thresholds: Thresholds = DEFAULTS
) -> None:
    """Write report.html, summary.json and junit.xml into `out_dir` (created if missing).
    `thresholds`: those the checks were judged with (large-message size, outlier rule, band)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.html").write_text(render_report(results, thresholds), encoding="utf-8")
    document = build_summary(results, thresholds)
    summary = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    (out_dir / "summary.json").write_text(summary + "\n", encoding="utf-8")
    (out_dir / "junit.xml").write_bytes(junit_xml(results))
