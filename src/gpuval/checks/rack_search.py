"""The search within a failing NVL72 rack, judged: which tray made the rack slow.

A rack whose test (gpuval.checks.rack_tests) failed is searched by group testing
(gpuval.plan.rack_search): its trays' all-reduces over multi-node NVLink, halves then pairs.
This module judges each group's run as the rack test is judged (the transport rule: it must
show multi-node NVLink; busbw against the rack's NVLink reference, the same per-GPU figure;
no wrong values), replays the search from those outcomes, and files one check per tray of a
searched rack: fail for the tray the search flags (it failed with every partner that passed a
group), pass for a tray in a group that reached the reference, unjudged for a suspect the
search could not confirm or a tray a cut-short search never cleared. The rack keeps its own
fail (the rack test's checks); a rack whose test passed, or left no verdict, is not searched.

The action plugin gpuval_rack_search asks `next_stage` between the stages of the run, so the
run and the report replay one search from the same outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuval.checks.context import JudgeState
from gpuval.checks.model import Check, Status
from gpuval.checks.nccl import bandwidth_check, nccl_samples
from gpuval.checks.rack_tests import rack_reference, rack_transport
from gpuval.evidence import Parsed, RunEvidence
from gpuval.plan import rack_search, steps
from gpuval.plan.confirmation import MIN_PARTNERS
from gpuval.plan.group_testing import GroupSearch, rounds_left
from gpuval.plan.rack_search import GroupRun, Outcome
from gpuval.records.nccl import NcclRun

# The collective a search runs: the rack test's all_reduce (its busbw is the one held to the rack's
# NVLink reference whatever the group's size).
SEARCHED = "all_reduce"
ACTION = (
    "take the tray out of service and check its NVLink: nvidia-smi nvlink -s and -e (links "
    "down or erroring), its fabric state in nvidia-smi -q, and its trays' cabling/cartridges"
)


@dataclass(frozen=True)
class GroupResult:
    """A group run's outcome (True reached the reference, False below it or off NVLink, None
    unjudged), why, and the file that says so."""

    outcome: Outcome
    reason: str
    source: str


def _wrong_values(run: NcclRun) -> bool:
    return any(
        count for placement in ("out_of_place", "in_place")
        for count in run.rows.column("wrong", placement) if count
    )  # fmt: skip


def group_result(
    judge: JudgeState, parsed: Parsed[NcclRun], rack: str, collective: str
) -> GroupResult:
    """One run judged as the rack test is: over multi-node NVLink, correct, and its busbw
    within the pass band of the rack's NVLink reference."""
    run, source = parsed.record, parsed.source()
    status, why = rack_transport("rack", run, rack)
    if status != "pass":
        return GroupResult(False if status == "fail" else None, why, source)
    if _wrong_values(run):
        return GroupResult(False, "wrong values in the #wrong column: it reduced wrongly", source)
    host = judge.evidence.hosts[parsed.host]
    cluster = len(judge.evidence.folder.hosts)
    reference = rack_reference("rack", host, parsed, collective, cluster)
    scratch = JudgeState(judge.evidence, judge.thresholds)
    bandwidth_check(scratch, parsed, "group", nccl_samples(run), reference, run.algorithms,
                    parsed.host)  # fmt: skip
    check = scratch.checks[-1]
    measured, peak = check.measured, check.reference
    if not isinstance(measured, float) or not isinstance(peak, float):
        return GroupResult(None if check.status != "fail" else False, check.reason, source)
    below = measured < judge.thresholds.busbw_pass_fraction * peak
    return GroupResult(not below and check.status != "fail", check.reason, check.source or source)


def racks_of(evidence: RunEvidence) -> dict[str, list[str]]:
    """Each declared rack's trays, in run order, where the rack test runs (two trays or more)."""
    hosts = list(evidence.folder.hosts)
    declared = {
        h: str(e.declared.nvl_domain) for h, e in evidence.hosts.items() if e.declared.nvl_domain
    }
    placed = steps.rack_test_hosts(hosts, declared)["rack"]
    return {declared[launcher]: trays for launcher, trays in placed.items()}


def _run_result(
    judge: JudgeState, launcher: str, step: str, rack: str, collective: str
) -> GroupResult | None:
    """The result of `step` on `launcher`, None where it left no file at all."""
    files = [f for f in judge.evidence.files if f.host == launcher and f.step == step]
    if not files:
        return None
    host = judge.evidence.hosts.get(launcher)
    found = [p for p in (host.nccl if host else ()) if p.file.step == step]
    if not found:
        ended = f" ({files[-1].ended[0]}: {files[-1].ended[1]})" if files[-1].ended else ""
        why = f"{step} on {launcher} left no nccl-tests table{ended}"
        return GroupResult(None, why, files[-1].path)
    return group_result(judge, found[-1], rack, collective)


@dataclass(frozen=True)
class RackSearch:
    """One rack's search as far as its outputs go, with every group run's result."""

    rack: str
    trays: tuple[str, ...]
    rack_test: GroupResult
    search: GroupSearch | None  # None: the rack test did not fail, nothing to search
    results: Mapping[GroupRun, GroupResult]


