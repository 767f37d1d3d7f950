"""Baselines: the key figures of a known-good run, and the rules that judge later runs against
them as well as against the hardware.

The rules follow SuperBench's data diagnosis
(https://microsoft.github.io/superbenchmark/docs/user-tutorial/data-diagnosis): a baseline from a
known-good run plus per-metric rules,
- `variance`: the change against the baseline's value for the same host and figure, a signed
  fraction (-0.05 is 5 % below; a counter that was 0 and grew is +inf);
- `value`: the value itself, against fixed numbers (an acceptance gate; needs no baseline);
- `fleet`: the change against the median of the baseline's hosts of the same GPU model, for a
  host the baseline does not know (a node added or replaced since).

Default bounds, with their reasoning:
- bandwidth (busbw, p2p, pair): warn more than 5 % below the baseline (SuperBench's example of a
  defective machine), fail more than 10 % below: run-to-run spread is 5-10 %
  (gpuval.checks.thresholds), so a larger drop is not noise;
- fleet: the same bounds as the judge's host outliers (10 % below the median warns) and twice
  that fails;
- error counters that grew since the baseline: uncorrectable ECC errors, retired pages and rows
  remapped for uncorrectable errors fail (the GPU lost memory); corrected ECC errors and PCIe
  replays warn (the hardware recovered, but something degrades).
"""

from __future__ import annotations

import fnmatch
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from gpuval.checks.model import Category, Check, Status
from gpuval.checks.wording import number_text, percent
from gpuval.files.archive import Archive, ArchiveError
from gpuval.files.atomic import write_json
from gpuval.files.slugs import is_slug, slug
from gpuval.records.key_figures import KeyFigure, figure_entry, figures_from_summary
from gpuval.runfolder import load_json
from gpuval.schemas.validation import SchemaError, validate

RuleKind = Literal["variance", "value", "fleet"]
BANDWIDTH_FIGURES = ("busbw.*", "p2p.*", "pair.*")
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Rule:
    rule: RuleKind
    figures: tuple[str, ...]  # shell patterns over figure names
    warn_below: float | None = None
    fail_below: float | None = None
    warn_above: float | None = None
    fail_above: float | None = None
    source: str | None = None

    def applies(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.figures)

    def status(self, x: float) -> Status:
        def beyond(below: float | None, above: float | None) -> bool:
            return (below is not None and x < below) or (above is not None and x > above)

        if beyond(self.fail_below, self.fail_above):
            return "fail"
        return "warn" if beyond(self.warn_below, self.warn_above) else "pass"

    def crossed(self, status: Status) -> str:
        """The bound a warn or fail crossed, as the rule states it ("more than 10 % below")."""
        below, above = (
            (self.fail_below, self.fail_above)
            if status == "fail"
            else (self.warn_below, self.warn_above)
        )
        if self.rule == "value":
            sides = [
                f"below {number_text(below)}" if below is not None else "",
                f"above {number_text(above)}" if above is not None else "",
            ]
        else:
            sides = [
                f"more than {percent(-below)} below" if below is not None else "",
                ("any growth" if above == 0 else f"more than {percent(above)} above")
                if above is not None
                else "",
            ]
        return " or ".join(side for side in sides if side)

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Rule:
        def bound(key: str) -> float | None:
            value = document.get(key)
            return float(value) if isinstance(value, (int, float)) else None

        return cls(
            rule=document["rule"],
            figures=tuple(document["figures"]),
            warn_below=bound("warn_below"),
            fail_below=bound("fail_below"),
            warn_above=bound("warn_above"),
            fail_above=bound("fail_above"),
            source=document.get("source"),
        )


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("variance", BANDWIDTH_FIGURES, warn_below=-0.05, fail_below=-0.10),
    Rule(
        "variance",
        ("health.ecc_uncorrected", "health.retired_pages", "health.remapped_rows"),
        fail_above=0,
    ),
    Rule("variance", ("health.ecc_corrected", "health.pcie_replays"), warn_above=0),
    Rule("fleet", BANDWIDTH_FIGURES, warn_below=-0.10, fail_below=-0.20),
)


@dataclass(frozen=True)
class Baseline:
    name: str
    created_at: str
    run_id: str
    run_dir: str
    verdict: str
    gpu_models: dict[str, str | None]  # host -> catalog GPU model
    figures: list[KeyFigure] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "created_at": self.created_at,
            "run_id": self.run_id,
            "run_dir": self.run_dir,
            "verdict": self.verdict,
            "gpu_models": self.gpu_models,
            "figures": [figure_entry(f) for f in self.figures],
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Baseline:
        return cls(
            name=document["name"],
            created_at=document["created_at"],
            run_id=document["run_id"],
            run_dir=document["run_dir"],
            verdict=document["verdict"],
            gpu_models=dict(document["gpu_models"]),
            figures=figures_from_summary(document),
        )


