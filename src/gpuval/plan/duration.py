"""The time plan of a run, before anything starts: its phases, their steps, the pair rounds and a
predicted duration of each and in all.

Each step's duration is the median of what earlier runs of the same step recorded (sidecars
named by the history database, gpuval.plan.step_history), else a documented default
(gpuval.plan.step_costs); every step says which. So is Ansible's own time in a phase, where
earlier runs of as many nodes kept their plays' times (plays.json): a setup step without a
sidecar (install, openmpi, build, the collect and report) is then within it. Node-local work
runs on `forks` hosts at a time (ansible.cfg), so a phase of node-local steps costs one wave
per `forks` hosts. The pair
phase costs its rounds: all pairs (the circle schedule: N-1 rounds, N for odd N), or staged (an
all-nodes test, then for each faulty node the search's own rounds: gpuval.plan.group_testing
plays it against one bad node, each group round priced as its largest group's all-nodes test,
each confirmation round as a round of pairs). Torchruns (group tests, all-reduce pairs) are
started on every host at once and waited for; a round of more pairs than forks runs in turns of
forks pairs (a turn's clients in one wave), each kind once a turn, and Ansible's own part of a
round once per wave of forks hosts. A hung step costs its timeout: the plan lists each step's.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuval.plan import steps
from gpuval.plan.confirmation import MIN_PARTNERS
from gpuval.plan.group_testing import Played, simulate
from gpuval.plan.phase_tags import TagSelection
from gpuval.plan.plan_model import PhaseCost, RunEstimate, Shape, StepCost
from gpuval.plan.stage_costs import StageCosts
from gpuval.plan.step_costs import (
    DEFAULTS,
    Variables,
    batches,
    p2p_seconds,
    sweep_seconds,
)
from gpuval.plan.step_history import (
    measured_durations,
    measured_phase_overheads,
    measured_round_overheads,
    median,
)

# Per (phase, occurrence), Ansible's own time in earlier runs (step_history).
Overheads = Mapping[tuple[str, int], Sequence[float]]
# Per count of hosts a round of pairs tests, Ansible's own time in each such round of earlier
# runs of as many nodes (step_history).
RoundOverheads = Mapping[int, Sequence[float]]


class _Costs:
    """Step durations: the history's median where it has the key, else the default."""

    def __init__(self, measured: Mapping[str, Sequence[float]], overheads: Overheads,
                 rounds: RoundOverheads) -> None:  # fmt: skip
        self.measured, self.overheads, self.rounds = measured, overheads, rounds
        self.defaults_used: dict[str, str] = {}

    def each(self, key: str, default_s: float, *defaults: str) -> tuple[float, str]:
        durations = self.measured.get(key)
        if durations:
            return median(durations), f"history: median of {len(durations)}"
        for name in defaults:
            self.defaults_used[name] = DEFAULTS[name].reason
        return default_s, "default"


def all_pairs_rounds(nodes: int, parallel: bool) -> int:
    """The circle schedule's rounds (gpuval.plan.host_order), or one per pair when not parallel."""
    if nodes < 2:
        return 0
    if not parallel:
        return nodes * (nodes - 1) // 2
    return nodes - 1 if nodes % 2 == 0 else nodes


@functools.lru_cache(maxsize=8)
def fault_search(nodes: int, partners: int, by_pairs: bool) -> Played:
    """The staged search played against one bad node, the first host: its half is the larger
    one at every split, so no other place costs more rounds (gpuval.plan.group_testing)."""
    hosts = [f"node{i}" for i in range(1, nodes + 1)]
    return simulate(hosts, hosts[:1], partners, by_pairs=by_pairs)


