"""Run a node-side module of library/ the way Ansible runs it: a process given a JSON args file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

LIBRARY = Path(__file__).resolve().parents[1] / "library"
MODULE_UTILS = LIBRARY.parent / "plugins" / "module_utils"
# What Ansible's module packaging does for a module that imports ansible.module_utils.gpuval_*:
# the repository's module_utils (ansible.cfg) beside ansible-core's own.
RUN_MODULE = (
    "import runpy, sys, ansible.module_utils as shared; "
    "shared.__path__.append(sys.argv.pop(1)); sys.argv.pop(0); "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def module_argv(module: str, args_file: Path) -> list[str]:
    """The command that runs library/<module>.py on args_file, its module_utils found."""
    return [sys.executable, "-c", RUN_MODULE, str(MODULE_UTILS), str(LIBRARY / f"{module}.py"),
            str(args_file)]  # fmt: skip


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
        module_argv(module, args_file),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result: dict[str, Any] = json.loads(completed.stdout)
    return result
