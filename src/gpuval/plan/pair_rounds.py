"""Which pairs of hosts to test, and in which rounds.

Two modes (bench_pairs_mode; auto picks by node count, gpuval.plan.steps.pairs_mode_for):
- all pairs (`circle_rounds`): the round-robin "circle" schedule. Every unordered pair exactly
  once; within a round the pairs are disjoint, so all of them run at the same time without a
  host serving two tests. N-1 rounds for even N, N rounds for odd N (each host sits one out).
  SuperBench runs its pair-wise traffic patterns in the same n-1 parallel rounds.
- staged, for big clusters where all pairs cost too much (232 nodes: 26,796 pairs): group
  testing (gpuval.plan.group_testing), built on this module's `screen_rounds` (every host
  tested once, in disjoint pairs) and `confirm_rounds` (each suspect with hosts that passed).

Host order and the circle schedule itself live in `gpuval.plan.host_order` (the step registry needs
them too; this module builds on both).

Between the rounds of the pair phase (the `gpuval_pairs` action plugin): `all_pairs_stage` (or
the staged search) plans what runs next as a `NextStage`, `retry_entries` + `pack_rounds` what
runs again to confirm a failure. A planned pair
is an `Entry`: its round, hosts, the try number of each kind and the step names it writes.

From a shell:
  python -m gpuval.plan.pair_rounds rounds --hosts a b c d
prints one JSON document: {"mode", "hosts", "rounds": [[["a","b"], ...], ...], "pairs":
[{"round": 1, "a": "a", "b": "b"}, ...]} (`pairs` is the same schedule flattened for a
`loop:`; rounds are numbered from 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, TypedDict, TypeVar

from gpuval.plan import steps
from gpuval.plan.host_order import (
    Pair,
    Rounds,
    circle_rounds,
    ordered_hosts,
    ordered_pair,
    sorted_round,
)

Packed = TypeVar("Packed")


def byes(hosts: Sequence[str], round_pairs: Sequence[Pair]) -> list[str]:
    """Hosts that sit a round out."""
    busy = {h for pair in round_pairs for h in pair}
    return [h for h in ordered_hosts(hosts) if h not in busy]


def screen_rounds(hosts: Iterable[str]) -> Rounds:
    """Every host tested once: the circle schedule's first round (circle_rounds(hosts)[:1],
    without building the N-2 others; with an odd count one host sits it out, `byes`)."""
    ring = ordered_hosts(hosts)
    if len(ring) < 2:
        return []
    last = len(ring) - 1 + len(ring) % 2  # the placeholder's place with an odd count
    return [
        sorted_round(
            (ring[i], ring[last - i]) for i in range((len(ring) + 1) // 2) if last - i < len(ring)
        )
    ]


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
    return [sorted_round(ordered_pair(*p) for p in found) for found in pack(todo, lambda p: p)]


def schedule_document(hosts: Iterable[str]) -> dict[str, object]:
    """The all-pairs schedule as the command line prints it."""
    ordered = ordered_hosts(hosts)
    rounds = circle_rounds(ordered)
    return {
        "mode": "all-pairs",
        "hosts": ordered,
        "rounds": [[list(pair) for pair in pairs] for pairs in rounds],
        "pairs": [
            {"round": number, "a": a, "b": b}
            for number, pairs in enumerate(rounds, start=1)
            for a, b in pairs
        ],
    }


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


def pack(
    items: Iterable[Packed], hosts_of: Callable[[Packed], Iterable[str]]
) -> list[list[Packed]]:
    """Items in rounds where no host appears twice (first fit, in the given order): every
    schedule of concurrent pairs is packed here (retries, confirmations)."""
    rounds: list[list[Packed]] = []
    busy: list[set[str]] = []
    for item in items:
        hosts = set(hosts_of(item))
        index = next((i for i, used in enumerate(busy) if not used & hosts), len(rounds))
        if index == len(rounds):
            rounds.append([])
            busy.append(set())
        rounds[index].append(item)
        busy[index] |= hosts
    return rounds


def pack_rounds(entries: Iterable[Entry]) -> list[list[Entry]]:
    """Entries in rounds where no host appears twice (`pack`)."""
    return pack(entries, lambda item: (item["a"], item["b"]))


def rounds_of_at_most(rounds: list[list[Entry]], most: int) -> list[list[Entry]]:
    """The rounds in turns of at most `most` pairs, in order (1: one pair after another). The
    role starts a round's servers at once (in the background) and then runs its first sides' clients
    (iperf3, ib_write_bw, mpirun) in one task, which Ansible runs on `forks` hosts at a time:
    with more pairs than forks the last clients would start after their servers gave up
    (their timeouts cover one pair's tests). Turns of `forks` pairs keep every client within."""
    most = max(most, 1)
    return [items[i : i + most] for items in rounds for i in range(0, max(len(items), 1), most)]


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


@dataclass(frozen=True)
class NextStage:
    """What the pair phase runs next. mode: done; all-pairs or pairs (`rounds` of entries);
    groups (each of `groups` one all-nodes run, all at the same time). Staged mode also says
    who is suspected and who passed, and the round numbers its pairs use (`scope`: the repeats
    and the judge after the stage look at these rounds only)."""

    mode: Literal["done", "all-pairs", "pairs", "groups"]
    rounds: list[list[Entry]] = field(default_factory=list)
    groups: list[list[str]] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)
    known_good: list[str] = field(default_factory=list)
    scope: list[int] = field(default_factory=list)


def all_pairs_stage(
    hosts: Sequence[str], kinds: Sequence[str], active: set[str],
    lanes: Sequence[steps.RdmaLane] = (),
) -> NextStage:  # fmt: skip
    """Every pair of the circle schedule, rounds numbered from 1."""
    return NextStage("all-pairs", schedule_entries(circle_rounds(hosts), 1, kinds, active, lanes))


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gpuval.plan.pair_rounds",
        description="Pair-test schedules as JSON (group testing: python -m "
        "gpuval.plan.group_testing).",
        epilog="example: python -m gpuval.plan.pair_rounds rounds --hosts a b c d",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    rounds = commands.add_parser("rounds", help="all pairs in rounds of disjoint pairs")
    rounds.add_argument("--hosts", nargs="+", required=True)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    try:
        document = schedule_document(arguments.hosts)
    except ValueError as problem:
        print(f"gpuval.plan.pair_rounds: {problem}", file=sys.stderr)
        return 2
    print(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
