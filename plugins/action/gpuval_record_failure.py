# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_record_failure: a node's failed phase as a step of the controller's run folder."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_record_failure
short_description: Record on the controller that a node failed a phase, and why
description:
  - Writes C(failed-<phase>.txt) (the phase, the task and the message that failed the node)
    and its sidecar C(failed-<phase>.meta.json) (exit status 1) into O(dest_dir), the node's
    C(raw/<host>/) on the controller, so the report names the node, the task and the message,
    and the node's verdict is FAIL, however the run went on. Works for a node that cannot be
    reached (nothing is done on it).
options:
  dest_dir: {description: "The controller's raw/<host>/ folder.", type: path, required: true}
  host: {description: The node's inventory name., type: str, required: true}
  phase: {description: The phase it failed (gpuval.plan.steps.PHASES)., type: str, required: true}
  task: {description: Name of the task that failed., type: str, default: ""}
  message: {description: What the task said., type: str, default: ""}
  unreachable: {description: The node could not be reached., type: bool, default: false}
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "dest_dir": {"type": "path", "required": True},
    "host": {"type": "str", "required": True},
    "phase": {"type": "str", "required": True},
    "task": {"type": "str", "default": ""},
    "message": {"type": "str", "default": ""},
    "unreachable": {"type": "bool", "default": False},
}


class ActionModule(ActionBase):
    _supports_check_mode = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.files.atomic import OutputError, OutputSet, json_text
        from gpuval.plan import steps

        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            name = steps.failed(args["phase"])
        except ValueError as problem:
            return {**result, "failed": True, "msg": str(problem)}
        dest = Path(args["dest_dir"])
        what = "unreachable" if args["unreachable"] else "failed"
        text = (
            f"{args['host']} {what} in phase {args['phase']}, task "
            f"{args['task'] or '(unnamed)'!r}: {args['message'].strip() or '(no message)'}\n"
        )
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        sidecar = {
            "schema_version": 1, "name": name, "host": args["host"], "phase": args["phase"],
            "raw": f"{name}.txt", "command": f"ansible task: {args['task']}", "tool": "context",
            "cwd": None, "env": {}, "exit_code": 1, "timed_out": False, "timeout_s": None,
            "started_at": now, "ended_at": now, "duration_s": 0, "skipped": None,
        }  # fmt: skip
        record = OutputSet()  # the output and its sidecar together, or neither
        record.add(dest / f"{name}.txt", text)
        record.add(dest / f"{name}.meta.json", json_text(sidecar))
        try:
            record.commit()
        except OutputError as problem:
            return {**result, "failed": True, "msg": f"{text.strip()}; not recorded: {problem}"}
        return {**result, "changed": True, "step": name, "msg": text.strip()}
