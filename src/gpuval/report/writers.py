"""The report writers: report.html, summary.json and junit.xml, views of a RunJudgement."""

from __future__ import annotations

import json
from pathlib import Path

from gpuval.files.atomic import OutputSet
from gpuval.judgement.model import RunJudgement
from gpuval.report.html import render_report
from gpuval.report.junit import junit_xml
from gpuval.report.summary import build_summary

__all__ = ["report_files", "write_report_files"]


def report_files(judgement: RunJudgement) -> dict[str, str | bytes]:
    """report.html, summary.json and junit.xml by name, rendered (nothing written)."""
    document = build_summary(judgement)
    summary = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
    return {
        "report.html": render_report(judgement),
        "summary.json": summary + "\n",
        "junit.xml": junit_xml(judgement),
    }


def write_report_files(judgement: RunJudgement, out_dir: Path) -> None:
    """Write report.html, summary.json and junit.xml into `out_dir` (created if missing), all
    three or none (gpuval.files.atomic)."""
    outputs = OutputSet()
    for name, content in report_files(judgement).items():
        outputs.add(out_dir / name, content)
    outputs.commit()
