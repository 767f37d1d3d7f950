"""Which pairs of hosts to test, and in which rounds.

Two modes:
- all pairs (`circle_rounds`): the round-robin "circle" schedule. Every unordered pair exactly
  once; within a round the pairs are disjoint, so all of them run at the same time without a
  host serving two tests. N-1 rounds for even N, N rounds for odd N (each host sits one out).
  SuperBench runs its pair-wise traffic patterns in the same n-1 parallel rounds.
- staged (`staged_plan`), for big clusters where all pairs cost too much (232 nodes: 26,796
  pairs): test all nodes together first; only when that fails, screen with one round of
  disjoint pairs (`screen_rounds`, every host tested once); the hosts of failed screening pairs
  are suspects, and each suspect is then paired with hosts that passed (`confirm_rounds`),
  as Google's cluster-health-scanner and NVIDIA's cluster readiness tests do.

Host order and the circle schedule itself live in `gpuval.plan.host_order` (the step registry needs
them too; this module builds on both).

Between the rounds of the pair phase (the `gpuval_pairs` action plugin): `next_stage` plans what
runs next, `retry_entries` + `pack_rounds` what runs again to confirm a failure. A planned pair
is an `Entry`: its round, hosts, the try number of each kind and the step names it writes.

From a shell:
  python -m gpuval.plan.pair_rounds rounds --hosts a b c d
  python -m gpuval.plan.pair_rounds staged --hosts a b c d --all-nodes fail
  python -m gpuval.plan.pair_rounds staged --hosts a b c d --all-nodes fail \
      --failed a--b --passed c--d
Each prints one JSON document: {"mode", "hosts", "suspects", "known_good", "rounds":
[[["a","b"], ...], ...], "pairs": [{"round": 1, "a": "a", "b": "b"}, ...]} (`pairs` is the
same schedule flattened for a `loop:`; rounds are numbered from 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, TypedDict

from gpuval.plan import steps
from gpuval.plan.host_order import (
    PAIR_SEPARATOR,
    Pair,
    Rounds,
    circle_rounds,
    natural_key,
    ordered_hosts,
    ordered_pair,
    sorted_round,
)

Mode = Literal["done", "all-pairs", "screen", "confirm"]


def byes(hosts: Sequence[str], round_pairs: Sequence[Pair]) -> list[str]:
    """Hosts that sit a round out."""
    busy = {h for pair in round_pairs for h in pair}
    return [h for h in ordered_hosts(hosts) if h not in busy]


def screen_rounds(hosts: Iterable[str]) -> Rounds:
    """Every host tested once: the first circle round; with an odd count the host left out meets
    the first other host in a second round."""
    ordered = ordered_hosts(hosts)
    rounds = circle_rounds(ordered)[:1]
    if rounds:
        left_out = byes(ordered, rounds[0])
        if left_out:
            partner = next(h for h in ordered if h != left_out[0])
            rounds.append([ordered_pair(partner, left_out[0])])
    return rounds


def split_screen(outcomes: Mapping[Pair, bool]) -> tuple[list[str], list[str]]:
    """(suspects, known good) from screening pair outcomes (True: passed). A host of a failed
    pair is a suspect even if another pair of it passed: a good partner can hide nothing."""
    suspects = {h for pair, passed in outcomes.items() if not passed for h in pair}
    good = {h for pair, passed in outcomes.items() if passed for h in pair} - suspects
    return sorted(suspects, key=natural_key), sorted(good, key=natural_key)


def confirm_rounds(suspects: Sequence[str], known_good: Sequence[str], partners: int = 1) -> Rounds:
    """Each suspect paired with `partners` different known-good hosts (fewer when fewer exist);
    within a round every host appears once. Good hosts are taken in turn, so the load spreads."""
    suspects = ordered_hosts(suspects)
    good = ordered_hosts(known_good)
    if set(suspects) & set(good):
        raise ValueError("a host cannot be both a suspect and known good")
    if not suspects or not good:
        return []
    wanted = min(partners, len(good))
    # Suspect i meets good hosts i, i+1, ... (mod len(good)): distinct partners per suspect.
    todo = [(s, good[(i + k) % len(good)]) for k in range(wanted) for i, s in enumerate(suspects)]
    rounds: Rounds = []
    while todo:
        used: set[str] = set()
        this_round: list[Pair] = []
        rest: list[Pair] = []
        for suspect, partner in todo:
            if suspect in used or partner in used:
                rest.append((suspect, partner))
                continue
            used.update((suspect, partner))
            this_round.append(ordered_pair(suspect, partner))
        rounds.append(sorted_round(this_round))
        todo = rest
    return rounds


@dataclass(frozen=True)
class StagePlan:
    """What to run next in staged mode, and why."""

    mode: Mode
    hosts: list[str]
    rounds: Rounds
    suspects: list[str] = field(default_factory=list)
    known_good: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "hosts": self.hosts,
            "suspects": self.suspects,
            "known_good": self.known_good,
            "rounds": [[list(pair) for pair in pairs] for pairs in self.rounds],
            "pairs": [
                {"round": number, "a": a, "b": b}
                for number, pairs in enumerate(self.rounds, start=1)
                for a, b in pairs
            ],
        }


def staged_plan(
    hosts: Iterable[str],
    all_nodes_passed: bool,
    screen_outcomes: Mapping[Pair, bool] | None = None,
    partners: int = 1,
) -> StagePlan:
    """The next stage: nothing when the all-nodes test passed; else the screening round; with
    its outcomes, the confirmation rounds (all pairs when no screening pair passed, since
    there is then no known-good host to pair suspects with)."""
    ordered = ordered_hosts(hosts)
    if all_nodes_passed:
        return StagePlan("done", ordered, [])
    if screen_outcomes is None:
        return StagePlan("screen", ordered, screen_rounds(ordered))
    unknown = sorted({h for pair in screen_outcomes for h in pair} - set(ordered))
    if unknown:
        raise ValueError(f"screening pair(s) name host(s) not in --hosts: {', '.join(unknown)}")
    suspects, good = split_screen(screen_outcomes)
    if suspects and not good:
        return StagePlan("all-pairs", ordered, circle_rounds(ordered), suspects, good)
    return StagePlan("confirm", ordered, confirm_rounds(suspects, good, partners), suspects, good)


# ------------------------------------------------------------------ between the rounds


class Entry(TypedDict):
    """One pair to run in a round: its tries (kind -> try number), the steps they write on the
    pair's first host (kind -> step names; iperf3 has both directions) and on its second host
    (`peers`: the iperf3 servers' and the all-reduce's second node's outputs); `lanes`: the rail
    and memory of each of steps["rdma"], in its order (empty without an rdma try)."""

    round: int
    a: str
    b: str
    tries: dict[str, int]
    steps: dict[str, list[str]]
    peers: dict[str, list[str]]
    lanes: list[dict[str, int | str]]


class LatestTry(TypedDict):
    """The latest try of one measurement as judged so far (status ok, low, failed or wrong)."""

    kind: str
    a: str
    b: str
    round: int
    attempt: int
    status: str


def entry(
    round_number: int,
    a: str,
    b: str,
    tries: Mapping[str, int],
    lanes: Sequence[steps.RdmaLane] = (),
) -> Entry:
    """`lanes`: the rdma kind's rails and memories (steps.rdma_lanes)."""
    names = {
        kind: steps.pair_entry_steps(kind, round_number, a, b, attempt, lanes)
        for kind, attempt in tries.items()
    }
    return {
        "round": round_number,
        "a": a,
        "b": b,
        "tries": dict(tries),
        "steps": names,
        "peers": {
            kind: [steps.peer(name) for name in found]
            for kind, found in names.items()
            if kind in steps.PEER_KINDS
        },
        "lanes": [asdict(lane) for lane in lanes] if "rdma" in tries else [],
    }


def pack_rounds(entries: Iterable[Entry]) -> list[list[Entry]]:
    """Entries in rounds where no host appears twice (first fit, in the given order)."""
    rounds: list[list[Entry]] = []
    busy: list[set[str]] = []
    for item in entries:
        for index, hosts in enumerate(busy):
            if not hosts & {item["a"], item["b"]}:
                rounds[index].append(item)
                hosts.update((item["a"], item["b"]))
                break
        else:
            rounds.append([item])
            busy.append({item["a"], item["b"]})
    return rounds


def one_pair_per_round(rounds: list[list[Entry]], parallel: bool) -> list[list[Entry]]:
    """The rounds as they are, or (not parallel) every pair in a round of its own."""
    return rounds if parallel else [[item] for items in rounds for item in items]


def retry_entries(
    latest: Sequence[LatestTry],
    max_tries: int,
    active: set[str],
    lanes: Sequence[steps.RdmaLane] = (),
) -> list[Entry]:
    """Pairs whose latest try failed or was low, with tries left and both hosts still there.
    Wrong results are not re-run: a later try cannot repair corrupted data."""
    wanted: dict[tuple[int, str, str], dict[str, int]] = {}
    for t in latest:
        if t["status"] not in ("failed", "low") or t["attempt"] >= max_tries:
            continue
        if not {t["a"], t["b"]} <= active:
            continue
        tries = wanted.setdefault((t["round"], t["a"], t["b"]), {})
        tries[t["kind"]] = max(tries.get(t["kind"], 0), t["attempt"] + 1)
    return [entry(r, a, b, tries, lanes) for (r, a, b), tries in wanted.items()]


def schedule_entries(
    rounds: Sequence[Sequence[Pair]],
    first_round: int,
    kinds: Sequence[str],
    active: set[str],
    lanes: Sequence[steps.RdmaLane] = (),
) -> list[list[Entry]]:
    """A schedule's rounds as entries with try 1 of every kind; pairs with a host gone are
    dropped (their first tries stay missing, which fails them closed)."""
    return [
        [entry(number, a, b, dict.fromkeys(kinds, 1), lanes) for a, b in pairs if {a, b} <= active]
        for number, pairs in enumerate(rounds, start=first_round)
    ]


def pair_outcomes(latest: Sequence[LatestTry]) -> dict[Pair, bool]:
    """Per pair: passed when every measurement of every kind passed."""
    outcomes: dict[Pair, bool] = {}
    for t in latest:
        pair = (t["a"], t["b"])
        outcomes[pair] = outcomes.get(pair, True) and t["status"] == "ok"
    return outcomes


Stage = Literal["start", "all-nodes", "screen", "pairs"]


@dataclass(frozen=True)
class NextStage:
    """What the pair phase runs next; mode done, all-nodes, all-pairs, screen or confirm."""

    mode: str
    rounds: list[list[Entry]] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)
    known_good: list[str] = field(default_factory=list)


