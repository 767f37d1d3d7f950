"""Group testing: find the bad nodes of a big cluster in a few rounds instead of all pairs.

All pairs costs N-1 rounds (1,023 at 1,024 nodes). Group testing, as NVIDIA's Cluster Readiness
Engine and Google's cluster-health-scanner do it, costs rounds in the logarithm of N:

1. screen: every node in one group test (an all-nodes collective); a pass ends the search. A
   group test passes when it reduced correctly and its busbw is within the pair judge's pass
   band of the bound of its slowest node's link (gpuval.plugin_api judges it): a filter lets a
   false failure cost one more bisection round, never a slow node through. A group with no
   bound to judge it against (no network speed, gloo on CPUs) is not passed on bandwidth;
2. bisect: a failing group is split in two halves, and every half of a round is tested at the
   same time, each as a group of its own; a failing half is split again. A half of one node
   cannot be tested alone: it is a suspect. A failing group whose halves all pass hides a fault
   between its halves (a link, an uplink) that only pairs place: all its nodes are suspects;
3. confirm: each suspect is paired with `partners` (at least two) distinct nodes that passed a
   group test, in rounds of disjoint pairs, and judged by gpuval.plan.confirmation's rule (the
   report's too): flagged only when it failed with every one of them, cleared when it passed
   with every one, else unconfirmed (never flagged on one measurement, never a pass either).

A node measured by no test is never known good: one that left the play (unreachable) before its
group's test ran is "not tested" (`untested`), whether its group passed or failed.

Where the inventory knows the topology (`gpuval_switch`, or `gpuval_rack`), a split keeps the
nodes under one switch together, so a bad uplink fails one half and not both.

A search is a `GroupSearch` value: `tests()` says what the next round runs, `record(outcomes)`
gives the search after it (pure; `to_dict`/`from_dict` carry it between Ansible tasks).
`simulate` plays a search to its end against a set of bad nodes and counts the rounds.

From a shell (one JSON document; --bad names the nodes a simulated test fails with):
  python -m gpuval.plan.group_testing simulate --count 32 --bad node7
  python -m gpuval.plan.group_testing simulate --count 1024 --bad node1 node600 --switch-size 32
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from gpuval.plan import search_fields as fields
from gpuval.plan import steps
from gpuval.plan.confirmation import MIN_PARTNERS, Verdict, confirmation_verdict
from gpuval.plan.host_order import Pair, natural_key, ordered_hosts, ordered_pair
from gpuval.plan.pair_rounds import (
    LatestTry,
    NextStage,
    byes,
    confirm_rounds,
    pack,
    pair_outcomes,
    schedule_entries,
    screen_rounds,
)

Group = tuple[str, ...]
Stage = Literal["groups", "confirm", "done"]
# Inventory variables naming the switch (leaf) or rack a node hangs under, first found wins.
TOPOLOGY_VARIABLES = ("gpuval_switch", "gpuval_rack")


def in_order(hosts: Iterable[str]) -> list[str]:
    """Hosts of a search in natural order (checked once, at its start, by ordered_hosts)."""
    return sorted(hosts, key=natural_key)


def topology_of(hostvars: Mapping[str, Mapping[str, Any]], hosts: Iterable[str]) -> dict[str, str]:
    """Each host's switch (or rack) from its inventory variables; hosts without one are left out."""
    found: dict[str, str] = {}
    for host in hosts:
        # Ansible's hostvars answers `in` for a host outside the inventory, but not `get`.
        variables = hostvars[host] if host in hostvars else {}  # noqa: SIM401
        name = next((variables[v] for v in TOPOLOGY_VARIABLES if variables.get(v)), None)
        if name is not None:
            found[host] = str(name)
    return found