def search_rack(
    judge: JudgeState, rack: str, trays: list[str], collective: str, partners: int = MIN_PARTNERS
) -> RackSearch:
    """The rack test's result and, where it failed, the search replayed from the group runs."""
    step = steps.rack_nccl(collective)
    tested = _run_result(judge, trays[0], step, rack, collective)
    rack_test = tested or GroupResult(None, f"the rack test {step} left no output", step)
    if rack_test.outcome is not False:
        return RackSearch(rack, tuple(trays), rack_test, None, {})
    results: dict[GroupRun, GroupResult] = {}

    def judged(run: GroupRun) -> Outcome | str:
        result = _run_result(judge, run.launcher, run.step, rack, collective)
        if result is None:
            return "absent"
        results[run] = result
        return result.outcome

    search, _ = rack_search.replay(trays, collective, judged, partners)
    return RackSearch(rack, tuple(trays), rack_test, search, results)


def next_stage(
    evidence: RunEvidence, judge: JudgeState, collective: str, partners: int = MIN_PARTNERS
) -> dict[str, object]:
    """What the rack searches run next, for the action plugin: rounds of runs (each round's runs
    at once, at most one per rack), the stages they may still take, one line per rack."""
    rounds: list[list[dict[str, object]]] = []
    summaries: list[str] = []
    stages_left = 0
    for rack, trays in racks_of(evidence).items():
        found = search_rack(judge, rack, trays, collective, partners)
        if found.search is None:
            verdict = {True: "passed", None: "left no verdict"}[found.rack_test.outcome]
            summaries.append(f"rack {rack}: its test {verdict}, not searched")
            continue
        for i, runs in enumerate(rack_search.stage_runs(found.search, collective)):
            rounds += [[]] * (i + 1 - len(rounds))
            rounds[i] = rounds[i] + [run.to_dict() for run in runs]
        stages_left = max(stages_left, rounds_left(found.search))
        summaries.append(_summary(found))
    return {"rounds": rounds, "stages_left": stages_left, "summaries": summaries}


def _summary(found: RackSearch) -> str:
    assert found.search is not None
    search = found.search
    verdicts = ", ".join(f"{t} {v}" for t, v in search.verdicts().items()) or "none yet"
    return (
        f"rack {found.rack}: its test failed; search round {search.rounds} ({search.stage}), "
        f"flagged {', '.join(search.flagged()) or 'none'}; suspects {verdicts}"
    )


def search_partners(search: GroupSearch, tray: str) -> list[str]:
    """The trays that passed a group and were paired with `tray` to confirm it."""
    return [p for c in search.confirmations if c.suspect == tray for p in c.partners]


def _tray_check(found: RackSearch, tray: str, check_id: str) -> Check:
    assert found.search is not None
    search = found.search
    verdict = search.verdicts().get(tray)
    mine = [r for run, r in found.results.items() if tray in run.trays]

    def last(outcome: Outcome | str) -> GroupResult:
        """The tray's latest run with that outcome (any outcome: "any"), else the rack test."""
        said = [r for r in mine if outcome == "any" or r.outcome is outcome]
        return said[-1] if said else found.rack_test

    rounds = f"the search of rack {found.rack} took {search.rounds} stage(s)"
    status: Status
    if verdict == "flagged":
        partners = ", ".join(search_partners(search, tray))
        status, reason = (
            "fail",
            (
                f"{tray} slows its rack's multi-node NVLink: every group that held it stayed below "
                f"the rack's NVLink reference, and so did each pair with a tray that passed "
                f"({partners}); {rounds}; last: {last(False).reason}"
            ),
        )
        cited = last(False)
    elif verdict == "cleared" or (verdict is None and tray in search.known_good):
        status, reason = (
            "pass",
            (
                f"{tray} reached the rack's NVLink reference "
                + (
                    f"with each of {', '.join(search_partners(search, tray))} (a suspect cleared)"
                    if verdict == "cleared"
                    else f"in a group of rack {found.rack}"
                )
                + f"; {rounds}; last: {last(True).reason}"
            ),
        )
        cited = last(True)
    else:
        why = (
            f"a suspect the search could not confirm ({verdict})" if verdict
            else "a suspect with no partner that passed" if tray in search.suspects
            else "not cleared: the search stopped before it was measured"
        )  # fmt: skip
        cited = last("any")
        status, reason = "unjudged", f"{tray}: {why}; {rounds}; last: {cited.reason}"
    return Check(check_id=check_id, host=tray, category="bandwidth", status=status, reason=reason,
                 source=cited.source, action=ACTION if status == "fail" else None)  # fmt: skip


def rack_search_checks(judge: JudgeState) -> None:
    """One check per tray of every searched rack (the rack's own checks stay the rack test's)."""
    check_id = f"nccl-tests.{SEARCHED}.rack-search"
    for rack, trays in racks_of(judge.evidence).items():
        found = search_rack(judge, rack, trays, SEARCHED)
        if found.search is not None and found.results:
            judge.checks += [_tray_check(found, tray, check_id) for tray in trays]
