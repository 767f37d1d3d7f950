"""Pair schedules: every pair once in disjoint rounds; staged screening and confirmation."""

from __future__ import annotations

import itertools
import json

import pytest

from gpuval.plan import pair_rounds, steps
from gpuval.plan.pair_rounds import (
    LatestTry,
    circle_rounds,
    confirm_rounds,
    entry,
    next_stage,
    one_pair_per_round,
    pack_rounds,
    pair_outcomes,
    retry_entries,
    screen_rounds,
    split_screen,
    staged_plan,
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
    tested = sorted({h for pairs in rounds for pair in pairs for h in pair})
    assert tested == sorted(hosts)
    assert len(rounds) == (1 if count % 2 == 0 else 2)
    for pairs in rounds:
        busy = [h for pair in pairs for h in pair]
        assert len(busy) == len(set(busy))


def test_split_screen_suspects_are_hosts_of_failed_pairs() -> None:
    outcomes = {("a", "b"): True, ("c", "d"): False, ("e", "a"): False}
    assert split_screen(outcomes) == (["a", "c", "d", "e"], ["b"])


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


def test_staged_plan_stages() -> None:
    hosts = hosts_of(6)
    assert staged_plan(hosts, all_nodes_passed=True).mode == "done"
    screen = staged_plan(hosts, all_nodes_passed=False)
    assert screen.mode == "screen" and screen.rounds == screen_rounds(hosts)
    outcomes = {pair: pair != ("node2", "node5") for pair in screen.rounds[0]}
    confirm = staged_plan(hosts, False, outcomes)
    assert confirm.mode == "confirm"
    assert confirm.suspects == ["node2", "node5"]
    assert confirm.known_good == ["node1", "node3", "node4", "node6"]
    assert confirm.rounds == [[("node1", "node2"), ("node3", "node5")]]
    everyone_failed = staged_plan(hosts, False, dict.fromkeys(screen.rounds[0], False))
    assert everyone_failed.mode == "all-pairs" and everyone_failed.rounds == circle_rounds(hosts)


def test_staged_plan_rejects_pairs_of_unknown_hosts() -> None:
    with pytest.raises(ValueError, match="not in --hosts"):
        staged_plan(["a", "b"], False, {("a", "x"): False})


def test_cli_prints_rounds_and_flat_pairs(capsys: pytest.CaptureFixture[str]) -> None:
    assert pair_rounds.main(["rounds", "--hosts", "d", "c", "b", "a"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["mode"] == "all-pairs" and len(document["rounds"]) == 3
    assert len(document["pairs"]) == 6
    assert {p["round"] for p in document["pairs"]} == {1, 2, 3}
    assert document["rounds"][0] == [["a", "d"], ["b", "c"]]


def test_cli_staged_confirm_and_bad_pair(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["staged", "--hosts", "a", "b", "c", "d", "--all-nodes", "fail"]
    assert pair_rounds.main([*argv, "--failed", "a--b", "--passed", "c--d"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert (document["mode"], document["suspects"]) == ("confirm", ["a", "b"])
    assert document["pairs"] == [{"round": 1, "a": "a", "b": "c"}, {"round": 1, "a": "b", "b": "d"}]
    assert pair_rounds.main([*argv, "--failed", "ab"]) == 2
    assert "HOST--HOST" in capsys.readouterr().err


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
    assert one_pair_per_round(rounds, parallel=False) == [[e] for r in rounds for e in r]
    assert one_pair_per_round(rounds, parallel=True) == rounds


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


def test_next_stage_all_pairs_and_staged() -> None:
    hosts = ["n1", "n2", "n3", "n4"]
    start = next_stage("start", "all-pairs", hosts, ["iperf3"], set(hosts))
    assert start.mode == "all-pairs" and len(start.rounds) == 3
    assert all(e["tries"] == {"iperf3": 1} for r in start.rounds for e in r)
    without_n4 = next_stage("start", "all-pairs", hosts, ["iperf3"], {"n1", "n2", "n3"})
    assert all("n4" not in (e["a"], e["b"]) for r in without_n4.rounds for e in r)
    assert next_stage("start", "staged", hosts, ["iperf3"], set(hosts)).mode == "all-nodes"
    passed = next_stage(
        "all-nodes", "staged", hosts, ["allreduce"], set(hosts), all_nodes_passed=True
    )
    assert passed.mode == "done" and passed.rounds == []
    screen = next_stage("all-nodes", "staged", hosts, ["iperf3"], set(hosts), used_rounds=0)
    assert screen.mode == "screen"
    assert [(e["round"], e["a"], e["b"]) for r in screen.rounds for e in r] == [
        (1, "n1", "n4"), (1, "n2", "n3"),
    ]  # fmt: skip
    screened = [latest("iperf3", "n1", "n4", "ok"), latest("iperf3", "n2", "n3", "low")]
    confirm = next_stage(
        "screen", "staged", hosts, ["iperf3"], set(hosts), latest=screened, used_rounds=1
    )
    assert (confirm.mode, confirm.suspects, confirm.known_good) == (
        "confirm", ["n2", "n3"], ["n1", "n4"],
    )  # fmt: skip
    assert {e["round"] for r in confirm.rounds for e in r} == {2}
    assert next_stage("pairs", "all-pairs", hosts, ["iperf3"], set(hosts)).mode == "done"


def test_pair_outcomes_pass_only_when_every_kind_passed() -> None:
    found = [latest("iperf3", "a", "b", "ok"), latest("allreduce", "a", "b", "low")]
    found.append(latest("iperf3", "c", "d", "ok"))
    assert pair_outcomes(found) == {("a", "b"): False, ("c", "d"): True}