def split(group: Sequence[str], switch_of: Mapping[str, str] | None = None) -> tuple[Group, Group]:
    """Two halves of a group (the first the larger when the count is odd). Nodes under one switch
    stay together while the group spans several switches (whole switches go to the lighter half,
    biggest first); within one switch, or without a topology, the halves follow host order."""
    ordered = in_order(group)
    if len(ordered) < 2:
        raise ValueError(f"a group of {len(ordered)} node(s) cannot be split")
    known = {h: s for h in ordered if (s := (switch_of or {}).get(h))}
    units: dict[str, list[str]] = {}
    for host in ordered:
        # Among nodes of known switches, a node of no known switch is a unit of its own.
        units.setdefault(known.get(host, f"\0{host}"), []).append(host)
    if not known or len(units) == 1:
        middle = (len(ordered) + 1) // 2
        return tuple(ordered[:middle]), tuple(ordered[middle:])
    halves: tuple[list[str], list[str]] = ([], [])
    for unit in sorted(units.values(), key=lambda u: (-len(u), natural_key(u[0]))):
        lighter = halves[0] if len(halves[0]) <= len(halves[1]) else halves[1]
        lighter.extend(unit)
    first, second = (tuple(in_order(h)) for h in halves)
    return (first, second) if len(first) >= len(second) else (second, first)


@dataclass(frozen=True)
class Confirmation:
    """A suspect's confirmation pairs: partner -> passed (None until measured)."""

    suspect: str
    partners: dict[str, bool | None]

    @property
    def verdict(self) -> Verdict:
        return confirmation_verdict(self.partners.values())


