"""How long steps took in earlier runs: the sidecars of the run folders the history database lists;
Ansible's own time in each phase: what the phase's plays took (plays.json) beyond the time a
step of the phase was running on some node; and Ansible's own time in each round of pairs: from
the round's first step to the next round's, less the time a step of the round was running.

A step's cost key names what decides its duration: the step (or pair kind and RDMA memory), the
sizes and seconds on its command line (nccl-tests -b/-e/-f/-n/-w, iperf3 -t, ib_write_bw -D, the
all-reduce bench's --min-bytes/--max-bytes) and, for the steps that span every node, the node
count. Only runs whose nodes have the planned GPU count are read. The history database
(REPORTS/history.sqlite, gpuval.history.store) is read here with sqlite alone: this layer sits
below the history package.
"""

from __future__ import annotations

import itertools
import json
import shlex
import sqlite3
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from gpuval.plan import steps
from gpuval.plan.phase_tags import TagSelection
from gpuval.plan.play_times import instant, phase_windows, read_play_times

# Flags whose values shape a step's duration, per tool word on the command line.
SIZE_FLAGS = ("-b", "-e", "-f", "-n", "-w", "-t", "-D", "--min-bytes", "--max-bytes")
ALL_NODE_STEPS = (steps.MPI_PREFLIGHT, steps.ALLNODES_ALLREDUCE)
RUNS_READ = 20  # the newest runs of the shape; older ones describe hardware that may be gone
# The phases whose Ansible time is learned. The pair phase's is not: it grows with its rounds,
# which the plan prices apiece (round-overhead, round-cpu-per-host), and a run with a faulty node
# played more of them than the next run may.
LEARNED_PHASES = frozenset(
    {"start", "preflight", "health", "install", "openmpi", "build", "intranode",
     "mpi-preflight", "internode", "report"}
)  # fmt: skip


def size_words(command: Sequence[str] | str | None) -> str:
    """The duration-shaping flags of a command line and their values, in a fixed order."""
    if not command:
        return ""
    try:
        words = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError:
        return ""
    found = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w in SIZE_FLAGS}
    return " ".join(f"{flag} {found[flag]}" for flag in SIZE_FLAGS if flag in found)


def cost_key(step: str, command: Sequence[str] | str | None, nodes: int) -> str | None:
    """The key a step's duration is filed under; None for steps the plan does not cost."""
    pair = steps.pair_step(step)
    if pair is not None:
        base = f"pair-{pair.kind}" + (f"-{pair.lane.memory}" if pair.lane else "")
    elif step.startswith(steps.PEER_PREFIX) or step.startswith(steps.FAILED_PREFIX):
        return None
    elif step.startswith(steps.INTERNODE_PREFIX) or step in ALL_NODE_STEPS:
        base = f"{step}@{nodes}"
    else:
        base = step
    words = size_words(command)
    return f"{base} {words}" if words else base


def _run_folders(database: Path, gpus_per_node: int) -> list[tuple[Path, int]]:
    """(run folder, node count) of the newest runs whose every node had `gpus_per_node` GPUs."""
    if not database.is_file() or database.is_symlink():
        return []
    query = """
        SELECT runs.run_dir, runs.host_count FROM runs JOIN hosts USING (run_id)
        GROUP BY runs.run_id HAVING MIN(COALESCE(hosts.gpu_count, 0)) = ?
        AND MAX(COALESCE(hosts.gpu_count, 0)) = ? ORDER BY runs.started_at DESC LIMIT ?"""
    try:
        uri = f"{database.resolve().as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True)) as connection:
            rows = connection.execute(query, (gpus_per_node, gpus_per_node, RUNS_READ)).fetchall()
    except sqlite3.Error:
        return []  # no history to learn from: the documented defaults hold
    return [(Path(str(folder)), int(count)) for folder, count in rows]


