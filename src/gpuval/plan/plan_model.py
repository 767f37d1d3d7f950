"""What a time plan is made of: the nodes it plans for (Shape), each step's cost (StepCost), the
phases (PhaseCost) and the whole estimate (RunEstimate), as gpuval.plan.duration makes them and
gpuval plan prints them."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuval.plan.stage_costs import STAGE_COSTS_KEY, StageCosts

FORKS = 50  # ansible.cfg's forks


@dataclass(frozen=True)
class Shape:
    """The nodes of the run, as the inventory (or --nodes/--gpus-per-node/--rails) gives them."""

    hosts: tuple[str, ...]
    gpus_per_node: int
    rails: int
    forks: int = FORKS
    # Ansible's work for every host runs on the controller: this machine's, where the plan is
    # made (gpuval plan and the run's start both run there).
    controller_cores: int = field(default_factory=lambda: os.cpu_count() or 1)

    @property
    def nodes(self) -> int:
        return len(self.hosts)

    def controller_s(self, cpu_s_per_host: float) -> float:
        """Wall seconds for the controller to spend `cpu_s_per_host` CPU seconds on each host,
        over its cores."""
        return cpu_s_per_host * self.nodes / max(self.controller_cores, 1)


@dataclass(frozen=True)
class StepCost:
    phase: str
    step: str  # what runs, as a person reads it
    key: str  # the cost key (gpuval.plan.step_history.cost_key)
    count: int  # how often it runs one after another (waves, rounds, collectives)
    each_s: float
    source: str  # "history: median of N" or "default"
    timeout_s: float | None = None
    switch: str = ""  # the -e KEY=VALUE or --skip-tags that turns it off

    @property
    def total_s(self) -> float:
        return self.count * self.each_s


@dataclass(frozen=True)
class PhaseCost:
    name: str
    steps: tuple[StepCost, ...]
    note: str = ""

    @property
    def total_s(self) -> float:
        return sum(step.total_s for step in self.steps)


@dataclass(frozen=True)
class RunEstimate:
    shape: Shape
    pairs_mode: str
    pair_rounds: int
    phases: tuple[PhaseCost, ...]
    # What each faulty node adds at most: staged, its bisection and confirmation rounds; all
    # pairs, its failing round's repeats (bench_pairs_max_tries).
    fault_s: float
    defaults_used: dict[str, str] = field(default_factory=dict)
    stage_costs: StageCosts | None = None  # None: no pair phase

    @property
    def total_s(self) -> float:
        return sum(phase.total_s for phase in self.phases)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": self.shape.nodes,
            "gpus_per_node": self.shape.gpus_per_node,
            "rails": self.shape.rails,
            "forks": self.shape.forks,
            "controller_cores": self.shape.controller_cores,
            "pairs_mode": self.pairs_mode,
            "pair_rounds": self.pair_rounds,
            "total_s": round(self.total_s, 1),
            "fault_s": round(self.fault_s, 1),
            "phases": [
                {
                    "name": phase.name,
                    "total_s": round(phase.total_s, 1),
                    "note": phase.note,
                    "steps": [
                        {**asdict(step), "total_s": round(step.total_s, 1)} for step in phase.steps
                    ],
                }
                for phase in self.phases
            ],
            "defaults": self.defaults_used,
            **({STAGE_COSTS_KEY: self.stage_costs.to_dict()} if self.stage_costs else {}),
        }
