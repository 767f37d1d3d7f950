"""Group testing (gpuval.plan.group_testing): the bounds of the issue, played against simulated
bad nodes (a test fails exactly when it holds one), and the confirmation rule."""

from __future__ import annotations

import json
import math
from itertools import combinations

import pytest

from gpuval.plan import group_testing, pair_rounds, steps
from gpuval.plan.group_testing import (
    GroupSearch,
    record_round,
    rounds_left,
    search_stage,
    simulate,
    split,
    split_depth,
    topology_of,
    worst_rounds,
)
from gpuval.plan.pair_rounds import LatestTry
from gpuval.plan.steps import RunPlan, expected_steps


def hosts_of(count: int) -> list[str]:
    return [f"node{i}" for i in range(1, count + 1)]


HOSTS_32 = hosts_of(32)


def test_the_bounds_of_the_issue() -> None:
    # 2*log2(32)+2 = 12 with one bad node, at most 16 with two.
    assert worst_rounds(32, 1) == 2 * math.log2(32) + 2 == 12
    assert worst_rounds(32, 2) == 16


def test_no_bad_node_ends_after_the_screen() -> None:
    played = simulate(HOSTS_32, [])
    assert (played.rounds, played.group_tests, played.pair_tests) == (1, 1, 0)
    assert played.flagged == [] and played.verdicts == {}


@pytest.mark.parametrize("bad", HOSTS_32)
def test_one_bad_node_of_32_is_found_within_12_rounds_and_only_it(bad: str) -> None:
    played = simulate(HOSTS_32, [bad])
    assert played.rounds <= 12
    assert played.flagged == [bad]


def test_two_bad_nodes_of_32_are_both_found_within_16_rounds_wherever_they_are() -> None:
    for pair in combinations(HOSTS_32, 2):
        played = simulate(HOSTS_32, pair)
        assert played.rounds <= 16, pair
        assert sorted(played.flagged) == sorted(pair), pair


def test_1024_hosts_one_bad_node() -> None:
    hosts = [f"node{i}" for i in range(1, 1025)]
    played = simulate(hosts, ["node700"])
    assert played.flagged == ["node700"]
    assert played.rounds <= worst_rounds(1024) == 22


def test_a_suspect_is_confirmed_by_two_distinct_good_partners() -> None:
    search = GroupSearch.start(["a", "b", "c", "d", "e", "f", "g", "h"])
    search = search.record_groups({("a", "b", "c", "d", "e", "f", "g", "h"): False})
    assert search.groups() == [("a", "b", "c", "d"), ("e", "f", "g", "h")]
    search = search.record_groups({("a", "b", "c", "d"): False, ("e", "f", "g", "h"): True})
    search = search.record_groups({("a", "b"): True, ("c", "d"): False})
    assert search.stage == "confirm" and search.suspects == ("c", "d")
    partners = {c.suspect: set(c.partners) for c in search.confirmations}
    assert all(len(p) == 2 and p <= set(search.known_good) for p in partners.values())
    rounds = search.pairs()
    assert all(len({h for p in r for h in p}) == 2 * len(r) for r in rounds)  # disjoint
    first = {pair: "c" not in pair for pair in rounds[0]}
    search = search.record_pairs(first)
    assert search.flagged() == []  # one failed pair flags nobody
    search = search.record_pairs({pair: "c" not in pair for pair in search.pairs()[0]})
    assert search.stage == "done"
    assert search.verdicts() == {"c": "flagged", "d": "cleared"}


def test_a_suspect_with_mixed_partners_is_unconfirmed_never_flagged_or_cleared() -> None:
    search = GroupSearch.start(["a", "b", "c", "d"])
    search = search.record_groups({("a", "b", "c", "d"): False})
    search = search.record_groups({("a", "b"): False, ("c", "d"): True})
    outcomes: dict[tuple[str, str], bool] = {}
    while search.stage == "confirm":
        round_pairs = search.pairs()[0]
        # a fails with c, passes with d; b fails with both
        step = {p: p in {("a", "d")} for p in round_pairs}
        outcomes.update(step)
        search = search.record_pairs(step)
    assert search.verdicts() == {"a": "unconfirmed", "b": "flagged"}


def test_a_failing_group_whose_halves_pass_makes_all_its_nodes_suspects() -> None:
    search = GroupSearch.start([f"n{i}" for i in range(1, 9)])
    search = search.record_groups({tuple(f"n{i}" for i in range(1, 9)): False})
    search = search.record_groups(dict.fromkeys(search.groups(), True))
    assert search.suspects == tuple(f"n{i}" for i in range(1, 9))
    assert search.known_good == ()
    assert set(search.verdicts().values()) == {"unconfirmed"}  # no partner that passed


def test_a_group_left_out_of_the_outcomes_counts_as_failed() -> None:
    search = GroupSearch.start(["a", "b", "c", "d"]).record_groups({})
    assert search.groups() == [("a", "b"), ("c", "d")] and search.known_good == ()


def test_fewer_than_two_partners_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        GroupSearch.start(["a", "b"], partners=1)


