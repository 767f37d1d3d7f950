# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_health_probes: the passive health probes of one stage in one module call."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_health_probes
short_description: Capture a node's passive health probes of one stage in one call
description:
  - Runs the probes of C(gpuval.plan.health_probes) whose stage is O(stage) on the node in one
    C(gpuval_capture) call (raw file and sidecar each, phase health; a program or path not there
    is recorded as skipped). The same table is what C(gpuval node-health) runs on a Slurm node.
  - The second capture of a probe (O(stage=after)) is the step of the same name with C(-after).
options:
  dest: {description: The node's raw-output folder of this run., type: path, required: true}
  host: {description: Host name recorded in the sidecars., type: str}
  stage:
    description: Before or after the benchmarks.
    type: str
    required: true
    choices: [before, after]
  timeout: {description: Seconds before one probe is killed., type: float, default: 60}
  sysfs_pci_root:
    description: Where the PCI devices are listed.
    type: str
    default: /sys/bus/pci/devices
  sysfs_infiniband_root:
    description: Where the RDMA adapters are listed.
    type: str
    default: /sys/class/infiniband
  modules_file: {description: The loaded kernel modules., type: str, default: /proc/modules}
  kernel_log_command:
    description: Shell command printing the kernel log since boot; empty for gpuval's own.
    type: str
    default: ""
  skip:
    description: Probe name -> why it is recorded as skipped instead of run.
    type: dict
    default: {}
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "dest": {"type": "path", "required": True},
    "host": {"type": "str"},
    "stage": {"type": "str", "required": True, "choices": ["before", "after"]},
    "timeout": {"type": "float", "default": 60},
    "sysfs_pci_root": {"type": "str", "default": "/sys/bus/pci/devices"},
    "sysfs_infiniband_root": {"type": "str", "default": "/sys/class/infiniband"},
    "modules_file": {"type": "str", "default": "/proc/modules"},
    "kernel_log_command": {"type": "str", "default": ""},
    "skip": {"type": "dict", "default": {}},
}


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.plan.health_probes import ProbePaths, capture_steps
        from gpuval.plugin_api import capture_on_node

        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        paths = ProbePaths(
            args["sysfs_pci_root"], args["sysfs_infiniband_root"], args["modules_file"],
            args["kernel_log_command"] or "",
        )  # fmt: skip
        skip = {str(name): str(why) for name, why in args["skip"].items()}
        probes = capture_steps(args["stage"], paths, skip)
        captured = capture_on_node(
            self._execute_module, self._task.resolved_action, task_vars, args, "health", probes
        )
        # Read-only queries: the files are this run's record, not a change to the node.
        return {**result, **captured, "changed": False}