def next_stage(
    stage: Stage,
    mode: Literal["all-pairs", "staged"],
    hosts: Sequence[str],
    kinds: Sequence[str],
    active: set[str],
    *,
    latest: Sequence[LatestTry] = (),
    used_rounds: int = 0,
    all_nodes_passed: bool = False,
    partners: int = 1,
    lanes: Sequence[steps.RdmaLane] = (),
) -> NextStage:
    """The stage after `stage`: start -> all pairs (all-pairs mode) or the all-nodes test
    (staged); all-nodes -> done or screening; screen -> confirmation; pairs -> done. Round
    numbers go on from `used_rounds`, so every try of the run has its own step name."""
    if stage == "start":
        if mode == "staged":
            return NextStage("all-nodes")
        return NextStage(
            "all-pairs", schedule_entries(circle_rounds(hosts), 1, kinds, active, lanes)
        )
    if stage == "all-nodes":
        plan = staged_plan(hosts, all_nodes_passed)
    elif stage == "screen":
        plan = staged_plan(hosts, False, pair_outcomes(latest), partners)
    else:
        return NextStage("done")
    return NextStage(
        plan.mode,
        schedule_entries(plan.rounds, used_rounds + 1, kinds, active, lanes),
        plan.suspects,
        [h for h in plan.known_good if h in active],
    )


