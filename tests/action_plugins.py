"""Run an action plugin of plugins/action/ as ansible-playbook runs it in its own process, with
the calls it makes to the node (`_execute_module`) recorded instead of sent."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

ACTIONS = Path(__file__).resolve().parents[1] / "plugins" / "action"


@dataclass
class ActionRun:
    result: dict[str, Any]
    node_calls: list[dict[str, Any]] = field(default_factory=list)


def run_action(
    name: str,
    args: dict[str, Any],
    task_vars: dict[str, Any],
    resolved_action: str | None = None,
    node: Callable[[dict[str, Any]], dict[str, Any]] = lambda call: {"results": []},
    check_mode: bool = False,
) -> ActionRun:
    """plugins/action/<name>.py run with the task's `args`; each node-side module call answers
    what `node` makes of it (by default {"results": []}). `resolved_action`: the name Ansible
    resolved the task's action to (the collection's FQCN, or the short name)."""
    spec = importlib.util.spec_from_file_location(name, ACTIONS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    task = mock.MagicMock(
        args=args, resolved_action=resolved_action or name, async_val=0, check_mode=check_mode
    )
    action = plugin.ActionModule(task, *(mock.MagicMock() for _ in range(5)))
    calls: list[dict[str, Any]] = []

    def execute_module(**call: Any) -> dict[str, Any]:
        calls.append(call)
        return node(call)

    action._execute_module = execute_module
    return ActionRun(action.run(task_vars=task_vars), calls)
