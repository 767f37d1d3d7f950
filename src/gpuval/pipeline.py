"""`gpuval report RUN_DIR`: read the run folder, judge it once (gpuval.judgement: evidence ->
checks -> one RunJudgement), write every output from that judgement. The library API:
`judge(run_dir, judging) -> RunJudgement`, `write_outputs(judgement, target)`; `report_run` is the
command around them, `report` the same with the judgement kept (gpuval.plugin_api).

Besides the hardware, a run is judged with an acceptance profile (its thresholds and value
rules) and against a baseline (gpuval.checks.baseline) when there are any:
- profile: `--profile NAME|FILE`; else the one the run folder records (profile.json, written by
  `gpuval run`); `auto` picks the shipped profile that fits the detected hardware (or derives
  one); none: gpuval's default thresholds;
- baseline: `--baseline NAME` (`none`: no baseline); else the profile's; else the archive's
  `default` baseline when there is one.

Then the outputs: results.json, summary.json, junit.xml, measurements.csv, report.html,
gpuval.prom (Prometheus) and profile.json, each written to a hidden temporary while the next one
renders, then all put in place together, all or none (gpuval.files.atomic: a failed render or a
full disk leaves the previous ones whole); the run's rows
in the history database of its reports folder (RUN_DIR/..; none with --out), and a webhook
notification when the verdict fails and $GPUVAL_WEBHOOK_URL is set.

Exit status (EXIT_CODES): 0 pass or warn; 1 fail; 2 error (bad input, or nothing measured);
3 unjudged (hardware that could not be judged is never a pass for cron, CI or a schedule).
`fail_on` is the least severe verdict that exits non-zero: "unjudged" by default, "fail" lets
unjudged exit 0, "warn" makes warn exit 1 too (acceptance runs that must be spotless). Bad
input never shows a traceback: it is one message saying what to do.

Each raw file is taken from the run's parse cache when it matches the file (gpuval.files.
parse_cache: the collect after every phase fills it, and so does a report written into its run
folder), else parsed: a thousand nodes are not parsed again by every report, and the verdict is
the same either way.

Messages go through `logging` (logger gpuval.pipeline); `report_run` shows them on stderr as
plain lines, `messages_to` hands them to any other handler.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from referencing.exceptions import Unresolvable

from gpuval.checks.baseline import BaselineError, load_baseline
from gpuval.checks.model import STATUS_ORDER, Check, Status, at_least_as_bad, worst
from gpuval.checks.thresholds import ThresholdsError, load_thresholds
from gpuval.files.archive import Archive
from gpuval.files.atomic import OutputError, OutputSet, json_text
from gpuval.history.store import HistoryError, RunEntry, index_run
from gpuval.judgement import Judging, judge_run_folder
from gpuval.judgement.model import RunJudgement
from gpuval.parsers import no_cycle_collection
from gpuval.profile import Profile, ProfileError, load_profile, parse_profile
from gpuval.report.prometheus import PROMETHEUS_FILE, prometheus_text
from gpuval.report.results_json import RESULTS_FILE, results_json
from gpuval.report.summary import checks_by_host
from gpuval.report.tables import MEASUREMENTS_FILE, measurements_csv
from gpuval.report.webhook import payload, send
from gpuval.report.writers import report_files
from gpuval.runfolder import RunFolderError, read_run_folder
from gpuval.schemas.validation import SchemaError

__all__ = [
    "EXIT_CODES", "Judging", "Reported", "RunJudgement", "exit_code", "judge",
    "messages_to", "report", "report_run", "resolve_judging", "write_outputs",
]  # fmt: skip

log = logging.getLogger(__name__)

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


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def judge(run_dir: Path, judging: Judging | None = None, generated_at: str | None = None
          ) -> RunJudgement:  # fmt: skip
    """Read RUN_DIR and judge it once; RunFolderError when it is no run folder."""
    folder = read_run_folder(run_dir, cached=True)
    return judge_run_folder(folder, judging or Judging(), generated_at or now())


class RenderError(Exception):
    """An output could not be rendered (a gpuval bug); nothing was written."""


def _render_outputs(judgement: RunJudgement, target: Path, prometheus_file: Path | None,
                    outputs: OutputSet) -> None:  # fmt: skip
    """Every file of a report into `outputs`, each written behind to its temporary while the
    next renders; none replaced before all are: a renderer that fails leaves the previous
    files as they were, never half of them replaced."""
    outputs.add(target / RESULTS_FILE, results_json(judgement))
    outputs.add(target / MEASUREMENTS_FILE, measurements_csv(judgement.measurements))
    for name, content in report_files(judgement).items():
        outputs.add(target / name, content)
    prometheus = prometheus_text(judgement)
    outputs.add(target / PROMETHEUS_FILE, prometheus)
    if prometheus_file is not None:
        outputs.add(prometheus_file, prometheus)
    if judgement.profile is not None:
        outputs.add(target / PROFILE_RECORD, json_text(judgement.profile.record()))


def write_outputs(
    judgement: RunJudgement, target: Path, prometheus_file: Path | None = None
) -> None:
    """Write results.json, measurements.csv, report.html, summary.json, junit.xml, gpuval.prom
    (and `prometheus_file`) and profile.json into `target`, all or none. RenderError when one
    cannot be rendered, OutputError when they cannot be written."""
    outputs = OutputSet(write_behind=True)
    try:
        try:
            _render_outputs(judgement, target, prometheus_file, outputs)
        except BaseException:
            outputs.discard()  # what was written behind goes, whatever stopped the render
            raise
    except OutputError:
        raise
    except (SchemaError, Unresolvable) as problem:
        raise RenderError(
            f"results.json would not match its schema, nothing written "
            f"(a gpuval bug: please report it):\n{problem}"
        ) from problem
    except Exception as problem:  # a renderer's bug: say so, and the verdict it cannot write
        raise RenderError(
            f"the report could not be rendered (a gpuval bug, please report it): "
            f"{type(problem).__name__}: {problem}; verdict {judgement.verdict.upper()}, nothing "
            f"written: the previous outputs in {target} are unchanged"
        ) from problem
    outputs.commit()


def _counts(checks: list[Check]) -> str:
    counted = Counter(c.status for c in checks)
    return ", ".join(f"{counted[s]} {s}" for s in STATUS_ORDER if counted[s]) or "no checks"


def _progress(judgement: RunJudgement) -> list[str]:
    lines = []
    per_host = checks_by_host(judgement.checks)
    files_per_host = Counter(f.host for f in judgement.files)
    for facts in judgement.hosts:
        checks = per_host.get(facts.name, [])
        files = files_per_host[facts.name]
        status = worst([c.status for c in checks]) if checks else "no checks"
        model = f" ({facts.gpu_count or '?'}x {facts.gpu_model})" if facts.gpu_model else ""
        lines.append(f"  {facts.name}{model}: {files} file(s), {_counts(checks)} -> {status}")
    return lines


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
    judgement: RunJudgement, target: Path, indexed: bool, webhook_url: str | None,
    fail_on: Status,
) -> list[str]:  # fmt: skip
    """The history rows (when `indexed`) and the webhook; what to say about them. Neither
    changes the verdict: a broken database or receiver is reported, never fatal."""
    said = []
    try:
        if indexed:
            index_run(Archive.of_run(target), RunEntry.from_judgement(judgement, target))
    except HistoryError as problem:
        said.append(f"history not updated: {problem}")
    if webhook_url and at_least_as_bad(judgement.verdict, fail_on):
        said.append(send(webhook_url, payload(judgement, str(target / "report.html"))))
    return said


@contextmanager
def messages_to(handler: logging.Handler) -> Iterator[None]:
    """The report's messages (INFO and worse) to `handler` while the block runs, as plain lines."""
    handler.setFormatter(logging.Formatter("%(message)s"))
    level, propagate = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # said once, where asked, whatever the process' own logging does
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate


