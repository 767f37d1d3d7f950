#!/usr/bin/python
# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible module: pack the files of a node's run folder that the controller does not hold yet."""

from __future__ import annotations

import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule

try:  # the repository's library/ (ansible.cfg's module_utils)
    from ansible.module_utils.gpuval_pack_files import pack
except ImportError:  # the gpuval.cluster collection
    from ansible_collections.gpuval.cluster.plugins.module_utils.gpuval_pack_files import pack

DOCUMENTATION = r"""
---
module: gpuval_pack
short_description: Pack a node's new or changed run-folder files for the controller
description:
  - The node side of the C(gpuval_collect) action, which gives it O(held) and unpacks what it
    returns into the controller's C(raw/<host>/).
  - Packs (tar, gzip) every regular file under O(path) whose size or modification time (whole
    seconds) differs from what O(held) lists, hidden files and partial outputs included, and
    returns the archive base64-encoded, so a collect after every phase carries only what the
    phase wrote.
  - Links and other special files are left out. A file that cannot be read is named in
    RV(unreadable) and left for a later collect. A node without O(path) packs nothing and says
    so in RV(found).
version_added: "0.1.0"
options:
  path: {description: The node's run folder., type: path, required: true}
  held:
    description: What the controller holds already, path relative to O(path) -> [size, mtime].
    type: dict
    default: {}
"""

RETURN = r"""
found: {description: Whether O(path) is a folder., returned: always, type: bool}
files: {description: Regular files under O(path)., returned: always, type: int}
packed: {description: Files in RV(archive) (new or changed)., returned: always, type: int}
archive:
  description: The .tar.gz of those files, base64 (empty when none).
  returned: always
  type: str
unreadable:
  description: Files that could not be packed, each with the reason.
  returned: always
  type: list
  elements: str
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "path": {"type": "path", "required": True},
    "held": {"type": "dict", "default": {}},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    root = module.params["path"]
    if not os.path.isdir(root):
        module.exit_json(changed=False, found=False, files=0, packed=0, archive="", unreadable=[])
    module.exit_json(changed=False, **pack(root, module.params["held"]))


if __name__ == "__main__":
    main()