class _Planner:
    def __init__(self, shape: Shape, variables: Variables, costs: _Costs) -> None:
        self.shape, self.v, self.costs = shape, variables, costs
        self.waves = batches(shape.nodes, shape.forks)
        self.occurrences: dict[str, int] = {}  # the phases priced so far, in the run's order

    def overhead(self, phase: str, plays: int = 1) -> StepCost:
        """Ansible's own time for the phase's plays: what earlier runs of as many nodes took,
        else a fixed part once per wave of `forks` hosts, and its work for each host spread
        over the controller's cores. Called once per phase, in the run's order."""
        self.occurrences[phase] = self.occurrences.get(phase, 0) + 1
        learned = self._learned(phase)
        if learned:
            return StepCost(phase, "Ansible's own time", "phase-overhead", 1, median(learned),
                            f"history: median of {len(learned)}")  # fmt: skip
        self.costs.defaults_used["phase-overhead"] = DEFAULTS["phase-overhead"].reason
        per_host = self.shape.controller_s(DEFAULTS["phase-cpu-per-host"].seconds)
        self.costs.defaults_used["phase-cpu-per-host"] = DEFAULTS["phase-cpu-per-host"].reason
        seconds = DEFAULTS["phase-overhead"].seconds + per_host / self.waves
        return StepCost(
            phase, "Ansible's own time", "phase-overhead", plays * self.waves, seconds, "default"
        )

    def step(
        self,
        phase: str,
        step: str,
        key: str,
        default_s: float,
        *defaults: str,
        count: int = 1,
        timeout_s: float | None = None,
        switch: str = "",
    ) -> StepCost:
        each, source = self.costs.each(key, default_s, *defaults)
        return StepCost(phase, step, key, count, each, source, timeout_s, switch)

    def _learned(self, phase: str) -> Sequence[float]:
        """What the history gave for Ansible's time in the phase's occurrence priced last."""
        return self.costs.overheads.get((phase, self.occurrences.get(phase, 0) - 1), ())

    def setup_step(self, phase: str, step: str, key: str, count: int,
                   timeout_s: float | None = None) -> StepCost:  # fmt: skip
        """A phase's work that writes no sidecar (install, build, the collect and report): its
        default, or nothing of its own where the history gave the phase's Ansible time, which
        holds it (call after the phase's `overhead`)."""
        if self._learned(phase):
            return StepCost(phase, step, key, 1, 0.0, "history: in Ansible's own time", timeout_s)
        return self.step(phase, step, key, DEFAULTS[key].seconds, key, count=count,
                         timeout_s=timeout_s)  # fmt: skip

    def probes(self, phase: str, names: Sequence[str], timeout_s: float) -> list[StepCost]:
        probe = DEFAULTS["probe"].seconds
        return [
            self.step(phase, name, name, probe, "probe", count=self.waves, timeout_s=timeout_s)
            for name in names
        ]

    def nccl(self, prefix: str, collective: str, launch_s: float) -> tuple[str, float]:
        role = "bench_internode" if prefix else "bench_intranode"
        v = self.v
        sizes = [
            v.text(f"{role}_{name}", default)
            for name, default in (
                ("min_bytes", "8"),
                ("max_bytes", "1G"),
                ("step_factor", "2"),
                ("iters", "20"),
                ("warmup_iters", "5"),
            )
        ]
        words = " ".join(
            f"{flag} {value}"
            for flag, value in zip(("-b", "-e", "-f", "-n", "-w"), sizes, strict=True)
        )
        seconds = sweep_seconds(
            v.size(f"{role}_min_bytes", "8"),
            v.size(f"{role}_max_bytes", "1G"),
            v.whole(f"{role}_step_factor", 2),
            v.whole(f"{role}_iters", 20),
            v.whole(f"{role}_warmup_iters", 5),
        )
        nodes = f"@{self.shape.nodes}" if prefix else ""
        return f"{prefix}nccl-{collective}{nodes} {words}", seconds + launch_s