@dataclass(frozen=True)
class GroupSearch:
    """Where a group-testing search stands. `pending`: the groups the next round tests, each
    with the group it was split from (None for the screen); `rounds`: rounds run so far;
    `by_pairs`: the screen is one round of disjoint pairs, each a group of two measured by the
    pair tests (where no all-nodes test can run); a node it leaves out is a suspect;
    `untested`: nodes that left the play before a test measured them (never known good)."""

    hosts: Group
    partners: int = MIN_PARTNERS
    switch_of: Mapping[str, str] = field(default_factory=dict)
    pending: tuple[tuple[Group, Group | None], ...] = ()
    suspects: Group = ()
    known_good: Group = ()
    untested: Group = ()
    confirmations: tuple[Confirmation, ...] = ()
    rounds: int = 0
    history: tuple[dict[str, Any], ...] = ()
    by_pairs: bool = False

    @classmethod
    def start(
        cls, hosts: Iterable[str], partners: int = MIN_PARTNERS,
        switch_of: Mapping[str, str] | None = None, by_pairs: bool = False,
    ) -> GroupSearch:  # fmt: skip
        """The search before its screen (nothing to test below two nodes)."""
        if partners < MIN_PARTNERS:
            raise ValueError(
                f"partners must be at least {MIN_PARTNERS}: a node is never flagged on one "
                f"unconfirmed pair, not {partners}"
            )
        ordered = tuple(ordered_hosts(hosts))
        topology = {h: s for h, s in (switch_of or {}).items() if h in ordered}
        if len(ordered) < 2:
            return cls(ordered, partners, topology, by_pairs=by_pairs)
        if not by_pairs:
            return cls(ordered, partners, topology, ((ordered, None),))
        first = screen_rounds(ordered)[0]
        return cls(
            ordered, partners, topology, tuple((pair, None) for pair in first),
            suspects=tuple(byes(ordered, first)), by_pairs=True,
        )  # fmt: skip

    @property
    def stage(self) -> Stage:
        if self.pending:
            return "groups"
        if any(c.verdict == "pending" for c in self.confirmations):
            return "confirm"
        return "done"

    def groups(self) -> list[Group]:
        """The groups the next round tests, each its own all-nodes run, all at the same time."""
        return [group for group, _ in self.pending]

    def leaders(self, active: set[str]) -> dict[Group, str]:
        """Each group's first node still in the play: its all-nodes test's output is the step
        (a group with none left has no leader, and fails)."""
        return {
            g: leader for g in self.groups() if (leader := next((h for h in g if h in active), ""))
        }

    def pairs(self) -> list[list[Pair]]:
        """The confirmation pairs still to measure, in rounds of disjoint pairs."""
        todo = [
            (c.suspect, partner)
            for c in self.confirmations
            for partner, passed in c.partners.items()
            if passed is None
        ]
        return pack((ordered_pair(*pair) for pair in todo), lambda pair: pair)

    def record_groups(
        self, passed: Mapping[Group, bool], active: set[str] | None = None
    ) -> GroupSearch:
        """The search after a round of group tests (`passed`: each tested group's outcome; a
        group left out counts as failed, so nothing is cleared without a measurement). Nodes
        no longer `active` (default all in play) were not measured by this round: they are
        neither known good nor suspects but untested, and leave the search."""
        if not self.pending:
            raise ValueError("no group test is pending")
        lost = {h for g, _ in self.pending for h in g if active is not None and h not in active}
        untested = set(self.untested) | lost
        outcome = {group: bool(passed.get(group, False)) for group, _ in self.pending}
        good = set(self.known_good) | {h for g, ok in outcome.items() if ok for h in g}
        suspects = set(self.suspects)
        next_pending: list[tuple[Group, Group]] = []
        children: dict[Group, list[Group]] = {}
        for group, parent in self.pending:
            if parent is not None:
                children.setdefault(parent, []).append(group)
            if outcome[group]:
                continue
            for half in split(group, self.switch_of):
                left = tuple(h for h in half if h not in untested)
                if len(left) == 1:
                    suspects.update(left)
                elif left:
                    next_pending.append((left, group))
        # A failed parent whose tested halves all passed: the fault lies between the halves.
        for parent, halves in children.items():
            if len(halves) == 2 and all(outcome[h] for h in halves):
                suspects.update(parent)
        suspects -= untested
        good -= suspects | untested
        searched = replace(
            self,
            pending=tuple(next_pending),
            suspects=tuple(in_order(suspects)),
            known_good=tuple(in_order(good)),
            untested=tuple(in_order(untested)),
            rounds=self.rounds + 1,
            history=(*self.history, {"groups": [list(g) for g in outcome], "passed": [
                outcome[g] for g in outcome
            ]}),
        )  # fmt: skip
        return searched if next_pending else searched._with_confirmations(active)

    def _with_confirmations(self, active: set[str] | None) -> GroupSearch:
        """Each suspect with `partners` distinct known-good partners (as many as there are)."""
        good = [h for h in self.known_good if active is None or h in active]
        planned = confirm_rounds(self.suspects, good, self.partners)
        partners: dict[str, dict[str, bool | None]] = {s: {} for s in self.suspects}
        for pair in (p for round_pairs in planned for p in round_pairs):
            suspect, partner = pair if pair[0] in partners else pair[::-1]
            partners[suspect][partner] = None
        return replace(
            self, confirmations=tuple(Confirmation(s, partners[s]) for s in self.suspects)
        )

    def record_pairs(self, passed: Mapping[Pair, bool | None]) -> GroupSearch:
        """The search after a round of confirmation pairs (`passed` by pair, either order; a
        pair that ran and left no result is the caller's False; None: the pair could not run,
        a host was lost, and the partner no longer counts). Pairs not given stay pending."""
        outcome = {ordered_pair(*pair): ok for pair, ok in passed.items()}
        confirmations = tuple(
            Confirmation(c.suspect, {
                partner: outcome.get(pair, ok) if ok is None else ok
                for partner, ok in c.partners.items()
                for pair in [ordered_pair(c.suspect, partner)]
                if ok is not None or pair not in outcome or outcome[pair] is not None
            })
            for c in self.confirmations
        )  # fmt: skip
        return replace(
            self,
            confirmations=confirmations,
            rounds=self.rounds + 1,
            history=(*self.history, {"pairs": [list(p) for p in outcome], "passed": list(
                outcome.values()
            )}),
        )  # fmt: skip

    def verdicts(self) -> dict[str, str]:
        """Per suspect: flagged, cleared, unconfirmed or pending."""
        return {c.suspect: c.verdict for c in self.confirmations}

    def flagged(self) -> list[str]:
        return [c.suspect for c in self.confirmations if c.verdict == "flagged"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": list(self.hosts),
            "partners": self.partners,
            "switch_of": dict(self.switch_of),
            "stage": self.stage,
            "pending": [
                {"group": list(g), "parent": list(p) if p else None} for g, p in self.pending
            ],
            "suspects": list(self.suspects),
            "known_good": list(self.known_good),
            "untested": list(self.untested),
            "confirmations": [
                {"suspect": c.suspect, "partners": c.partners, "verdict": c.verdict}
                for c in self.confirmations
            ],
            "flagged": self.flagged(),
            "rounds": self.rounds,
            "history": list(self.history),
            "by_pairs": self.by_pairs,
        }

    @classmethod
    def from_dict(cls, data: object) -> GroupSearch:
        """A search as `to_dict` wrote it (the computed keys stage, flagged are ignored). A
        malformed one (a key missing, a value of the wrong type) is a ValueError naming it."""
        if not isinstance(data, Mapping):
            raise fields.wrong("search", "a mapping", data)
        pending = fields.listed(data, "pending", Mapping)
        confirmations = fields.listed(data, "confirmations", Mapping)
        partners = fields.count(data, "partners")
        if partners < MIN_PARTNERS:
            raise fields.wrong("partners", f"at least {MIN_PARTNERS}", partners)
        return cls(
            hosts=fields.host_list(data, "hosts"),
            partners=partners,
            switch_of={h: str(s) for h, s in fields.mapping(data, "switch_of").items()},
            pending=tuple(
                (fields.host_list(p, f"pending[{i}].group"), fields.parent(p, i))
                for i, p in enumerate(pending)
            ),
            suspects=fields.host_list(data, "suspects"),
            known_good=fields.host_list(data, "known_good"),
            untested=fields.host_list(data, "untested", required=False),
            confirmations=tuple(
                Confirmation(fields.text(c, f"confirmations[{i}].suspect"), fields.outcomes(c, i))
                for i, c in enumerate(confirmations)
            ),
            rounds=fields.count(data, "rounds"),
            history=tuple(fields.listed(data, "history", Mapping, required=False)),
            by_pairs=bool(data.get("by_pairs")),
        )


