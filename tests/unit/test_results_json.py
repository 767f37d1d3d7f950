"""results.json keeps the judgement and, per raw file, what identifies it (its sidecar, the tool,
how many runs, the parser's diagnostics), never the parsed records: those stay derivable from
the raw file (`gpuval parse`), so the document grows with the measurements, not with the raw
text; the history still reads the version-1 documents that held them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuval.history.store import RunEntry
from gpuval.pipeline import judge
from gpuval.records.base import to_jsonable
from gpuval.report.results_json import results_document
from gpuval.runfolder import read_run_folder

SAMPLE_RUN = Path(__file__).parents[1] / "data" / "sample-run"


def _files(run: Path) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = results_document(judge(run, generated_at="t"))["files"]
    return items


def test_each_file_item_is_its_sidecar_tool_run_count_and_diagnostics() -> None:
    items = _files(SAMPLE_RUN)
    parses = {raw.path: raw.parse for raw in read_run_folder(SAMPLE_RUN).files}
    assert [item["path"] for item in items] == list(parses)
    for item in items:
        sidecar = json.loads((SAMPLE_RUN / item["path"]).with_suffix(".meta.json").read_text())
        assert item["sidecar"]["command"] == sidecar["command"]
        assert item["sidecar"]["exit_code"] == sidecar["exit_code"]
        if item["parse"] is None:
            continue
        parsed = parses[item["path"]]  # what `gpuval parse` prints of it, less the records
        assert parsed is not None
        assert item["parse"] == {
            "tool": parsed.tool,
            "run_count": len(parsed.runs),
            "errors": [to_jsonable(d) for d in parsed.errors],
            "warnings": [to_jsonable(d) for d in parsed.warnings],
        }


def test_the_history_reads_a_version_1_results_json_with_the_records(tmp_path: Path) -> None:
    run = tmp_path / "run-v1"
    run.mkdir()
    check = {
        "check_id": "nccl-tests.all_reduce.busbw", "host": "node1", "status": "pass",
        "measured": 230.0, "reference": 200.0, "unit": "GB/s", "reason": "230 GB/s",
    }  # fmt: skip
    records = {
        "tool": "nccl-tests",
        "source": "raw/node1/nccl-all_reduce.txt",
        "runs": [{"collective": "all_reduce", "rows": []}],
        "warnings": [],
        "errors": [],
    }
    (run / "results.json").write_text(json.dumps({
        "schema_version": 1, "run_id": "run-v1", "generated_at": "2026-11-01T00:00:00Z",
        "verdict": "pass", "checks": [check], "meta": {}, "hosts": [{"name": "node1"}],
        "files": [{"host": "node1", "path": "raw/node1/nccl-all_reduce.txt", "sidecar": None,
                   "parse": records}],
    }))  # fmt: skip
    (run / "summary.json").write_text(json.dumps({"run_id": "run-v1", "verdict": "pass",
                                                  "figures": []}))  # fmt: skip
    entry = RunEntry.from_folder(run)
    assert (entry.run_id, entry.verdict, entry.checks) == ("run-v1", "pass", [check])
    assert entry.hosts == [{"name": "node1", "status": "pass"}]
