"""The gpuval_pairs action cuts a round in turns of at most the play's forks pairs, read from
ansible-playbook itself (here ansible.cfg's forks = 2): a round's servers start at once, its
clients in one task on forks hosts at a time, so more pairs than forks would start the last
clients after their servers gave up."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.local_playbook import run_locally

HOSTS = [f"node{i}" for i in range(1, 9)]


def test_all_pairs_rounds_come_in_turns_of_forks_pairs(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "raw").mkdir(parents=True)
    planned = tmp_path / "planned.json"
    completed = run_locally(tmp_path, ["controller"], {
        "name": "plan the pairs", "gather_facts": False,
        "tasks": [
            {"name": "Plan", "gpuval_pairs": {
                "run_dir": str(run_dir), "hosts": HOSTS, "mode": "all-pairs", "stage": "start",
            }, "register": "plan"},
            {"name": "Keep it", "ansible.builtin.copy": {
                "content": "{{ plan.next.rounds | to_json }}", "dest": str(planned),
            }},
        ],
    }, forks=2)  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    turns = json.loads(planned.read_text())
    # 8 hosts: 7 rounds of 4 pairs, each in two turns of 2 pairs under the same round number.
    assert [len(turn) for turn in turns] == [2] * 14
    assert [turn[0]["round"] for turn in turns] == [r for r in range(1, 8) for _ in (1, 2)]
