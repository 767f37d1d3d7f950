"""The run folder's start (action gpuval_run_folder, run by ansible-playbook): raw/ and run.json
made once; a run started again with its run id keeps its first run.json; check mode writes
nothing; a link where run.json goes is refused, never written through."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.local_playbook import run_locally

DOCUMENT = {"run_id": "r1", "started_at": "2026-11-27T08:00:00Z", "hosts": ["node1"],
            "expected": {"node1": ["os-release"]}, "config": {}, "declared": {}}  # fmt: skip


def start(
    tmp_path: Path, run_dir: Path, document: dict[str, Any], changed: bool, check: bool = False
) -> tuple[int, str]:
    """The action run once; the play fails unless it reports `changed`."""
    task = {"name": "Start", "gpuval_run_folder": {"run_dir": str(run_dir), "run_json": document},
            "check_mode": check, "register": "made"}  # fmt: skip
    said = {"name": "Changed?", "ansible.builtin.assert": {"that": [f"made.changed == {changed}"]}}
    completed = run_locally(tmp_path, ["localhost"], {
        "name": "run folder", "gather_facts": False, "tasks": [task, said],
    })  # fmt: skip
    return completed.returncode, completed.stdout + completed.stderr


def test_a_new_run_gets_its_folder_and_run_json_and_keeps_them(tmp_path: Path) -> None:
    run_dir = tmp_path / "reports" / "r1"
    returncode, output = start(tmp_path, run_dir, DOCUMENT, changed=True)
    assert returncode == 0, output
    assert (run_dir / "raw").is_dir()
    assert json.loads((run_dir / "run.json").read_text()) == DOCUMENT
    first = (run_dir / "run.json").read_text()
    assert first.endswith("}\n") and first.index('"config"') < first.index('"run_id"')  # sorted
    again = {**DOCUMENT, "started_at": "2026-11-27T09:00:00Z"}
    returncode, output = start(tmp_path, run_dir, again, changed=False)
    assert returncode == 0, output
    assert (run_dir / "run.json").read_text() == first


def test_check_mode_writes_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "reports" / "r1"
    returncode, output = start(tmp_path, run_dir, DOCUMENT, changed=True, check=True)
    assert returncode == 0, output
    assert not run_dir.exists()


def test_a_link_where_run_json_goes_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "reports" / "r1"
    (run_dir / "raw").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere.json"
    (run_dir / "run.json").symlink_to(elsewhere)
    returncode, output = start(tmp_path, run_dir, DOCUMENT, changed=True)
    assert returncode == 2, output
    assert "fatal: [localhost]" in output and f"{run_dir / 'run.json'}" in output, output
    assert not elsewhere.exists()