@dataclass
class Reported:
    """What `report` did: its exit code, and the judgement when there was one."""

    exit_code: int
    judgement: RunJudgement | None


def _tell_judged(judgement: RunJudgement, run_dir: Path, quiet: bool, where: Path) -> None:
    if not quiet:
        log.info(
            "gpuval report: %s: %d host(s), %d file(s)",
            run_dir, len(judgement.hosts), len(judgement.files),
        )  # fmt: skip
        for line in _progress(judgement):
            log.info("%s", line)
        profile, baseline = judgement.profile, judgement.baseline
        judged_with = [
            f"profile {profile.name} ({profile.origin})" if profile else "",
            f"baseline {baseline.name} (run {baseline.run_id})" if baseline else "",
        ]
        if any(judged_with):
            log.info("judged with %s", " and ".join(part for part in judged_with if part))
    verdict = judgement.verdict
    log.info("verdict: %s (%s); report: %s", verdict.upper(), _counts(judgement.checks), where)
    if not quiet:
        bad = [c for c in judgement.checks if c.status in ("fail", "error")]
        for check in bad[:MAX_FAILURES_SHOWN]:
            at = f" [{check.source}]" if check.source else ""
            log.info("  %s %s %s: %s%s", check.status.upper(), check.host, check.check_id,
                     check.reason, at)  # fmt: skip
        if len(bad) > MAX_FAILURES_SHOWN:
            log.info("  ... and %d more in %s", len(bad) - MAX_FAILURES_SHOWN, where)


