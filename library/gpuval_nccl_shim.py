#!/usr/bin/python
# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible module: a folder of links that makes any NCCL look like NCCL_HOME/{include,lib}."""

from __future__ import annotations

import os
import re
import stat
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: gpuval_nccl_shim
short_description: Link NCCL's headers and libraries into one NCCL_HOME-shaped folder
description:
  - Every consumer of NCCL (nccl-tests' Makefile, the launchers) takes C(-I$NCCL_HOME/include
    -L$NCCL_HOME/lib -lnccl), wherever the files really are (a distribution package, a wheel).
    Creates O(shim_dir)/include and O(shim_dir)/lib (mode 0755) and links into them every
    C(nccl*) and C(libnccl*) of O(include_dir) and O(lib_dir) (NCCL >= 2.28 adds
    C(nccl_device.h) and a C(nccl_device/) folder).
  - Where O(lib_dir) has only versioned names (a wheel ships C(libnccl.so.2)), C(lib/libnccl.so)
    links to the highest C(libnccl.so.N), which C(-lnccl) needs.
  - A link is replaced only when it points elsewhere, so a second run changes nothing. Check mode
    says what would change.
version_added: "0.1.0"
options:
  shim_dir:
    description: The folder to build (absolute).
    type: path
    required: true
  include_dir:
    description: The folder that holds nccl.h.
    type: path
    required: true
  lib_dir:
    description: The folder that holds libnccl.so*.
    type: path
    required: true
"""

RETURN = r"""
changes:
  description: What was (or, in check mode, would be) made or relinked, one line each.
  type: list
  elements: str
  returned: always
"""

_VERSIONED = re.compile(r"libnccl\.so\.(\d+)\Z")


def wanted_links(include_dir: str, lib_dir: str, shim_dir: str) -> dict[str, str]:
    """Link path in the shim -> what it points at."""
    links: dict[str, str] = {}
    for source, folder in ((include_dir, "include"), (lib_dir, "lib")):
        names = sorted(os.listdir(source)) if os.path.isdir(source) else []
        for name in names:
            if name.startswith(("nccl", "libnccl")):
                links[os.path.join(shim_dir, folder, name)] = os.path.join(source, name)
    unversioned = os.path.join(lib_dir, "libnccl.so")
    if not os.path.exists(unversioned) and os.path.isdir(lib_dir):
        versions = [m for name in os.listdir(lib_dir) if (m := _VERSIONED.match(name))]
        if versions:
            newest = max(versions, key=lambda m: int(m[1]))
            links[os.path.join(shim_dir, "lib", "libnccl.so")] = os.path.join(lib_dir, newest[0])
    return links


def build_shim(params: dict[str, Any], check: bool) -> list[str]:
    """Make the shim's folders and links; what changed."""
    changes: list[str] = []
    for folder in ("include", "lib"):
        path = os.path.join(params["shim_dir"], folder)
        if not os.path.isdir(path):
            changes.append(f"{path}: created")
            if not check:
                os.makedirs(path, mode=0o755, exist_ok=True)
        elif stat.S_IMODE(os.stat(path).st_mode) != 0o755:
            changes.append(f"{path}: mode 0755")
        if not check:
            os.chmod(path, 0o755)  # makedirs' mode is masked by the umask
    links = wanted_links(params["include_dir"], params["lib_dir"], params["shim_dir"])
    for link, target in links.items():
        current = os.readlink(link) if os.path.islink(link) else None
        if current == target:
            continue
        changes.append(f"{link} -> {target}")
        if check:
            continue
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(target, link)
    return changes


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "shim_dir": {"type": "path", "required": True},
            "include_dir": {"type": "path", "required": True},
            "lib_dir": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    try:
        changes = build_shim(module.params, module.check_mode)
    except OSError as problem:
        module.fail_json(msg=f"{problem.filename}: {problem.strerror}", changes=[])
    module.exit_json(changed=bool(changes), changes=changes)


if __name__ == "__main__":
    main()
