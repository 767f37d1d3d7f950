# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_collect: a node's new run-folder files to the controller's raw/<host>/, in one
round trip."""

from __future__ import annotations

import base64
import binascii
import io
import os
import stat
import tarfile
from pathlib import Path
from typing import Any, NamedTuple

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_collect
short_description: Bring a node's new raw outputs to the controller in one round trip
description:
  - Tells the node what O(dest_dir) on the controller holds already (each file's size and
    modification time), and the node (module C(gpuval_pack), with become when the task has it)
    packs what is new or changed in O(node_dir) and sends it back in the same round trip, so a
    collect after every phase costs what that phase wrote.
  - Everything goes (outputs of failed steps, partial outputs of killed steps, sidecars of
    skipped steps, hidden files); links and special files do not.
  - Each file is written whole (a temporary file renamed into place, never through a link). A
    controller copy is never replaced by a shorter one from the node (a truncated or emptied
    file would destroy evidence); it is kept, and named in a warning. A node without
    O(node_dir) changes nothing and says so in RV(msg).
options:
  node_dir: {description: The node's run folder., type: path, required: true}
  dest_dir: {description: "The controller's raw/<host>/ folder.", type: path, required: true}
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "node_dir": {"type": "path", "required": True},
    "dest_dir": {"type": "path", "required": True},
}
PACK_MODULE = "gpuval_pack"


class ActionModule(ActionBase):
    _supports_check_mode = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.files.atomic import OutputError
        from gpuval.plugin_api import sibling_module

        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        node_dir, dest = args["node_dir"], Path(args["dest_dir"])
        packed = self._execute_module(
            module_name=sibling_module(self._task.resolved_action, PACK_MODULE),
            module_args={"path": node_dir, "held": held(dest)},
            task_vars=task_vars,
        )
        if packed.get("failed"):
            return {**result, **packed}
        if not packed["found"]:
            return {**result, "changed": False, "files": 0, "new_files": 0,
                    "msg": f"nothing to collect: no folder {node_dir}"}  # fmt: skip
        try:
            unpacked = unpack(base64.b64decode(packed["archive"], validate=True), dest)
        except (binascii.Error, tarfile.TarError, OSError, OutputError) as problem:
            return {**result, "failed": True, "msg": f"what {node_dir} sent cannot be unpacked "
                    f"into {dest}: {problem}"}  # fmt: skip
        warnings = [
            f"{dest}/{name}: the controller's copy kept, the node's is shorter"
            for name in unpacked.kept
        ] + [f"{node_dir}/{problem} (left for a later collect)" for problem in packed["unreadable"]]
        if unpacked.written:
            warnings += read_ahead(dest)
        return {
            **result,
            "changed": bool(unpacked.written),
            "files": packed["files"],
            "new_files": len(unpacked.written),
            "kept": unpacked.kept,
            "msg": f"{packed['files']} file(s), {len(unpacked.written)} new or changed -> {dest}",
            **({"warnings": warnings} if warnings else {}),
        }


def held(dest: Path) -> dict[str, list[int]]:
    """What the controller holds of the node: path relative to dest -> [size, mtime (whole
    seconds)], regular files only (what gpuval_pack compares with)."""
    found: dict[str, list[int]] = {}
    for folder, _, names in os.walk(dest):
        for name in names:
            path = Path(folder, name)
            status = path.lstat()
            if stat.S_ISREG(status.st_mode):
                found[str(path.relative_to(dest))] = [status.st_size, int(status.st_mtime)]
    return found


def read_ahead(dest: Path) -> list[str]:
    """Parse what just arrived in raw/<host>/ into the run's parse cache, so that `gpuval report`
    finds it read; warnings (never a failure: the report reads what the cache lacks)."""
    from gpuval.runfolder import RAW_DIR, update_parse_cache

    if dest.parent.name != RAW_DIR:
        return []
    try:
        update_parse_cache(dest.parent.parent, dest.name)
    except Exception as problem:  # a slower report, never a lost collect
        return [f"{dest}: not read ahead for the report ({type(problem).__name__}: {problem})"]
    return []


class Unpacked(NamedTuple):
    written: list[str]
    kept: list[str]  # controller copies longer than the node's


def unpack(archive: bytes, dest: Path) -> Unpacked:
    """The regular files of a .tar.gz into dest, each whole, inside dest (tarfile's data
    filter), never shortening a file dest holds."""
    outcome = Unpacked([], [])
    if not archive:
        return outcome
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            if not member.isfile():
                continue
            safe = tarfile.data_filter(member, str(dest))
            target = dest / safe.name
            if _longer(target, safe.size):
                outcome.kept.append(safe.name)
                continue
            source = tar.extractfile(member)
            assert source is not None  # a regular file
            _write_whole(target, source.read(), safe.mtime)
            outcome.written.append(safe.name)
    return outcome


def _longer(path: Path, size: int) -> bool:
    """Whether path is a regular file longer than size (a link is no copy to keep)."""
    try:
        found = path.lstat()
    except FileNotFoundError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size > size


def _write_whole(path: Path, content: bytes, mtime: float) -> None:
    """Whole or not at all, never through a link (gpuval.files.atomic), with the node's modification
    time: the next collect compares it with the node's."""
    from gpuval.files.atomic import write_output

    write_output(path, content)
    os.utime(path, (mtime, mtime))
