# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_packages: the module of the same name finds which packages dpkg lacks, then apt
installs those alone, and nothing runs apt when none is missing."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

# The module's documentation (library/gpuval_packages.py) covers both sides.


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = super().run(tmp, task_vars)
        found = self._execute_module(module_args=dict(self._task.args), task_vars=task_vars)
        result.update(found)
        missing: list[str] = found.get("missing", [])
        if found.get("failed") or not missing:
            return result
        if self._task.check_mode:
            return {**result, "changed": True, "msg": f"would install {', '.join(missing)}"}
        apt = self._execute_module(
            module_name="ansible.builtin.apt",
            module_args={
                "name": missing,
                "state": "present",
                "update_cache": True,
                "cache_valid_time": int(self._task.args.get("cache_valid_time", 3600)),
                "install_recommends": bool(self._task.args.get("install_recommends", False)),
            },
            task_vars=task_vars,
        )
        if apt.get("failed"):  # apt's own words alone name python3-apt on an offline node
            why = f"{', '.join(missing)} not installed (dpkg) and apt could not install them"
            return {**result, **apt, "missing": missing, "installed": [],
                    "msg": f"{why}: {apt.get('msg', 'no reason given')}"}  # fmt: skip
        return {**result, **apt, "missing": missing, "installed": missing}
