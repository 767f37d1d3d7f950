"""The report writers: report.html, summary.json and junit.xml, views of a RunJudgement."""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

from gpuval.files.atomic import OutputSet
from gpuval.judgement.model import RunJudgement
from gpuval.report.html import render_report
from gpuval.report.junit import junit_xml
from gpuval.report.summary import build_summary

__all__ = ["report_files", "write_report_files"]


# The leaves of summary.json: json's C encoder, which `indent=` would leave for its pure-Python
# one (seconds for the 16 MB summary of a thousand nodes).
_LEAF = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _leaf(value: Any) -> str:
    """A value that is no container to lay out, as json writes it: the plain types directly
    (a hundred thousand leaves at a thousand nodes), the rest (NaN: refused) by the encoder."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value)
    if kind is int:
        return int.__repr__(value)
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    if value is None:
        return "null"
    return _LEAF.encode(value)


def indented_json(value: Any, depth: int = 0) -> str:
    """`json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)`, character for
    character: containers laid out here, everything else written as json writes it."""
    if isinstance(value, dict) and value and all(type(key) is str for key in value):
        inner = "\n" + "  " * (depth + 1)
        members = (
            f"{encode_basestring(k)}: {indented_json(v, depth + 1)}" for k, v in value.items()
        )
        return "{" + inner + ("," + inner).join(members) + "\n" + "  " * depth + "}"
    if isinstance(value, (list, tuple)) and value:
        inner = "\n" + "  " * (depth + 1)
        entries = (indented_json(entry, depth + 1) for entry in value)
        return "[" + inner + ("," + inner).join(entries) + "\n" + "  " * depth + "]"
    if isinstance(value, dict) and value:  # keys json turns into text: its own layout, moved in
        text = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
        return text.replace("\n", "\n" + "  " * depth)
    return _leaf(value)


def report_files(judgement: RunJudgement) -> dict[str, str | bytes]:
    """report.html, summary.json and junit.xml by name, rendered (nothing written)."""
    summary = indented_json(build_summary(judgement))
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
