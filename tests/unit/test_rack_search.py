"""Group testing within a failing NVL72 rack (gpuval.plan.rack_search, gpuval.checks.rack_search):
the plan's groups and rounds for a rack of 18 trays, and the judge on a constructed run folder
where the rack test failed and the search's group runs isolate one tray.

The expectations are the search's rules, written before running it: the rack test is the screen
(round 1), a failing group is split in halves (the first the larger), a suspect is flagged only
when it failed with two trays that passed; the bound is gpuval.plan.group_testing.worst_rounds
(2*ceil(log2 18)+2 = 12 rounds with one bad tray, 16 with two), all pairs would cost 17.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tests.action_plugins import run_action
from tests.run_folders import write_run_json, write_step

from gpuval.checks import judge_run
from gpuval.checks.model import CLUSTER, Check
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.plan import rack_search, steps
from gpuval.plan.group_testing import worst_rounds
from gpuval.plan.rack_search import GroupRun
from gpuval.runfolder import read_run_folder

TRAYS = [f"tray{i:02d}" for i in range(1, 19)]
RACK = "nvl72-a"
HEALTHY = (
    Path(__file__).parents[1]
    / "data/verdicts/rack-gb200-mnnvl-healthy/raw/gb200-tray01/rack-nccl-all_reduce.txt"
).read_text()
ROW = re.compile(r"^(\s+\d+\s+\d+\s+\w+\s+\w+\s+-?\d+)(.*)$")


def slowed(text: str, factor: float) -> str:
    """DERIVED: the real GB200 rack output with every row's times divided and bandwidths times
    `factor` (a rack, or group, whose NVLink runs at that fraction)."""

    def row(line: str) -> str:
        found = ROW.match(line)
        if not found:
            return line
        t1, a1, b1, w1, t2, a2, b2, w2 = found.group(2).split()
        values = [float(t1) / factor, float(a1) * factor, float(b1) * factor]
        more = [float(t2) / factor, float(a2) * factor, float(b2) * factor]
        cells = [f"{v:.2f}" for v in values] + [w1] + [f"{v:.2f}" for v in more] + [w2]
        return found.group(1) + "".join(f"{c:>9}" for c in cells)

    return "\n".join(row(line) for line in text.splitlines()) + "\n"


def played(bad: set[str]) -> tuple[int, list[str], list[list[GroupRun]]]:
    """The search of a failed rack where a group fails exactly when it holds a bad tray: rounds
    of runs (the rack test included), flagged trays, each stage's rounds."""
    stages: list[list[GroupRun]] = []
    search = rack_search.start(TRAYS)
    while search.stage != "done":
        runs = rack_search.stage_runs(search, "all_reduce")
        stages += runs
        outcome = {run: not bad & set(run.trays) for r in runs for run in r}
        search = rack_search.record_stage(search, runs, outcome)
    return 1 + len(stages), search.flagged(), stages


def test_the_first_stage_splits_the_rack_in_halves() -> None:
    runs = rack_search.stage_runs(rack_search.start(TRAYS), "all_reduce")
    assert runs == [[
        GroupRun("tray01", tuple(TRAYS[:9]), "rack-search-nccl-all_reduce-r2"),
        GroupRun("tray10", tuple(TRAYS[9:]), "rack-search-nccl-all_reduce-r2"),
    ]]  # fmt: skip


@pytest.mark.parametrize("bad", [{"tray07"}, {"tray07", "tray12"}, {"tray18"}, {"tray01"}])
def test_the_search_names_the_bad_trays_in_few_rounds(bad: set[str]) -> None:
    rounds, flagged, stages = played(bad)
    assert flagged == sorted(bad)
    assert rounds <= worst_rounds(len(TRAYS), len(bad))
    assert rounds < len(TRAYS) - 1  # all pairs: 17 rounds
    for stage_round in stages:  # the runs of one round start at once: disjoint trays
        trays = [t for run in stage_round for t in run.trays]
        assert len(trays) == len(set(trays))


