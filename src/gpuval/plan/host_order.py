"""Host order and the all-pairs circle schedule: the leaf both the step registry
(`gpuval.plan.steps`, run.json's expected pair steps) and the planner
(`gpuval.plan.pair_rounds`) build on.

Host order is the natural order of the names ("node2" before "node10") whatever order the
inventory gives, so the same hosts always give the same plan; within a pair the first host is
the earlier one (the iperf3 client, the rank-0 host).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

Pair = tuple[str, str]
Rounds = list[list[Pair]]
PAIR_SEPARATOR = "--"  # "a--b" on the command line and in file names; host names must not hold it


def natural_key(name: str) -> tuple[list[int | str], str]:
    """'node2' < 'node10': digit runs compare as numbers (re.split alternates text and digits)."""
    parts: list[int | str] = [
        int(part) if index % 2 else part for index, part in enumerate(re.split(r"(\d+)", name))
    ]
    return parts, name


def ordered_hosts(hosts: Iterable[str]) -> list[str]:
    """The hosts in natural order; duplicates and names holding '--' are mistakes, not data."""
    listed = list(hosts)
    # One count of every name (not a count per host: that is quadratic at a thousand nodes).
    repeated = sorted(h for h, times in Counter(listed).items() if times > 1)
    if repeated:
        raise ValueError(f"host(s) listed more than once: {', '.join(repeated)}")
    bad = [h for h in listed if not h or PAIR_SEPARATOR in h]
    if bad:
        raise ValueError(f"host name(s) empty or holding {PAIR_SEPARATOR!r}: {bad}")
    return sorted(listed, key=natural_key)


def ordered_pair(a: str, b: str) -> Pair:
    first, second = sorted((a, b), key=natural_key)
    return first, second


def sorted_round(pairs: Iterable[Pair]) -> list[Pair]:
    return sorted((ordered_pair(a, b) for a, b in pairs), key=lambda p: natural_key(p[0]))


def circle_rounds(hosts: Iterable[str]) -> Rounds:
    """All unordered pairs in rounds of disjoint pairs (the circle method: fix the first host,
    rotate the others one place per round; with an odd count a placeholder gives one bye)."""
    ring: list[str | None] = list(ordered_hosts(hosts))
    if len(ring) < 2:
        return []
    if len(ring) % 2:
        ring.append(None)
    count = len(ring)
    rounds: Rounds = []
    for _ in range(count - 1):
        pairs = [(ring[i], ring[count - 1 - i]) for i in range(count // 2)]
        rounds.append(sorted_round((a, b) for a, b in pairs if a is not None and b is not None))
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds
