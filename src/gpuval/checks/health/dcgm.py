"""DCGM: the diagnostics, each failed test named per GPU."""

from __future__ import annotations

from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check
from gpuval.checks.model import Check
from gpuval.evidence import HostEvidence


def dcgm_checks(judge: JudgeState, host: HostEvidence) -> None:
    for parsed in host.health.dcgm:
        run = parsed.record
        if run.runtime_error:
            judge.add(Check(
                check_id="health.dcgm", host=host.name, category="health", status="fail",
                source=parsed.source(), reason=f"DCGM could not run: {run.runtime_error}",
                action="check nv-hostengine and the DCGM version against the driver",
            ))  # fmt: skip
            continue
        problems: list[Problem] = []
        for test in run.tests:
            status = (test.status or "").lower()
            if status not in ("fail", "warn"):
                continue
            bad = [r for r in test.results if r.status.lower() == status] or test.results
            entities = ", ".join(r.entity for r in bad) or "all GPUs"
            why = next((w for r in bad for w in r.warnings), "")
            problems.append(("fail" if status == "fail" else "warn",
                             f"{test.name}: {test.status} on {entities}"
                             + (f" ({why})" if why else ""),
                             f"drain the node; run dcgmi diag -r 3 again on {entities}, RMA "
                             "what fails twice" if status == "fail" else
                             f"read DCGM's warning for {entities}"))  # fmt: skip
        skipped = [t.name for t in run.tests if (t.status or "").lower() == "skip"]
        passed = f"{len(run.tests) - len(skipped)} DCGM test(s) passed (DCGM {run.dcgm_version})"
        if skipped:
            passed += f"; skipped: {', '.join(skipped)}"
        add_check(judge, host, "health.dcgm", problems, passed, parsed.source())
