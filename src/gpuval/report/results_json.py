"""results.json: the whole of a judged run (gpuval.judgement.RunJudgement), schema-validated.

It keeps the judgement (checks, references, expectations, pair tables, hosts) and, of each raw
file, what identifies it: its sidecar (what ran, how it ended), the tool that read it, how many
runs it held and the parser's diagnostics. The parsed records themselves stay derivable from the
raw files beside it (`gpuval parse FILE`): copying them made results.json grow with the text
(85 % of it at 128 nodes) instead of with the measurements.
"""

from __future__ import annotations

import json
from typing import Any

from gpuval.judgement.model import FileEntry, RunJudgement
from gpuval.records.base import to_jsonable
from gpuval.schemas.validation import validate

SCHEMA_VERSION = 2  # 2: `files` items hold a parse summary, not the parsed records


def _file_item(entry: FileEntry) -> dict[str, Any]:
    """One `files` item: the file, the sidecar of the step that wrote it, and what the parser
    made of it (null: unrecognised, missing or skipped)."""
    parse = None
    if entry.tool is not None:
        parse = {
            "tool": entry.tool,
            "run_count": entry.run_count,
            "errors": [to_jsonable(d) for d in entry.errors],
            "warnings": [to_jsonable(d) for d in entry.warnings],
        }
    return {
        "host": entry.host,
        "path": entry.path,
        "sidecar": to_jsonable(entry.step),
        "parse": parse,
    }


def results_document(judgement: RunJudgement) -> dict[str, Any]:
    """The results.json document (schema: results.schema.json)."""
    j = judgement
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": j.run_id,
        "generated_at": j.generated_at,
        "gpuval_version": j.gpuval_version,
        "verdict": j.verdict,
        "hosts": to_jsonable(j.hosts),
        "files": [_file_item(f) for f in j.files],
        "checks": to_jsonable(j.checks),
        "expectations": to_jsonable(j.expectations),
        "diagnostics": to_jsonable(j.diagnostics),  # run-folder problems
        "meta": to_jsonable(j.meta),  # run.json as written by the playbook
        # The pair analysis' tables "tries", "pairs", "nodes"; {} when no pair test ran.
        "pairs": to_jsonable(j.pair_tables),
        # The acceptance profile and the baseline the run was judged with (None: defaults, none).
        "profile": j.profile_name,
        "baseline": j.baseline_name,
        # NVLink domains (NVL72 racks); left out when the run has none.
        **({"racks": to_jsonable(j.racks)} if j.racks else {}),
        # Copies a later one replaced, kept under superseded/; left out when there are none.
        **({"superseded": list(j.superseded)} if j.superseded else {}),
    }


RESULTS_FILE = "results.json"


# json.dumps(sort_keys=True) makes a new encoder at every call: one for the ~100,000 entries.
_ENTRY = json.JSONEncoder(sort_keys=True)


def _laid_out(value: Any, depth: int = 0) -> str:
    """JSON text of `value`, sorted keys: objects open one member per line and arrays one entry
    per line, each entry on a single line (objects with other keys than text too, as json writes
    them). json's C encoder writes the entries; `indent=` would take its pure-Python encoder,
    minutes at a thousand nodes."""
    inner = "  " * (depth + 1)
    if isinstance(value, dict) and value and all(isinstance(key, str) for key in value):
        members = (
            f"{inner}{json.dumps(key)}: {_laid_out(value[key], depth + 1)}" for key in sorted(value)
        )
    elif isinstance(value, list) and value:
        members = (f"{inner}{_ENTRY.encode(entry)}" for entry in value)
    else:
        return _ENTRY.encode(value)
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    return opening + "\n" + ",\n".join(members) + "\n" + "  " * depth + closing


def results_json(judgement: RunJudgement) -> str:
    """The content of results.json, validated; deterministic (sorted keys; one line per check,
    file, host or table row)."""
    document = results_document(judgement)
    validate(document, "results")  # all of it: compiled, it costs a fraction of writing it
    return _laid_out(document) + "\n"
