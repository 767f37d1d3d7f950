# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_cluster_versions: mixed driver or NCCL versions across the preflight's hosts."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_cluster_versions
short_description: Mixed NVIDIA driver or NCCL versions across hosts, from their preflight facts
description:
  - Compares the facts C(gpuval_preflight) set on O(hosts) (C(gpuval.plugin_api.version_problems))
    in the controller process; returns one sentence per problem in RV(problems).
options:
  hosts:
    description: Hosts to compare (hosts without preflight facts are left out).
    type: list
    elements: str
    required: true
"""

FACT_KEYS = ("preflight_driver_version", "preflight_nccl_version")


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.plugin_api import version_problems

        task_vars = task_vars or {}
        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(
            argument_spec={"hosts": {"type": "list", "elements": "str", "required": True}}
        )
        hostvars = task_vars.get("hostvars", {})
        facts = {
            host: {key: self._templar.template(hostvars[host].get(key)) for key in FACT_KEYS}
            for host in args["hosts"]
            if host in hostvars
        }
        return {**result, "changed": False, "problems": version_problems(facts)}
