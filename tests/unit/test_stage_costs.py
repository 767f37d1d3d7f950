"""What a stage of the pair phase costs (gpuval.plan.stage_costs), counted by hand from its
numbers; the plan keeps them in plan.json, and the search reads them back from there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuval.plan import duration
from gpuval.plan.plan_model import Shape
from gpuval.plan.plan_text import next_stage_s
from gpuval.plan.stage_costs import StageCosts

# 8 hosts, 2 cores: a pair's tests 10 s, a round's fixed part 0.4 s a wave of forks hosts, the
# controller 1 CPU s per tested host and 0.05 s per idle one, a group test 4 s + 0.5 s a member.
COSTS = StageCosts(
    nodes=8, forks=50, controller_cores=2, pair_tests_s=10.0, round_fixed_s=0.4,
    cpu_per_host_s=1.0, cpu_per_idle_host_s=0.05, group_test_s=4.0, launch_per_node_s=0.5,
)  # fmt: skip
HOSTS = [f"node{i}" for i in range(1, 9)]


def test_a_round_of_pairs_costs_its_tests_its_fixed_part_and_the_controllers_share() -> None:
    assert COSTS.pair_round_s(8) == pytest.approx(10 + 0.4 + 8 * 1.0 / 2)
    assert COSTS.pair_round_s(2) == pytest.approx(10 + 0.4 + (2 * 1.0 + 6 * 0.05) / 2)


def test_more_pairs_than_forks_run_in_turns_and_waves() -> None:
    two_forks = StageCosts(**{**COSTS.to_dict(), "forks": 2})
    # 4 pairs in turns of 2: the tests twice; 8 hosts in waves of 2: the fixed part 4 times.
    assert two_forks.pair_round_s(8) == pytest.approx(2 * 10 + 4 * 0.4 + 8 * 1.0 / 2)


def test_a_round_of_groups_is_paced_by_its_largest_group() -> None:
    assert COSTS.group_round_s(8, 4) == pytest.approx(4 + 4 * 0.5 + 0.4 + 8 * 1.0 / 2)
    assert COSTS.group_round_s(8, 4, test_s=30.0) == pytest.approx(30 + 0.4 + 4.0)
    assert COSTS.stage_s([HOSTS[:4], HOSTS[4:6]], []) == pytest.approx(
        4 + 4 * 0.5 + 0.4 + (6 * 1.0 + 2 * 0.05) / 2
    )


def test_a_stage_of_pairs_is_its_rounds_one_after_another() -> None:
    rounds = [[{"pair": "node1--node2"}, {"pair": "node3--node4"}], [{"pair": "node1--node5"}]]
    assert COSTS.stage_s([], rounds) == pytest.approx(COSTS.pair_round_s(4) + COSTS.pair_round_s(2))


def test_the_plan_keeps_its_stage_costs_in_plan_json() -> None:
    shape = Shape(tuple(HOSTS), gpus_per_node=8, rails=8, forks=50, controller_cores=2)
    document = json.loads(json.dumps(duration.estimate(shape, {}, {}).to_dict()))
    kept = StageCosts.from_dict(document["stage_costs"])
    assert (kept.nodes, kept.forks, kept.controller_cores) == (8, 50, 2)
    one_node = Shape(("node1",), gpus_per_node=8, rails=8)
    assert "stage_costs" not in duration.estimate(one_node, {}, {}).to_dict()


def test_stage_costs_that_are_no_numbers_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"stage_costs\.forks is None, not a number"):
        StageCosts.from_dict({**COSTS.to_dict(), "forks": None})
    with pytest.raises(ValueError, match=r"stage_costs\.nodes is True, not a number"):
        StageCosts.from_dict({**COSTS.to_dict(), "nodes": True})


def test_the_next_stage_is_estimated_only_from_a_plan_that_has_the_costs(tmp_path: Path) -> None:
    groups = [HOSTS[:4], HOSTS[4:]]
    assert next_stage_s(tmp_path, groups, []) == (None, None)  # no plan.json
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"total_s": 3.0}))  # one node: no pair phase
    assert next_stage_s(tmp_path, groups, []) == (None, None)
    plan.write_text(json.dumps({"stage_costs": COSTS.to_dict()}))
    assert next_stage_s(tmp_path, groups, []) == (COSTS.group_round_s(8, 4), None)
    plan.write_text('{"stage_costs": ')
    seconds, problem = next_stage_s(tmp_path, groups, [])
    assert seconds is None and problem is not None
    assert problem.startswith(f"{plan}: cannot be read (")
    assert problem.endswith("the next stage is not estimated")
