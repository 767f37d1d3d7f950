"""Pair schedules: every pair once in disjoint rounds; staged mode's screening and confirmation
rounds (the search itself: test_group_testing)."""

from __future__ import annotations

import itertools
import json

import pytest

from gpuval.plan import pair_rounds, steps
from gpuval.plan.pair_rounds import (
    LatestTry,
    all_pairs_stage,
    byes,
    circle_rounds,
    confirm_rounds,
    entry,
    pack_rounds,
    pair_outcomes,
    retry_entries,
    rounds_of_at_most,
    screen_rounds,
)


def hosts_of(count: int) -> list[str]:
    return [f"node{i}" for i in range(1, count + 1)]


@pytest.mark.parametrize("count", range(2, 17))
def test_circle_rounds_cover_every_pair_once_in_disjoint_rounds(count: int) -> None:
    hosts = hosts_of(count)
    rounds = circle_rounds(hosts)
    assert len(rounds) == (count - 1 if count % 2 == 0 else count)
    seen = [frozenset(pair) for pairs in rounds for pair in pairs]
    assert len(seen) == len(set(seen))
    assert set(seen) == {frozenset(p) for p in itertools.combinations(hosts, 2)}
    for pairs in rounds:
        busy = [h for pair in pairs for h in pair]
        assert len(busy) == len(set(busy)), pairs
        assert len(pairs) == count // 2  # every round is full: at most one bye


def test_circle_rounds_do_not_depend_on_inventory_order() -> None:
    hosts = hosts_of(7)
    assert circle_rounds(hosts) == circle_rounds(list(reversed(hosts)))
    first, second = circle_rounds(["node10", "node2"])[0][0]
    assert (first, second) == ("node2", "node10")  # natural order: the client is node2


def test_too_few_and_bad_hosts() -> None:
    assert circle_rounds([]) == [] and circle_rounds(["a"]) == []
    with pytest.raises(ValueError, match="more than once"):
        circle_rounds(["a", "b", "a"])
    with pytest.raises(ValueError, match="'--'"):
        circle_rounds(["a--b", "c"])


@pytest.mark.parametrize("count", range(2, 12))
def test_screen_tests_every_host_once_in_disjoint_pairs(count: int) -> None:
    hosts = hosts_of(count)
    rounds = screen_rounds(hosts)
    assert len(rounds) == 1
    busy = [h for pair in rounds[0] for h in pair]
    assert len(busy) == len(set(busy))
    left_out = byes(hosts, rounds[0])
    assert sorted(busy + left_out) == sorted(hosts) and len(left_out) == count % 2


@pytest.mark.parametrize(("suspects", "good", "partners"), [
    (["s1", "s2", "s3"], ["g1"], 1),
    (["s1", "s2", "s3", "s4", "s5"], ["g1", "g2"], 2),
    (["s1"], ["g1", "g2", "g3"], 3),
    (["s1", "s2"], ["g1", "g2", "g3", "g4"], 1),
])  # fmt: skip
def test_confirm_pairs_each_suspect_with_distinct_good_hosts(
    suspects: list[str], good: list[str], partners: int
) -> None:
    rounds = confirm_rounds(suspects, good, partners)
    pairs = [pair for pairs in rounds for pair in pairs]
    for pairs_in_round in rounds:
        busy = [h for pair in pairs_in_round for h in pair]
        assert len(busy) == len(set(busy))
    for suspect in suspects:
        partners_of = [b if a == suspect else a for a, b in pairs if suspect in (a, b)]
        assert len(partners_of) == len(set(partners_of)) == min(partners, len(good))
        assert set(partners_of) <= set(good)
    # no round could have held more: each round is limited by the good hosts or the suspects
    assert len(rounds) == -(
        -len(suspects) * min(partners, len(good)) // min(len(good), len(suspects))
    )


def test_confirm_rejects_a_host_in_both_lists() -> None:
    with pytest.raises(ValueError, match="both"):
        confirm_rounds(["a"], ["a", "b"])


