"""A run started again under the same run id (action gpuval_run_folder): the failure records an
earlier start left for the phases this start plays move to superseded/<host>/, so a phase that
passes now is not judged on its earlier failure; the records of phases it does not play stay.
Seen on a lent H200: a second start whose pairs phase passed was judged FAIL on the first
start's failed-pairs record."""

from __future__ import annotations

import json
from pathlib import Path

from tests.action_plugins import run_action

RUN_JSON = {"run_id": "r1", "hosts": ["node1"]}


def failure(run_dir: Path, host: str, phase: str) -> None:
    folder = run_dir / "raw" / host
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"failed-{phase}.txt").write_text(f"{host} failed in phase {phase}\n")
    (folder / f"failed-{phase}.meta.json").write_text(json.dumps({"exit_code": 1}))


def test_a_restart_moves_the_earlier_failure_records_of_the_phases_it_plays(tmp_path: Path) -> None:
    run_dir = tmp_path / "reports" / "r1"
    failure(run_dir, "node1", "pairs")
    failure(run_dir, "node2", "intranode")
    result = run_action(
        "gpuval_run_folder", {"run_dir": str(run_dir), "run_json": RUN_JSON},
        {"ansible_run_tags": ["all"], "ansible_skip_tags": ["intranode"]},
    ).result  # fmt: skip
    assert not (run_dir / "raw" / "node1" / "failed-pairs.txt").exists()
    assert (run_dir / "raw" / "node2" / "failed-intranode.txt").is_file()  # not played again
    moved = sorted(result["superseded"])
    assert [path.rsplit(".", 1)[0] for path in moved] == [
        "superseded/node1/failed-pairs.meta.json",
        "superseded/node1/failed-pairs.txt",
    ]
    assert (run_dir / moved[1]).read_text() == "node1 failed in phase pairs\n"
    assert len(result["warnings"]) == 2


def test_a_first_start_moves_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "reports" / "r1"
    result = run_action(
        "gpuval_run_folder", {"run_dir": str(run_dir), "run_json": RUN_JSON}, {}
    ).result
    assert result["superseded"] == []
    assert (run_dir / "run.json").is_file()
    assert not (run_dir / "superseded").exists()
