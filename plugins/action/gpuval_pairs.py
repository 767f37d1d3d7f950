# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_pairs: judge the pair tests gathered so far and plan the next rounds."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_pairs
short_description: Judge gpuval pair tests in a run folder and plan the next rounds
description:
  - Runs in the controller process between the rounds of the pair phase; reads the controller's
    run folder (C(run.json), C(raw/<host>/)) as collected so far. Never connects to a node.
  - Judging is gpuval's (C(gpuval.plugin_api.judge_pairs), the report's own pair analysis);
    planning is C(gpuval.schedule) (C(next_stage), C(retry_entries), C(pack_rounds)).
  - Returns the latest try of every measurement (RV(pairs)), the pairs to run again
    (RV(retry_rounds)), the next stage (RV(next)), the all-nodes test's outcome and the MPI
    preflight's. Every planned entry is C({round, a, b, tries, steps, peers}), with the try
    number of each kind and the step names it writes (gpuval.steps).
options:
  run_dir:
    description: The controller's run folder (reports/<run-id>).
    type: path
    required: true
  hosts:
    description: Every host of the schedule (any order).
    type: list
    elements: str
    required: true
  active_hosts:
    description: Hosts still in the play; pairs with another host are neither retried nor planned.
    type: list
    elements: str
  mode:
    description: all-pairs or staged.
    type: str
    choices: [all-pairs, staged]
    default: all-pairs
  stage:
    description: What has just finished (start, all-nodes, screen, pairs).
    type: str
    choices: [start, all-nodes, screen, pairs]
    default: pairs
  kinds: {description: Pair kinds of this run., type: list, elements: str, default: [iperf3]}
  rounds:
    description: Judge and retry only pairs of these rounds (default all).
    type: list
    elements: int
  max_tries: {description: Tries per measurement, the first included., type: int, default: 3}
  thresholds: {description: gpuval thresholds JSON (pair_low_fraction)., type: path}
  parallel: {description: False puts every pair in a round of its own., type: bool, default: true}
  partners: {description: Known-good partners per suspect (staged)., type: int, default: 1}
  all_nodes_host:
    description: Host holding the all-nodes test (default the first host).
    type: str
  rdma_rails:
    description: Rails of the rdma kind (HCAs every node has; the i-th HCA of each node is rail i).
    type: int
    default: 0
  rdma_gpudirect:
    description: Measure each rail with GPU memory (--use_cuda) too.
    type: bool
    default: false
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "run_dir": {"type": "path", "required": True},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "active_hosts": {"type": "list", "elements": "str"},
    "mode": {"type": "str", "choices": ["all-pairs", "staged"], "default": "all-pairs"},
    "stage": {
        "type": "str",
        "choices": ["start", "all-nodes", "screen", "pairs"],
        "default": "pairs",
    },
    "kinds": {
        "type": "list",
        "elements": "str",
        "choices": ["iperf3", "allreduce", "nccl", "rdma"],
        "default": ["iperf3"],
    },
    "rounds": {"type": "list", "elements": "int"},
    "max_tries": {"type": "int", "default": 3},
    "thresholds": {"type": "path"},
    "parallel": {"type": "bool", "default": True},
    "partners": {"type": "int", "default": 1},
    "all_nodes_host": {"type": "str"},
    "rdma_rails": {"type": "int", "default": 0},
    "rdma_gpudirect": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval import schedule
        from gpuval.plugin_api import judge_pairs
        from gpuval.steps import rdma_lanes

        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args["max_tries"] < 1 or args["partners"] < 1:
            return {**result, "failed": True, "msg": "max_tries and partners must be at least 1"}
        run_dir = Path(args["run_dir"])
        hosts, kinds = args["hosts"], args["kinds"]
        active = set(args["active_hosts"] if args["active_hosts"] is not None else hosts)
        lanes = rdma_lanes(args["rdma_rails"], args["rdma_gpudirect"])
        if not run_dir.is_dir():
            if not self._task.check_mode:
                return {**result, "failed": True, "msg": f"run folder {run_dir} does not exist"}
            # A dry run has no run folder yet: nothing to judge or plan.
            empty = schedule.NextStage("done")
            no_preflight: dict[str, Any] = {
                "found": False,
                "ok": None,
                "failed_hosts": [],
                "reason": "",
            }
            return {
                **result, "pairs": [], "failing_pairs": [], "retry_rounds": [],
                "next": asdict(empty), "mpi_preflight": {**no_preflight, "reason": ""},
            }  # fmt: skip
        all_nodes_host = None
        if args["stage"] == "all-nodes":
            all_nodes_host = args["all_nodes_host"] or schedule.ordered_hosts(hosts)[0]
        try:
            progress = judge_pairs(
                run_dir,
                kinds,
                args["max_tries"],
                Path(args["thresholds"]) if args["thresholds"] else None,
                args["rounds"],
                all_nodes_host,
            )
            planned = schedule.next_stage(
                args["stage"],
                args["mode"],
                hosts,
                kinds,
                active,
                latest=progress.latest,
                used_rounds=progress.used_rounds,
                all_nodes_passed=bool(
                    progress.all_nodes and progress.all_nodes["status"] == "pass"
                ),
                partners=args["partners"],
                lanes=lanes,
            )
        except ValueError as problem:  # a host list the schedule refuses (duplicates, '--')
            return {**result, "failed": True, "msg": str(problem)}
        retries = schedule.pack_rounds(
            schedule.retry_entries(progress.latest, args["max_tries"], active, lanes)
        )
        next_stage = asdict(planned)
        next_stage["rounds"] = schedule.one_pair_per_round(planned.rounds, args["parallel"])
        result.update(
            changed=False,
            pairs=progress.details,
            failing_pairs=sorted(
                {f"{t['a']}--{t['b']}" for t in progress.latest if t["status"] != "ok"}
            ),
            retry_rounds=schedule.one_pair_per_round(retries, args["parallel"]),
            next=next_stage,
            mpi_preflight=progress.mpi_preflight,
        )
        if progress.all_nodes is not None:
            result["all_nodes"] = progress.all_nodes
        return result
