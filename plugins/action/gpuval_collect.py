# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_collect: a node's new run-folder files to the controller's raw/<host>/, in one
round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
  - Each file is written whole (a temporary file renamed into place, never through a link).
    The node's copy is the one judged (a step's output and sidecar from the same try); a
    controller copy longer than it is moved to the run's superseded/<host>/ first, never lost,
    and named in a warning. A node without
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
        from gpuval.files.node_archive import held
        from gpuval.plugin_api import collect_packed, sibling_module

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
        return {**result, **collect_packed(packed, node_dir, dest)}