def _node_phases(p: _Planner, plan: steps.RunPlan) -> list[PhaseCost]:
    shape, v = p.shape, p.v
    gpu = shape.gpus_per_node > 0
    probe_timeout = v.number("preflight_command_timeout_s", 120)
    preflight = [probe.name for probe in steps.PREFLIGHT_PROBES if gpu or not probe.gpu]
    health_timeout = v.number("health_probe_timeout_s", 60)
    phases = [
        PhaseCost("start", (p.overhead("start"),), "run id, run folder, run.json, this plan"),
        PhaseCost(
            "preflight", (p.overhead("preflight"), *p.probes("preflight", preflight, probe_timeout))
        ),
        PhaseCost(
            "health",
            (
                p.overhead("health"),
                *p.probes("health", steps.health_passive_steps("before"), health_timeout),
            ),
            "passive probes before the benchmarks",
        ),
    ]
    for name in ("install", "openmpi", "build"):
        ansible = p.overhead(name)
        phases.append(PhaseCost(name, (ansible, p.setup_step(name, name, name, p.waves))))
    intranode: list[StepCost] = [p.overhead("intranode")]
    timeout = v.number("bench_intranode_timeout_s", 1200)
    if gpu and plan.intranode_p2p and shape.gpus_per_node > 1:
        intranode.append(
            p.step(
                "intranode",
                steps.P2P,
                steps.P2P,
                p2p_seconds(shape.gpus_per_node),
                "p2p-base",
                "p2p-per-gpu-pair",
                count=p.waves,
                timeout_s=timeout,
                switch="-e bench_intranode_p2p=false",
            )
        )
    for collective in plan.intranode_collectives if gpu else ():
        key, seconds = p.nccl("", collective, 0.0)
        intranode.append(
            p.step(
                "intranode",
                steps.intranode_nccl(collective),
                key,
                seconds,
                "nccl-start",
                "nccl-rate",
                count=p.waves,
                timeout_s=timeout,
                switch="--skip-tags intranode",
            )
        )
    phases.append(PhaseCost("intranode", tuple(intranode), "" if gpu else "no GPU: nothing runs"))
    return phases


def _spanning_phases(p: _Planner, plan: steps.RunPlan) -> list[PhaseCost]:
    shape, v = p.shape, p.v
    if shape.nodes < 2:
        return []
    launch = DEFAULTS["launch-per-node"].seconds * shape.nodes
    mpi = p.step(
        "mpi-preflight",
        steps.MPI_PREFLIGHT,
        f"{steps.MPI_PREFLIGHT}@{shape.nodes}",
        5.0 + launch,
        "launch-per-node",
        timeout_s=v.number("mpi_preflight_timeout_s", 120),
    )
    internode: list[StepCost] = [p.overhead("internode")]
    for collective in plan.internode_collectives if shape.gpus_per_node else ():
        key, seconds = p.nccl(steps.INTERNODE_PREFIX, collective, launch)
        internode.append(
            p.step(
                "internode",
                steps.internode_nccl(collective),
                key,
                seconds,
                "nccl-start",
                "nccl-rate",
                "launch-per-node",
                timeout_s=v.number("bench_internode_timeout_s", 1800),
                switch="--skip-tags internode",
            )
        )
    retry = (
        f"a failed try runs once more (up to {v.number('mpi_preflight_timeout_s', 120):.0f} s "
        "again)"
        if v.flag("mpi_preflight_retry", "true") == "true"
        else ""
    )
    return [
        PhaseCost("mpi-preflight", (p.overhead("mpi-preflight"), mpi), retry),
        PhaseCost("internode", tuple(internode)),
    ]