def split_depth(group: Sequence[str], switch_of: Mapping[str, str] | None = None) -> int:
    """Group rounds a group can cost, its own test included: its halves are split further down
    to groups of two (the splits do not depend on outcomes, so this is exact)."""
    if len(group) < 2:
        return 0
    return 1 + max(split_depth(half, switch_of) for half in split(group, switch_of))


def rounds_left(search: GroupSearch) -> int:
    """At most this many more stages: the group rounds still possible, then the confirmation
    (its pair rounds run as one stage)."""
    # Screened by pairs: a failed pair's nodes are suspects at once, nothing is split.
    depth = max(
        (1 if search.by_pairs else split_depth(g, search.switch_of) for g in search.groups()),
        default=0,
    )
    return depth + int(search.stage != "done")


def record_round(
    search: GroupSearch, latest: Sequence[LatestTry], group_passed: Mapping[str, bool],
    active: set[str],
) -> GroupSearch:  # fmt: skip
    """The search after the round it planned: group tests judged by their leader's all-nodes
    test (`group_passed`, by leader), pairs by every kind's latest try (`latest`, of the
    round's pairs only). A group or pair without a result failed, unless a host of the pair was
    lost (then the partner no longer counts)."""
    outcomes = pair_outcomes(latest)
    if search.stage == "groups":
        leaders = search.leaders(active)
        return search.record_groups({
            g: outcomes.get((g[0], g[1]), False) if search.by_pairs
            else group_passed.get(leaders.get(g, ""), False)
            for g in search.groups()
        }, active)  # fmt: skip
    if search.stage == "confirm":
        return search.record_pairs({
            pair: outcomes.get(pair, False if set(pair) <= active else None)
            for pairs in search.pairs()
            for pair in pairs
        })  # fmt: skip
    return search


def search_stage(
    search: GroupSearch, kinds: Sequence[str], active: set[str], used_rounds: int = 0,
    lanes: Sequence[steps.RdmaLane] = (),
) -> NextStage:  # fmt: skip
    """What the pair phase runs for the search's next tests: its groups (each an all-nodes run),
    or pairs as entries of every kind, numbered on from `used_rounds`."""
    suspects = list(search.suspects)
    good = [h for h in search.known_good if h in active]
    if search.stage == "done":
        return NextStage("done", suspects=suspects, known_good=good)
    if search.stage == "groups" and not search.by_pairs:
        groups = [list(g) for g in search.groups()]
        return NextStage("groups", groups=groups, suspects=suspects, known_good=good)
    pairs = (
        [[ordered_pair(g[0], g[1]) for g in search.groups()]]
        if search.stage == "groups"
        else search.pairs()
    )
    rounds = schedule_entries(pairs, used_rounds + 1, kinds, active, lanes)
    scope = sorted({item["round"] for items in rounds for item in items})
    return NextStage("pairs", rounds, suspects=suspects, known_good=good, scope=scope)