def test_cli_prints_rounds_and_flat_pairs(capsys: pytest.CaptureFixture[str]) -> None:
    assert pair_rounds.main(["rounds", "--hosts", "d", "c", "b", "a"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["mode"] == "all-pairs" and len(document["rounds"]) == 3
    assert len(document["pairs"]) == 6
    assert {p["round"] for p in document["pairs"]} == {1, 2, 3}
    assert document["rounds"][0] == [["a", "d"], ["b", "c"]]


def test_cli_refuses_a_bad_host_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert pair_rounds.main(["rounds", "--hosts", "a", "a"]) == 2
    assert "more than once" in capsys.readouterr().err


# ------------------------------------------------------------------ between the rounds


def latest(kind: str, a: str, b: str, status: str, attempt: int = 1, rnd: int = 1) -> LatestTry:
    return {"kind": kind, "a": a, "b": b, "round": rnd, "attempt": attempt, "status": status}


def test_an_entry_names_the_steps_of_its_tries() -> None:
    planned = entry(2, "a", "b", {"iperf3": 1, "allreduce": 3, "nccl": 2})
    assert planned["steps"] == {
        "iperf3": ["pair-iperf3-r2-a--b-try1", "pair-iperf3-r2-b--a-try1"],
        "allreduce": ["pair-allreduce-r2-a--b-try3"],
        "nccl": ["pair-nccl-r2-a--b-try2"],
    }
    assert planned["peers"] == {
        "iperf3": ["peer-iperf3-r2-a--b-try1", "peer-iperf3-r2-b--a-try1"],
        "allreduce": ["peer-allreduce-r2-a--b-try3"],
    }
    assert planned["lanes"] == []


def test_an_rdma_entry_gives_the_rail_and_memory_of_each_step() -> None:
    planned = entry(1, "a", "b", {"rdma": 2}, steps.rdma_lanes(2, gpudirect=True))
    assert planned["steps"]["rdma"][1:3] == [
        "pair-rdma-rail0-cuda-r1-a--b-try2",
        "pair-rdma-rail1-host-r1-a--b-try2",
    ]
    assert planned["lanes"][1:3] == [{"rail": 0, "memory": "cuda"}, {"rail": 1, "memory": "host"}]
    assert planned["peers"]["rdma"][0] == "peer-rdma-rail0-host-r1-a--b-try2"


def test_pack_rounds_never_puts_a_host_twice_in_a_round() -> None:
    entries = [
        entry(1, a, b, {"iperf3": 2}) for a, b in [("a", "b"), ("a", "c"), ("c", "d"), ("b", "d")]
    ]
    rounds = pack_rounds(entries)
    assert [[(e["a"], e["b"]) for e in r] for r in rounds] == [
        [("a", "b"), ("c", "d")],
        [("a", "c"), ("b", "d")],
    ]
    assert rounds_of_at_most(rounds, 1) == [[e] for r in rounds for e in r]
    assert rounds_of_at_most(rounds, 50) == rounds


def test_a_round_of_more_pairs_than_forks_runs_in_turns_of_forks_pairs() -> None:
    """A round's clients run in one task on `forks` hosts at a time, its servers all at once:
    5 pairs with forks 2 are three turns, so no client waits beyond its server's timeout."""
    pairs = [(f"a{i}", f"b{i}") for i in range(5)]
    rounds = [[entry(1, a, b, {"iperf3": 1}) for a, b in pairs], []]
    turns = rounds_of_at_most(rounds, 2)
    assert [[(e["a"], e["b"]) for e in turn] for turn in turns] == [
        pairs[0:2], pairs[2:4], pairs[4:], [],
    ]  # fmt: skip
    assert {e["round"] for turn in turns for e in turn} == {1}  # the same round's step names


def test_retry_entries_repeat_failed_and_low_tries_while_tries_and_hosts_are_left() -> None:
    found = [
        latest("iperf3", "a", "b", "low"),
        latest("allreduce", "a", "b", "failed", attempt=2),
        latest("iperf3", "c", "d", "wrong"),  # corrupted data: a repeat cannot repair it
        latest("iperf3", "e", "f", "failed", attempt=3),  # no try left
        latest("iperf3", "g", "h", "failed"),  # h is gone
        latest("iperf3", "i", "j", "ok"),
    ]
    active = {"a", "b", "c", "d", "e", "f", "g", "i", "j"}
    retries = retry_entries(found, max_tries=3, active=active)
    assert [(e["round"], e["a"], e["b"], e["tries"]) for e in retries] == [
        (1, "a", "b", {"iperf3": 2, "allreduce": 3})
    ]


def test_all_pairs_stage_numbers_rounds_from_one_and_drops_lost_hosts() -> None:
    hosts = ["n1", "n2", "n3", "n4"]
    start = all_pairs_stage(hosts, ["iperf3"], set(hosts))
    assert start.mode == "all-pairs" and len(start.rounds) == 3
    assert [e["round"] for r in start.rounds for e in r] == [1, 1, 2, 2, 3, 3]
    assert all(e["tries"] == {"iperf3": 1} for r in start.rounds for e in r)
    without_n4 = all_pairs_stage(hosts, ["iperf3"], {"n1", "n2", "n3"})
    assert all("n4" not in (e["a"], e["b"]) for r in without_n4.rounds for e in r)


def test_pair_outcomes_pass_only_when_every_kind_passed() -> None:
    found = [latest("iperf3", "a", "b", "ok"), latest("allreduce", "a", "b", "low")]
    found.append(latest("iperf3", "c", "d", "ok"))
    assert pair_outcomes(found) == {("a", "b"): False, ("c", "d"): True}
