# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_slurm_allocation: request or release the run's Slurm allocation
(gpuval.slurm.allocation), on the controller."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_slurm_allocation
short_description: Request or release the Slurm allocation that srun starts a run's steps in
description:
  - With O(state=present), asks Slurm for the hosts' nodes (C(salloc --no-shell --exclusive),
    each host as its C(gpuval_slurm_node)) and sets the facts C(gpuval_slurm_jobid) and
    C(gpuval_slurm_allocated) (the hosts in the allocation) on every host of the play (run it
    with C(run_once)); C(gpuval_mpirun) then starts its multi-node steps there with srun when
    C(gpuval_launcher=slurm).
  - A node Slurm cannot give now (drained, down, held by a job) is left out and returned in
    C(not_tested), as is a node the granted job lacks; the steps on it are skipped, never passed.
  - With O(state=absent), releases the allocation O(job_id) (C(scancel)).
  - In check mode nothing is asked of Slurm; the command is returned.
  - Runs in the controller process, with the controller's Slurm client and configuration
    (C(SLURM_CONF)).
options:
  state: {description: Request (present) or release (absent)., type: str, default: present,
          choices: [present, absent]}
  hosts: {description: Inventory hosts to allocate (present)., type: list, elements: str}
  job_id: {description: The allocation to release (absent)., type: str}
  job_name: {description: Slurm job name., type: str, default: gpuval}
  partition: {description: Slurm partition (else the cluster's default)., type: str}
  qos: {description: Slurm QOS., type: str}
  time_minutes: {description: Time limit in minutes; overrides O(predicted_s)., type: int}
  predicted_s:
    description:
      - The run's predicted seconds (gpuval plan's C(total_s)); the time limit is that and the
        margin of a C(gpuval run --slurm) job (gpuval.slurm.batch.time_limit_minutes).
      - With neither this nor O(time_minutes), the partition's limit applies.
    type: float
  gpus_per_node: {description: GPUs to ask for on each node (C(--gpus-per-node))., type: int}
  wait_s:
    description: Seconds salloc waits for the nodes before it gives up (C(--immediate)).
    type: int
    default: 60
author:
  - gpuval contributors
"""

EXAMPLES = r"""
- name: Ask Slurm for the run's nodes
  gpuval_slurm_allocation:
    hosts: "{{ groups['gpu_nodes'] }}"
    job_name: "gpuval-{{ gpuval_run_id }}"
    predicted_s: 4180.5  # gpuval plan's total_s
    qos: scavenger
  run_once: true
  delegate_to: localhost

- name: Give the nodes back
  gpuval_slurm_allocation:
    state: absent
    job_id: "{{ gpuval_slurm_jobid }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
job_id:
  description: The allocation's job id ("" in check mode).
  returned: state=present
  type: str
allocated:
  description: Hosts in the allocation.
  returned: state=present
  type: list
  elements: str
not_tested: {description: Host to why Slurm could not give it., returned: state=present, type: dict}
command: {description: The salloc or scancel command., returned: always, type: list, elements: str}
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
    "hosts": {"type": "list", "elements": "str"},
    "job_id": {"type": "str"},
    "job_name": {"type": "str", "default": "gpuval"},
    "partition": {"type": "str"},
    "qos": {"type": "str"},
    "time_minutes": {"type": "int"},
    "predicted_s": {"type": "float"},
    "gpus_per_node": {"type": "int"},
    "wait_s": {"type": "int", "default": 60},
}


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.slurm import allocation as slurm
        from gpuval.slurm.nodes import SlurmOutputError
        from gpuval.slurm.scontrol import SlurmCommandError, show_nodes

        task_vars = task_vars or {}
        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC,
            required_if=[("state", "present", ["hosts"]), ("state", "absent", ["job_id"])],
        )
        try:
            if args["state"] == "absent":
                command = slurm.release_command(args["job_id"])
                if not self._task.check_mode:
                    slurm.release(args["job_id"])
                result.update(changed=not self._task.check_mode, command=command)
                return result
            hostvars = task_vars.get("hostvars", {})
            node_of = {
                str(self._templar.template(hostvars[host].get("gpuval_slurm_node", host))): host
                for host in args["hosts"]
            }
            request = slurm.AllocationRequest(
                nodes=tuple(node_of), job_name=args["job_name"], partition=args["partition"],
                qos=args["qos"],
                time_minutes=slurm.time_limit(args["time_minutes"], args["predicted_s"]),
                gpus_per_node=args["gpus_per_node"], wait_s=args["wait_s"],
            )  # fmt: skip
            if self._task.check_mode:
                result.update(command=slurm.salloc_command(request), job_id="", allocated=[])
                result["not_tested"] = {}
                return result
            granted = slurm.allocate(request, show_nodes(",".join(node_of)))
        except (SlurmCommandError, SlurmOutputError) as problem:
            raise AnsibleActionFail(str(problem)) from problem
        allocated = [node_of[node] for node in granted.nodes]
        not_tested = {node_of[node]: why for node, why in granted.not_tested.items()}
        result.update(
            changed=True,
            job_id=granted.job_id,
            allocated=allocated,
            not_tested=not_tested,
            command=slurm.salloc_command(request),
            ansible_facts={
                "gpuval_slurm_jobid": granted.job_id,
                "gpuval_slurm_allocated": allocated,
            },
        )
        for host, why in not_tested.items():
            self._display.warning(f"{host}: not tested, Slurm could not give it: {why}")
        return result
