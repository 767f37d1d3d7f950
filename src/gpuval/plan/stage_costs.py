"""What a stage of the pair phase costs, by the hosts it tests: the prices the plan gives the pair
rounds and group tests (gpuval.plan.duration), kept in plan.json so that the staged search can
say, after each stage, what the next one will take (gpuval.plan.plan_text.next_stage_s)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
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
