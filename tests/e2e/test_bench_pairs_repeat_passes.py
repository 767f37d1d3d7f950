"""roles/bench_pairs' repeat passes (repeat.yml): the controller judges the tries so far and runs
again what failed or was low, in twice as many passes as repeats. A pass that runs nothing again
leaves the tries as they were, so the passes after it are skipped, their judge included: on a
healthy cluster the judge runs once, not four times (each call reads the whole run folder)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.local_playbook import REPO, run_locally

HOSTS = ["node1", "node2"]


def test_after_a_pass_that_repeats_nothing_no_pass_runs(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "raw").mkdir(parents=True)
    completed = run_locally(tmp_path, HOSTS, {
        "name": "repeat passes", "gather_facts": False,
        "vars": {
            "bench_pairs_run_dir": str(run_dir), "bench_pairs_group": "all",
            "bench_pairs_max_tries": 3, "bench_pairs_thresholds_file": "",
            "bench_pairs_parallel": True, "bench_pairs_scope": [],
        },
        "tasks": [{"name": "Repeat", "ansible.builtin.include_tasks": str(
            REPO / "roles/bench_pairs/tasks/repeat.yml"
        )}],
    })  # fmt: skip
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    assert "repeat pass 1: 0 pair(s) to run again" in output
    # passes 2 to 4 (2 x (3 - 1)) are included, and skip their judge
    judged = output.split("TASK [Judge the tries so far on the controller]")[1:]
    assert len(judged) == 4
    assert [part.lstrip(" *\n").split(":")[0] for part in judged] == ["ok"] + ["skipping"] * 3
    assert "repeat pass 2" not in output
