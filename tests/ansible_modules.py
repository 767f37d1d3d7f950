"""Run a node-side module of library/ the way Ansible runs it: a process given a JSON args file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

LIBRARY = Path(__file__).resolve().parents[1] / "library"


def run_module(
    module: str, tmp_path: Path, check_mode: bool = False, /, **args: Any
) -> dict[str, Any]:
    """Run library/<module>.py with ANSIBLE_MODULE_ARGS (`args`, which may hold a `name`) and
    return its JSON result."""
    module_args = dict(args)
    if check_mode:
        module_args["_ansible_check_mode"] = True
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": module_args}))
    completed = subprocess.run(
        [sys.executable, str(LIBRARY / f"{module}.py"), str(args_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result: dict[str, Any] = json.loads(completed.stdout)
    return result
