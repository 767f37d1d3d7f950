"""A judged run: everything the report, summary.json, junit.xml and measurements.csv need,
and results.json (the whole of it, schema-validated)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from gpuval.checks.model import Check, Expectation, Status
from gpuval.evidence import HostFacts
from gpuval.records.base import Diagnostic, to_jsonable
from gpuval.runfolder import RawFile
from gpuval.schema import validate


@dataclass
class RunResults:
    run_id: str
    generated_at: str
    gpuval_version: str
    verdict: Status
    hosts: list[HostFacts]
    files: list[RawFile]
    checks: list[Check]
    expectations: list[Expectation]
    diagnostics: list[Diagnostic] = field(default_factory=list)  # run-folder problems
    meta: dict[str, Any] = field(default_factory=dict)  # run.json as written by the playbook
    # The pair analysis (gpuval.checks.pairs.PairAnalysis.to_dict): tables "tries", "pairs",
    # "nodes"; {} when no pair test ran.
    pairs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # The acceptance profile and the baseline the run was judged with (None: defaults, none).
    profile: str | None = None
    baseline: str | None = None


def results_document(results: RunResults) -> dict[str, Any]:
    """The results.json document (schema: results.schema.json)."""
    document = {
        f.name: to_jsonable(getattr(results, f.name))
        for f in dataclasses.fields(results)
        if f.name != "files"
    }
    document["schema_version"] = 1
    document["files"] = [
        {**to_jsonable(raw), "parse": raw.parse.to_dict() if raw.parse else None}
        for raw in results.files
    ]
    return document


# Files whose parse result is checked against the schemas, per tool. One parser gives every file
# the same shape, so more prove nothing new, while a thousand nodes' files would take minutes.
VALIDATED_FILES_PER_TOOL = 20


def validation_sample(document: dict[str, Any]) -> dict[str, Any]:
    """results.json as validated: everything but `files`, of which the first
    VALIDATED_FILES_PER_TOOL of each tool (and of files no parser read)."""
    kept: dict[str | None, int] = {}
    files = []
    for entry in document["files"]:
        tool = entry["parse"]["tool"] if entry["parse"] else None
        kept[tool] = kept.get(tool, 0) + 1
        if kept[tool] <= VALIDATED_FILES_PER_TOOL:
            files.append(entry)
    return {**document, "files": files}


RESULTS_FILE = "results.json"


def results_json(results: RunResults) -> str:
    """The content of results.json, validated; deterministic (sorted keys, fixed indent)."""
    document = results_document(results)
    validate(validation_sample(document), "results")
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