def test_one_bad_tray_costs_six_rounds() -> None:
    # screen, 9|9, 5|4, 2|2 (tray06 and tray07 suspects), then tray06 and tray07 each meet two
    # trays that passed: two pair rounds.
    rounds, _, stages = played({"tray07"})
    assert rounds == 6
    assert [len(r) for r in stages] == [2, 2, 2, 2, 2]


def test_two_bad_trays_cost_seven_rounds() -> None:
    # screen; 1-9 and 10-18 both fail; 1-5 passes, 6-9 and 10-14 fail, 15-18 passes; 6-7 and
    # 10-12 fail, 8-9 and 13-14 pass; 10-11 passes (tray12 alone: a suspect); tray06, tray07 and
    # tray12 each meet two trays that passed: six pairs in two rounds of disjoint pairs.
    rounds, flagged, stages = played({"tray07", "tray12"})
    assert flagged == ["tray07", "tray12"]
    assert rounds == 7
    assert [[r.trays for r in stage_round] for stage_round in stages[:4]] == [
        [tuple(TRAYS[:9]), tuple(TRAYS[9:])],
        [tuple(TRAYS[:5]), tuple(TRAYS[5:9]), tuple(TRAYS[9:14]), tuple(TRAYS[14:])],
        [tuple(TRAYS[5:7]), tuple(TRAYS[7:9]), tuple(TRAYS[9:12]), tuple(TRAYS[12:14])],
        [tuple(TRAYS[9:11])],
    ]


def test_a_search_step_is_not_a_rack_test() -> None:
    step = rack_search.search_step("all_reduce", 3)
    assert rack_search.is_search_step(step)
    assert steps.rack_test(step) is None
    assert not rack_search.is_search_step(steps.rack_nccl("all_reduce"))


def write_rack(run: Path, bad: set[str], searched: bool = True, bad_text: str = "") -> None:
    declared = {t: {"gpu_model": "GB200", "nvl_domain": RACK,
                    "system": "GB200 NVL72 compute tray"} for t in TRAYS}  # fmt: skip
    write_run_json(run, "rack-search", TRAYS, declared=declared)
    env = {"NCCL_DEBUG": "INFO", "NCCL_MNNVL_ENABLE": "1"}
    slow = slowed(HEALTHY, 0.4)  # 334 GB/s at 8 GiB: 37 % of 900 GB/s, below the fail band
    write_step(run, "tray01", steps.rack_nccl("all_reduce"), slow if bad else HEALTHY,
               phase="internode", tool="nccl-tests", env=env)  # fmt: skip
    if not searched:
        return
    _, _, stages = played(bad)
    for run_ in (r for stage_round in stages for r in stage_round):
        text = (bad_text or slow) if bad & set(run_.trays) else HEALTHY
        write_step(run, run_.launcher, run_.step, text, phase="internode", tool="nccl-tests",
                   env=env)  # fmt: skip


def checks_of(run: Path) -> list[Check]:
    return judge_run(build_evidence(read_run_folder(run)), DEFAULTS).checks


def test_the_judge_names_the_tray_the_search_isolates(tmp_path: Path) -> None:
    write_rack(tmp_path, {"tray07"})
    checks = checks_of(tmp_path)
    search = {c.host: c for c in checks if c.check_id == "nccl-tests.all_reduce.rack-search"}
    assert set(search) == set(TRAYS)
    assert search["tray07"].status == "fail", search["tray07"].reason
    assert "tray07" in search["tray07"].reason
    assert search["tray07"].action
    assert {t for t, c in search.items() if c.status != "pass"} == {"tray07"}
    rack = [c for c in checks if c.host == f"rack {RACK}"]
    assert any(c.status == "fail" for c in rack)  # the rack keeps its fail
    # The group runs are the search's: none is judged as a run across nodes of the cluster.
    assert not [c for c in checks if c.host == CLUSTER and "rack-search" in (c.source or "")]


