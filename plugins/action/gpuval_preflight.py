# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_preflight: every preflight probe in one module call; facts read by gpuval."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_preflight
short_description: Capture a node's inventory in one call and publish the facts later roles need
description:
  - Runs every probe of C(gpuval.plan.steps.PREFLIGHT_PROBES) on the node in one C(gpuval_capture)
    call (raw file and sidecar each, phase preflight; a program not installed is recorded as
    skipped), then reads the facts from the outputs with gpuval's parsers on the controller
    (C(gpuval.plugin_api.preflight_facts)) and sets them as host facts.
  - Returns RV(problems), what makes this node's benchmarks meaningless (GPUs lost or fewer
    than O(expected_gpus)); deciding what to do about them is the role's.
options:
  dest: {description: The node's raw-output folder of this run., type: path, required: true}
  host: {description: Host name recorded in the sidecars., type: str}
  timeout: {description: Seconds before one probe is killed., type: float, default: 120}
  expected_gpus:
    description: GPUs the node should show (0 = do not check).
    type: int
    default: 0
  cuda_home: {description: Toolkit whose nvcc is asked first., type: str}
  nccl_home: {description: NCCL whose header is read first., type: str}
  nvcc_dirs:
    description: Folders searched for nvcc next (then PATH).
    type: list
    elements: str
    default: []
  nccl_headers:
    description: Headers read for the NCCL version next.
    type: list
    elements: str
    default: []
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "dest": {"type": "path", "required": True},
    "host": {"type": "str"},
    "timeout": {"type": "float", "default": 120},
    "expected_gpus": {"type": "int", "default": 0},
    "cuda_home": {"type": "str"},
    "nccl_home": {"type": "str"},
    "nvcc_dirs": {"type": "list", "elements": "str", "default": []},
    "nccl_headers": {"type": "list", "elements": "str", "default": []},
}


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.plugin_api import (
            capture_on_node,
            host_problems,
            preflight_facts,
            preflight_probes,
        )

        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        probes = preflight_probes(
            args["cuda_home"], args["nccl_home"], args["nvcc_dirs"], args["nccl_headers"]
        )
        captured = capture_on_node(
            self._execute_module, self._task.resolved_action, task_vars, args, "preflight", probes
        )
        if captured.get("failed"):
            return {**result, **captured}
        facts = preflight_facts(captured["results"], args["timeout"])
        result.update(
            changed=False,  # read-only queries: the files are this run's record, not a change
            ansible_facts=facts,
            problems=host_problems(facts, args["expected_gpus"]),
            probes=[{k: v for k, v in r.items() if k != "output"} for r in captured["results"]],
        )
        return result