def parse_pair(text: str) -> Pair:
    a, separator, b = text.partition(PAIR_SEPARATOR)
    if not separator or not a or not b or PAIR_SEPARATOR in b:
        raise ValueError(f"pair {text!r} must be written HOST{PAIR_SEPARATOR}HOST")
    return ordered_pair(a, b)


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gpuval.plan.pair_rounds", description="Pair-test schedules as JSON."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    rounds = commands.add_parser("rounds", help="all pairs in rounds of disjoint pairs")
    rounds.add_argument("--hosts", nargs="+", required=True)
    staged = commands.add_parser("staged", help="the next stage of a staged (screened) test")
    staged.add_argument("--hosts", nargs="+", required=True)
    staged.add_argument("--all-nodes", choices=("pass", "fail"), required=True)
    staged.add_argument("--passed", nargs="*", default=None, metavar="A--B")
    staged.add_argument("--failed", nargs="*", default=None, metavar="A--B")
    staged.add_argument("--partners", type=int, default=1, help="known-good partners per suspect")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    try:
        if arguments.command == "rounds":
            hosts = ordered_hosts(arguments.hosts)
            plan = StagePlan("all-pairs", hosts, circle_rounds(hosts))
        else:
            outcomes: dict[Pair, bool] | None = None
            if arguments.passed is not None or arguments.failed is not None:
                outcomes = {parse_pair(p): True for p in arguments.passed or []}
                outcomes.update({parse_pair(p): False for p in arguments.failed or []})
            plan = staged_plan(
                arguments.hosts, arguments.all_nodes == "pass", outcomes, arguments.partners
            )
    except ValueError as problem:
        print(f"gpuval.plan.pair_rounds: {problem}", file=sys.stderr)
        return 2
    print(json.dumps(plan.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
