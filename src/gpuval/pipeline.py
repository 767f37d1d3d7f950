"""`gpuval report RUN_DIR`: read the run folder, build the evidence, judge, write the results
and the report. One direction: run folder -> evidence -> checks -> report.

Exit status: 0 pass, warn or unjudged; 1 fail; 2 error (bad input, or nothing measured).
`fail_on="warn"` (or "unjudged") makes those verdicts, and any worse, exit 1: for acceptance
runs that must be spotless. Bad input never shows a traceback: it is one message saying what
to do.
"""

from __future__ import annotations

import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from referencing.exceptions import Unresolvable

from gpuval import __version__
from gpuval.checks import judge_run
from gpuval.checks.model import STATUS_ORDER, Check, Status, at_least_as_bad, worst
from gpuval.checks.thresholds import Thresholds, ThresholdsError, load_thresholds
from gpuval.evidence import build_evidence
from gpuval.report import write_report_files
from gpuval.report.tables import write_measurements
from gpuval.results import RunResults, write_results
from gpuval.runfolder import RunFolder, RunFolderError, read_run_folder
from gpuval.schema import SchemaError

MAX_FAILURES_SHOWN = 10


def exit_code(verdict: Status, fail_on: Status = "fail") -> int:
    """2 for error; 1 for a verdict at or worse than `fail_on`; else 0."""
    if verdict == "error":
        return 2
    return 1 if at_least_as_bad(verdict, fail_on) else 0


def build_results(folder: RunFolder, thresholds: Thresholds, generated_at: str) -> RunResults:
    """Judge a read run folder; the verdict is the worst check (no check at all: error)."""
    evidence = build_evidence(folder)
    judgement = judge_run(evidence, thresholds)
    run_id = folder.meta.get("run_id")
    return RunResults(
        run_id=run_id if isinstance(run_id, str) else folder.run_dir.resolve().name,
        generated_at=generated_at,
        gpuval_version=__version__,
        verdict=worst([c.status for c in judgement.checks]),
        hosts=[host.facts() for host in evidence.hosts.values()],
        files=folder.files,
        checks=judgement.checks,
        expectations=judgement.expectations,
        diagnostics=folder.diagnostics,
        meta=folder.meta,
        pairs=judgement.pairs.to_dict(),
    )


def _counts(checks: list[Check]) -> str:
    counted = Counter(c.status for c in checks)
    return ", ".join(f"{counted[s]} {s}" for s in STATUS_ORDER if counted[s]) or "no checks"


def _progress(results: RunResults) -> list[str]:
    lines = []
    for facts in results.hosts:
        checks = [c for c in results.checks if c.host == facts.name]
        files = sum(f.host == facts.name for f in results.files)
        status = worst([c.status for c in checks]) if checks else "no checks"
        model = f" ({facts.gpu_count or '?'}x {facts.gpu_model})" if facts.gpu_model else ""
        lines.append(f"  {facts.name}{model}: {files} file(s), {_counts(checks)} -> {status}")
    return lines


def _write_report(results: RunResults, out_dir: Path, thresholds: Thresholds) -> Path | None:
    """report.html, summary.json and junit.xml; None when rendering failed (a gpuval bug)."""
    try:
        write_report_files(results, out_dir, thresholds)
    except OSError:
        raise
    except Exception as problem:  # results.json is written: the verdict must still be told
        print(
            f"gpuval report: the HTML report could not be rendered (a gpuval bug, please "
            f"report it): {type(problem).__name__}: {problem}",
            file=sys.stderr,
        )
        return None
    return out_dir / "report.html"


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def report_run(
    run_dir: Path,
    out_dir: Path | None = None,
    thresholds_file: Path | None = None,
    quiet: bool = False,
    fail_on: Status = "fail",
) -> int:
    """Judge RUN_DIR and write results.json, measurements.csv and the report; the exit code
    (see `exit_code`)."""
    try:
        thresholds = load_thresholds(thresholds_file)
        folder = read_run_folder(run_dir)
    except (ThresholdsError, RunFolderError) as problem:
        _say(f"gpuval report: {problem}")
        return exit_code("error")
    generated_at = datetime.now(UTC).isoformat(timespec="seconds")
    results = build_results(folder, thresholds, generated_at)
    target = out_dir or run_dir
    try:
        target.mkdir(parents=True, exist_ok=True)
        write_results(results, target)
        write_measurements(results.files, target)
        report = _write_report(results, target, thresholds)
    except OSError as problem:
        _say(
            f"gpuval report: cannot write into {target}: {problem.strerror or problem}; "
            "pass a writable folder with --out"
        )
        return exit_code("error")
    except (SchemaError, Unresolvable) as problem:
        _say(
            f"gpuval report: results.json would not match its schema, nothing written "
            f"(a gpuval bug: please report it):\n{problem}"
        )
        return exit_code("error")
    if not quiet:
        _say(
            f"gpuval report: {run_dir}: {len(results.hosts)} host(s), {len(results.files)} file(s)"
        )
        for line in _progress(results):
            _say(line)
    where = report or target / "results.json"
    _say(f"verdict: {results.verdict.upper()} ({_counts(results.checks)}); report: {where}")
    if not quiet:
        bad = [c for c in results.checks if c.status in ("fail", "error")]
        for check in bad[:MAX_FAILURES_SHOWN]:
            at = f" [{check.source}]" if check.source else ""
            _say(f"  {check.status.upper()} {check.host} {check.check_id}: {check.reason}{at}")
        if len(bad) > MAX_FAILURES_SHOWN:
            _say(f"  ... and {len(bad) - MAX_FAILURES_SHOWN} more in {where}")
    return exit_code(results.verdict, fail_on)
