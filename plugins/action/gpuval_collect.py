# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_collect: a node's run folder to the controller's raw/<host>/, in one task."""

from __future__ import annotations

import base64
import binascii
import io
import shlex
import tarfile
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_collect
short_description: Bring a node's raw outputs to the controller in one round trip
description:
  - Packs O(node_dir) on the node (tar, gzip) in one command over the open connection (with
    become when the task has it), carries the archive back in that command's output, and
    unpacks it into O(dest_dir) on the controller, over what an earlier collect brought.
  - Everything goes (outputs of failed steps, partial outputs of killed steps, sidecars of
    skipped steps). A node without O(node_dir) changes nothing and says so in RV(msg).
options:
  node_dir: {description: The node's run folder., type: path, required: true}
  dest_dir: {description: "The controller's raw/<host>/ folder.", type: path, required: true}
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "node_dir": {"type": "path", "required": True},
    "dest_dir": {"type": "path", "required": True},
}


class ActionModule(ActionBase):
    _supports_check_mode = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        node_dir = args["node_dir"]
        packed = self._low_level_execute_command(
            f"tar -czf - -C {shlex.quote(node_dir)} . | base64 -w0", sudoable=True
        )
        try:
            archive = base64.b64decode(packed["stdout"], validate=True)
            files, new = _unpack(archive, Path(args["dest_dir"]))
        except (binascii.Error, tarfile.TarError, OSError) as problem:
            why = (packed.get("stderr") or "").strip() or str(problem)
            return {**result, "changed": False, "files": 0, "msg": f"nothing to collect in "
                    f"{node_dir} ({why})"}  # fmt: skip
        return {
            **result,
            "changed": new > 0,
            "files": files,
            "new_files": new,
            "msg": f"{files} file(s), {new} new or changed -> {args['dest_dir']}",
        }


def _unpack(archive: bytes, dest: Path) -> tuple[int, int]:
    """Unpack a .tar.gz into dest: the number of files it held, and of those new or changed
    (size or modification time) since an earlier collect."""
    if not archive:
        raise tarfile.TarError("empty archive")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        files = [member for member in tar.getmembers() if member.isfile()]
        new = sum(not _same(dest / member.name, member) for member in files)
        tar.extractall(dest, filter="data")
    return len(files), new


def _same(path: Path, member: tarfile.TarInfo) -> bool:
    try:
        found = path.stat()
    except OSError:
        return False
    return found.st_size == member.size and int(found.st_mtime) == int(member.mtime)
