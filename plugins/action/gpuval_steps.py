# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_steps: the step-name registry (gpuval.plan.steps) served to the roles."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_steps
short_description: Step names of a gpuval run, and the steps run.json expects
description:
  - Answers from C(gpuval.plan.steps) in the controller process; never connects to a node.
  - Always returns the fixed names (RV(preflight), RV(p2p), RV(mpi_preflight) and its second
    try RV(mpi_preflight_retry), RV(allnodes), RV(failure_records) per phase).
  - With O(collectives), the intranode and internode nccl-tests step of each, and the two
    NVL72 rack tests' (RV(rack), over one rack's multi-node NVLink; RV(across_racks), the
    network-only test across racks).
  - With O(hosts), RV(expected) (per host, the steps run.json lists), RV(config) (the knobs
    that shape the run, the role variables set for the first host or on the controller over the
    suite's defaults) and RV(declared) (per host, what its inventory variables say it is,
    of C(gpuval_gpu_model), C(gpuval_gpus_per_node), C(gpuval_system), C(gpuval_nic_count),
    C(gpuval_nic_rate_gbit), C(gpuval_ib_hcas), C(gpuval_network_interface), C(gpuval_nvl_domain)
    and C(gpuval_nvl_domain_nodes); only those set), and RV(rack_tests), where the two NVL72
    rack tests run; per test (C(rack), C(across_racks)) the host that launches a run and the
    hosts of that run, from the hosts' C(gpuval_nvl_domain) (the same placement RV(expected)
    holds them to).
options:
  collectives: {description: nccl-tests collectives to name steps for., type: list, elements: str}
  hosts: {description: The hosts of the run, in inventory order., type: list, elements: str}
  phases:
    description: Phases the playbook runs, for RV(expected).
    type: list
    elements: str
    choices: [preflight, health, intranode, internode, pairs]
    default: [preflight, health, intranode, internode, pairs]
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "collectives": {"type": "list", "elements": "str"},
    "hosts": {"type": "list", "elements": "str"},
    "phases": {
        "type": "list",
        "elements": "str",
        "choices": ["preflight", "health", "intranode", "internode", "pairs"],
        "default": ["preflight", "health", "intranode", "internode", "pairs"],
    },
}


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.plan import steps

        task_vars = task_vars or {}
        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result.update(
            changed=False,
            preflight=list(steps.PREFLIGHT_STEPS),
            p2p=steps.P2P,
            mpi_preflight=steps.MPI_PREFLIGHT,
            mpi_preflight_retry=steps.MPI_PREFLIGHT_RETRY,
            allnodes=steps.ALLNODES_ALLREDUCE,
            peer_allnodes=steps.peer(steps.ALLNODES_ALLREDUCE),
            failure_records={phase: steps.failed(phase) for phase in steps.PHASES},
        )
        collectives = args["collectives"] or []
        result["intranode"] = {c: steps.intranode_nccl(c) for c in collectives}
        result["internode"] = {c: steps.internode_nccl(c) for c in collectives}
        result["rack"] = {c: steps.rack_nccl(c) for c in collectives}
        result["across_racks"] = {c: steps.across_racks_nccl(c) for c in collectives}
        if args["hosts"] is not None:
            try:
                plan = steps.RunPlan.from_variables(self._plan_variables(task_vars, args["hosts"]))
            except ValueError as problem:
                return {**result, "failed": True, "msg": str(problem)}
            try:
                declared = self._declared(task_vars, args["hosts"])
            except ValueError as problem:
                return {**result, "failed": True, "msg": str(problem)}
            racks = {host: str(values["nvl_domain"]) for host, values in declared.items()
                     if values.get("nvl_domain")}  # fmt: skip
            result["expected"] = steps.expected_steps(args["hosts"], plan, args["phases"], racks)
            placed = steps.rack_test_hosts(args["hosts"], racks)
            result["rack_tests"] = {"rack": placed["rack"], "across_racks": placed["across-racks"]}
            result["config"] = plan.to_variables()
            result["declared"] = declared
        return result

    def _declared(self, task_vars: dict[str, Any], hosts: list[str]) -> dict[str, Any]:
        """run.json `declared`: per host, the hardware its inventory variables declare."""
        from gpuval.plugin_api import DECLARED_VARIABLES, declared_hardware

        hostvars = task_vars.get("hostvars", {})
        declared = {}
        for host in hosts:
            found = {}
            for variable, _ in DECLARED_VARIABLES.values():
                if variable in hostvars.get(host, {}):
                    found[variable] = self._templar.template(hostvars[host][variable])
            try:
                declared[host] = declared_hardware(found)
            except ValueError as problem:
                raise ValueError(f"host {host}: {problem}") from None
        return {host: values for host, values in declared.items() if values}

    def _plan_variables(self, task_vars: dict[str, Any], hosts: list[str]) -> dict[str, Any]:
        """The plan's role variables as the nodes see them (an inventory's [gpu_nodes:vars]),
        else as the controller does (-e, group_vars/all)."""
        from gpuval.plan.steps import PLAN_VARIABLES

        node_vars = task_vars.get("hostvars", {}).get(hosts[0], {}) if hosts else {}
        found = {}
        for variable in PLAN_VARIABLES.values():
            for source in (node_vars, task_vars):
                if variable in source:
                    found[variable] = self._templar.template(source[variable])
                    break
        return found
