"""`gpuval report RUN_DIR`: read the run folder, parse, judge, write the results and the report.

Exit status: 0 pass (warnings count as pass), 1 fail, 2 error (bad input, or nothing measured).
Bad input never shows a traceback: it is one message saying what to do.
"""

from __future__ import annotations

import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from referencing.exceptions import Unresolvable

from gpuval import __version__
from gpuval.analysis.checks import judge_run
from gpuval.analysis.model import STATUS_ORDER, Check, RunResults, Status, worst
from gpuval.analysis.pairs import (
    PairThresholds,
    analyse_pairs,
    collective_bench_checks,
    mpi_preflight_checks,
)
from gpuval.analysis.thresholds import Thresholds, ThresholdsError, load_thresholds
from gpuval.normalise import host_facts, write_measurements, write_results
from gpuval.report import write_report_files
from gpuval.runfolder import RunFolder, RunFolderError, read_run_folder
from gpuval.schema import SchemaError

EXIT_CODES: dict[Status, int] = {"pass": 0, "warn": 0, "fail": 1, "error": 2}
MAX_FAILURES_SHOWN = 10


def build_results(folder: RunFolder, thresholds: Thresholds, generated_at: str) -> RunResults:
    """Judge a read run folder; the verdict is the worst check (no check at all: error)."""
    facts = host_facts(folder)
    checks, expectations = judge_run(folder, facts, thresholds)
    expected = {host: folder.expected_steps(host) for host in folder.hosts}
    pairs = analyse_pairs(folder.files, PairThresholds.from_thresholds(thresholds), expected)
    checks += pairs.checks + mpi_preflight_checks(folder.files)
    checks += collective_bench_checks(folder.files)
    run_id = folder.meta.get("run_id")
    return RunResults(
        run_id=run_id if isinstance(run_id, str) else folder.run_dir.resolve().name,
        generated_at=generated_at,
        gpuval_version=__version__,
        verdict=worst([c.status for c in checks]),
        hosts=facts,
        files=folder.files,
        checks=checks,
        expectations=expectations,
        diagnostics=folder.diagnostics,
        meta=folder.meta,
        pairs=pairs.to_dict(),
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
) -> int:
    """Judge RUN_DIR and write results.json, measurements.csv and the report; the exit code."""
    try:
        thresholds = load_thresholds(thresholds_file)
        folder = read_run_folder(run_dir)
    except (ThresholdsError, RunFolderError) as problem:
        _say(f"gpuval report: {problem}")
        return EXIT_CODES["error"]
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
        return EXIT_CODES["error"]
    except (SchemaError, Unresolvable) as problem:
        _say(
            f"gpuval report: results.json would not match its schema, nothing written "
            f"(a gpuval bug: please report it):\n{problem}"
        )
        return EXIT_CODES["error"]
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
    return EXIT_CODES[results.verdict]
