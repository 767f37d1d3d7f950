"""The report writers: report.html, summary.json and junit.xml from a judged run."""

from __future__ import annotations

import json
from pathlib import Path

from gpuval.checks.thresholds import DEFAULTS, Thresholds
from gpuval.outputs import OutputSet
from gpuval.report.html import render_report
from gpuval.report.junit import junit_xml
from gpuval.report.summary import build_summary
from gpuval.results import RunResults

__all__ = ["report_files", "write_report_files"]


def report_files(results: RunResults, thresholds: Thresholds = DEFAULTS) -> dict[str, str | bytes]:
    """report.html, summary.json and junit.xml by name, rendered (nothing written).
    `thresholds`: those the checks were judged with (large-message size, outlier rule, band)."""
    document = build_summary(results, thresholds)
    summary = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    return {
        "report.html": render_report(results, thresholds),
        "summary.json": summary + "\n",
        "junit.xml": junit_xml(results),
    }


def write_report_files(
    results: RunResults, out_dir: Path, thresholds: Thresholds = DEFAULTS
) -> None:
    """Write report.html, summary.json and junit.xml into `out_dir` (created if missing), all
    three or none (gpuval.outputs)."""
    outputs = OutputSet()
    for name, content in report_files(results, thresholds).items():
        outputs.add(out_dir / name, content)
    outputs.commit()
