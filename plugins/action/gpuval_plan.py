# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_plan: the run's time plan (gpuval.plan.duration) shown and kept at its start."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_plan
short_description: Print the run's time plan and write plan.json into the run folder
description:
  - Answers from C(gpuval.plan.duration) in the controller process; never connects to a node.
  - The phases, their steps, the pair rounds and the predicted duration of each and in all, as
    C(gpuval plan) prints them, from the roles' defaults with the variables the first host of
    O(hosts) sees (its inventory, -e) over them; each step's duration is the median of earlier
    runs of the same step in the history database of O(reports_dir), else a documented default.
  - The GPUs per node come from O(gpus_per_node), else C(gpuval_gpus_per_node); the rails from
    O(rails), else C(gpuval_ib_hcas); where neither is set the plan leaves the GPU or RDMA steps
    out and says so.
  - The phases the run's --tags and --skip-tags skip are listed with no time, and say so.
  - Writes O(run_dir)/plan.json (not in check mode).
options:
  hosts:
    description: The hosts of the run, in inventory order.
    type: list
    elements: str
    required: true
  run_dir: {description: The run folder plan.json goes to., type: path, required: true}
  gpus_per_node: {description: GPUs in each node (nodes not yet launched)., type: int}
  rails: {description: RDMA HCAs in each node (nodes not yet launched)., type: int}
  reports_dir:
    description: The reports folder whose history.sqlite is read.
    type: path
    required: true
"""

RETURN = r"""
plan: {description: The plan (plan.json)., returned: always, type: dict}
lines: {description: The plan as printed., returned: always, type: list, elements: str}
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "run_dir": {"type": "path", "required": True},
    "reports_dir": {"type": "path", "required": True},
    "gpus_per_node": {"type": "int"},
    "rails": {"type": "int"},
}
# Beside the roles' variables, the inventory's word on the nodes' shape.
SHAPE_VARIABLES = ("gpuval_gpus_per_node", "gpuval_ib_hcas")
ROLES = Path(__file__).resolve().parents[2] / "roles"


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from ansible import constants
        from ansible.utils.display import Display

        from gpuval.files.atomic import OutputError, json_text, write_output
        from gpuval.plan import duration, inputs, plan_model, plan_text
        from gpuval.plan.phase_tags import RUN_TAGS, SKIP_TAGS

        task_vars = task_vars or {}
        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            defaults = inputs.role_defaults(ROLES)
            variables = inputs.merged(
                defaults,
                self._seen(task_vars, args["hosts"], defaults),
                # The run's own --tags and --skip-tags: the phases they skip are left out.
                {name: task_vars.get(name) for name in (RUN_TAGS, SKIP_TAGS)},
            )
            gpus = args["gpus_per_node"]
            if gpus is None:
                gpus = int(variables.get("gpuval_gpus_per_node") or 0)
            rails = args["rails"]
            if rails is None:
                rails = inputs.hca_count(variables.get("gpuval_ib_hcas"))
            shape = plan_model.Shape(
                tuple(args["hosts"]), gpus, rails, int(constants.DEFAULT_FORKS)
            )
            database = Path(args["reports_dir"]) / "history.sqlite"
            estimate = duration.estimate_from_history(shape, variables, database)
        except ValueError as problem:
            return {**result, "failed": True, "msg": f"cannot plan the run: {problem}"}
        lines = plan_text.plan_lines(estimate)
        if not gpus:
            lines.append("GPUs per node unknown (gpuval_gpus_per_node): GPU steps left out")
        if not rails:
            lines.append("no RDMA rails named (gpuval_ib_hcas): ib_write_bw pairs left out")
        Display().display("\n".join(lines))
        document = plan_text.plan_document(estimate)
        if not self._task.check_mode:
            try:
                write_output(Path(args["run_dir"]) / plan_text.PLAN_FILE, json_text(document))
            except OutputError as problem:
                return {**result, "failed": True, "msg": str(problem)}
        return {**result, "changed": False, "plan": document, "lines": lines}

    def _seen(
        self, task_vars: dict[str, Any], hosts: list[str], defaults: dict[str, Any]
    ) -> dict[str, Any]:
        """The variables the first node sees (its inventory, -e), else the controller, of the
        roles' variables and the shape's; a value Ansible cannot fill in yet is left out."""
        from ansible.errors import AnsibleError

        hostvars = task_vars.get("hostvars", {})
        # Nodes not yet launched (the Lambda plan) are in no inventory: the controller's word.
        node_vars = hostvars[hosts[0]] if hosts and hosts[0] in hostvars else {}
        found: dict[str, Any] = {}
        for variable in (*defaults, *SHAPE_VARIABLES):
            for source in (node_vars, task_vars):
                if variable in source:
                    # A value naming facts of later phases cannot be filled in: the default holds.
                    with suppress(AnsibleError):
                        found[variable] = self._templar.template(source[variable])
                    break
        return found