def _round_kinds(p: _Planner, plan: steps.RunPlan) -> list[StepCost]:
    """One pair's tests of a round (the pairs of a round run at the same time), count 1."""
    shape, v = p.shape, p.v
    gpu = shape.gpus_per_node > 0
    kinds: list[StepCost] = []
    if plan.pairs_iperf3:
        seconds = v.number("bench_pairs_iperf3_seconds", 10)
        kinds.append(
            p.step(
                "pairs",
                "iperf3 (each direction)",
                f"pair-iperf3 -t {v.text('bench_pairs_iperf3_seconds', '10')}",
                seconds + DEFAULTS["iperf3-start"].seconds,
                "iperf3-start",
                count=2,
                timeout_s=v.number("bench_pairs_iperf3_timeout_s", 60),
                switch="-e bench_pairs_iperf3=false",
            )
        )
    if plan.pairs_allreduce != "false" and gpu:
        sizes = " ".join(
            f"--{n}-bytes {v.text(f'bench_pairs_allreduce_{n}_bytes', d)}"
            for n, d in (("min", "1M"), ("max", "64M"))
        )
        kinds.append(
            p.step(
                "pairs",
                "torch all-reduce",
                f"pair-allreduce {sizes}",
                DEFAULTS["allreduce-pair"].seconds,
                "allreduce-pair",
                timeout_s=v.number("bench_pairs_allreduce_timeout_s", 300),
                switch="-e bench_pairs_allreduce=false",
            )
        )
    if plan.pairs_nccl != "false" and gpu:
        low, high = (
            v.text("bench_pairs_nccl_min_bytes", "8"),
            v.text("bench_pairs_nccl_max_bytes", "1G"),
        )
        seconds = sweep_seconds(
            v.size("bench_pairs_nccl_min_bytes", "8"),
            v.size("bench_pairs_nccl_max_bytes", "1G"),
            2,
            20,
            5,
        )
        kinds.append(
            p.step(
                "pairs",
                "nccl-tests across the pair",
                f"pair-nccl -b {low} -e {high} -f 2",
                seconds + 2 * DEFAULTS["launch-per-node"].seconds,
                "nccl-start",
                "nccl-rate",
                timeout_s=v.number("bench_pairs_nccl_timeout_s", 900),
                switch="-e bench_pairs_nccl=false",
            )
        )
    if v.flag("bench_pairs_rdma", "auto") != "false" and shape.rails:
        memories = (
            ["host", "cuda"]
            if gpu and v.flag("bench_pairs_rdma_gpudirect", "true") == "true"
            else ["host"]
        )
        parallel = v.flag("bench_pairs_rdma_parallel", "true") == "true"
        lanes = 1 if parallel else shape.rails
        how = (
            f"{shape.rails} rails at once" if parallel else f"{shape.rails} rails one after another"
        )
        seconds = v.number("bench_pairs_rdma_seconds", 5)
        for memory in memories:
            kinds.append(
                p.step(
                    "pairs",
                    f"ib_write_bw {memory} memory ({how})",
                    f"pair-rdma-{memory} -D {v.text('bench_pairs_rdma_seconds', '5')}",
                    seconds + DEFAULTS["rdma-start"].seconds,
                    "rdma-start",
                    count=lanes,
                    timeout_s=v.number("bench_pairs_rdma_timeout_s", 60),
                    switch="-e bench_pairs_rdma=false",
                )
            )
    return kinds


