"""The judgement of a run, made once: run folder -> evidence -> checks (gpuval.checks), then the
acceptance profile's value rules and the baseline on the key figures -> one RunJudgement that
every output reads (gpuval.judgement.model).

A run is judged with an acceptance profile (its thresholds and value rules) and against a
baseline (gpuval.checks.baseline) when there are any (`Judging`); the verdict is the worst check, no
check at all an error.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuval import __version__
from gpuval.checks import judge_run
from gpuval.checks.baseline import DEFAULT_RULES, Baseline, baseline_checks, value_checks
from gpuval.checks.model import CLUSTER, Check, worst
from gpuval.checks.thresholds import Thresholds, load_thresholds
from gpuval.evidence import HostFacts, ParsedFile, RunEvidence, build_evidence
from gpuval.judgement.figures import host_metrics, in_host_order, outliers, unordered_figures
from gpuval.judgement.measurements import MEASURED_TOOLS, measurement_rows
from gpuval.judgement.model import FileEntry, RunJudgement
from gpuval.judgement.series import SERIES_TOOLS, busbw_series, p2p_runs, tool_runs, topo_runs
from gpuval.profile import Profile, fits, node_shape
from gpuval.profile import profile_for as profile_for_shapes
from gpuval.records.key_figures import KeyFigure
from gpuval.runfolder import RawFile, RunFolder

__all__ = ["Judging", "RunJudgement", "judge_run_folder"]


@dataclass(frozen=True)
class Judging:
    """What a run is judged with besides the hardware."""

    thresholds: Thresholds | None = None  # an override file's; None: the profile's or defaults
    profile: Profile | None = None
    auto_profile: bool = False  # choose the profile from the detected hardware
    baseline: Baseline | None = None


def _profile_for(evidence: RunEvidence) -> Profile:
    return profile_for_shapes([node_shape(h) for h in evidence.hosts.values()])


def _acceptance_checks(
    evidence: RunEvidence, profile: Profile | None, baseline: Baseline | None,
    figures: list[KeyFigure], facts: list[HostFacts],
) -> list[Check]:  # fmt: skip
    """The profile's value rules (for the hosts the profile fits) and the baseline rules."""
    rules = profile.rules if profile else DEFAULT_RULES
    checks = []
    if profile is not None:
        fitting = {n for n, h in evidence.hosts.items() if fits(profile, node_shape(h))}
        checks += value_checks([f for f in figures if f.host in fitting], rules)
    if baseline is not None:
        models = {h.name: h.gpu_model for h in facts}
        checks += baseline_checks(figures, baseline, rules, models)
    return checks


def _host_names(inventory: list[str], checks: list[Check], files: list[ParsedFile]) -> list[str]:
    """Inventory order first, then any other host that has checks or files."""
    extra = {c.host for c in checks} | {f.host for f in files}
    return inventory + sorted(extra - set(inventory) - {CLUSTER})


def _file_entry(raw: RawFile) -> FileEntry:
    parse = raw.parse
    return FileEntry(
        host=raw.host,
        path=raw.path,
        tool=parse.tool if parse else None,
        step=raw.sidecar,
        errors=list(parse.errors) if parse else [],
        warnings=list(parse.warnings) if parse else [],
        run_count=len(parse.runs) if parse else 0,
    )


def judge_run_folder(folder: RunFolder, judging: Judging, generated_at: str) -> RunJudgement:
    """Judge a read run folder: every check, the key figures and the value and baseline rules on
    them, and all an output shows."""
    evidence = build_evidence(folder)
    profile = judging.profile or (_profile_for(evidence) if judging.auto_profile else None)
    thresholds = judging.thresholds or (profile.thresholds if profile else load_thresholds(None))
    outcome = judge_run(evidence, thresholds)
    files = evidence.files
    pair_tables = outcome.pairs.to_dict()
    entries = [_file_entry(raw) for raw in folder.files]
    runs = tool_runs(files, SERIES_TOOLS | MEASURED_TOOLS)
    series = busbw_series(runs, outcome.expectations, thresholds.large_message_min_bytes)
    p2p = p2p_runs(runs)
    metrics = host_metrics(series, p2p)
    inventory = [host.name for host in evidence.hosts.values()]
    figures = unordered_figures(
        metrics, _host_names(inventory, outcome.checks, files), files, pair_tables.get("pairs", [])
    )
    # The rules judge the figures in the order of the hosts the checks so far name.
    judged_figures = in_host_order(figures, _host_names(inventory, outcome.checks, files))
    facts = [host.facts() for host in evidence.hosts.values()]
    checks = outcome.checks + _acceptance_checks(
        evidence, profile, judging.baseline, judged_figures, facts
    )
    hosts = _host_names(inventory, checks, files)
    run_id = folder.meta.get("run_id")
    return RunJudgement(
        run_id=run_id if isinstance(run_id, str) else folder.run_dir.resolve().name,
        generated_at=generated_at,
        gpuval_version=__version__,
        verdict=worst([c.status for c in checks]),
        meta=folder.meta,
        hosts=facts,
        host_names=hosts,
        files=entries,
        checks=checks,
        expectations=outcome.expectations,
        diagnostics=[*folder.refused, *folder.diagnostics],
        pairs=outcome.pairs,
        pair_tables=pair_tables,
        thresholds=thresholds,
        profile=profile,
        baseline=judging.baseline,
        host_metrics=metrics,
        figures=in_host_order(figures, hosts),
        outliers=outliers(metrics, hosts, thresholds),
        busbw_series=series,
        p2p_runs=p2p,
        topo_runs=topo_runs(runs),
        measurements=measurement_rows(runs, files, outcome.pairs.tries),
        racks=outcome.racks,
        superseded=folder.superseded,
    )
