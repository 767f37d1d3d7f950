"""gpuval's Slurm allocation: the salloc it asks with, and a node Slurm cannot give is not
tested, never passed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from tests import fake_salloc, fake_scontrol

from gpuval.slurm import allocation
from gpuval.slurm.allocation import AllocationRequest, SlurmCommandError
from gpuval.slurm.nodes import SlurmNode
from gpuval.slurm.scontrol import show_nodes

OUTPUTS = Path(__file__).resolve().parent.parent / "data" / "slurm"


def node(name: str, *states: str, reason: str = "") -> SlurmNode:
    return SlurmNode(name, name, name, states, 4, (), ("gpu",), reason)


KNOWN = [
    node("gpu1", "IDLE"),
    node("gpu2", "IDLE", "DRAIN", reason="disk replacement"),
    node("gpu3", "ALLOCATED"),
    node("gpu4", "IDLE"),
]
REQUEST = AllocationRequest(nodes=("gpu1", "gpu4"), job_name="gpuval-r1")


def test_salloc_asks_for_the_nodes_whole_without_a_shell_and_waits_a_bounded_time() -> None:
    full = AllocationRequest(("gpu1", "gpu4"), "gpuval-r1", "batch", "scavenger", 90, 8, 30)
    assert allocation.salloc_command(full) == [
        "salloc", "--no-shell", "--job-name=gpuval-r1", "--nodelist=gpu1,gpu4", "--nodes=2",
        "--exclusive", "--no-kill", "--immediate=30", "--partition=batch", "--qos=scavenger",
        "--time=90", "--gpus-per-node=8",
    ]  # fmt: skip
    assert allocation.salloc_command(REQUEST)[-1] == "--immediate=60"
    assert allocation.release_command("42") == ["scancel", "42"]


def test_the_time_limit_is_the_plan_s_prediction_with_the_batch_job_s_margin() -> None:
    # 3600 s predicted: 3600 * 1.25 + the 360 s stop notice = 4860 s, 81 minutes, as for
    # `gpuval run --slurm`'s job (gpuval.slurm.batch.time_limit_minutes).
    assert allocation.time_limit(None, 3600.0) == 81
    assert allocation.time_limit(90, 3600.0) == 90
    assert allocation.time_limit(None, None) is None


def test_the_job_id_is_salloc_s_granted_allocation() -> None:
    # Slurm 22.05's salloc --no-shell, on its standard error (tests/simhosts/slurm.py's cluster).
    assert allocation.granted_job("salloc: Granted job allocation 3\n") == "3"
    with pytest.raises(SlurmCommandError, match="granted no allocation"):
        allocation.granted_job(
            "salloc: error: Unable to allocate resources: Requested nodes are busy"
        )


def test_drained_busy_and_unknown_nodes_are_not_asked_for() -> None:
    assert allocation.unusable_nodes(["gpu1", "gpu2", "gpu3", "gpu9"], KNOWN) == {
        "gpu2": "IDLE+DRAIN (disk replacement)",
        "gpu3": "ALLOCATED",
        "gpu9": "not a node of this Slurm cluster",
    }


def fake_slurm(monkeypatch: pytest.MonkeyPatch, granted_nodelist: str) -> list[list[str]]:
    asked: list[list[str]] = []

    def run(command: Sequence[str], timeout: float) -> str:
        asked.append(list(command))
        if command[0] == "salloc":
            return "salloc: Granted job allocation 7\n"
        return f"JobId=7 JobName=gpuval-r1 NodeList={granted_nodelist} BatchHost=gpu1\n"

    monkeypatch.setattr(allocation, "_run", run)
    return asked


def test_a_node_slurm_cannot_give_is_left_out_and_not_tested(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = fake_slurm(monkeypatch, "gpu[1,4]")
    request = AllocationRequest(("gpu1", "gpu2", "gpu4"), "gpuval-r1")
    granted = allocation.allocate(request, KNOWN)
    assert asked[0][3:5] == ["--nodelist=gpu1,gpu4", "--nodes=2"]
    assert granted == allocation.Allocation(
        "7", ("gpu1", "gpu4"), {"gpu2": "IDLE+DRAIN (disk replacement)"}
    )


def test_a_node_the_granted_job_lacks_is_not_tested(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_slurm(monkeypatch, "gpu1")
    granted = allocation.allocate(REQUEST, KNOWN)
    assert granted.nodes == ("gpu1",)
    assert granted.not_tested == {"gpu4": "not in the allocation Slurm granted (job 7)"}


def test_nothing_to_ask_for_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = fake_slurm(monkeypatch, "gpu1")
    with pytest.raises(SlurmCommandError, match="no node Slurm can give now"):
        allocation.allocate(AllocationRequest(("gpu2", "gpu3"), "gpuval-r1"), KNOWN)
    assert asked == []


def test_slurm_s_clients_grant_the_idle_node_for_the_plan_s_time_and_release_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Slurm 22.05's nodes as recorded: gpu1 idle, gpu2 drained by a person.
    environment = fake_salloc.install(tmp_path, fake_scontrol.install(tmp_path, OUTPUTS))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    request = AllocationRequest(("gpu1", "gpu2"), "gpuval-r1", time_minutes=81)
    granted = allocation.allocate(request, show_nodes("gpu1,gpu2"))
    allocation.release(granted.job_id)
    assert granted == allocation.Allocation(
        fake_salloc.JOB_ID,
        ("gpu1",),
        {"gpu2": "UNKNOWN+DRAIN+NOT_RESPONDING (disk replacement, ticket 4711)"},
    )
    salloc, scancel = fake_salloc.calls(tmp_path)
    assert salloc["argv"][2:4] == ["--nodelist=gpu1", "--nodes=1"]
    assert salloc["argv"][-1] == "--time=81"
    assert scancel == {"program": "scancel", "argv": [fake_salloc.JOB_ID]}
