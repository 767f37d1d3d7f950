"""The gpuval_pairs action's staged search between two calls (plugins/action/gpuval_pairs.py):
the group steps it judges are the ones the previous call ran, stage after stage."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from gpuval.plan.pair_plan import NodeFacts, PairPlan, PairSettings
from gpuval.plugin_api import PairProgress

ACTION = Path(__file__).resolve().parents[2] / "plugins" / "action" / "gpuval_pairs.py"
HOSTS = [f"node{i}" for i in range(1, 9)]


def action() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpuval_pairs_action", ACTION)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_stage_judges_the_group_steps_the_last_one_ran() -> None:
    module = action()
    facts = NodeFacts(address="", torch_version="2.4.0", has_gpu=True, gpu_count=8)
    plan = PairPlan(PairSettings(), {h: facts for h in HOSTS}, HOSTS)
    args: dict[str, Any] = {"mode": "staged", "stage": "start", "partners": 2, "search": None}
    searched = module._searched(args, {}, HOSTS, set(HOSTS), ["allreduce"])
    assert searched.group_steps == {}
    result: dict[str, Any] = {}
    first = searched.next(PairProgress([], {}, 0), set(HOSTS), [], result, plan)
    assert (first.mode, first.groups) == ("groups", [HOSTS])
    assert result["group_runs"]["node1"]["name"] == "allnodes-allreduce"
    ran = {h for h, part in result["group_runs"].items() if part["leader"]}
    args |= {"stage": "search", "search": json.loads(json.dumps(result["search"]))}
    for stage in (2, 3):  # the first group fails each time: node1's half, then its pair
        searched = module._searched(args, {}, HOSTS, set(HOSTS), ["allreduce"])
        assert set(searched.group_steps) == ran
        failed = {h: {"status": "fail" if h == "node1" else "pass"} for h in ran}
        result = {}
        planned = searched.next(
            PairProgress([], {}, 0, groups=failed), set(HOSTS), [], result, plan
        )
        assert planned.mode == "groups"
        leaders = {h: p["name"] for h, p in result["group_runs"].items() if p["leader"]}
        assert set(leaders.values()) == {f"allnodes-allreduce-g{stage}"}
        ran = set(leaders)
        args["search"] = result["search"]
    searched = module._searched(args, {}, HOSTS, set(HOSTS), ["allreduce"])
    failed = {h: {"status": "fail" if h == "node1" else "pass"} for h in ran}
    result = {}
    confirm = searched.next(PairProgress([], {}, 0, groups=failed), set(HOSTS), [], result, plan)
    assert confirm.mode == "pairs" and confirm.suspects == ["node1", "node2"]
    assert result["search_rounds_left"] == 1
