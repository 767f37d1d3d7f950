# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_mpirun: start MPI ranks the one way (gpuval.plan.mpirun), captured by
gpuval_capture."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_mpirun
short_description: Run a program under mpirun from the launch contract, capturing its output
description:
  - Builds the mpirun command from the fact C(openmpi_launch) that the openmpi role publishes
    (mpirun path, options, interface, NCCL environment, addresses; see C(gpuval.plan.mpirun)) and
    runs it on the node through the C(gpuval_capture) module, which keeps the raw output and
    the sidecar.
  - With O(steps), several programs one after another in one module call, each its own step.
  - Without C(openmpi_launch) (the openmpi role did not run) the steps are recorded as skipped.
  - With the inventory variable C(gpuval_launcher=slurm), ranks on several nodes start as a job
    step of the Slurm allocation C(gpuval_slurm_jobid) (C(srun --overlap --mpi=pmix), see
    C(gpuval.plan.mpirun.srun_command)), each host as its C(gpuval_slurm_node); a host outside
    the allocation (C(gpuval_slurm_allocated), when set), or one that has left it since (the
    job's nodes, read with C(scontrol show job) on the controller before each srun step), makes
    the step skipped, not tested.
options:
  hosts:
    description: Inventory names of the hosts the ranks run on (C(localhost) for the node itself).
    type: list
    elements: str
    required: true
  ranks_per_host:
    description: Ranks started on each host.
    type: int
    required: true
  program:
    description: The program and its arguments, run by every rank (one step, O(name)).
    type: list
    elements: str
  steps:
    description: Several steps, each a dict with C(name) and C(program), run in this order.
    type: list
    elements: dict
  env:
    description: Environment of the ranks beyond the contract's (forwarded with C(-x) too).
    type: dict
    default: {}
  name: {description: Step name (gpuval_capture), type: str, required: true}
  dest: {description: Node folder of the raw output (gpuval_capture), type: path, required: true}
  host: {description: Host name in the sidecar (gpuval_capture), type: str}
  phase: {description: Phase of the step (gpuval_capture), type: str, required: true}
  tool: {description: Parser hint (gpuval_capture), type: str}
  timeout: {description: Seconds before mpirun's process group is killed, type: float, default: 0}
  skip_reason: {description: Run nothing; record why (gpuval_capture), type: str}
author:
  - gpuval contributors
"""

EXAMPLES = r"""
- name: Run all_reduce_perf over two nodes, one rank per GPU
  gpuval_mpirun:
    name: pair-nccl-r1-node1--node2-try1
    dest: "{{ gpuval_node_run_dir }}"
    host: "{{ inventory_hostname }}"
    phase: internode
    tool: nccl-tests
    hosts: [node1, node2]
    ranks_per_host: 8
    program: ["{{ nccl_tests_bin_dir }}/all_reduce_perf", -b, "8", -e, 1G, -g, "1"]
    env: {NCCL_DEBUG: INFO}
"""

CAPTURE_OPTIONS = ("dest", "host", "phase", "tool", "timeout", "skip_reason")
ARGUMENT_SPEC: dict[str, Any] = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "ranks_per_host": {"type": "int", "required": True},
    "program": {"type": "list", "elements": "str"},
    "steps": {"type": "list", "elements": "dict"},
    "env": {"type": "dict", "default": {}},
    "name": {"type": "str"},
    "dest": {"type": "path", "required": True},
    "host": {"type": "str"},
    "phase": {"type": "str", "required": True},
    "tool": {"type": "str"},
    "timeout": {"type": "float", "default": 0},
    "skip_reason": {"type": "str"},
}
if TYPE_CHECKING:
    from gpuval.plan.mpirun import SlurmSteps

NO_LAUNCHER = "no MPI launcher on this host: the openmpi role did not run (fact openmpi_launch)"
NO_ALLOCATION = "gpuval_launcher is slurm but there is no allocation (gpuval_slurm_jobid)"


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.plan.mpirun import LaunchError, launch_command, not_allocated
        from gpuval.plugin_api import capture_module

        task_vars = task_vars or {}
        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC,
            mutually_exclusive=[("name", "steps"), ("program", "steps")],
            required_one_of=[("name", "steps")],
            required_together=[("name", "program")],
        )
        capture = {key: args[key] for key in CAPTURE_OPTIONS if args[key] is not None}
        contract = self._templar.template(task_vars.get("openmpi_launch"))
        if args["skip_reason"] is None and not contract:
            capture["skip_reason"] = NO_LAUNCHER
        allocation = self._allocation(task_vars, args["hosts"])
        if allocation is not None and "skip_reason" not in capture:
            if not allocation.job_id:
                capture["skip_reason"] = NO_ALLOCATION
            elif missing := not_allocated(args["hosts"], self._held(allocation, args["hosts"])):
                capture["skip_reason"] = (
                    f"not tested: {', '.join(missing)} not in Slurm allocation {allocation.job_id}"
                )
        wanted = args["steps"] or [{"name": args["name"], "program": args["program"]}]
        steps = []
        for step in wanted:
            if not step.get("name") or not isinstance(step.get("program"), list):
                raise AnsibleActionFail(f"every step needs a name and a program list: {step}")
            if "skip_reason" in capture:
                steps.append({"name": step["name"]})
                continue
            try:
                launch = launch_command(
                    contract, args["hosts"], args["ranks_per_host"], step["program"],
                    args["env"], allocation,
                )  # fmt: skip
            except LaunchError as problem:
                raise AnsibleActionFail(str(problem)) from problem
            steps.append({"name": step["name"], "command": launch.argv})
            capture["env"] = launch.env
        if args["steps"] is None:
            capture.update(steps[0])
        else:
            capture["steps"] = steps
        wrap_async = bool(self._task.async_val) and not self._connection.has_native_async
        result.update(
            self._execute_module(
                module_name=capture_module(self._task.resolved_action),
                module_args=capture,
                task_vars=task_vars,
                wrap_async=wrap_async,
            )
        )
        return result

    @staticmethod
    def _held(allocation: SlurmSteps, hosts: list[str]) -> SlurmSteps:
        """The allocation as Slurm holds it now, read before every srun step: a node that left
        it since it was granted (failed, or set down) is no longer in it."""
        from gpuval.plan.mpirun import still_allocated
        from gpuval.slurm.allocation import job_nodes
        from gpuval.slurm.scontrol import SlurmCommandError

        if hosts == ["localhost"]:  # one node's ranks start with mpirun, not in the allocation
            return allocation
        try:
            return still_allocated(allocation, job_nodes(allocation.job_id))
        except SlurmCommandError as problem:
            raise AnsibleActionFail(
                f"cannot read the nodes of Slurm allocation {allocation.job_id}"
                f" (gpuval_slurm_jobid) on the controller: {problem}"
            ) from problem

    def _allocation(self, task_vars: dict[str, Any], hosts: list[str]) -> SlurmSteps | None:
        """The Slurm allocation the steps start in, or None where the launcher is mpirun."""
        from gpuval.plan.mpirun import LAUNCHERS, SlurmSteps

        launcher = self._templar.template(task_vars.get("gpuval_launcher", "mpirun"))
        if launcher not in LAUNCHERS:
            raise AnsibleActionFail(
                f"gpuval_launcher must be one of {', '.join(LAUNCHERS)}, not {launcher!r}"
            )
        if launcher != "slurm":
            return None
        hostvars = task_vars.get("hostvars", {})
        allocated = self._templar.template(task_vars.get("gpuval_slurm_allocated"))
        nodes = {
            host: str(self._templar.template(hostvars[host].get("gpuval_slurm_node", host)))
            for host in hosts
            if host in hostvars and (allocated is None or host in allocated)
        }
        job_id = self._templar.template(task_vars.get("gpuval_slurm_jobid", ""))
        return SlurmSteps(job_id=str(job_id or ""), nodes=nodes)
