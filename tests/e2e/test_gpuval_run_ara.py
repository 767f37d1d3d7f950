"""`gpuval run --ara`: ARA records the playbook run through ansible-runner, beside gpuval's own
progress callback. No node is needed: with --tags none and an inventory without GPU nodes only
the run's start (on localhost) runs, which writes run.json; nothing is measured, so the verdict
is ERROR (exit 2), and ARA holds the playbook with its tasks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def test_ara_records_a_gpuval_run(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory" / "hosts.ini"
    inventory.parent.mkdir()
    inventory.write_text("[gpu_nodes]\n")  # no node: the run starts on the implicit localhost
    (inventory.parent / "group_vars").symlink_to(REPO / "inventory" / "group_vars")
    env = {
        **os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "ARA_API_CLIENT": "offline",
        "ARA_BASE_DIR": str(tmp_path / "ara"),
    }  # fmt: skip
    done = subprocess.run(
        [
            str(VENV_BIN / "gpuval"), "run", "--ara", "-i", str(inventory), "--tags", "none",
            "--reports", str(tmp_path / "reports"), "--run-id", "ara-1",
        ],
        cwd=REPO, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "ansible-playbook: successful (rc 0)" in output
    assert "nothing was measured" in output
    assert json.loads((tmp_path / "reports" / "ara-1" / "run.json").read_text())["hosts"] == []
    listed = subprocess.run(
        [str(VENV_BIN / "ara"), "playbook", "list", "-f", "json"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    (playbook,) = json.loads(listed.stdout)
    assert playbook["path"] == str(REPO / "playbooks" / "benchmark.yml")
    assert playbook["status"] == "completed"
    assert playbook["tasks"] > 0