def stage_summary(
    search: GroupSearch, planned: NextStage, groups: Mapping[str, Mapping[str, Any]]
) -> str:
    """One line on the round just judged and what runs next (the role prints it)."""
    untested = f", not tested {', '.join(search.untested)}" if search.untested else ""
    sizes = ", ".join(str(len(g)) for g in planned.groups)
    why = "; ".join(str(o.get("reason", "")) for o in groups.values() if o.get("reason"))
    return (
        f"search round {search.rounds}: suspects {', '.join(planned.suspects) or 'none'}, passed "
        f"{len(planned.known_good)} node(s){untested}; next {planned.mode}"
        + (f" of {sizes} node(s)" if sizes else "")
        + (f" ({why})" if why else "")
    )


def search_summary(search: GroupSearch) -> str:
    """One line on what the search found so far (the role prints it once the search is done)."""
    verdicts = ", ".join(f"{node} {verdict}" for node, verdict in search.verdicts().items())
    untested = f"; not tested {', '.join(search.untested)}" if search.untested else ""
    return (
        f"staged search, {search.rounds} stage(s): flagged {', '.join(search.flagged()) or 'none'}"
        f"; suspects {verdicts or 'none'}{untested}"
    )


AllNodesRun = Callable[[list[str], str], Mapping[str, Any]]


@dataclass(frozen=True)
class SearchCall:
    """One call of the gpuval_pairs action in staged mode: the search as the previous call left
    it (or new, at the start). `group_steps` names the group tests to judge, then `advance`
    records the round they belong to and plans the next."""

    search: GroupSearch
    kinds: tuple[str, ...]
    started: bool

    @classmethod
    def begin(
        cls, stage: str, previous: object, hosts: Sequence[str], active: set[str],
        kinds: Sequence[str], partners: int | None, hostvars: Mapping[str, Mapping[str, Any]],
    ) -> SearchCall:  # fmt: skip
        """At stage start a new search over the hosts in play (the screen by pairs where the
        all-reduce does not run); at stage search the one handed back (`previous`), which
        carries its own partners."""
        if stage == "start":
            search = GroupSearch.start(
                [h for h in hosts if h in active], MIN_PARTNERS if partners is None else partners,
                topology_of(hostvars, hosts), by_pairs="allreduce" not in kinds,
            )  # fmt: skip
            return cls(search, tuple(kinds), started=True)
        if partners is not None:
            raise ValueError(
                "partners is read at stage start only (the search carries it after): leave it out"
            )
        if not previous:
            raise ValueError(f"stage search needs the search: {fields.SEARCH_ADVICE}")
        return cls(GroupSearch.from_dict(previous), tuple(kinds), started=False)

    def group_steps(self, active: set[str]) -> dict[str, str]:
        """Leader -> the group step the previous call's round wrote (none at the start)."""
        if self.started or self.search.stage != "groups" or self.search.by_pairs:
            return {}
        name = steps.group_allreduce(self.search.rounds + 1)
        return dict.fromkeys(self.search.leaders(active).values(), name)

    def advance(
        self, latest: Sequence[LatestTry], groups: Mapping[str, Mapping[str, Any]],
        active: set[str], used_rounds: int, lanes: Sequence[steps.RdmaLane] = (),
        all_nodes_run: AllNodesRun | None = None,
    ) -> tuple[NextStage, dict[str, Any]]:  # fmt: skip
        """The next stage and the action's return values: the search to hand back, the stages
        it may still take, the summaries and, for group tests, every host's part of its group's
        all-nodes run (`all_nodes_run(group, step)`: gpuval.plan.pair_plan's)."""
        search = self.search
        if not self.started:
            passed = {leader: o.get("status") == "pass" for leader, o in groups.items()}
            search = record_round(search, latest, passed, active)
        planned = search_stage(search, self.kinds, active, used_rounds, lanes)
        returned: dict[str, Any] = {
            "search": search.to_dict(),
            "search_rounds_left": rounds_left(search),
            "stage_summary": stage_summary(search, planned, {} if self.started else groups),
            "search_summary": search_summary(search),
        }
        if planned.mode == "groups" and all_nodes_run:
            name = steps.group_allreduce(search.rounds + 1)
            returned["group_runs"] = {
                host: part for g in planned.groups for host, part in all_nodes_run(g, name).items()
            }
        return planned, returned


