"""One owner for where the NVL72 rack tests run: gpuval.plan.steps.rack_test_hosts places them,
run.json expects them there, and bench_internode runs them from the same answer (gpuval_steps'
`rack_tests`) with no placement rule of its own, so the plan and the role cannot disagree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuval.plan import steps
from gpuval.plan.steps import RunPlan, expected_steps, rack_test_hosts

ROLE = Path(__file__).resolve().parents[2] / "roles" / "bench_internode"
LAYOUTS = [
    # Two racks of two trays, a rack of one and an undeclared host, interleaved.
    {"t1": "a", "t2": "b", "t3": "a", "t4": "b", "t5": "c"},
    {"t1": "a", "t2": "a"},  # one rack: no network-only test
    {"t1": "a", "t2": "b"},  # racks of one tray: no rack test
    {},  # no rack declared
]


@pytest.mark.parametrize("racks", LAYOUTS)
def test_run_json_expects_each_rack_test_on_the_host_that_launches_it(racks: dict[str, str]):
    hosts = ["t0", *racks]
    placed = rack_test_hosts(hosts, racks)
    expected = expected_steps(hosts, RunPlan(), ["internode"], racks)
    rack_steps = {h for h, names in expected.items() if steps.rack_nccl("all_reduce") in names}
    across = {h for h, names in expected.items() if steps.across_racks_nccl("all_reduce") in names}
    assert (rack_steps, across) == (set(placed["rack"]), set(placed["across-racks"]))


def test_the_rack_tests_run_from_the_first_tray_of_each_rack_and_of_the_first_rack() -> None:
    placed = rack_test_hosts(["t0", *LAYOUTS[0]], LAYOUTS[0])
    assert placed == {
        "rack": {"t1": ["t1", "t3"], "t2": ["t2", "t4"]},
        "across-racks": {"t1": ["t1", "t2", "t5"]},
    }


def _tasks(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for task in tasks:
        found += [task, *_tasks(task.get("block", []))]
    return found


def test_the_role_runs_the_rack_tests_where_the_plan_places_them() -> None:
    tasks = _tasks(yaml.safe_load((ROLE / "tasks" / "racks.yml").read_text()))
    (asked,) = [t for t in tasks if "gpuval_steps" in t]
    assert asked["register"] == "bench_internode_rack_steps" and asked.get("run_once") is True
    runs = [t for t in tasks if "gpuval_mpirun" in t]
    assert len(runs) == 2
    for run, test in zip(runs, ("rack", "across_racks"), strict=True):
        placement = f"bench_internode_rack_steps.rack_tests.{test}"
        assert run["gpuval_mpirun"]["hosts"] == f"{{{{ {placement}[inventory_hostname] }}}}"
    rack_block = next(t for t in tasks if "block" in t)
    assert rack_block["when"] == "inventory_hostname in bench_internode_rack_steps.rack_tests.rack"
    assert runs[1]["when"] == (
        "inventory_hostname in bench_internode_rack_steps.rack_tests.across_racks"
    )


def test_the_role_keeps_no_rack_rule_of_its_own() -> None:
    for path in [*(ROLE / "vars").glob("*.yml"), *(ROLE / "tasks").glob("*.yml")]:
        assert "gpuval_nvl_domain" not in path.read_text(), path