def test_split_keeps_a_switch_together_and_halves_in_order_without_topology() -> None:
    hosts = [f"n{i}" for i in range(1, 7)]
    assert split(hosts) == (("n1", "n2", "n3"), ("n4", "n5", "n6"))
    switch_of = {"n1": "s1", "n4": "s1", "n2": "s2", "n5": "s2", "n3": "s3", "n6": "s3"}
    first, second = split(hosts, switch_of)
    assert first == ("n1", "n3", "n4", "n6") and second == ("n2", "n5")
    with pytest.raises(ValueError, match="cannot be split"):
        split(["n1"])


def test_switch_aware_search_finds_a_bad_uplink_switch_by_switch() -> None:
    switch_of = {h: f"leaf{(i - 1) // 8 + 1}" for i, h in enumerate(HOSTS_32, start=1)}
    search = GroupSearch.start(HOSTS_32, switch_of=switch_of).record_groups({})
    assert [len({switch_of[h] for h in g}) for g in search.groups()] == [2, 2]
    played = simulate(HOSTS_32, ["node9"], switch_of=switch_of)
    assert played.flagged == ["node9"] and played.rounds <= 12


def test_topology_from_inventory_variables() -> None:
    hostvars = {"a": {"gpuval_switch": "leaf1"}, "b": {"gpuval_rack": "r2"}, "c": {}}
    assert topology_of(hostvars, ["a", "b", "c"]) == {"a": "leaf1", "b": "r2"}


def test_a_search_survives_its_round_trip_through_json() -> None:
    search = GroupSearch.start(HOSTS_32[:8]).record_groups({})
    again = GroupSearch.from_dict(json.loads(json.dumps(search.to_dict())))
    assert again == search


