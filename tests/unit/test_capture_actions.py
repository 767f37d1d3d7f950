"""The capture actions (gpuval_preflight, gpuval_health_probes) run as ansible-playbook runs
them, with the node-side call recorded: each sends its probes in one gpuval_capture call, from
the place the action came from, with its own dest, host, phase and timeout."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import pytest

from gpuval.plan.health_probes import ProbePaths, capture_steps
from gpuval.plugin_api import preflight_probes

ACTIONS = Path(__file__).resolve().parents[2] / "plugins" / "action"


def action_plugin(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ACTIONS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_action(name: str, resolved: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    """What the action asked the node to run (each `_execute_module` call's arguments)."""
    task = mock.MagicMock(args=args, resolved_action=resolved, async_val=0, check_mode=False)
    action = action_plugin(name).ActionModule(task, *(mock.MagicMock() for _ in range(5)))
    calls: list[dict[str, Any]] = []

    def execute_module(**call: Any) -> dict[str, Any]:
        calls.append(call)
        return {"results": []}

    action._execute_module = execute_module
    action.run(task_vars={"inventory_hostname": "n1"})
    return calls


@pytest.mark.parametrize(
    ("resolved", "module"),
    [
        ("gpuval_health_probes", "gpuval_capture"),
        ("gpuval.cluster.gpuval_health_probes", "gpuval.cluster.gpuval_capture"),
    ],
)
def test_health_probes_send_one_stages_probes_in_one_capture_call(
    resolved: str, module: str
) -> None:
    args = {"dest": "/raw/n1", "host": "n1", "stage": "after", "skip": {"health-ofed": "no OFED"}}
    (call,) = run_action("gpuval_health_probes", resolved, args)
    paths = ProbePaths("/sys/bus/pci/devices", "/sys/class/infiniband", "/proc/modules", "")
    assert call == {
        "module_name": module,
        "module_args": {
            "dest": "/raw/n1",
            "host": "n1",
            "phase": "health",
            "timeout": 60.0,
            "steps": capture_steps("after", paths, {"health-ofed": "no OFED"}),
        },
        "task_vars": {"inventory_hostname": "n1"},
    }


def test_preflight_sends_every_preflight_probe_in_one_capture_call() -> None:
    args = {"dest": "/raw/n1", "host": "n1", "timeout": 30, "cuda_home": "/usr/local/cuda"}
    (call,) = run_action("gpuval_preflight", "gpuval.cluster.gpuval_preflight", args)
    assert call == {
        "module_name": "gpuval.cluster.gpuval_capture",
        "module_args": {
            "dest": "/raw/n1",
            "host": "n1",
            "phase": "preflight",
            "timeout": 30.0,
            "steps": preflight_probes("/usr/local/cuda", None, [], []),
        },
        "task_vars": {"inventory_hostname": "n1"},
    }
