#!/usr/bin/python
# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible module: judge a gpuval run folder and render its report (thin wrapper over gpuval)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: gpuval_report
short_description: Normalise, judge and render a gpuval run folder on the controller
description:
  - Calls C(gpuval.pipeline.report_run) on O(run_dir) (the folder holding C(run.json) and
    C(raw/<host>/)), which writes C(results.json), C(measurements.csv), C(summary.json),
    C(junit.xml) and C(report.html) into it, the same as C(gpuval report RUN_DIR).
  - Returns the verdict and the report's path, and fails when the verdict is one of
    O(fail_on_verdict), after the report is written.
  - Runs on the controller with a Python that has the gpuval package installed (the
    ansible-playbook Python of the repository's .venv); use it with C(delegate_to: localhost)
    or in a play on localhost with C(ansible_python_interpreter={{ ansible_playbook_python }}).
version_added: "0.1.0"
options:
  run_dir:
    description: The run folder, e.g. C(reports/20261121T055300Z).
    type: path
    required: true
  thresholds:
    description: JSON file overriding gpuval's default verdict thresholds.
    type: path
  fail_on_verdict:
    description:
      - Verdicts that make the task fail. The report is written either way.
      - C(error) means the run folder could not be judged (unreadable, or nothing measured).
    type: list
    elements: str
    choices: [pass, warn, fail, error]
    default: [fail]
notes:
  - Check mode writes nothing and reports the folder as changed.
  - Always changes the run folder (the report carries the time it was generated).
requirements:
  - the gpuval package importable by the module's Python
author:
  - gpuval contributors
"""

EXAMPLES = r"""
- name: Judge the run and render its report
  gpuval_report:
    run_dir: "{{ gpuval_reports_dir }}/{{ gpuval_run_id }}"
  delegate_to: localhost

- name: Render a run without failing on its verdict
  gpuval_report:
    run_dir: reports/20261121T055300Z
    thresholds: thresholds/h100-cluster.json
    fail_on_verdict: []
  register: report

- name: Show the verdict
  ansible.builtin.debug:
    msg: "{{ report.verdict }}: {{ report.report_path }}"
"""

RETURN = r"""
verdict:
  description: The run's verdict (worst check); null in check mode.
  returned: always
  type: str
  sample: pass
rc:
  description: Exit code of C(gpuval report) (0 pass or warn, 1 fail, 2 error); null in check mode.
  returned: always
  type: int
  sample: 0
report_path:
  description: Path of report.html, or null when it was not written.
  returned: always
  type: str
  sample: /work/gpuval/reports/20261121T055300Z/report.html
summary_path:
  description: Path of summary.json, or null when it was not written.
  returned: always
  type: str
  sample: /work/gpuval/reports/20261121T055300Z/summary.json
counts:
  description: Number of checks per status, from summary.json.
  returned: when summary.json was written
  type: dict
  sample: {"pass": 41, "warn": 2, "fail": 0, "error": 0}
failing_checks:
  description: The failing and erroring checks listed in summary.json.
  returned: when summary.json was written
  type: list
  elements: dict
output_lines:
  description: What the report step printed (per-host progress, verdict, first failures).
  returned: always
  type: list
  elements: str
"""

VERDICTS = ["pass", "warn", "fail", "error"]
# gpuval report's exit code when summary.json is missing (1 fail, 2 error); 0 needs a summary.
VERDICT_OF_EXIT_CODE = {1: "fail", 2: "error"}

ARGUMENT_SPEC: dict[str, Any] = {
    "run_dir": {"type": "path", "required": True},
    "thresholds": {"type": "path"},
    "fail_on_verdict": {
        "type": "list",
        "elements": "str",
        "choices": VERDICTS,
        "default": ["fail"],
    },
}


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """summary.json of the run folder, or None when absent or unreadable."""
    try:
        document = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def render(run_dir: Path, thresholds: Path | None) -> tuple[int, list[str]]:
    """Run gpuval's report step; its exit code and what it printed (kept off the module's stdout,
    which must carry only the module's JSON answer)."""
    from gpuval.pipeline import report_run

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        rc = report_run(run_dir, thresholds_file=thresholds)
    return rc, printed.getvalue().splitlines()


def existing(path: Path) -> str | None:
    return str(path) if path.is_file() else None


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_dir = Path(module.params["run_dir"]).resolve()
    thresholds = Path(module.params["thresholds"]) if module.params["thresholds"] else None
    if not run_dir.is_dir():
        module.fail_json(msg=f"run folder {run_dir} does not exist")
    if module.check_mode:
        module.exit_json(
            changed=True,
            failed=False,  # explicit: Ansible otherwise fails a result whose rc is not 0
            verdict=None,
            rc=None,
            report_path=None,
            summary_path=None,
            output_lines=[f"check mode: would judge {run_dir} and render its report"],
        )
    try:
        rc, lines = render(run_dir, thresholds)
    except ImportError as problem:
        module.fail_json(
            msg=f"cannot import gpuval ({problem}): run the module with the Python that has "
            "gpuval installed (ansible_python_interpreter: '{{ ansible_playbook_python }}' "
            "from the repository's .venv)"
        )
    summary = read_summary(run_dir)
    verdict = summary.get("verdict") if summary else VERDICT_OF_EXIT_CODE.get(rc, "error")
    result: dict[str, Any] = {
        "changed": True,
        # Explicit: Ansible otherwise fails every result whose rc is not 0.
        "failed": False,
        "verdict": verdict,
        "rc": rc,
        "report_path": existing(run_dir / "report.html"),
        "summary_path": existing(run_dir / "summary.json"),
        "output_lines": lines,
    }
    if summary:
        result["counts"] = summary.get("counts", {})
        result["failing_checks"] = summary.get("failing_checks", [])
    if verdict in module.params["fail_on_verdict"]:
        where = result["report_path"] or run_dir
        result["failed"] = True
        module.fail_json(msg=f"gpuval verdict {str(verdict).upper()}: see {where}", **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