def test_cli_reports_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    assert group_testing.main(["simulate", "--count", "32", "--bad", "node5"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["flagged"] == ["node5"] and document["all_pairs_rounds"] == 31
    assert document["rounds"] <= document["bound"] == 12
    assert group_testing.main(["simulate", "--count", "4", "--bad", "x"]) == 2
    assert "not among the hosts" in capsys.readouterr().err


# ------------------------------------------------------------------ the mode and the pair phase


def test_auto_is_all_pairs_up_to_8_nodes_and_staged_above() -> None:
    assert [steps.pairs_mode_for("auto", n) for n in (2, 8, 9, 1024)] == [
        "all-pairs", "all-pairs", "staged", "staged",
    ]  # fmt: skip
    assert steps.pairs_mode_for("all-pairs", 1024) == "all-pairs"
    assert steps.pairs_mode_for("staged", 4) == "staged"
    with pytest.raises(ValueError, match="bench_pairs_mode must be one of"):
        RunPlan.from_variables({"bench_pairs_mode": "bisect"})
    # run.json expects every try-1 pair step where auto means all pairs, none where staged
    eight, nine = (hosts_of(8), hosts_of(9))
    assert sum(len(s) for s in expected_steps(eight, RunPlan(), ["pairs"]).values()) == 2 * 28
    assert expected_steps(nine, RunPlan(), ["pairs"]) == {h: [] for h in nine}


def test_a_screen_by_pairs_tests_every_node_once_and_suspects_the_one_left_out() -> None:
    search = GroupSearch.start(hosts_of(5), by_pairs=True)
    assert search.groups() == [("node2", "node5"), ("node3", "node4")]
    assert search.suspects == ("node1",)  # the circle's bye
    played = simulate(hosts_of(32), ["node9"], by_pairs=True)
    assert played.flagged == ["node9"] and played.rounds == 3  # the screen, two partners


def test_split_depth_and_stages_left() -> None:
    assert [split_depth(hosts_of(n)) for n in (1, 2, 3, 4, 32, 33)] == [0, 1, 2, 2, 5, 6]
    assert rounds_left(GroupSearch.start(hosts_of(32))) == 6  # 5 group rounds, the confirmation
    assert rounds_left(GroupSearch.start(hosts_of(32), by_pairs=True)) == 2
    assert rounds_left(GroupSearch.start(hosts_of(32)).record_groups({tuple(hosts_of(32)): 1})) == 0


def test_a_round_is_recorded_from_what_the_judge_found() -> None:
    hosts = hosts_of(4)
    search = GroupSearch.start(hosts)
    first = search_stage(search, ["iperf3"], set(hosts))
    assert (first.mode, first.groups) == ("groups", [hosts])
    # the screen's first node failed its all-nodes test; then node3's half passed, node1's failed
    search = record_round(search, [], {"node1": False}, set(hosts))
    search = record_round(search, [], {"node1": False, "node3": True}, set(hosts))
    assert search.suspects == ("node1", "node2") and search.stage == "confirm"
    confirm = search_stage(search, ["iperf3"], set(hosts), used_rounds=0)
    assert confirm.mode == "pairs" and confirm.known_good == ["node3", "node4"]
    entries = [(e["round"], e["a"], e["b"]) for r in confirm.rounds for e in r]
    assert entries == [(1, "node1", "node3"), (1, "node2", "node4"),
                       (2, "node1", "node4"), (2, "node2", "node3")]  # fmt: skip

    def tried(a: str, b: str, status: str) -> LatestTry:
        return {"kind": "iperf3", "a": a, "b": b, "round": 1, "attempt": 1, "status": status}

    found = [tried("node1", "node3", "low"), tried("node1", "node4", "failed")]
    found += [tried("node2", "node3", "ok")]  # node2--node4 left nothing: it fails closed
    done = record_round(search, found, {}, set(hosts))
    assert done.verdicts() == {"node1": "flagged", "node2": "unconfirmed"}
    # a partner lost from the play no longer counts: one partner confirms nothing
    lost = record_round(search, found, {}, {"node1", "node2", "node3"})
    assert lost.verdicts() == {"node1": "flagged", "node2": "unconfirmed"}
    assert [len(c.partners) for c in lost.confirmations] == [2, 1]
    assert search_stage(done, ["iperf3"], set(hosts)).mode == "done"


def test_a_group_whose_first_node_left_is_judged_by_the_next_one() -> None:
    hosts = hosts_of(4)
    search = GroupSearch.start(hosts).record_groups({})
    active = {"node2", "node3", "node4"}
    assert search.leaders(active) == {("node1", "node2"): "node2", ("node3", "node4"): "node3"}
    judged = record_round(search, [], {"node2": True, "node3": False}, active)
    # node1 left the play before its group's test: never measured, so not tested, not good
    assert judged.known_good == ("node2",) and judged.suspects == ("node3", "node4")
    assert judged.untested == ("node1",)
    assert {p for c in judged.confirmations for p in c.partners} == {"node2"}
    assert GroupSearch.start(hosts).leaders(set()) == {}  # nobody left: no leader, it fails


def test_a_node_lost_before_the_screen_ran_is_not_tested_even_when_the_screen_passed() -> None:
    hosts = hosts_of(8)
    search = GroupSearch.start(hosts)
    active = set(hosts) - {"node5"}  # unreachable before the all-nodes test: never measured
    passed = record_round(search, [], {"node1": True}, active)
    assert "node5" not in passed.known_good and passed.untested == ("node5",)
    assert passed.to_dict()["untested"] == ["node5"]
    assert GroupSearch.from_dict(passed.to_dict()).untested == ("node5",)


def test_a_node_lost_from_a_failing_group_is_neither_split_nor_suspected() -> None:
    hosts = hosts_of(4)
    judged = GroupSearch.start(hosts).record_groups({}, active={"node1", "node3", "node4"})
    assert judged.untested == ("node2",)
    assert judged.groups() == [("node3", "node4")] and judged.suspects == ("node1",)


@pytest.mark.parametrize(
    ("broken", "named"),
    [
        ("not a dict", "search must be a mapping, not str"),
        ({"pending": None}, "the key pending is missing"),
        ({"pending": "node1"}, "pending must be a list of mappings, not str"),
        ({"hosts": "node1 node2"}, "hosts must be a list of host names, not str"),
        ({"partners": "two"}, "partners must be a whole number, not str"),
        ({"partners": 1}, "partners must be at least 2, not 1"),
        ({"pending": [{"parent": None}]}, "the key pending[0].group is missing"),
        ({"confirmations": [{"suspect": "node1", "partners": {"node2": "yes"}}]},
         "confirmations[0].partners must be a mapping of partner -> true, false or null"),
    ],
)  # fmt: skip
def test_a_malformed_search_is_an_error_naming_the_key_and_what_to_do(
    broken: object, named: str
) -> None:
    whole = GroupSearch.start(hosts_of(4)).to_dict()
    # A key given as None is left out.
    changed = {**whole, **broken} if isinstance(broken, dict) else {}
    data = {k: v for k, v in changed.items() if v is not None} if changed else broken
    with pytest.raises(ValueError) as raised:
        GroupSearch.from_dict(data)
    assert named in str(raised.value)
    assert "hand back the `search` the previous gpuval_pairs call returned" in str(raised.value)


def test_every_schedule_of_concurrent_pairs_is_packed_by_one_function() -> None:
    # Retries, the confirmation plan and the search's pairs still to measure: one first fit.
    plan = [("node1", "node3"), ("node2", "node4"), ("node1", "node4"), ("node2", "node3")]
    packed = pair_rounds.pack(plan, lambda pair: pair)
    assert packed == [[("node1", "node3"), ("node2", "node4")],
                      [("node1", "node4"), ("node2", "node3")]]  # fmt: skip
    assert pair_rounds.confirm_rounds(["node1", "node2"], ["node3", "node4"], 2) == packed
    search = (
        GroupSearch.start(hosts_of(4))
        .record_groups({})
        .record_groups({("node1", "node2"): False, ("node3", "node4"): True})
    )
    assert search.pairs() == packed
    entries = [pair_rounds.entry(1, a, b, {"iperf3": 2}) for a, b in plan]
    assert pair_rounds.pack_rounds(entries) == pair_rounds.pack(entries, lambda e: (e["a"], e["b"]))
