"""The staged search between two calls of the gpuval_pairs action (gpuval.plan.group_testing's
SearchCall, which the action only calls): the group steps it judges are the ones the previous
call ran, stage after stage; the options it no longer reads are refused, not ignored."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpuval.plan.group_testing import SearchCall
from gpuval.plan.pair_plan import NodeFacts, PairPlan, PairSettings

HOSTS = [f"node{i}" for i in range(1, 9)]
ACTIVE = set(HOSTS)


def begin(stage: str, previous: object = None, partners: int | None = None) -> SearchCall:
    return SearchCall.begin(stage, previous, HOSTS, ACTIVE, ["allreduce"], partners, {})


def test_each_stage_judges_the_group_steps_the_last_one_ran() -> None:
    facts = NodeFacts(address="", torch_version="2.4.0", has_gpu=True, gpu_count=8)
    plan = PairPlan(PairSettings(), {h: facts for h in HOSTS}, HOSTS)
    searched = begin("start", partners=2)
    assert searched.group_steps(ACTIVE) == {}
    first, returned = searched.advance([], {}, ACTIVE, 0, (), plan.all_nodes_run)
    assert (first.mode, first.groups) == ("groups", [HOSTS])
    assert returned["group_runs"]["node1"]["name"] == "allnodes-allreduce"
    ran = {h for h, part in returned["group_runs"].items() if part["leader"]}
    search = json.loads(json.dumps(returned["search"]))
    # The first group fails each time: node1's half, then its pair (both halves tested at once).
    for stage, sizes in ((2, ("4", "4")), (3, ("2", "2"))):
        searched = begin("search", search)
        assert set(searched.group_steps(ACTIVE)) == ran
        failed = {h: {"status": "fail" if h == "node1" else "pass"} for h in ran}
        planned, returned = searched.advance([], failed, ACTIVE, 0, (), plan.all_nodes_run)
        assert planned.mode == "groups"
        leaders = {h: p["name"] for h, p in returned["group_runs"].items() if p["leader"]}
        assert set(leaders.values()) == {f"allnodes-allreduce-g{stage}"}
        ran = set(leaders)
        search = returned["search"]
        assert returned["stage_summary"].endswith(f"next groups of {', '.join(sizes)} node(s)")
    failed = {h: {"status": "fail" if h == "node1" else "pass"} for h in ran}
    confirm, returned = begin("search", search).advance([], failed, ACTIVE, 0)
    assert confirm.mode == "pairs" and confirm.suspects == ["node1", "node2"]
    assert returned["search_rounds_left"] == 1
    assert confirm.scope == [1, 2]  # the rounds the repeats and the next judge look at
    assert returned["stage_summary"].startswith("search round 3: suspects node1, node2")
    assert "flagged none; suspects node1 pending, node2 pending" in returned["search_summary"]


def test_partners_after_the_start_are_refused_not_ignored() -> None:
    search: dict[str, Any] = begin("start", partners=3).advance([], {}, ACTIVE, 0)[1]["search"]
    assert begin("search", search).search.partners == 3
    with pytest.raises(ValueError, match="partners is read at stage start only"):
        begin("search", search, partners=2)


def test_stage_search_without_the_search_says_what_to_hand_back() -> None:
    with pytest.raises(ValueError, match="hand back the `search` the previous gpuval_pairs"):
        begin("search", None)
