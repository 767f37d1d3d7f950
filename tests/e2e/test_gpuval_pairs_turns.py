"""The gpuval_pairs action cuts a round in turns of at most the play's forks pairs, read from
ansible-playbook itself (here ansible.cfg's forks = 2): a round's servers start at once, its
clients in one task on forks hosts at a time, so more pairs than forks would start the last
clients after their servers gave up. A staged search says what its next stage will take by the
run's plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.local_playbook import run_locally

HOSTS = [f"node{i}" for i in range(1, 9)]
# A play of 8 hosts: one pair's tests 10 s, a round's fixed part 0.4 s a wave of forks hosts,
# 1 CPU s per tested host and 0.05 s per idle one over 2 cores (numbers chosen to count by hand).
STAGE_COSTS = {
    "nodes": 8, "forks": 2, "controller_cores": 2, "pair_tests_s": 10.0, "round_fixed_s": 0.4,
    "cpu_per_host_s": 1.0, "cpu_per_idle_host_s": 0.05, "group_test_s": 4.0,
    "launch_per_node_s": 0.5,
}  # fmt: skip


def started(tmp_path: Path, mode: str, plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """What gpuval_pairs returns at stage start for HOSTS, run by ansible-playbook with forks 2
    on the controller alone (the hosts are no inventory's); `plan`: the run folder's plan.json."""
    run_dir = tmp_path / "run"
    (run_dir / "raw").mkdir(parents=True)
    if plan is not None:
        (run_dir / "plan.json").write_text(json.dumps(plan))
    said = tmp_path / "said.json"
    completed = run_locally(tmp_path, ["controller"], {
        "name": "plan the pairs", "gather_facts": False,
        "tasks": [
            {"name": "Plan", "gpuval_pairs": {
                "run_dir": str(run_dir), "hosts": HOSTS, "mode": mode, "stage": "start",
            }, "register": "plan"},
            {"name": "Keep it", "ansible.builtin.copy": {
                "content": "{{ plan | to_json }}", "dest": str(said),
            }},
        ],
    }, forks=2)  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    result: dict[str, Any] = json.loads(said.read_text())
    return result


def test_all_pairs_rounds_come_in_turns_of_forks_pairs(tmp_path: Path) -> None:
    turns = started(tmp_path, "all-pairs")["next"]["rounds"]
    # 8 hosts: 7 rounds of 4 pairs, each in two turns of 2 pairs under the same round number.
    assert [len(turn) for turn in turns] == [2] * 14
    assert [turn[0]["round"] for turn in turns] == [r for r in range(1, 8) for _ in (1, 2)]


def test_the_search_says_what_its_next_stage_takes_by_the_runs_plan(tmp_path: Path) -> None:
    # Staged mode asks each host's variables for its switch: hosts outside the inventory too.
    plan = started(tmp_path, "staged", {"total_s": 100.0, "stage_costs": STAGE_COSTS})
    # iperf3 only: the screen is one round of 4 pairs, in two turns of 2 pairs (forks 2). A turn
    # tests 4 hosts: 10 s of tests + 0.4 s for each of its 2 waves + (4 x 1 + 4 x 0.05) / 2 s.
    assert [len(turn) for turn in plan["next"]["rounds"]] == [2, 2]
    assert plan["next_stage_s"] == 2 * (10 + 0.8 + 2.1)
    assert plan["stage_summary"].endswith("; about 0:00:26 by the plan (plan.json)")