def report(
    run_dir: Path,
    out_dir: Path | None = None,
    thresholds_file: Path | None = None,
    quiet: bool = False,
    fail_on: Status = DEFAULT_FAIL_ON,
    profile: str | None = None,
    baseline: str | None = None,
    prometheus_file: Path | None = None,
    webhook_url: str | None = None,
) -> Reported:
    """`gpuval report`: judge RUN_DIR once and write every output of that judgement; its
    messages through logging (see `messages_to`)."""
    try:
        judging = resolve_judging(run_dir, thresholds_file, profile, baseline)
    except (ThresholdsError, ProfileError, BaselineError) as problem:
        log.error("gpuval report: %s", problem)
        return Reported(exit_code("error"), None)
    target = out_dir or run_dir
    # A thousand nodes' records are millions of objects without cycles: the cycle collector
    # would walk them over and over while they are read, judged and rendered (about 15% of the
    # time); what they leave behind is collected once it is back on.
    with no_cycle_collection():
        try:
            # Written into the run folder, the report keeps what it parsed in the run's parse
            # cache too (a report after a gpuval upgrade parses everything once, not every
            # time); rendered elsewhere (--out: a read-only archive) it leaves RUN_DIR as it is.
            folder = read_run_folder(run_dir, cached=True, write_back=out_dir is None)
        except RunFolderError as problem:
            log.error("gpuval report: %s", problem)
            return Reported(exit_code("error"), None)
        judgement = judge_run_folder(folder, judging, now())
        try:
            write_outputs(judgement, target, prometheus_file)
        except (RenderError, OutputError) as problem:
            log.error("gpuval report: %s", problem)
            return Reported(exit_code("error"), judgement)
    # A reports folder's history indexes its own run folders (what `gpuval history --rebuild`
    # reads). A render elsewhere (--out: other thresholds, a read-only archive) is none of
    # them: it neither replaces the run's row in RUN_DIR/.. nor plants a database beside DIR.
    notes = _history_and_webhook(judgement, target, out_dir is None, webhook_url, fail_on)
    _tell_judged(judgement, run_dir, quiet, target / "report.html")
    for note in notes:
        log.warning("gpuval report: %s", note)
    return Reported(exit_code(judgement.verdict, fail_on), judgement)


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
    """The command: `report`, its messages on stderr; the exit code (see `exit_code`)."""
    # The judgement is dropped as soon as its exit code is read, and reference counting frees
    # it: turning the cycle collector back on while it is alive walked all of it for nothing
    # (millions of objects at a thousand nodes).
    with messages_to(logging.StreamHandler(sys.stderr)), no_cycle_collection():
        return report(
            run_dir, out_dir, thresholds_file, quiet, fail_on, profile, baseline,
            prometheus_file, webhook_url,
        ).exit_code  # fmt: skip
