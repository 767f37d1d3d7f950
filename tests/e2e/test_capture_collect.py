"""gpuval_capture with collect_to (its action plugin): the step's files, and whatever else of the
node's run folder the controller lacks, reach raw/<host>/ in the step's own task, as a
gpuval_collect task after it would bring them; a dry run brings nothing; steps that outlive
the task (background) refuse it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuval.files.parse_cache import CACHE_DIR
from tests.e2e.local_playbook import run_locally


def capture(node_dir: Path, raw: Path, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": f"Capture {name}", "register": "captured",
        "gpuval_capture": {
            "name": name, "dest": str(node_dir), "host": "node1", "command": f"echo {name}",
            "phase": "network", "collect_to": str(raw), **extra,
        },
    }  # fmt: skip


def keep(result: Path) -> dict[str, Any]:
    return {"name": "Keep it", "ansible.builtin.copy": {
        "content": "{{ captured | to_json }}", "dest": str(result),
    }}  # fmt: skip


def test_a_step_brings_the_node_folders_new_files_in_its_own_task(tmp_path: Path) -> None:
    node_dir, raw = tmp_path / "node" / "run", tmp_path / "run" / "raw" / "node1"
    node_dir.mkdir(parents=True)
    (node_dir / "earlier.txt").write_text("left by an earlier phase\n")
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    completed = run_locally(tmp_path, ["node1"], {
        "name": "capture and collect", "gather_facts": False,
        "tasks": [capture(node_dir, raw, "one"), keep(first),
                  capture(node_dir, raw, "two"), keep(second)],
    })  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    once, again = json.loads(first.read_text()), json.loads(second.read_text())
    assert once["rc"] == 0 and "pack" not in once
    assert (once["collected"]["files"], once["collected"]["new_files"]) == (3, 3)
    assert (again["collected"]["files"], again["collected"]["new_files"]) == (5, 2)
    assert sorted(p.name for p in raw.iterdir()) == [
        "earlier.txt", "one.meta.json", "one.txt", "two.meta.json", "two.txt"
    ]  # fmt: skip
    assert (raw / "two.txt").read_text() == "two\n"
    assert json.loads((raw / "two.meta.json").read_text())["exit_code"] == 0
    # The read-ahead found a run folder's raw/<host>/: the report will find them parsed.
    assert [p.name for p in (tmp_path / "run" / CACHE_DIR).iterdir()] == ["node1.pickle"]


def test_a_dry_run_collects_nothing_and_background_steps_refuse_it(tmp_path: Path) -> None:
    node_dir, raw = tmp_path / "node" / "run", tmp_path / "run" / "raw" / "node1"
    completed = run_locally(tmp_path, ["node1"], {
        "name": "dry", "gather_facts": False,
        "tasks": [{**capture(node_dir, raw, "one"), "check_mode": True}],
    })  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert not raw.exists() and not node_dir.exists()
    completed = run_locally(tmp_path, ["node1"], {
        "name": "background", "gather_facts": False,
        "tasks": [capture(node_dir, raw, "served", background="served")],
    })  # fmt: skip
    assert completed.returncode == 2
    assert "collect_to is for steps that end within the task, not background" in completed.stdout
    assert not raw.exists()
