# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_capture: the module of the same name on the node and, with `collect_to`, the
new files of its run folder into the controller's raw/<host>/ in the same round trip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

# The module's documentation (library/gpuval_capture.py) covers both sides, collect_to included.


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.plugin_api import CAPTURE_MODULE, sibling_module

        result: dict[str, Any] = super().run(tmp, task_vars)
        module_args = dict(self._task.args)
        collect_to = module_args.get("collect_to")
        target = Path(collect_to) if collect_to and not self._task.check_mode else None
        if target is not None:
            from gpuval.files.node_archive import held

            module_args["pack_held"] = held(target)
        captured = self._execute_module(
            module_name=sibling_module(self._task.resolved_action, CAPTURE_MODULE),
            module_args=module_args,
            task_vars=task_vars,
        )
        result.update(captured)
        if target is None or captured.get("failed"):
            return result
        if "pack" not in captured:  # never a collect that silently brought nothing
            why = f"the node's {CAPTURE_MODULE} packed nothing for collect_to {target}"
            return {**result, "failed": True, "msg": f"{why}: it is not this gpuval's module"}
        from gpuval.plugin_api import collect_packed

        collected = collect_packed(result.pop("pack"), str(module_args["dest"]), target)
        warnings = collected.pop("warnings", [])
        if warnings:
            result["warnings"] = [*result.get("warnings", []), *warnings]
        if collected.get("failed"):
            return {**result, "failed": True, "msg": collected["msg"]}
        return {**result, "collected": collected}
