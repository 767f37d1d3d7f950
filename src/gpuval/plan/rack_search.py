"""Group testing within a failing NVL72 rack: which trays' all-reduces find the slow tray(s).

A rack's test (gpuval.checks.rack_tests) is one all_reduce over the multi-node NVLink of all its
trays: it says only that the rack is slow. It is the screen of a group-testing search
(gpuval.plan.group_testing, the staged mode's search, unchanged): when it failed, the rack's
trays are split in halves, each half run as an all_reduce of its own over multi-node NVLink
(the rack test's NCCL environment, so it measures NVLink, not the network), all halves of a
round at the same time, a failing half split again; each suspect then meets two trays that
passed, one pair at a time, and is flagged only when it failed with both.

Every group's run is judged against the rack's NVLink reference, the per-GPU figure the rack
test uses: all_reduce busbw is normalised so it does not depend on the number of ranks
(busbw = algbw * 2(n-1)/n, a figure that compares with the hardware's peak whatever the
number of ranks:
https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md), and within one NVLink
domain every GPU reaches every other through the NVSwitches at its full NVLink bandwidth, so a
group of two trays and the whole rack are held to one figure.

The search is a value: `start` (the rack test failed), `stage_runs` (what the next stage runs,
in rounds of disjoint runs, each named by its step), `record_stage` (the search after the
stage's outcomes). The action plugin gpuval_rack_search calls them between the stages of
roles/bench_internode; the report's judge (gpuval.checks.rack_search) replays the same calls
from the run folder, so the run and its report never disagree about a tray.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpuval.plan.confirmation import MIN_PARTNERS
from gpuval.plan.group_testing import GroupSearch
from gpuval.plan.host_order import ordered_pair

# rack-search-nccl-<collective>-r<round>: one group's all_reduce over multi-node NVLink, on the
# group's first tray; round 1 is the rack test itself, so the search's steps start at round 2.
SEARCH_PREFIX = "rack-search-nccl-"
_SEARCH_STEP = re.compile(rf"^{SEARCH_PREFIX}(?P<collective>[a-z_]+)-r(?P<round>\d+)$")
# A group's outcome: True reached the rack's NVLink reference, False below it (or fell off
# NVLink), None unjudged or not run (never a pass; it clears no tray).
Outcome = bool | None


def search_step(collective: str, round_number: int) -> str:
    """The step of a search group's run on its first tray."""
    return f"{SEARCH_PREFIX}{collective}-r{round_number}"


def is_search_step(step: str) -> bool:
    """A rack search group's run: judged by the rack search, not as a run across nodes."""
    return _SEARCH_STEP.match(step) is not None


@dataclass(frozen=True)
class GroupRun:
    """One group's all_reduce: started by mpirun on `launcher`, over `trays`, written as `step`."""

    launcher: str
    trays: tuple[str, ...]
    step: str

    def to_dict(self) -> dict[str, object]:
        return {"launcher": self.launcher, "trays": list(self.trays), "step": self.step}


def start(trays: Sequence[str], partners: int = MIN_PARTNERS) -> GroupSearch:
    """The search of a rack whose test failed: the rack test was its screen (round 1), so its
    first stage tests the halves. One NVLink domain has no switch topology to keep together."""
    search = GroupSearch.start(trays, partners)
    if search.stage != "groups":
        return search  # one tray: nothing to split
    return search.record_groups({})


def stage_runs(search: GroupSearch, collective: str) -> list[list[GroupRun]]:
    """The runs of the search's next stage in rounds of disjoint runs (each round's runs start
    at once): the groups stage is one round; the confirmation one round per pair round. Steps
    are numbered from the search's next round on."""
    first = search.rounds + 1
    if search.stage == "groups":
        return [[GroupRun(g[0], g, search_step(collective, first)) for g in search.groups()]]
    if search.stage == "confirm":
        return [
            [GroupRun(a, (a, b), search_step(collective, first + i)) for a, b in pairs]
            for i, pairs in enumerate(search.pairs())
        ]
    return []


def record_stage(
    search: GroupSearch, runs: Sequence[Sequence[GroupRun]], outcome: Mapping[GroupRun, Outcome]
) -> GroupSearch:
    """The search after its stage: a group that did not reach the reference, or has no verdict,
    is split further (nothing is cleared unmeasured); a confirmation pair without a verdict no
    longer counts as a partner (the suspect stays unconfirmed, never flagged on fewer than two)."""
    done = [run for stage_round in runs for run in stage_round]
    if search.stage == "groups":
        return search.record_groups({run.trays: outcome.get(run) is True for run in done})
    if search.stage == "confirm":
        return search.record_pairs({ordered_pair(*run.trays): outcome.get(run) for run in done})
    return search


def replay(
    trays: Sequence[str], collective: str, judged: Callable[[GroupRun], Outcome | str],
    partners: int = MIN_PARTNERS,
) -> tuple[GroupSearch, dict[GroupRun, Outcome]]:  # fmt: skip
    """The search of a failed rack played from its runs' outcomes (`judged`: a run's outcome,
    or the string "absent" where the run left no output). It stops at the first stage none of
    whose runs left an output: the search ended there (the run was cut short, or never
    searched). Returns the search and every run's outcome."""
    search = start(trays, partners)
    seen: dict[GroupRun, Outcome] = {}
    while search.stage != "done":
        runs = stage_runs(search, collective)
        found = {run: judged(run) for stage_round in runs for run in stage_round}
        if all(result == "absent" for result in found.values()):
            break
        outcome: dict[GroupRun, Outcome] = {
            run: None if isinstance(result, str) else result for run, result in found.items()
        }
        seen.update(outcome)
        search = record_stage(search, runs, outcome)
    return search, seen
