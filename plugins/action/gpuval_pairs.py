# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_pairs: judge the pair tests gathered so far and plan the next rounds."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ansible.plugins.action import ActionBase

if TYPE_CHECKING:
    from gpuval.plan.pair_plan import PairPlan

DOCUMENTATION = r"""
---
module: gpuval_pairs
short_description: Judge gpuval pair tests in a run folder and plan the next rounds
description:
  - Runs in the controller process between the rounds of the pair phase; reads the controller's
    run folder (C(run.json), C(raw/<host>/)) as collected so far. Never connects to a node.
  - Judging is gpuval's (C(gpuval.plugin_api.judge_pairs), the report's own pair analysis);
    planning is C(gpuval.plan.pair_rounds) (all pairs, C(retry_entries), C(pack_rounds)) and,
    in staged mode, C(gpuval.plan.group_testing) (screen, bisect, confirm).
  - Returns the latest try of every measurement (RV(pairs)), the pairs to run again
    (RV(retry_rounds)), the next stage (RV(next)), the MPI preflight's outcome
    (RV(mpi_preflight), with C(found), C(ok), C(retry) when its only try failed and it must run
    once more, the C(failed_hosts) and the C(reason)) and, in staged mode, the search
    (RV(search), handed back with O(search) after each of its rounds), the stages it may still
    take (RV(search_rounds_left)), one line on the round just judged
    (RV(stage_summary)) and on the search so far (RV(search_summary)), the group tests'
    outcomes (RV(groups)), and what the next stage will take by the run's plan
    (RV(next_stage_s), also at the end of RV(stage_summary); from the stage costs in the run
    folder's plan.json, where there is one); RV(next)'s C(scope) holds the round numbers its
    pairs use. The search itself is C(gpuval.plan.group_testing.SearchCall); this action only
    reads its options, calls gpuval and returns. Every planned entry is C({round, a, b, tries,
    steps, peers, lanes}), with the try number of each kind and the step names it writes
    (gpuval.plan.steps).
  - With O(commands), also what the nodes run (C(gpuval.plan.pair_plan)), that is the kinds
    that run and why the others do not (RV(kinds), RV(skip_reasons), RV(summary)), the rails
    (RV(rdma_rails), RV(hosts_with_rail), RV(rails)), RV(addresses), staged mode's
    RV(group_runs) (every host's part of its group's all-nodes run), and in every entry
    C(pair), C(hosts) and C(run) (per kind, the commands of both sides).
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
    description: all-pairs, staged, or auto (all pairs up to 8 hosts, staged above).
    type: str
    choices: [auto, all-pairs, staged]
    default: auto
  stage:
    description:
      - What has just finished. start, nothing; search, the round staged mode's O(search)
        planned; pairs, the rounds of all pairs (nothing follows them).
    type: str
    choices: [start, search, pairs]
    default: pairs
  search:
    description: Staged mode's search as the previous call returned it (RV(search)).
    type: dict
  kinds:
    description: Pair kinds of this run (without O(commands); with it the plan's).
    type: list
    elements: str
    default: [iperf3]
  rounds:
    description: Judge and retry only pairs of these rounds (default all).
    type: list
    elements: int
  max_tries:
    description:
      - Tries per measurement, the first included (default 3). For the repeats (RV(retry_rounds));
        refused at stage search, whose judge call plans none (the role repeats before it).
    type: int
  thresholds: {description: gpuval thresholds JSON (pair_low_fraction)., type: path}
  parallel:
    description:
      - False puts every pair in a round of its own. True cuts a round in turns of at most the
        play's forks pairs (the first sides' clients run in one task, on forks hosts at a time).
    type: bool
    default: true
  partners:
    description:
      - Partners that passed per suspect (staged; at least 2; default 2). Read at stage start
        only; the search carries it after, so stage search refuses it.
    type: int
  commands:
    description:
      - Plan what the nodes run (C(gpuval.plan.pair_plan)) from the role's C(bench_pairs_*)
        variables (as the task sees them) and each host's facts (C(hostvars)), as
        roles/bench_pairs does; O(kinds) is then the plan's (RV(kinds)), not the option's.
      - Every planned entry then carries C(pair) (C(a--b)), C(hosts) and C(run), which holds for
        each kind it tries the commands of both sides; C(parts), the role's task files each side
        includes in order (C(a), C(b)); and C(collect_by), the part whose task brings the first
        node's new files to the controller (empty when C(bench_pairs_collect_each_round) is
        false) (C(gpuval.plan.pair_plan.PairPlan.with_commands)).
    type: bool
    default: false
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "run_dir": {"type": "path", "required": True},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "active_hosts": {"type": "list", "elements": "str"},
    "mode": {"type": "str", "choices": ["auto", "all-pairs", "staged"], "default": "auto"},
    "stage": {"type": "str", "choices": ["start", "search", "pairs"], "default": "pairs"},
    "search": {"type": "dict"},
    "kinds": {
        "type": "list",
        "elements": "str",
        "choices": ["iperf3", "allreduce", "nccl", "rdma"],
        "default": ["iperf3"],
    },
    "rounds": {"type": "list", "elements": "int"},
    "max_tries": {"type": "int"},
    "thresholds": {"type": "path"},
    "parallel": {"type": "bool", "default": True},
    "partners": {"type": "int"},
    "commands": {"type": "bool", "default": False},
}


def forks() -> int:
    """The play's forks (ansible-playbook --forks, ANSIBLE_FORKS, ansible.cfg), which a round's
    turns of pairs are cut at (gpuval.plan.pair_rounds.rounds_of_at_most)."""
    from ansible import constants, context

    return int(context.CLIARGS.get("forks") or constants.DEFAULT_FORKS)


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.plan import group_testing, pair_rounds, steps
        from gpuval.plugin_api import NO_MPI_PREFLIGHT, judge_pairs

        task_vars = task_vars or {}
        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args["stage"] == "search" and args["max_tries"] is not None:
            return {**result, "failed": True, "msg": "max_tries is for the repeats: stage search "
                    "plans none (the role repeats before it), leave it out"}  # fmt: skip
        max_tries = 3 if args["max_tries"] is None else args["max_tries"]
        if max_tries < 1:
            return {**result, "failed": True, "msg": "max_tries must be at least 1"}
        run_dir = Path(args["run_dir"])
        hosts = args["hosts"]
        in_play = args["active_hosts"] if args["active_hosts"] is not None else hosts
        active = set(in_play)
        mode = steps.pairs_mode_for(args["mode"], len(hosts))
        plan = self._plan(task_vars, hosts, active) if args["commands"] else None
        kinds = plan.kinds if plan else args["kinds"]
        lanes = plan.lanes if plan else []
        done: dict[str, Any] = {
            "pairs": [], "failing_pairs": [], "retry_rounds": [],
            "next": asdict(pair_rounds.NextStage("done")),
            "mpi_preflight": dict(NO_MPI_PREFLIGHT),
        }  # fmt: skip
        if plan:
            result.update(plan.facts(), summary=plan.summary(mode, args["parallel"]))
            if args["stage"] == "start" and (not kinds or len(hosts) < 2):
                return {**result, **done}
        if not run_dir.is_dir():
            if not self._task.check_mode:
                return {**result, "failed": True, "msg": f"run folder {run_dir} does not exist"}
            # A dry run has no run folder yet: nothing to judge or plan.
            return {**result, **done}
        try:
            search = (
                group_testing.SearchCall.begin(
                    args["stage"], args["search"], hosts, active, kinds, args["partners"],
                    task_vars.get("hostvars", {}),
                )
                if mode == "staged" and args["stage"] != "pairs"
                else None
            )  # fmt: skip
            progress = judge_pairs(
                run_dir,
                kinds,
                Path(args["thresholds"]) if args["thresholds"] else None,
                args["rounds"],
                group_steps=search.group_steps(active) if search else None,
            )
            if search is not None:
                planned, returned = search.advance(
                    progress.latest, progress.groups, active, progress.used_rounds, lanes,
                    plan.all_nodes_run if plan else None,
                )  # fmt: skip
                result.update(returned)
            elif mode == "all-pairs" and args["stage"] == "start":
                planned = pair_rounds.all_pairs_stage(hosts, kinds, active, lanes)
            else:
                planned = pair_rounds.NextStage("done")
        except ValueError as problem:  # a host list the plan refuses (duplicates, '--'), a mode
            return {**result, "failed": True, "msg": str(problem)}
        # Pairs at a time: one (not parallel), else as many as Ansible runs hosts at once.
        turn = forks() if args["parallel"] else 1
        retries: list[Any] = (
            []
            if args["stage"] == "search"
            else pair_rounds.rounds_of_at_most(
                pair_rounds.pack_rounds(
                    pair_rounds.retry_entries(progress.latest, max_tries, active, lanes)
                ),
                turn,
            )
        )
        next_stage = asdict(planned)
        next_stage["rounds"] = pair_rounds.rounds_of_at_most(planned.rounds, turn)
        if plan:
            retries = plan.rounds_with_commands(retries)
            next_stage["rounds"] = plan.rounds_with_commands(next_stage["rounds"])
        result.update(
            changed=False,
            pairs=progress.details,
            failing_pairs=sorted(
                {f"{t['a']}--{t['b']}" for t in progress.latest if t["status"] != "ok"}
            ),
            retry_rounds=retries,
            next=next_stage,
            mpi_preflight=progress.mpi_preflight,
        )
        if progress.groups:
            result["groups"] = progress.groups
        if search is not None and planned.mode in ("groups", "pairs"):
            self._estimate(result, run_dir, planned.groups, next_stage["rounds"])
        return result

    @staticmethod
    def _estimate(result: dict[str, Any], run_dir: Path, groups: list[list[str]],
                  rounds: list[list[dict[str, Any]]]) -> None:  # fmt: skip
        """The next stage's time by the run's plan (plan.json), in RV(next_stage_s) and at the
        end of RV(stage_summary)."""
        from gpuval.plan.plan_text import PLAN_FILE, clock, next_stage_s

        seconds, problem = next_stage_s(run_dir, groups, rounds)
        if problem:
            result.setdefault("warnings", []).append(problem)
        if seconds is not None:
            result["next_stage_s"] = round(seconds, 1)
            result["stage_summary"] += f"; about {clock(seconds)} by the plan ({PLAN_FILE})"

    def _plan(self, task_vars: dict[str, Any], hosts: list[str], in_play: set[str]) -> PairPlan:
        """gpuval.plan.pair_plan's plan over the hosts still in play, in the inventory's order."""
        from gpuval.plan.pair_plan import NODE_VARIABLES, NodeFacts, PairPlan, PairSettings

        def templated(source: Any, names: Any) -> dict[str, Any]:
            return {name: self._templar.template(source[name]) for name in names if name in source}

        hostvars = task_vars.get("hostvars", {})
        active = [h for h in hosts if h in in_play]
        return PairPlan(
            PairSettings.from_variables(templated(task_vars, PairSettings.variables())),
            {
                h: NodeFacts.from_variables(h, templated(hostvars[h], NODE_VARIABLES))
                for h in active
            },
            active,
        )