class BaselineError(Exception):
    """A baseline that cannot be made or read; the message names the file and what to do."""


def _read_json(path: Path) -> dict[str, Any]:
    document, problem = load_json(path, str(path))
    if problem is not None:
        raise BaselineError(f"{path}: {problem.message}")
    if not isinstance(document, dict):
        raise BaselineError(f"{path}: must hold a JSON object")
    return document


GOOD_VERDICTS = ("pass", "warn", "unjudged")


def _baseline_name(name: str) -> str:
    """A name that stays a file of baselines/ (gpuval.files.slugs), else a BaselineError."""
    try:
        return slug(name, "baseline name")
    except ValueError as problem:
        raise BaselineError(str(problem)) from problem


def create_baseline(
    archive: Archive, run_reference: str, name: str, force: bool = False
) -> Baseline:
    """Write baselines/<name>.json from a judged run's key figures. A run whose verdict is fail
    or error is no known-good run: refused unless `force`."""
    _baseline_name(name)
    try:
        run_dir = archive.resolve_run(run_reference)
    except ArchiveError as problem:
        raise BaselineError(str(problem)) from problem
    summary = _read_json(run_dir / "summary.json")
    results = _read_json(run_dir / "results.json")
    verdict = str(summary.get("verdict"))
    if verdict not in GOOD_VERDICTS and not force:
        raise BaselineError(
            f"{run_dir}: verdict {verdict.upper()}: a baseline is a known-good run; judge a good "
            "run, or pass --force to keep this one anyway"
        )
    try:
        figures = figures_from_summary(summary)
        gpu_models = {str(h["name"]): h.get("gpu_model") for h in results.get("hosts", [])}
    except (KeyError, TypeError, ValueError, AttributeError) as problem:
        raise BaselineError(
            f"{run_dir}: summary.json or results.json is malformed ({type(problem).__name__}: "
            f"{problem}); judge the run again with `gpuval report {run_dir}`"
        ) from problem
    if not figures:
        raise BaselineError(f"{run_dir}: no key figures in summary.json: nothing to compare with")
    baseline = Baseline(
        name=name,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        run_id=str(summary.get("run_id")),
        run_dir=str(run_dir.resolve()),
        verdict=verdict,
        gpu_models=gpu_models,
        figures=figures,
    )
    try:
        validate(baseline.document(), "baseline")
    except SchemaError as problem:
        raise BaselineError(f"{run_dir}: its key figures make no baseline: {problem}") from problem
    write_json(archive.baseline_path(name), baseline.document())  # raises OutputError
    return baseline


def load_baseline(archive: Archive, name: str) -> Baseline:
    path = archive.baseline_path(_baseline_name(name))
    if not path.is_file():
        known = ", ".join(baseline_names(archive)) or "none yet"
        raise BaselineError(
            f"no baseline {name!r} in {archive.baselines_dir} (known: {known}); "
            "make one with `gpuval baseline create RUN_DIR --name NAME`"
        )
    document = _read_json(path)
    try:
        validate(document, "baseline")
    except SchemaError as problem:
        raise BaselineError(f"{path}: {problem}") from problem
    return Baseline.from_document(document)


def baseline_names(archive: Archive) -> list[str]:
    """The names of the baseline files of the archive, read or not (other files are no
    baselines: gpuval never writes a name that is not a slug)."""
    return sorted(
        path.stem
        for path in archive.baselines_dir.glob("*.json")
        if is_slug(path.stem) and path.is_file()
    )


def list_baselines(archive: Archive) -> list[Baseline]:
    """Every readable baseline, by name; unreadable files are left out (load names them)."""
    found = []
    for name in baseline_names(archive):
        try:
            found.append(load_baseline(archive, name))
        except BaselineError:
            continue
    return found


# ------------------------------------------------------------------ judging against a baseline


def change(value: float, reference: float) -> float:
    """Signed fraction of `reference`; from 0, any growth is +inf (a counter that was clean)."""
    if reference == 0:
        return 0.0 if value == 0 else math.copysign(math.inf, value)
    return (value - reference) / abs(reference)


CATEGORIES: dict[str, Category] = {
    "busbw": "bandwidth",
    "p2p": "p2p",
    "pair": "network",
    "health": "hardware",
}