def _sidecar(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def measured_durations(
    database: Path, gpus_per_node: int, wanted: Iterable[str]
) -> dict[str, list[float]]:
    """Per cost key of `wanted`, the durations earlier runs recorded (finished, not timed out,
    exit status 0): what a healthy step of that shape takes. A skipped step took no time: on a
    node without dcgmi, DCGM's diagnostic is planned at 0 s once the history says so."""
    keys = set(wanted)
    found: dict[str, list[float]] = defaultdict(list)
    for folder, nodes in _run_folders(database, gpus_per_node):
        for path in sorted(folder.glob("raw/*/*.meta.json")):
            document = _sidecar(path)
            if document is None:
                continue
            duration = 0.0 if document.get("skipped") else document.get("duration_s")
            if not document.get("skipped") and (
                document.get("exit_code") != 0 or document.get("timed_out")
            ):
                continue
            if not isinstance(duration, int | float):
                continue
            key = cost_key(str(document.get("name", "")), document.get("command"), nodes)
            if key in keys:
                found[key].append(float(duration))
    return dict(found)


def median(durations: Sequence[float]) -> float:
    return float(statistics.median(durations))


Interval = tuple[datetime, datetime]


def _interval(document: dict[str, Any]) -> Interval | None:
    started, ended = document.get("started_at"), document.get("ended_at")
    if not (isinstance(started, str) and isinstance(ended, str)):
        return None
    start, end = instant(started), instant(ended)
    if start is None or end is None or end < start:
        return None
    return start, end


def sidecar_intervals(run_dir: Path) -> list[Interval]:
    """When each step of a run folder ran: its sidecar's start and end (the node's clock)."""
    documents = (_sidecar(path) for path in sorted(run_dir.glob("raw/*/*.meta.json")))
    return [i for d in documents if d is not None and (i := _interval(d)) is not None]


def busy_seconds(intervals: Sequence[Interval], start: datetime | None = None,
                 end: datetime | None = None) -> float:  # fmt: skip
    """Seconds during which at least one of `intervals` (steps running on some node) was under
    way: concurrent ones count once; only those between `start` and `end`, when given."""
    clipped = sorted(
        (max(begun, start) if start else begun, min(ended, end) if end else ended)
        for begun, ended in intervals
        if (end is None or begun < end) and (start is None or ended > start)
    )
    total, reach = 0.0, None
    for begun, ended in clipped:
        if reach is None or ended > reach:
            total += (ended - (begun if reach is None else max(begun, reach))).total_seconds()
            reach = ended
    return total


def measured_phase_overheads(
    database: Path, gpus_per_node: int, nodes: int
) -> dict[tuple[str, int], list[float]]:
    """Per (phase, occurrence) of LEARNED_PHASES, Ansible's own time in each earlier run of
    `nodes` nodes of the shape that kept its plays' times: the phase's time less the seconds a
    step was running on some node (sidecar times are the nodes' clocks: a node whose clock is off
    moves its steps' time into or out of a phase). It holds what runs without sidecars too: an
    install or a build that had nothing to do, the collect, the report. A run started with
    --tags teaches nothing (it plays parts of phases); of one with --skip-tags, the phases it
    left out teach nothing."""
    found: dict[tuple[str, int], list[float]] = defaultdict(list)
    for folder, count in _run_folders(database, gpus_per_node):
        recorded = read_play_times(folder)
        played = TagSelection(recorded.tags, recorded.skip_tags)
        windows = [
            w for w in phase_windows(recorded.plays)
            if w.phase in LEARNED_PHASES and played.phase_runs(w.phase)
        ]  # fmt: skip
        if count != nodes or not windows or set(played.run) != {"all"}:
            continue
        intervals = sidecar_intervals(folder)
        for window in windows:
            own = window.duration_s - busy_seconds(intervals, window.start, window.end)
            found[(window.phase, window.occurrence)].append(max(own, 0.0))
    return dict(found)


@dataclass
class _PlayedRound:
    """Pair tries a run played at the same time (a round, or one pair of it where pairs ran one
    after another): their steps' times and the hosts they tested."""

    steps: list[Interval] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)

    @property
    def start(self) -> datetime:
        return min(begun for begun, _ in self.steps)

    @property
    def end(self) -> datetime:
        return max(ended for _, ended in self.steps)


def _played_rounds(run_dir: Path) -> tuple[list[_PlayedRound], list[datetime]]:
    """The run's rounds of pairs in the order played, each the tries (a pair's round and try)
    that overlapped in time; and when each group test of the staged search began. Only their
    sidecars are read (a sidecar is named after its step): the pair phase runs nothing else,
    and the other phases' steps come before or after its rounds."""
    tries: dict[tuple[int, int, frozenset[str]], _PlayedRound] = defaultdict(_PlayedRound)
    group_tests: list[datetime] = []
    paths = [*run_dir.glob(f"raw/*/{steps.PAIR_STEP_PREFIX}*.meta.json"),
             *run_dir.glob(f"raw/*/{steps.ALLNODES_ALLREDUCE}*.meta.json")]  # fmt: skip
    for path in sorted(paths):
        document = _sidecar(path)
        interval = None if document is None else _interval(document)
        if document is None or interval is None:
            continue
        name = str(document.get("name", ""))
        pair = steps.pair_step(name)
        if pair is None:
            group_tests.append(interval[0])
            continue
        played = tries[(pair.round, pair.attempt, frozenset((pair.src, pair.dst)))]
        played.steps.append(interval)
        played.hosts |= {pair.src, pair.dst}
    rounds: list[_PlayedRound] = []
    for played in sorted(tries.values(), key=lambda t: t.start):
        if rounds and played.start < rounds[-1].end:
            rounds[-1].steps += played.steps
            rounds[-1].hosts |= played.hosts
        else:
            rounds.append(_PlayedRound(list(played.steps), set(played.hosts)))
    return rounds, group_tests


def _round_times(run_dir: Path) -> dict[int, list[float]]:
    """Per count of hosts a round tested, Ansible's time in each round of the run's pairs but
    its last: until the next round's first step, less the seconds a step of the round was
    running. A round followed by a group test of the staged search before the next is left
    out: its time is not the round's alone."""
    rounds, group_tests = _played_rounds(run_dir)
    found: dict[int, list[float]] = defaultdict(list)
    for played, following in itertools.pairwise(rounds):
        if any(played.start < begun < following.start for begun in group_tests):
            continue
        span = (following.start - played.start).total_seconds()
        found[len(played.hosts)].append(max(span - busy_seconds(played.steps), 0.0))
    return found


def measured_round_overheads(
    database: Path, gpus_per_node: int, nodes: int
) -> dict[int, list[float]]:
    """Per count of hosts a round tests, Ansible's own time in each round of pairs of earlier
    runs of `nodes` nodes of the shape (see _round_times): its include, the servers' start,
    the collect and judging, whatever the round's hosts, and the skipped include of every host
    it left out. Sidecar times are the nodes' clocks: nodes whose clocks disagree move time
    between rounds."""
    found: dict[int, list[float]] = defaultdict(list)
    for folder, count in _run_folders(database, gpus_per_node):
        if count == nodes:
            for tested, seconds in _round_times(folder).items():
                found[tested] += seconds
    return dict(found)
