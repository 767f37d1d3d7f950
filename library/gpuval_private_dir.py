#!/usr/bin/python
# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible module: a folder the run builds and executes from, that no other user can write."""

from __future__ import annotations

import os
import pwd
import stat
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: gpuval_private_dir
short_description: Create a folder only the task's user can write, or refuse one that is not
description:
  - gpuval builds and runs programs (nccl-tests, the time-to-live watchdog) from folders on the
    node, as root when become is on. A folder another user created first, or may write, would
    let that user replace what root runs.
  - Creates O(path) and every missing parent with O(mode), owned by the user the module runs as
    (root with become).
  - Fails, naming the path, its owner and mode and what to do, when O(path) exists and is a
    symbolic link, not a folder, owned by another user, or writable by group or others; or
    when an existing parent is owned by another user than root or the runner, or is writable by
    group or others without the sticky bit (such a parent's other users could replace O(path)).
version_added: "0.1.0"
options:
  path:
    description: Absolute path of the folder.
    type: path
    required: true
  mode:
    description: Mode of the folders created (octal string); group and others never get write.
    type: str
    default: "0755"
"""

RETURN = r"""
created:
  description: The folders created, outermost first.
  type: list
  elements: str
  returned: always
owner:
  description: Owner of O(path) (user name, else uid).
  type: str
  returned: success
mode:
  description: Mode of O(path), octal.
  type: str
  returned: success
"""

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _described(path: str, info: os.stat_result) -> str:
    return f"{path} (owner {_user(info.st_uid)}, mode {stat.S_IMODE(info.st_mode):04o})"


def _target_problem(path: str, uid: int) -> str | None:
    """Why the existing folder `path` must not be used, or None."""
    info = os.lstat(path)
    runner = _user(uid)
    remedy = (
        f"check what is inside, remove it (rm -rf {path}) and run again, or point "
        "gpuval_work_root elsewhere"
    )
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link (to {os.readlink(path)}): gpuval refuses it; {remedy}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{_described(path, info)} is not a folder; {remedy}"
    if info.st_uid != uid or info.st_mode & _OTHERS_WRITE:
        return (
            f"{_described(path, info)} must be owned by {runner}, who builds and runs the "
            f"benchmarks from it, and not writable by group or others; {remedy}"
        )
    return None


def _parent_problem(path: str, target: str, uid: int) -> str | None:
    """Why the existing parent `path` lets another user replace `target`, or None."""
    info = os.stat(path)  # a link to a parent is fine as long as where it leads is safe
    if not stat.S_ISDIR(info.st_mode):
        return f"{_described(path, info)} is not a folder, so {target} cannot be created"
    foreign = info.st_uid not in (0, uid)
    loose = info.st_mode & _OTHERS_WRITE and not info.st_mode & stat.S_ISVTX
    if foreign or loose:
        return (
            f"{_described(path, info)} lets another user replace {target} (it must be owned by "
            f"root or {_user(uid)}, and writable by group or others only with the sticky bit); "
            "set gpuval_work_root to a folder under a safe parent"
        )
    return None


def ensure_private_dir(path: str, mode: int, create: bool) -> tuple[list[str], str | None]:
    """(folders created, problem): creates the missing levels of `path` (unless not `create`)
    and checks every existing one."""
    uid, created = os.geteuid(), list[str]()
    parts = path.strip("/").split("/")
    for depth in range(1, len(parts) + 1):
        level = "/" + "/".join(parts[:depth])
        is_target = depth == len(parts)
        if not os.path.lexists(level):
            if not create:
                return created, None  # check mode: nothing below a missing level exists
            try:
                os.mkdir(level, mode)
                os.chmod(level, mode)  # the umask may have taken bits away
                created.append(level)
                continue
            except FileExistsError:
                pass  # created meanwhile by someone else: checked below like any existing one
        if level in created:
            continue
        problem = _target_problem(level, uid) if is_target else _parent_problem(level, path, uid)
        if problem:
            return created, problem
    return created, None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "mode": {"type": "str", "default": "0755"},
        },
        supports_check_mode=True,
    )
    path = os.path.normpath(module.params["path"])
    try:
        mode = int(module.params["mode"], 8)
    except ValueError:
        module.fail_json(msg=f"mode {module.params['mode']!r}: give an octal mode such as 0755")
    if not os.path.isabs(path) or path == "/":
        module.fail_json(msg=f"path {path!r}: give an absolute folder below /")
    if mode & _OTHERS_WRITE or mode & ~0o777:
        module.fail_json(msg=f"mode {mode:04o}: group and others may not write (e.g. 0755, 0700)")
    try:
        created, problem = ensure_private_dir(path, mode, create=not module.check_mode)
    except OSError as error:
        module.fail_json(msg=f"{error.filename or path}: {error.strerror or error}", created=[])
    if problem:
        module.fail_json(msg=problem, created=created)
    would_create = module.check_mode and not os.path.lexists(path)
    result: dict[str, Any] = {
        "changed": bool(created) or would_create,
        "created": created,
        "path": path,
    }
    if os.path.isdir(path):
        info = os.lstat(path)
        result.update(owner=_user(info.st_uid), mode=f"{stat.S_IMODE(info.st_mode):04o}")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
