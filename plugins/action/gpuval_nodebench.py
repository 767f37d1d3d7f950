# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_nodebench: where a node program of the gpuval package lies on the controller."""

from __future__ import annotations

import hashlib
from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_nodebench
short_description: Path and checksum of a program gpuval ships for the nodes
description:
  - The file C(gpuval.nodebench/<name>) of the controller's gpuval package (C(mpi_preflight.c),
    C(allreduce_bench.py)), for a role's C(copy:); RV(sha1) names a build of it. Never connects
    to a node.
options:
  name: {description: File name in gpuval.nodebench., type: str, required: true}
"""


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.nodebench import source_path

        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(
            argument_spec={"name": {"type": "str", "required": True}}
        )
        path = source_path(args["name"])
        if not path.is_file():
            return {**result, "failed": True, "msg": f"gpuval.nodebench has no {args['name']}"}
        digest = hashlib.sha1(path.read_bytes(), usedforsecurity=False).hexdigest()
        return {**result, "changed": False, "path": str(path), "sha1": digest}
