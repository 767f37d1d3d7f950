"""results.json: the whole of a judged run (gpuval.judgement.RunJudgement), schema-validated."""

from __future__ import annotations

import json
from typing import Any

from gpuval.judgement.model import RunJudgement
from gpuval.records.base import to_jsonable
from gpuval.schemas.validation import validate


def results_document(judgement: RunJudgement) -> dict[str, Any]:
    """The results.json document (schema: results.schema.json)."""
    j = judgement
    return {
        "schema_version": 1,
        "run_id": j.run_id,
        "generated_at": j.generated_at,
        "gpuval_version": j.gpuval_version,
        "verdict": j.verdict,
        "hosts": to_jsonable(j.hosts),
        "files": [f.document for f in j.files],
        "checks": to_jsonable(j.checks),
        "expectations": to_jsonable(j.expectations),
        "diagnostics": to_jsonable(j.diagnostics),  # run-folder problems
        "meta": to_jsonable(j.meta),  # run.json as written by the playbook
        # The pair analysis' tables "tries", "pairs", "nodes"; {} when no pair test ran.
        "pairs": to_jsonable(j.pair_tables),
        # The acceptance profile and the baseline the run was judged with (None: defaults, none).
        "profile": j.profile_name,
        "baseline": j.baseline_name,
    }


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


def results_json(judgement: RunJudgement) -> str:
    """The content of results.json, validated; deterministic (sorted keys, fixed indent)."""
    document = results_document(judgement)
    validate(validation_sample(document), "results")
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
