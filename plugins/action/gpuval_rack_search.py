# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_rack_search: judge a failing NVL72 rack's search so far and plan its next stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_rack_search
short_description: Plan the group-testing search within each NVL72 rack whose rack test failed
description:
  - Runs in the controller process between the stages of roles/bench_internode's rack search;
    reads the controller's run folder (C(run.json), C(raw/<host>/)) as collected so far. Never
    connects to a node.
  - Judges each rack test (C(rack-nccl-all_reduce)) as the report does; a rack whose test failed
    is searched by group testing (C(gpuval.plan.rack_search), the staged search), halves of its
    trays, then each suspect with two trays that passed, every group an all_reduce over
    multi-node NVLink. The search is replayed from the group runs' outputs at every call
    (C(gpuval.checks.rack_search.next_stage)), so nothing is handed back between calls and the
    report replays the same search.
  - A rack whose test passed, or left no verdict, is not searched.
options:
  run_dir:
    description: The controller's run folder (reports/<run-id>).
    type: path
    required: true
  partners:
    description: Trays that passed a group each suspect must fail with to be flagged (at least 2).
    type: int
    default: 2
  thresholds: {description: gpuval thresholds JSON (busbw pass and fail fractions)., type: path}
"""

RETURN = r"""
rounds:
  description:
    - The next stage's runs in rounds; the runs of one round start at once (disjoint trays).
      Each run is C({launcher, trays, step}), mpirun on C(launcher) over C(trays), written as
      C(step) (C(rack-search-nccl-all_reduce-r<round>)).
  type: list
  returned: always
stages_left:
  description: At most this many more stages, the one in RV(rounds) included.
  type: int
  returned: always
summaries:
  description: One line per rack with a rack test (searched or why not).
  type: list
  returned: always
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "run_dir": {"type": "path", "required": True},
    "partners": {"type": "int", "default": 2},
    "thresholds": {"type": "path"},
}


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.plan.confirmation import MIN_PARTNERS
        from gpuval.plugin_api import plan_rack_search
        from gpuval.runfolder import RunFolderError

        result: dict[str, Any] = super().run(tmp, task_vars or {})
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        nothing = {"changed": False, "rounds": [], "stages_left": 0, "summaries": []}
        if args["partners"] < MIN_PARTNERS:
            return {**result, "failed": True, "msg": f"partners must be at least {MIN_PARTNERS}: "
                    "a tray is never flagged on one pair"}  # fmt: skip
        run_dir = Path(args["run_dir"])
        if not run_dir.is_dir():
            if self._task.check_mode:  # a dry run has no run folder yet: nothing to judge
                return {**result, **nothing}
            return {**result, "failed": True, "msg": f"run folder {run_dir} does not exist"}
        try:
            thresholds = Path(args["thresholds"]) if args["thresholds"] else None
            planned = plan_rack_search(run_dir, thresholds, args["partners"])
        except (ValueError, RunFolderError) as problem:  # thresholds or run.json unreadable
            return {**result, "failed": True, "msg": str(problem)}
        return {**result, **nothing, **planned}