def _relative_reason(
    figure: KeyFigure, reference: float, against: str, rule: Rule, status: Status
) -> str:
    unit = figure.unit
    measured = f"{figure.name} {number_text(figure.value)} {unit}"
    reference_text = f"{number_text(reference)} {unit}"
    if figure.higher_is_better and reference:
        said = f"{measured} = {percent(figure.value / reference)} of {against} ({reference_text})"
    else:
        said = f"{measured}, {against} {reference_text}"
    if status == "pass":
        return f"{said}: within the {rule.rule} rule"
    x = change(figure.value, reference)
    moved = (
        "grew from nothing"
        if math.isinf(x)
        else f"{percent(abs(x))} {'below' if x < 0 else 'above'}"
    )
    return f"{said}: {moved} ({status}: {rule.crossed(status)})"


def _check(
    figure: KeyFigure, rule: Rule, reference: float, reason: str, status: Status, source: str
) -> Check:
    return Check(
        check_id=f"baseline.{rule.rule}.{figure.name}",
        host=figure.host,
        category=CATEGORIES.get(figure.family, "consistency"),
        status=status,
        reason=reason + (f" [{rule.source}]" if rule.source else ""),
        measured=figure.value,
        reference=reference,
        unit=figure.unit,
        source=source,
    )


def _fleet_medians(baseline: Baseline) -> dict[tuple[str | None, str], float]:
    values: dict[tuple[str | None, str], list[float]] = {}
    for figure in baseline.figures:
        model = baseline.gpu_models.get(figure.host)
        values.setdefault((model, figure.name), []).append(figure.value)
    return {key: statistics.median(found) for key, found in values.items()}


def value_checks(figures: Iterable[KeyFigure], rules: Sequence[Rule]) -> list[Check]:
    """The `value` rules: each figure against fixed numbers (no baseline needed)."""
    checks = []
    for figure in figures:
        for rule in rules:
            if rule.rule != "value" or not rule.applies(figure.name):
                continue
            status = rule.status(figure.value)
            verdict = (
                "within the acceptance values"
                if status == "pass"
                else (f"{status}: {rule.crossed(status)}")
            )
            reason = f"{figure.name} {number_text(figure.value)} {figure.unit}: {verdict}"
            bound = next(
                (
                    b
                    for b in (rule.fail_below, rule.warn_below, rule.fail_above, rule.warn_above)
                    if b is not None
                ),
                0.0,
            )
            checks.append(_check(figure, rule, bound, reason, status, "profile"))
    return checks


def baseline_checks(
    figures: Sequence[KeyFigure],
    baseline: Baseline,
    rules: Sequence[Rule],
    gpu_models: dict[str, str | None],
) -> list[Check]:
    """The `variance` and `fleet` rules against `baseline`, and one warning per host listing the
    baseline's figures this run did not measure (not a pass: nothing was compared)."""
    source = f"baselines/{baseline.name}.json"
    against = f"baseline '{baseline.name}'"
    known = {(f.host, f.name): f.value for f in baseline.figures}
    baseline_hosts = {f.host for f in baseline.figures}
    medians = _fleet_medians(baseline)
    checks = []
    for figure in figures:
        for rule in rules:
            if not rule.applies(figure.name):
                continue
            if rule.rule == "variance" and (figure.host, figure.name) in known:
                reference = known[(figure.host, figure.name)]
                status = rule.status(change(figure.value, reference))
                reason = _relative_reason(figure, reference, against, rule, status)
            elif rule.rule == "fleet" and figure.host not in baseline_hosts:
                model = gpu_models.get(figure.host)
                if (model, figure.name) not in medians:
                    continue
                reference = medians[(model, figure.name)]
                status = rule.status(change(figure.value, reference))
                fleet = f"the median of {against}'s {model or 'GPU-less'} hosts"
                reason = _relative_reason(figure, reference, fleet, rule, status)
                reason += f"; {figure.host} is not in the baseline"
            else:
                continue
            checks.append(_check(figure, rule, reference, reason, status, source))
    measured = {(f.host, f.name) for f in figures}
    for host in sorted({h for h, _ in known}):
        missing = sorted(name for h, name in known if h == host and (h, name) not in measured)
        if missing:
            checks.append(
                Check(
                    check_id="baseline.coverage",
                    host=host,
                    category="completeness",
                    status="warn",
                    reason=(
                        f"{len(missing)} figure(s) of {against} (run {baseline.run_id}) not "
                        f"measured in this run, so not compared: {', '.join(missing)}"
                    ),
                    source=source,
                )
            )
    return checks
