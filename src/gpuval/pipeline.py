"""`gpuval report RUN_DIR`: read the run folder, build the evidence, judge, write the results
and the report. One direction: run folder -> evidence -> checks -> report.

Besides the hardware, a run is judged with an acceptance profile (its thresholds and value
rules) and against a baseline (gpuval.baseline) when there are any:
- profile: `--profile NAME|FILE`; else the one the run folder records (profile.json, written by
  `gpuval run`); `auto` picks the shipped profile that fits the detected hardware (or derives
  one); none: gpuval's default thresholds;
- baseline: `--baseline NAME` (`none`: no baseline); else the profile's; else the archive's
  `default` baseline when there is one.

Then the outputs: results.json, summary.json, junit.xml, measurements.csv, report.html,
gpuval.prom (Prometheus) and profile.json, all rendered first and written together, all or none
(gpuval.outputs: a failed render or a full disk leaves the previous ones whole); the run's rows
in the history database of its reports folder (RUN_DIR/..; none with --out), and a webhook
notification when the verdict fails and $GPUVAL_WEBHOOK_URL is set.

Exit status (EXIT_CODES): 0 pass or warn; 1 fail; 2 error (bad input, or nothing measured);
3 unjudged (hardware that could not be judged is never a pass for cron, CI or a schedule).
`fail_on` is the least severe verdict that exits non-zero: "unjudged" by default, "fail" lets
unjudged exit 0, "warn" makes warn exit 1 too (acceptance runs that must be spotless). Bad
input never shows a traceback: it is one message saying what to do.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from referencing.exceptions import Unresolvable

from gpuval import __version__
from gpuval.archive import Archive
from gpuval.baseline import (
    DEFAULT_RULES,
    Baseline,
    BaselineError,
    baseline_checks,
    load_baseline,
    value_checks,
)
from gpuval.checks import judge_run
from gpuval.checks.model import STATUS_ORDER, Check, Status, at_least_as_bad, worst
from gpuval.checks.thresholds import Thresholds, ThresholdsError, load_thresholds
from gpuval.evidence import RunEvidence, build_evidence
from gpuval.figures import KeyFigure
from gpuval.history.store import HistoryError, RunEntry, index_run
from gpuval.notify import payload, send
from gpuval.outputs import OutputError, OutputSet, json_text
from gpuval.profile import Profile, ProfileError, fits, load_profile, node_shape, parse_profile
from gpuval.profile import profile_for as profile_for_shapes
from gpuval.records.base import to_jsonable
from gpuval.report import report_files
from gpuval.report.prometheus import PROMETHEUS_FILE, prometheus_text
from gpuval.report.summary import checks_by_host, key_figures
from gpuval.report.tables import MEASUREMENTS_FILE, measurements_csv
from gpuval.results import RESULTS_FILE, RunResults, results_json
from gpuval.runfolder import RunFolder, RunFolderError, read_run_folder
from gpuval.schema import SchemaError

MAX_FAILURES_SHOWN = 10
PROFILE_RECORD = "profile.json"  # the profile a run folder was judged with
AUTO = "auto"
NO_BASELINE = "none"
DEFAULT_BASELINE = "default"


# The exit status of each verdict at or worse than `fail_on` (error: always); 0 for the others.
EXIT_CODES: dict[Status, int] = {"error": 2, "fail": 1, "unjudged": 3, "warn": 1, "pass": 0}
EXIT_ERROR = EXIT_CODES["error"]
DEFAULT_FAIL_ON: Status = "unjudged"  # fail closed: a run that could not be judged is no pass


def exit_code(verdict: Status, fail_on: Status = DEFAULT_FAIL_ON) -> int:
    """The verdict's EXIT_CODES entry when it is error, or at or worse than `fail_on`; else 0."""
    if verdict == "error" or at_least_as_bad(verdict, fail_on):
        return EXIT_CODES[verdict]
    return 0


@dataclass(frozen=True)
class Judging:
    """What a run is judged with besides the hardware."""

    thresholds: Thresholds | None = None  # an override file's; None: the profile's or defaults
    profile: Profile | None = None
    auto_profile: bool = False  # choose the profile from the detected hardware
    baseline: Baseline | None = None


@dataclass
class Judged:
    results: RunResults
    thresholds: Thresholds
    profile: Profile | None
    figures: list[KeyFigure] = field(default_factory=list)


def _profile_for(evidence: RunEvidence) -> Profile:
    return profile_for_shapes([node_shape(h) for h in evidence.hosts.values()])


