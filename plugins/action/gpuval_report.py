# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_report: judge a run folder and render its report, in the controller process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_report
short_description: Normalise, judge and render a gpuval run folder on the controller
description:
  - Calls C(gpuval.pipeline.report_run) on O(run_dir) in ansible-playbook's own process, which
    writes C(results.json), C(measurements.csv), C(summary.json), C(junit.xml) and
    C(report.html) into it, the same as C(gpuval report RUN_DIR).
  - Returns the verdict, C(gpuval report)'s exit status RV(rc) and the report's path; with
    O(fail_task) fails when that status is not 0, after the report is written.
  - Never connects to the host it runs for.
options:
  run_dir: {description: "The run folder, e.g. reports/<run-id>.", type: path, required: true}
  thresholds: {description: JSON file overriding gpuval's verdict thresholds., type: path}
  fail_on:
    description:
      - C(gpuval report --fail-on); the verdicts at or worse than this one exit non-zero (fail 1,
        unjudged 3, warn 1); error (nothing could be judged) always exits 2. C(fail) lets an
        unjudged run (hardware that could not be judged) exit 0.
    type: str
    choices: [fail, unjudged, warn]
    default: unjudged
  fail_task:
    description: Fail the task when the exit status is not 0.
    type: bool
    default: true
requirements:
  - the gpuval package installed in ansible-playbook's Python
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "run_dir": {"type": "path", "required": True},
    "thresholds": {"type": "path"},
    "fail_on": {"type": "str", "choices": ["fail", "unjudged", "warn"], "default": "unjudged"},
    "fail_task": {"type": "bool", "default": True},
}


def _existing(path: Path) -> str | None:
    return str(path) if path.is_file() else None


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.plugin_api import render_report

        result: dict[str, Any] = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        run_dir = Path(args["run_dir"]).resolve()
        if not run_dir.is_dir():
            return {**result, "failed": True, "msg": f"run folder {run_dir} does not exist"}
        if self._task.check_mode:
            return {
                **result, "changed": True, "failed": False, "verdict": None, "rc": None,
                "report_path": None,
                "summary_path": None,
                "output_lines": [f"check mode: would judge {run_dir} and render its report"],
            }  # fmt: skip
        thresholds = Path(args["thresholds"]) if args["thresholds"] else None
        rendered = render_report(run_dir, thresholds, args["fail_on"])
        result.update(
            changed=True,
            failed=False,  # explicit: Ansible otherwise fails a result whose rc is not 0
            verdict=rendered.verdict,
            rc=rendered.rc,
            report_path=_existing(run_dir / "report.html"),
            summary_path=_existing(run_dir / "summary.json"),
            output_lines=rendered.lines,
        )
        if rendered.summary:
            result["counts"] = rendered.summary.get("counts", {})
            result["failing_checks"] = rendered.summary.get("failing_checks", [])
        if rendered.rc != 0 and args["fail_task"]:
            where = result["report_path"] or run_dir
            result.update(
                failed=True, msg=f"gpuval verdict {rendered.verdict.upper()}: see {where}"
            )
        return result
