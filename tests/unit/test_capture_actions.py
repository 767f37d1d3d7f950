"""The capture actions (gpuval_preflight, gpuval_health_probes) run as ansible-playbook runs
them, with the node-side call recorded: each sends its probes in one gpuval_capture call, from
the place the action came from, with its own dest, host, phase and timeout."""

from __future__ import annotations

from typing import Any

import pytest
from tests.action_plugins import run_action

from gpuval.plan.health_probes import ProbePaths, capture_steps
from gpuval.plugin_api import preflight_probes

TASK_VARS = {"inventory_hostname": "n1"}


def node_call(name: str, resolved: str, args: dict[str, Any]) -> dict[str, Any]:
    """The one call the action made to the node."""
    (call,) = run_action(name, args, TASK_VARS, resolved).node_calls
    return call


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
    call = node_call("gpuval_health_probes", resolved, args)
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
        "task_vars": TASK_VARS,
    }


def test_preflight_sends_every_preflight_probe_in_one_capture_call() -> None:
    args = {"dest": "/raw/n1", "host": "n1", "timeout": 30, "cuda_home": "/usr/local/cuda"}
    call = node_call("gpuval_preflight", "gpuval.cluster.gpuval_preflight", args)
    assert call == {
        "module_name": "gpuval.cluster.gpuval_capture",
        "module_args": {
            "dest": "/raw/n1",
            "host": "n1",
            "phase": "preflight",
            "timeout": 30.0,
            "steps": preflight_probes("/usr/local/cuda", None, [], []),
        },
        "task_vars": TASK_VARS,
    }