def _acceptance_checks(
    evidence: RunEvidence, profile: Profile | None, baseline: Baseline | None,
    figures: list[KeyFigure], results: RunResults,
) -> list[Check]:  # fmt: skip
    """The profile's value rules (for the hosts the profile fits) and the baseline rules."""
    rules = profile.rules if profile else DEFAULT_RULES
    checks = []
    if profile is not None:
        fitting = {n for n, h in evidence.hosts.items() if fits(profile, node_shape(h))}
        checks += value_checks([f for f in figures if f.host in fitting], rules)
    if baseline is not None:
        models = {h.name: h.gpu_model for h in results.hosts}
        checks += baseline_checks(figures, baseline, rules, models)
    return checks


def build_results(folder: RunFolder, thresholds: Thresholds, generated_at: str) -> RunResults:
    """Judge a read run folder on the hardware alone (no profile, no baseline)."""
    return judge_folder(folder, Judging(thresholds=thresholds), generated_at).results


def judge_folder(folder: RunFolder, judging: Judging, generated_at: str) -> Judged:
    """Judge a read run folder; the verdict is the worst check (no check at all: error)."""
    evidence = build_evidence(folder)
    profile = judging.profile or (_profile_for(evidence) if judging.auto_profile else None)
    thresholds = judging.thresholds or (profile.thresholds if profile else load_thresholds(None))
    judgement = judge_run(evidence, thresholds)
    run_id = folder.meta.get("run_id")
    results = RunResults(
        run_id=run_id if isinstance(run_id, str) else folder.run_dir.resolve().name,
        generated_at=generated_at,
        gpuval_version=__version__,
        verdict="error",
        hosts=[host.facts() for host in evidence.hosts.values()],
        files=folder.files,
        checks=judgement.checks,
        expectations=judgement.expectations,
        diagnostics=[*folder.refused, *folder.diagnostics],
        meta=folder.meta,
        pairs=judgement.pairs.to_dict(),
        profile=profile.name if profile else None,
        baseline=judging.baseline.name if judging.baseline else None,
    )
    figures = key_figures(results, thresholds)
    results.checks += _acceptance_checks(evidence, profile, judging.baseline, figures, results)
    results.verdict = worst([c.status for c in results.checks])
    return Judged(results, thresholds, profile, figures)


def _counts(checks: list[Check]) -> str:
    counted = Counter(c.status for c in checks)
    return ", ".join(f"{counted[s]} {s}" for s in STATUS_ORDER if counted[s]) or "no checks"


def _progress(results: RunResults) -> list[str]:
    lines = []
    per_host = checks_by_host(results.checks)
    files_per_host = Counter(f.host for f in results.files)
    for facts in results.hosts:
        checks = per_host.get(facts.name, [])
        files = files_per_host[facts.name]
        status = worst([c.status for c in checks]) if checks else "no checks"
        model = f" ({facts.gpu_count or '?'}x {facts.gpu_model})" if facts.gpu_model else ""
        lines.append(f"  {facts.name}{model}: {files} file(s), {_counts(checks)} -> {status}")
    return lines


def rendered_outputs(judged: Judged, target: Path, prometheus_file: Path | None) -> OutputSet:
    """Every file of a report, rendered into memory before any is written: a renderer that
    fails leaves the previous files as they were, never half of them replaced."""
    results = judged.results
    outputs = OutputSet()
    outputs.add(target / RESULTS_FILE, results_json(results))
    outputs.add(target / MEASUREMENTS_FILE, measurements_csv(results.files))
    for name, content in report_files(results, judged.thresholds).items():
        outputs.add(target / name, content)
    prometheus = prometheus_text(results, judged.figures)
    outputs.add(target / PROMETHEUS_FILE, prometheus)
    if prometheus_file is not None:
        outputs.add(prometheus_file, prometheus)
    if judged.profile is not None:
        outputs.add(target / PROFILE_RECORD, json_text(judged.profile.record()))
    return outputs


def _say(message: str) -> None:
    print(message, file=sys.stderr)


def _recorded_profile(run_dir: Path) -> Profile | None:
    """The profile.json of a run folder (gpuval run writes it), or None."""
    path = run_dir / PROFILE_RECORD
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        document = record["profile"]
    except (OSError, ValueError, KeyError, TypeError) as problem:
        raise ProfileError(f"{path}: not a profile record ({problem})") from problem
    profile = parse_profile(json.dumps(document), str(path))
    return dataclasses.replace(profile, origin=str(record.get("origin") or path))


