"""What a stage of the pair phase costs, by the hosts it tests: the prices the plan gives the pair
rounds and group tests (gpuval.plan.duration), kept in plan.json so that the staged search can
say, after each stage, what the next one will take (the gpuval_pairs action)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from gpuval.plan.step_costs import batches

STAGE_COSTS_KEY = "stage_costs"  # where plan.json keeps them


@dataclass(frozen=True)
class StageCosts:
    """The numbers a stage's price follows from, for a play of `nodes` hosts."""

    nodes: int
    forks: int
    controller_cores: int
    pair_tests_s: float  # one pair's tests of a round (each kind once)
    round_fixed_s: float  # Ansible's fixed part of a round and its collect, once a wave
    cpu_per_host_s: float  # the controller's work for each host a round tests
    cpu_per_idle_host_s: float  # ... and for each host it leaves out
    group_test_s: float  # an all-nodes all-reduce, before its launch on each member
    launch_per_node_s: float

    def host_share(self, tested: int) -> float:
        """The controller's work in a round that tests `tested` hosts of the play: theirs (the
        pair's tasks, the collect), and every other host's skipped include, over its cores."""
        cpu_s = tested * self.cpu_per_host_s + (self.nodes - tested) * self.cpu_per_idle_host_s
        return cpu_s / max(self.controller_cores, 1)

    def turns(self, hosts: int) -> int:
        """A round's turns, one after another (gpuval.plan.pair_rounds.rounds_of_at_most: at
        most `forks` pairs each, so each turn's clients run in one wave): every kind runs once
        a turn, its torchruns started at once (gpuval.plan.pair_plan.started_at_once)."""
        return batches(max(hosts // 2, 1), self.forks)

    def pair_round_s(self, hosts: int) -> float:
        """One round of pairs over `hosts`: its kinds once a turn, Ansible's fixed part once a
        wave, and the controller's work for the play's hosts, tested or not."""
        return (
            self.pair_tests_s * self.turns(hosts)
            + self.round_fixed_s * batches(hosts, self.forks)
            + self.host_share(hosts)
        )

    def group_test_each_s(self, size: int) -> float:
        """An all-nodes all-reduce of `size` nodes, each member launched."""
        return self.group_test_s + self.launch_per_node_s * size

    def group_round_s(self, tested: int, largest: int, test_s: float | None = None) -> float:
        """A round of group tests: every member of every group started at once (so one all-nodes
        run, the largest group setting the pace; `test_s` where earlier runs measured it),
        Ansible's part once a wave."""
        return (
            (self.group_test_each_s(largest) if test_s is None else test_s)
            + self.round_fixed_s * batches(tested, self.forks)
            + self.host_share(tested)
        )

    def stage_s(self, groups: Sequence[Sequence[str]], rounds: Sequence[Sequence[Any]]) -> float:
        """A stage of the search: its `groups` tested at once, or its `rounds` of pair entries
        one after another (before any repeat of a pair that fails)."""
        if groups:
            return self.group_round_s(sum(map(len, groups)), max(map(len, groups)))
        return sum(self.pair_round_s(2 * len(entries)) for entries in rounds)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> StageCosts:
        """From plan.json; ValueError when a number is missing or no number."""
        values: dict[str, Any] = {}
        for field in fields(cls):
            value = document.get(field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{STAGE_COSTS_KEY}.{field.name} is {value!r}, not a number")
            values[field.name] = int(value) if field.type == "int" else float(value)
        return cls(**values)


PLAN_FILE = "plan.json"  # the run's time plan, in its run folder (the gpuval_plan action's)


def next_stage_s(run_dir: Path, groups: Sequence[Sequence[str]], rounds: Sequence[Sequence[Any]]
                 ) -> tuple[float | None, str | None]:  # fmt: skip
    """What the run's plan says the search's next stage (`groups`, or `rounds` of pair entries)
    will take: (seconds, None); (None, None) when the run has no plan.json or its plan has no
    pair phase; (None, why) when plan.json cannot be read."""
    path = run_dir / PLAN_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as problem:
        return None, f"{path}: cannot be read ({problem}); the next stage is not estimated"
    found = document.get(STAGE_COSTS_KEY) if isinstance(document, dict) else None
    if found is None:
        return None, None
    try:
        costs = StageCosts.from_dict(found if isinstance(found, dict) else {})
    except ValueError as problem:
        return None, f"{path}: {problem}; the next stage is not estimated"
    return costs.stage_s(groups, rounds), None