def test_a_rack_that_passed_is_not_searched(tmp_path: Path) -> None:
    write_rack(tmp_path, set())
    checks = checks_of(tmp_path)
    assert not [c for c in checks if c.check_id.endswith(".rack-search")]


def test_a_failed_rack_whose_search_never_ran_names_no_tray(tmp_path: Path) -> None:
    write_rack(tmp_path, {"tray07"}, searched=False)
    checks = checks_of(tmp_path)
    assert not [c for c in checks if c.check_id.endswith(".rack-search")]


def test_unconfirmed_suspects_are_unjudged_never_passed(tmp_path: Path) -> None:
    write_rack(tmp_path, {"tray07"})
    # The confirmation pairs left nothing readable: tray06 and tray07 stay unconfirmed.
    for path in (tmp_path / "raw").rglob("rack-search-nccl-all_reduce-r[56].txt"):
        path.write_text("")
    checks = checks_of(tmp_path)
    search = {c.host: c for c in checks if c.check_id == "nccl-tests.all_reduce.rack-search"}
    assert search["tray07"].status == "unjudged", search["tray07"].reason
    assert search["tray06"].status == "unjudged", search["tray06"].reason
    assert {t for t, c in search.items() if c.status == "fail"} == set()
    # A group run's ending is the search's reason: no fail pinned on the tray that launched it.
    launched = [c for c in checks if "rack-search-" in (c.source or "") + c.check_id]
    assert {c.check_id for c in launched if c.status == "fail"} == set(), launched


def planned(run: Path) -> dict[str, Any]:
    return run_action("gpuval_rack_search", {"run_dir": str(run)}, {}).result


def test_the_action_plans_the_halves_of_a_failed_rack(tmp_path: Path) -> None:
    write_rack(tmp_path, {"tray07"}, searched=False)
    result = planned(tmp_path)
    assert result["rounds"] == [[
        {"launcher": "tray01", "trays": TRAYS[:9], "step": "rack-search-nccl-all_reduce-r2"},
        {"launcher": "tray10", "trays": TRAYS[9:], "step": "rack-search-nccl-all_reduce-r2"},
    ]]  # fmt: skip
    # 9 | 9, 5 | 4, 3 | 2, 2 | 1 group rounds at most, then the confirmation.
    assert result["stages_left"] == 5


def test_the_action_plans_nothing_once_the_search_is_done(tmp_path: Path) -> None:
    write_rack(tmp_path, {"tray07"})
    result = planned(tmp_path)
    assert result["rounds"] == []
    assert result["stages_left"] == 0
    assert "flagged tray07" in result["summaries"][0]


def test_the_action_leaves_a_rack_that_passed(tmp_path: Path) -> None:
    write_rack(tmp_path, set(), searched=False)
    result = planned(tmp_path)
    assert (result["rounds"], result["stages_left"]) == ([], 0)
    assert result["summaries"] == [f"rack {RACK}: its test passed, not searched"]


def test_the_action_refuses_one_partner(tmp_path: Path) -> None:
    write_rack(tmp_path, {"tray07"}, searched=False)
    result = run_action("gpuval_rack_search", {"run_dir": str(tmp_path), "partners": 1}, {})
    assert result.result["failed"] is True
    assert "at least 2" in result.result["msg"]


def test_a_group_that_left_nvlink_fails_its_tray(tmp_path: Path) -> None:
    # DERIVED: the healthy output with its channel line over the network (as on a tray whose
    # GPUs never joined the fabric): fast enough, but it did not measure multi-node NVLink.
    fell_back = HEALTHY.replace("via P2P/MNNVL", "via NET/IB/0/GDRDMA")
    assert fell_back != HEALTHY
    write_rack(tmp_path, {"tray07"}, bad_text=fell_back)
    checks = checks_of(tmp_path)
    search = {c.host: c for c in checks if c.check_id == "nccl-tests.all_reduce.rack-search"}
    assert {t for t, c in search.items() if c.status != "pass"} == {"tray07"}
    assert search["tray07"].status == "fail"
    assert "fell back to the network" in search["tray07"].reason