def resolve_judging(
    run_dir: Path, thresholds_file: Path | None, profile: str | None, baseline: str | None
) -> Judging:
    """Judging settings from the command line, the run folder and its reports folder; raises
    ThresholdsError, ProfileError or BaselineError with a message naming the file."""
    thresholds = load_thresholds(thresholds_file) if thresholds_file else None
    chosen = None if profile in (None, AUTO) else load_profile(profile)
    if profile is None:
        chosen = _recorded_profile(run_dir)
    archive = Archive.of_run(run_dir)
    name = baseline or (chosen.baseline_name if chosen else None)
    if name == NO_BASELINE:
        found = None
    elif name is not None:
        found = load_baseline(archive, name)
    elif archive.baseline_path(DEFAULT_BASELINE).is_file():
        found = load_baseline(archive, DEFAULT_BASELINE)
    else:
        found = None
    return Judging(thresholds, chosen, profile == AUTO, found)


def _history_and_webhook(
    judged: Judged, target: Path, indexed: bool, webhook_url: str | None, fail_on: Status
) -> list[str]:
    """The history rows (when `indexed`) and the webhook; what to say about them. Neither
    changes the verdict: a broken database or receiver is reported, never fatal."""
    results = judged.results
    said = []
    try:
        if indexed:
            entry = RunEntry.from_results(results, judged.figures, target)
            index_run(Archive.of_run(target), entry)
    except HistoryError as problem:
        said.append(f"history not updated: {problem}")
    if webhook_url and at_least_as_bad(results.verdict, fail_on):
        checks = [to_jsonable(c) for c in results.checks]
        where = str(target / "report.html")
        said.append(send(webhook_url, payload(results.run_id, results.verdict, checks, where)))
    return said


def report_run(
    run_dir: Path,
    out_dir: Path | None = None,
    thresholds_file: Path | None = None,
    quiet: bool = False,
    fail_on: Status = DEFAULT_FAIL_ON,
    profile: str | None = None,
    baseline: str | None = None,
    prometheus_file: Path | None = None,
    webhook_url: str | None = None,
) -> int:
    """Judge RUN_DIR and write results.json, measurements.csv, the report and the automation
    outputs; the exit code (see `exit_code`)."""
    try:
        judging = resolve_judging(run_dir, thresholds_file, profile, baseline)
        folder = read_run_folder(run_dir)
    except (ThresholdsError, ProfileError, BaselineError, RunFolderError) as problem:
        _say(f"gpuval report: {problem}")
        return exit_code("error")
    generated_at = datetime.now(UTC).isoformat(timespec="seconds")
    judged = judge_folder(folder, judging, generated_at)
    results = judged.results
    target = out_dir or run_dir
    try:
        outputs = rendered_outputs(judged, target, prometheus_file)
    except (SchemaError, Unresolvable) as problem:
        _say(
            f"gpuval report: results.json would not match its schema, nothing written "
            f"(a gpuval bug: please report it):\n{problem}"
        )
        return exit_code("error")
    except Exception as problem:  # a renderer's bug: say so, and the verdict it cannot write
        _say(
            f"gpuval report: the report could not be rendered (a gpuval bug, please report it): "
            f"{type(problem).__name__}: {problem}; verdict {results.verdict.upper()}, nothing "
            f"written: the previous outputs in {target} are unchanged"
        )
        return exit_code("error")
    try:
        outputs.commit()
    except OutputError as problem:
        _say(f"gpuval report: {problem}")
        return exit_code("error")
    # A reports folder's history indexes its own run folders (what `gpuval history --rebuild`
    # reads). A render elsewhere (--out: other thresholds, a read-only archive) is none of
    # them: it neither replaces the run's row in RUN_DIR/.. nor plants a database beside DIR.
    notes = _history_and_webhook(judged, target, out_dir is None, webhook_url, fail_on)
    if not quiet:
        _say(
            f"gpuval report: {run_dir}: {len(results.hosts)} host(s), {len(results.files)} file(s)"
        )
        for line in _progress(results):
            _say(line)
        judged_with = [
            f"profile {judged.profile.name} ({judged.profile.origin})" if judged.profile else "",
            f"baseline {judging.baseline.name} (run {judging.baseline.run_id})"
            if judging.baseline
            else "",
        ]
        if any(judged_with):
            _say("judged with " + " and ".join(part for part in judged_with if part))
    where = target / "report.html"
    _say(f"verdict: {results.verdict.upper()} ({_counts(results.checks)}); report: {where}")
    if not quiet:
        bad = [c for c in results.checks if c.status in ("fail", "error")]
        for check in bad[:MAX_FAILURES_SHOWN]:
            at = f" [{check.source}]" if check.source else ""
            _say(f"  {check.status.upper()} {check.host} {check.check_id}: {check.reason}{at}")
        if len(bad) > MAX_FAILURES_SHOWN:
            _say(f"  ... and {len(bad) - MAX_FAILURES_SHOWN} more in {where}")
    for note in notes:
        _say(f"gpuval report: {note}")
    return exit_code(results.verdict, fail_on)
