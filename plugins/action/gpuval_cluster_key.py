# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_cluster_key: the run's ssh key pair on the controller, made at the start of a
run and removed at its end."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_cluster_key
short_description: Make or remove the run's ssh key pair in a controller folder of its own
description:
  - Runs in the controller process (a task on localhost starts a Python interpreter for each
    module it runs, which every run paid twice); never connects to a node.
  - With O(state=present), makes O(key_dir) (0700, parents included) and in it an ed25519 key
    pair O(key_name) without a passphrase, commented O(comment), with C(ssh-keygen); a key
    already there is kept. Also in check mode, since a dry run shows what the nodes would get.
  - With O(state=absent), removes O(key_dir) and everything in it (not in check mode).
options:
  key_dir: {description: The run's key folder on the controller., type: path, required: true}
  key_name: {description: The private key's file name (the public key adds .pub)., type: str}
  comment: {description: The key's comment (ssh-keygen -C)., type: str}
  state:
    description: C(present) at the start of a run, C(absent) at its end.
    type: str
    choices: [present, absent]
    default: present
"""

RETURN = r"""
key: {description: The private key's path (O(state=present))., returned: success, type: str}
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "key_dir": {"type": "path", "required": True},
    "key_name": {"type": "str", "no_log": False},
    "comment": {"type": "str"},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
}


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars or {})
        _, args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC,
            required_if=[("state", "present", ("key_name", "comment"))],
        )
        key_dir = Path(args["key_dir"])
        if args["state"] == "absent":
            there = key_dir.exists() or key_dir.is_symlink()
            if there and not self._task.check_mode:
                try:
                    if key_dir.is_symlink():  # the link goes, never what it leads to
                        key_dir.unlink()
                    else:
                        shutil.rmtree(key_dir)
                except OSError as problem:
                    where = problem.filename or key_dir
                    return {**result, "failed": True, "msg": f"{where}: {problem.strerror}"}
            return {**result, "changed": there}
        key = key_dir / args["key_name"]
        if key.exists():
            return {**result, "changed": False, "key": str(key)}
        try:
            key_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            key_dir.chmod(0o700)
            made = subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", args["comment"],
                 "-f", str(key)],
                capture_output=True, text=True, check=False, timeout=60,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as problem:
            return {**result, "failed": True, "msg": f"cannot make the run's key {key}: {problem}"}
        if made.returncode != 0:
            return {**result, "failed": True,
                    "msg": f"ssh-keygen failed ({made.returncode}) for {key}: "
                           f"{made.stderr.strip() or made.stdout.strip()}"}  # fmt: skip
        return {**result, "changed": True, "key": str(key)}
