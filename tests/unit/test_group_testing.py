"""Group testing (gpuval.plan.group_testing): the bounds of the issue, played against simulated
bad nodes (a test fails exactly when it holds one), and the confirmation rule."""

from __future__ import annotations

import json
import math
from itertools import combinations

import pytest

from gpuval.plan import group_testing
from gpuval.plan.group_testing import GroupSearch, simulate, split, topology_of, worst_rounds

HOSTS_32 = [f"node{i}" for i in range(1, 33)]


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