def _pairs_phase(p: _Planner, plan: steps.RunPlan, mode: str
                 ) -> tuple[PhaseCost, int, float, StageCosts | None]:  # fmt: skip
    """(the pair phase, its rounds, what a fault adds at most, what its stages cost)."""
    shape, v = p.shape, p.v
    if shape.nodes < 2:
        return PhaseCost("pairs", (), "one node: no pairs"), 0, 0.0, None
    kinds = _round_kinds(p, plan)
    costs = StageCosts(
        nodes=shape.nodes, forks=shape.forks, controller_cores=shape.controller_cores,
        pair_tests_s=sum(k.total_s for k in kinds),
        round_fixed_s=DEFAULTS["round-overhead"].seconds + (
            DEFAULTS["collect-round"].seconds
            if v.flag("bench_pairs_collect_each_round", "true") == "true"
            else 0.0
        ),
        cpu_per_host_s=DEFAULTS["round-cpu-per-host"].seconds,
        cpu_per_idle_host_s=DEFAULTS["round-cpu-per-idle-host"].seconds,
        group_test_s=DEFAULTS["allreduce-pair"].seconds,
        launch_per_node_s=DEFAULTS["launch-per-node"].seconds,
    )  # fmt: skip
    round_waves = p.waves
    for key in ("round-cpu-per-host", "round-cpu-per-idle-host"):
        p.costs.defaults_used[key] = DEFAULTS[key].reason
    parallel = v.flag("bench_pairs_parallel", "true") == "true"
    scale = {"all-pairs": all_pairs_rounds(shape.nodes, parallel)}
    # The hosts an all-pairs round tests: every one (an odd one sits out), or one pair.
    all_pairs_tested = shape.nodes - shape.nodes % 2 if parallel else 2

    def controller_share(rounds: int, tested: int) -> StepCost:
        return StepCost(
            "pairs", f"per round: the controller for {tested} hosts tested of {shape.nodes}",
            "round-cpu-per-host", rounds, costs.host_share(tested), "default",
        )  # fmt: skip

    def pair_rounds(rounds: int) -> list[StepCost]:
        """`rounds` rounds of pairs over every node."""
        turns = costs.turns(shape.nodes)
        body = [replace(k, count=k.count * rounds * turns) for k in kinds]
        learned = p.costs.rounds.get(all_pairs_tested)
        if learned:  # earlier runs' rounds of as many hosts: the controller's share is in them
            return [*body, StepCost(
                "pairs", "per round: Ansible and the controller", "round-overhead",
                rounds, median(learned), f"history: median of {len(learned)} round(s)",
            )]  # fmt: skip
        body.append(StepCost(
            "pairs", "per round: Ansible and the collect", "round-overhead", rounds * round_waves,
            costs.round_fixed_s, "default",
        ))  # fmt: skip
        body.append(controller_share(rounds, all_pairs_tested))
        p.costs.defaults_used["round-overhead"] = DEFAULTS["round-overhead"].reason
        return body

    if mode == "all-pairs":
        rounds = scale["all-pairs"]
        body = pair_rounds(rounds)
        at_once = f"round(s) of {shape.nodes // 2} pair(s) at once" if parallel else "pair(s)"
        note = f"all pairs: {rounds} {at_once}" + ("" if parallel else ", one after another")
        # A faulty node is in a failing pair of every round it plays (N-1 of them), and the
        # repeats pack failing pairs into disjoint pairs: N-1 repeat rounds of its one pair,
        # each try again.
        repeats = (shape.nodes - 1) * costs.pair_round_s(2) * (plan.pairs_max_tries - 1)
        return PhaseCost("pairs", (p.overhead("pairs"), *body), note), rounds, repeats, costs
    sizes = " ".join(
        f"--{n}-bytes {v.text(f'bench_pairs_allreduce_{n}_bytes', d)}"
        for n, d in (("min", "1M"), ("max", "64M"))
    )

    def all_nodes(size: int) -> StepCost:
        name = "all-nodes all-reduce" if size == shape.nodes else f"group all-reduce of {size}"
        return p.step(
            "pairs", name, f"{steps.ALLNODES_ALLREDUCE}@{size} {sizes}",
            costs.group_test_each_s(size), "allreduce-pair", "launch-per-node",
            timeout_s=v.number("bench_pairs_allreduce_timeout_s", 300),
        )  # fmt: skip

    p.costs.defaults_used["round-overhead"] = DEFAULTS["round-overhead"].reason
    by_pairs = not any(k.key.startswith("pair-allreduce") for k in kinds)
    played = fault_search(shape.nodes, v.whole("bench_pairs_partners", MIN_PARTNERS), by_pairs)
    # A round of group tests: every member of every group started at once (so one all-nodes
    # run, the largest group setting the pace), Ansible's part (start, wait, collect, judge)
    # once per wave of `forks` hosts, the screen's as every later round's.
    group_round = StepCost(
        "pairs", "per group round: Ansible (start, wait, collect)", "round-overhead",
        round_waves, costs.round_fixed_s, "default",
    )  # fmt: skip
    screen = (
        pair_rounds(1)
        if by_pairs
        else [all_nodes(shape.nodes), group_round, controller_share(1, shape.nodes)]
    )
    # Each later round of the search: its groups, or its pairs; and each round of pairs with
    # a failing pair (the screen's too, when it is by pairs) repeats that pair with the tries
    # left (repeat.yml), a round each.
    later = sum(
        costs.group_round_s(tested, largest, all_nodes(largest).total_s)
        if kind == "groups"
        else costs.pair_round_s(tested)
        for kind, tested, largest in played.stages[1:]
    )
    pair_stages = played.pair_rounds + (1 if by_pairs else 0)
    fault = later + pair_stages * (plan.pairs_max_tries - 1) * costs.pair_round_s(2)
    # The screen is the first group round, by pairs or not.
    groups, pairs = played.group_rounds - 1, played.pair_rounds
    note = (
        f"staged: the screen; one faulty node adds {played.rounds - 1} round(s) of the search "
        f"({groups} of groups, {pairs} of pairs; all pairs would be {scale['all-pairs']})"
    )
    return PhaseCost("pairs", (p.overhead("pairs"), *screen), note), 0, fault, costs


