"""`gpuval run`'s progress from ansible-runner events (the event shapes of ansible-runner's
awx_display callback: event, event_data with play, role, task, task_action, host and res), and
what --tags does to run.json's expected steps, Ctrl-C, and the hook for providers that rent the
nodes."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gpuval.cli import main
from gpuval.run import launch, providers
from gpuval.run.launch import RunRequest, Stopper, phase_vars, phases_run
from gpuval.run.progress import Progress, steps_in_result
from gpuval.run.providers import ProvisionRequest

WRITE_RUN_JSON = "Create the run folder on the controller and write its run.json"


def event(kind: str, **data: Any) -> dict[str, Any]:
    return {"event": kind, "event_data": data, "pid": 4242}


def follow(tmp_path: Path, events: list[dict[str, Any]]) -> tuple[Progress, list[str]]:
    out = io.StringIO()
    progress = Progress(tmp_path / "run.json", out, interactive=False)
    for one in events:
        if one["event_data"].get("task") == WRITE_RUN_JSON:
            (tmp_path / "run.json").write_text(json.dumps({"expected": {
                "node1": ["nvidia-smi", "os-release", "pair-iperf3-r1-node1--node2-try1"],
                "node2": ["nvidia-smi", "os-release"],
            }}))  # fmt: skip
        assert progress.on_event(one) is True  # every event kept in the artifacts
    progress.finish()
    # the elapsed clock ("00:00") is the only part that depends on time
    return progress, [re.sub(r"\d\d:\d\d", "MM:SS", line) for line in out.getvalue().splitlines()]


def test_progress_names_phase_host_and_step_over_the_expected_steps(tmp_path: Path) -> None:
    progress, lines = follow(tmp_path, [
        event("playbook_on_play_start", play="Start the run"),
        event("playbook_on_task_start", role="run_context", task=WRITE_RUN_JSON,
              task_action="gpuval_run_folder"),
        event("runner_on_ok", host="localhost", res={"changed": True}),
        event("playbook_on_play_start", play="Preflight"),
        event("playbook_on_task_start", role="preflight", task="Validate arguments",
              task_action="ansible.builtin.validate_argument_spec"),
        event("playbook_on_task_start", role="preflight", task="Inventory the node",
              task_action="gpuval_capture"),
        event("runner_on_start", host="node1"),
        # several steps in one call; a loop's items
        event("runner_on_ok", host="node1", res={"results": [
            {"name": "nvidia-smi", "rc": None, "skipped_reason": "no NVIDIA driver"},
            {"name": "os-release", "rc": 0},
        ]}),
        event("runner_item_on_ok", host="node2", res={
            "sidecar_path": "/var/tmp/gpuval/runs/r/nvidia-smi.meta.json", "rc": None,
        }),
        event("runner_on_unreachable", host="node2", res={
            "msg": "Failed to connect to the host via ssh: Connection timed out",
        }),
        event("playbook_on_play_start", play="Find the bad node"),
        # the phase's own task before its role (no role): the phase comes from the role
        event("playbook_on_task_start", task="Leave out a node that failed an earlier phase",
              task_action="ansible.builtin.meta"),
        event("playbook_on_task_start", role="bench_pairs", task="Run iperf3"),
        event("runner_on_ok", host="node1", res={
            "sidecar_path": "/var/tmp/gpuval/runs/r/pair-iperf3-r1-node1--node2-try1.meta.json",
        }),
        event("playbook_on_task_start", role="collect", task="Fetch the new files"),
        # the same step again (a repeat of the result) counts once
        event("runner_on_ok", host="node1", res={
            "sidecar_path": "/var/tmp/gpuval/runs/r/pair-iperf3-r1-node1--node2-try1.meta.json",
        }),
    ])  # fmt: skip
    assert lines == [
        "MM:SS  phase start",
        "MM:SS  phase preflight",
        "[#####-------------------] 1/5 steps  20 %  MM:SS  preflight  node1  nvidia-smi",
        "[##########--------------] 2/5 steps  40 %  MM:SS  preflight  node1  os-release",
        "[##############----------] 3/5 steps  60 %  MM:SS  preflight  node2  nvidia-smi",
        "MM:SS  node2 UNREACHABLE in preflight (Inventory the node): Failed to connect to the "
        "host via ssh: Connection timed out",
        "MM:SS  phase pairs",
        "[###################-----] 4/5 steps  80 %  MM:SS  pairs  node1  "
        "pair-iperf3-r1-node1--node2-try1",
        "[###################-----] 4/5 steps  80 %  MM:SS  playbook ended; 1 expected step(s) "
        "left no result",
    ]
    assert progress.playbook_pid == 4242


def test_steps_are_read_from_the_capture_results_only() -> None:
    assert steps_in_result({"sidecar_path": "/x/nccl-all_reduce.meta.json", "rc": 0}) == [
        "nccl-all_reduce"
    ]
    assert steps_in_result({"changed": True, "msg": "ok"}) == []
    assert steps_in_result({"name": "a task name", "msg": "no rc: not a step"}) == []
    assert steps_in_result("not a dict") == []


def test_tags_keep_the_expected_steps_to_the_phases_that_run() -> None:
    everything = ["preflight", "health", "intranode", "internode", "pairs"]
    assert phases_run((), ()) == everything
    assert phases_run(("pairs",), ()) == ["pairs"]
    assert phases_run(("preflight", "install", "pairs"), ("pairs",)) == ["preflight"]
    assert phases_run((), ("intranode",)) == ["preflight", "health", "internode", "pairs"]
    assert phase_vars(["pairs"]) == {"run_context_phases": ["pairs"]}


def test_a_first_interrupt_asks_ansible_to_stop_a_second_kills_it() -> None:
    out = io.StringIO()
    stopper = Stopper(out)
    assert not stopper.cancel()
    stopper.request(2, None)  # SIGINT before any event: no pid to signal, cancel at once
    assert stopper.cancel()
    stopper = Stopper(out)
    stopper.playbook_pid = 2**22 + 12345  # no such process: the interrupt finds it gone
    stopper.request(2, None)
    assert not stopper.cancel()  # ansible-playbook gets its grace time to stop
    stopper.request(2, None)
    assert stopper.cancel()
    assert "SIGINT: stopping ansible-playbook (Ctrl-C again to kill it)" in out.getvalue()
    assert "killing ansible-playbook" in out.getvalue()


class Rented:
    """A provider double: hands out an inventory and records that it gave the nodes back."""

    def __init__(self, inventory: Path) -> None:
        self.inventory = inventory
        self.requests: list[ProvisionRequest] = []
        self.released = False

    @contextmanager
    def cluster(self, request: ProvisionRequest) -> Iterator[Path]:
        self.requests.append(request)
        try:
            yield self.inventory
        finally:
            self.released = True


def test_a_provider_rents_the_nodes_for_the_run_and_gives_them_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rented = Rented(tmp_path / "rented.ini")
    monkeypatch.setitem(providers.PROVIDERS, "double", lambda: rented)
    launched: list[RunRequest] = []

    def launch_double(request: RunRequest) -> int:
        launched.append(request)
        return 1

    monkeypatch.setattr(launch, "launch", launch_double)
    code = main(["run", "--provision", "double", "--profile", "pcie", "--run-id", "r1",
                 "--reports", str(tmp_path / "reports")])  # fmt: skip
    assert code == 1  # the run's own exit status
    (request,) = launched
    assert request.inventory == tmp_path / "rented.ini"
    assert request.profile is not None and request.profile.name == "pcie"
    assert rented.requests[0].run_id == "r1"
    assert rented.requests[0].run_dir == tmp_path / "reports" / "r1"
    assert rented.released
    assert main(["run", "--provision", "nowhere"]) == 2
    assert "no provisioning provider 'nowhere' (known: double)" in capsys.readouterr().err
