"""A run's time plan as text, its cost where instances are rented, and what to turn off to fit a
budget; plan.json, and what the staged search reads back from it."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuval.plan.plan_model import RunEstimate
from gpuval.plan.stage_costs import STAGE_COSTS_KEY, StageCosts

PLAN_FILE = "plan.json"  # plan_document's file in a run folder (the gpuval_plan action writes it)


def clock(seconds: float) -> str:
    """h:mm:ss, rounded up to the second."""
    whole = int(-(-seconds // 1))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


@dataclass(frozen=True)
class Price:
    """What one rented node costs per hour, and where the price comes from."""

    usd_per_hour: float
    source: str

    def total_usd(self, estimate: RunEstimate) -> float:
        return round(self.usd_per_hour * estimate.shape.nodes * estimate.total_s / 3600, 2)


def plan_lines(estimate: RunEstimate, price: Price | None = None) -> list[str]:
    shape = estimate.shape
    rounds = (
        f"{estimate.pair_rounds} pair round(s)" if estimate.pairs_mode == "all-pairs" else "staged"
    )
    lines = [
        f"gpuval plan: {shape.nodes} node(s) x {shape.gpus_per_node} GPU(s), {shape.rails} "
        f"RDMA rail(s); pairs {estimate.pairs_mode} ({rounds}); {shape.forks} forks, "
        f"{shape.controller_cores} controller core(s)",
        f"{'phase / step':<44} {'runs':>6} {'each':>9} {'time':>9}  source",
    ]
    for phase in estimate.phases:
        note = f"  ({phase.note})" if phase.note else ""
        lines.append(f"{phase.name:<44} {'':>6} {'':>9} {clock(phase.total_s):>9}{note}")
        for step in phase.steps:
            hung = f", timeout {clock(step.timeout_s)}" if step.timeout_s else ""
            lines.append(
                f"  {step.step[:42]:<42} {step.count:>6} {step.each_s:>8.1f}s "
                f"{clock(step.total_s):>9}  {step.source}{hung}"
            )
    lines.append(f"predicted duration {clock(estimate.total_s)} ({estimate.total_s / 60:.1f} min)")
    if estimate.fault_s:
        what = (
            "bisection and confirmation rounds"
            if estimate.pairs_mode == "staged"
            else "its pair of each round, repeated alone"
        )
        lines.append(f"each faulty node adds at most {clock(estimate.fault_s)} ({what})")
    if price:
        lines.append(
            f"cost: {shape.nodes} x ${price.usd_per_hour:.2f}/h ({price.source}) for "
            f"{estimate.total_s / 3600:.2f} h = ${price.total_usd(estimate):.2f}"
        )
    lines.append("defaults (where no earlier run of the same step, sizes and shape was found):")
    lines += [f"  {name}: {reason}" for name, reason in sorted(estimate.defaults_used.items())]
    return lines


def plan_document(estimate: RunEstimate, price: Price | None = None) -> dict[str, Any]:
    """plan.json: the estimate, and the cost when priced."""
    document = estimate.to_dict()
    if price:
        document["cost"] = {
            "usd_per_hour_per_node": price.usd_per_hour,
            "source": price.source,
            "total_usd": price.total_usd(estimate),
        }
    return document


def savings(estimate: RunEstimate, staged: RunEstimate | None = None) -> list[tuple[str, float]]:
    """What each switch would save, most first: the steps it turns off, and (all pairs) staged."""
    saved: dict[str, float] = defaultdict(float)
    for phase in estimate.phases:
        for step in phase.steps:
            if step.switch:
                saved[step.switch] += step.total_s
    if staged is not None and estimate.pairs_mode == "all-pairs":
        pairs = {p.name: p.total_s for p in estimate.phases}.get("pairs", 0.0)
        cheaper = pairs - {p.name: p.total_s for p in staged.phases}.get("pairs", 0.0)
        if cheaper > 0:
            saved["-e bench_pairs_mode=staged"] = cheaper
    return sorted(saved.items(), key=lambda item: -item[1])


def to_fit(estimate: RunEstimate, max_s: float, staged: RunEstimate | None = None) -> list[str]:
    """Lines saying by how much the plan is over `max_s`, and the switches that bring it under,
    biggest saving first (the list stops where it fits)."""
    over = estimate.total_s - max_s
    lines = [
        f"the plan takes {clock(estimate.total_s)}, {clock(over)} over the budget of "
        f"{clock(max_s)}; nothing was started. To fit, turn off (biggest first):"
    ]
    for switch, seconds in savings(estimate, staged):
        lines.append(f"  {switch:<36} saves {clock(seconds)}")
        over -= seconds
        if over <= 0:
            break
    if over > 0:
        lines.append(
            "  even all of these leave it over: test fewer nodes (--limit) or raise the budget"
        )
    return lines


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