def _health_level(v: Variables, level: str) -> tuple[int, int, float]:
    """(burn seconds, DCGM level, timeout) of a health level: the role's defaults, or what
    `health_levels` sets, each checked with the path of its key in the message."""
    defaults = {"quick": (20, 1, 300), "standard": (60, 2, 900), "extended": (300, 3, 3600)}
    burn, dcgm, timeout = defaults[level]
    levels = v.values.get("health_levels") or {}
    if not isinstance(levels, Mapping):
        raise ValueError(
            f"health_levels must map a level name to its settings (burn_seconds, dcgm_level, "
            f"timeout_s), not {levels!r}"
        )
    settings = levels.get(level) or {}
    if not isinstance(settings, Mapping):
        raise ValueError(
            f"health_levels.{level} must be a mapping (burn_seconds, dcgm_level, timeout_s), "
            f"not {settings!r}"
        )
    named = Variables({f"health_levels.{level}.{key}": value for key, value in settings.items()})
    return (
        named.whole(f"health_levels.{level}.burn_seconds", burn),
        named.whole(f"health_levels.{level}.dcgm_level", dcgm),
        named.number(f"health_levels.{level}.timeout_s", timeout),
    )


def _closing_phases(p: _Planner, plan: steps.RunPlan) -> list[PhaseCost]:
    v = p.v
    health = [
        p.overhead("health"),
        *p.probes(
            "health", steps.health_passive_steps("after"), v.number("health_probe_timeout_s", 60)
        ),
    ]
    level = plan.health_level
    if level != "none" and p.shape.gpus_per_node:
        burn, dcgm, timeout = _health_level(v, level)
        health.append(
            p.step(
                "health",
                steps.HEALTH_GEMM_BURN,
                steps.HEALTH_GEMM_BURN,
                burn + DEFAULTS["burn-start"].seconds,
                "burn-start",
                count=p.waves,
                timeout_s=timeout,
                switch="-e health_level=none",
            )
        )
        key = f"dcgm-{min(max(dcgm, 1), 3)}"
        health.append(
            p.step(
                "health",
                steps.HEALTH_DCGM_DIAG,
                steps.HEALTH_DCGM_DIAG,
                DEFAULTS[key].seconds,
                key,
                count=p.waves,
                timeout_s=timeout,
                switch="-e health_level=none",
            )
        )
    ansible = p.overhead("report", 2)
    report = p.setup_step(
        "report", "collect and report", "report", 1, v.number("collect_timeout_s", 120)
    )
    return [
        PhaseCost(
            "health",
            tuple(health),
            "passive probes again" + (f", health_level {level}" if level != "none" else ""),
        ),
        PhaseCost("report", (ansible, report)),
    ]


def estimate(
    shape: Shape,
    variables: Mapping[str, Any],
    measured: Mapping[str, Sequence[float]],
    overheads: Overheads | None = None,
    round_overheads: RoundOverheads | None = None,
) -> RunEstimate:
    """The run's time plan from its shape, its role variables and the history's durations (of
    steps, and of Ansible's own time per phase and per round of pairs)."""
    v = Variables(variables)
    plan = steps.RunPlan.from_variables(variables)
    mode = steps.pairs_mode_for(v.text("bench_pairs_mode", "auto"), shape.nodes)
    costs = _Costs(measured, overheads or {}, round_overheads or {})
    planner = _Planner(shape, v, costs)
    pairs, rounds, fault, stage_costs = _pairs_phase(planner, plan, mode)
    phases = [
        *_node_phases(planner, plan),
        *_spanning_phases(planner, plan),
        pairs,
        *_closing_phases(planner, plan),
    ]
    tags = TagSelection.of(variables)
    phases = [
        phase if tags.phase_runs(phase.name) else PhaseCost(phase.name, (), f"left out by {tags}")
        for phase in phases
    ]
    if not tags.phase_runs(pairs.name):
        rounds, fault, stage_costs = 0, 0.0, None
    return RunEstimate(
        shape, mode, rounds, tuple(phases), fault, dict(costs.defaults_used), stage_costs
    )


def cost_keys(estimate: RunEstimate) -> list[str]:
    return sorted({step.key for phase in estimate.phases for step in phase.steps})


def estimate_from_history(
    shape: Shape, variables: Mapping[str, Any], database: Path
) -> RunEstimate:
    """The estimate with the durations the history database's runs recorded for its steps and
    for Ansible's own time in its phases and rounds of pairs."""
    first = estimate(shape, variables, {})
    measured = measured_durations(database, shape.gpus_per_node, cost_keys(first))
    overheads = measured_phase_overheads(database, shape.gpus_per_node, shape.nodes)
    round_overheads = measured_round_overheads(database, shape.gpus_per_node, shape.nodes)
    if not (measured or overheads or round_overheads):
        return first
    return estimate(shape, variables, measured, overheads, round_overheads)
