# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_run_folder: the controller's run folder and its run.json, made at a run's start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_run_folder
short_description: Make the run folder (with raw/) on the controller and write its run.json once
description:
  - Runs in the controller process (a file task on localhost starts a Python interpreter for
    each module it runs, which every run paid twice); never connects to a node.
  - Makes O(run_dir)/raw, parents included.
  - Writes O(run_json) as O(run_dir)/run.json, whole or not at all, only where there is none
    yet. A run started again with the same run id keeps its first run.json (its start time).
  - A symbolic link where run.json goes is refused, never written through.
  - A run started again with the same run id plays some phases again (all, or those its --tags
    and --skip-tags select). The failure records an earlier start left for those phases
    (C(raw/<host>/failed-<phase>.*)) move to C(superseded/<host>/), named in a warning, so a
    phase that now passes is not judged on its earlier failure; it is recorded anew if it fails.
  - Changed where it made the folder or wrote run.json; check mode says so and writes nothing.
options:
  run_dir: {description: The run folder (reports/<run-id>)., type: path, required: true}
  run_json:
    description: >-
      The document run.json holds (run id, start time, hosts, expected steps, config, declared
      hardware).
    type: dict
    required: true
"""

RETURN = r"""
run_dir: {description: The run folder., returned: always, type: str}
created: {description: What was (or would be) made., returned: always, type: list, elements: str}
superseded:
  description: The earlier failure records moved, relative to the run folder.
  returned: always
  type: list
  elements: str
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "run_dir": {"type": "path", "required": True},
    "run_json": {"type": "dict", "required": True},
}


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.files.atomic import OutputError, write_output

        result: dict[str, Any] = super().run(tmp, task_vars or {})
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        run_dir = Path(args["run_dir"])
        raw, run_json = run_dir / "raw", run_dir / "run.json"
        created = [str(path) for path in (raw, run_json) if not path.exists()]
        if created and not self._task.check_mode:
            try:
                raw.mkdir(mode=0o755, parents=True, exist_ok=True)
                if not run_json.exists():
                    write_output(run_json, _run_json_text(args["run_json"]))
            except OSError as problem:
                return {**result, "failed": True, "created": [], "run_dir": str(run_dir),
                        "msg": f"{problem.filename or run_dir}: {problem.strerror}"}  # fmt: skip
            except OutputError as problem:
                return {**result, "failed": True, "created": [], "run_dir": str(run_dir),
                        "msg": str(problem)}  # fmt: skip
        moved = [] if self._task.check_mode else _earlier_failures(run_dir, task_vars or {})
        warnings = [f"{run_dir / path}: an earlier start's failure record of a phase played again"
                    for path in moved]  # fmt: skip
        return {**result, "changed": bool(created or moved), "created": created,
                "run_dir": str(run_dir), "superseded": moved,
                **({"warnings": warnings} if warnings else {})}  # fmt: skip


def _earlier_failures(run_dir: Path, task_vars: dict[str, Any]) -> list[str]:
    """The failure records of the phases this start plays (its tags), moved to superseded/."""
    from gpuval.files.superseded import supersede_records
    from gpuval.plan import steps
    from gpuval.plan.phase_tags import TagSelection

    played = [phase for phase in steps.PHASES if TagSelection.of(task_vars).phase_runs(phase)]
    return supersede_records(
        run_dir,
        [steps.failed(phase) + suffix for phase in played for suffix in (".txt", ".meta.json")],
    )


def _run_json_text(document: dict[str, Any]) -> str:
    """run.json as the role wrote it before (Ansible's to_nice_json: keys sorted, indented 2)."""
    return json.dumps(document, indent=2, sort_keys=True, separators=(",", ": ")) + "\n"