def worst_rounds(count: int, bad: int = 1) -> int:
    """The bound the search is held to: 2*log2(N)+2 rounds with one bad node (the screen, at most
    two rounds a halving, the confirmation), four more for each further one."""
    if count < 2:
        return 0
    return 2 * math.ceil(math.log2(count)) + 2 + 4 * max(bad - 1, 0)


@dataclass(frozen=True)
class Played:
    """A search played to its end: rounds of each stage, and what it flagged. `stages`: each
    round in order as (groups or pairs, hosts it tests, its largest group: 2 for pairs)."""

    rounds: int
    group_rounds: int
    pair_rounds: int
    group_tests: int
    pair_tests: int
    flagged: list[str]
    verdicts: dict[str, str]
    stages: tuple[tuple[str, int, int], ...] = ()


def simulate(
    hosts: Iterable[str], bad: Iterable[str], partners: int = MIN_PARTNERS,
    switch_of: Mapping[str, str] | None = None, by_pairs: bool = False,
) -> Played:  # fmt: skip
    """Play a search where a test (group or pair) fails exactly when it holds a bad node."""
    broken = set(bad)
    search = GroupSearch.start(hosts, partners, switch_of, by_pairs)
    unknown = broken - set(search.hosts)
    if unknown:
        raise ValueError(f"bad node(s) not among the hosts: {', '.join(sorted(unknown))}")
    group_rounds = pair_rounds = group_tests = pair_tests = 0
    stages: list[tuple[str, int, int]] = []
    while search.stage != "done":
        if search.stage == "groups":
            groups = search.groups()
            group_rounds, group_tests = group_rounds + 1, group_tests + len(groups)
            stages.append(("groups", sum(map(len, groups)), max(map(len, groups))))
            search = search.record_groups({g: not broken & set(g) for g in groups})
        else:
            first_round = search.pairs()[0]
            pair_rounds, pair_tests = pair_rounds + 1, pair_tests + len(first_round)
            stages.append(("pairs", 2 * len(first_round), 2))
            search = search.record_pairs({p: not broken & set(p) for p in first_round})
    return Played(
        search.rounds, group_rounds, pair_rounds, group_tests, pair_tests, search.flagged(),
        search.verdicts(), tuple(stages),
    )  # fmt: skip


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gpuval.plan.group_testing",
        description="Play a group-testing search against simulated bad nodes; print its rounds.",
        epilog="example: python -m gpuval.plan.group_testing simulate --count 32 --bad node7",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    simulated = commands.add_parser("simulate", help="play a search to its end, count rounds")
    who = simulated.add_mutually_exclusive_group(required=True)
    who.add_argument("--hosts", nargs="+", help="host names")
    who.add_argument("--count", type=int, help="node1 ... nodeN")
    simulated.add_argument("--bad", nargs="*", default=[], help="nodes every test of theirs fails")
    simulated.add_argument("--partners", type=int, default=MIN_PARTNERS)
    simulated.add_argument(
        "--switch-size", type=int, default=0, help="nodes per switch, in host order (0: unknown)"
    )
    simulated.add_argument(
        "--by-pairs", action="store_true", help="screen with disjoint pairs (no all-nodes test)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    hosts = arguments.hosts or [f"node{i}" for i in range(1, arguments.count + 1)]
    size = arguments.switch_size
    switch_of = (
        {h: f"switch{i // size + 1}" for i, h in enumerate(ordered_hosts(hosts))} if size else {}
    )
    try:
        played = simulate(hosts, arguments.bad, arguments.partners, switch_of, arguments.by_pairs)
    except ValueError as problem:
        print(f"gpuval.plan.group_testing: {problem}", file=sys.stderr)
        return 2
    document = {
        "hosts": len(hosts),
        "bad": arguments.bad,
        "rounds": played.rounds,
        "bound": worst_rounds(len(hosts), max(len(arguments.bad), 1)),
        "all_pairs_rounds": len(hosts) - 1 if len(hosts) % 2 == 0 else len(hosts),
        **{k: v for k, v in vars(played).items() if k not in ("rounds", "stages")},
    }
    print(json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
