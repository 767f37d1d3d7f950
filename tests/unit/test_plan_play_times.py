"""gpuval plan learns Ansible's own time per phase from earlier runs: each phase's play times
(plays.json, written by the gpuval_play_times callback) less the seconds a step of some node was
running (its sidecars); and per round of pairs: from a round's first step to the next round's,
less the seconds a step of the round was running. The expected seconds are worked out by hand
from the times written here."""

from __future__ import annotations

import json
import runpy
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpuval.history.store import TABLES
from gpuval.plan import duration, inputs, plan_model, steps
from gpuval.plan.play_times import PLAYS_FILE, PlayTime, phase_windows, read_play_times
from gpuval.plan.step_history import (
    busy_seconds,
    measured_phase_overheads,
    measured_round_overheads,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = inputs.role_defaults(ROOT / "roles")
T0 = datetime(2026, 11, 20, 10, 0, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


Plays = list[tuple[str, str, float, float]]
# (play, phase, start, seconds): a run of the plan's order; the collect, the ssh clean-up and
# the report are the one report phase, health comes twice.
PLAYS: Plays = [
    ("Start the run", "start", 0, 2.0),
    ("Preflight", "preflight", 2, 10.0),
    ("Node health before", "health", 12, 5.0),
    ("Install", "install", 17, 3.0),
    ("Node health after", "health", 20, 6.0),
    ("Collect", "report", 26, 2.0),
    ("Remove the ssh key", "report", 28, 1.0),
    ("Report", "report", 29, 0.5),
]
# (host, start, end) of steps: n1 and n2 overlap in the preflight ([3, 8] s: 5 s busy), one step
# spans the end of preflight and the start of health ([11, 13] s: 1 s of each), then 1 s of
# health before and 2.5 s of health after.
STEPS = [("n1", 3, 6), ("n2", 4, 8), ("n1", 11, 13), ("n2", 13, 14), ("n1", 21, 23.5)]


# (host, start, end), or (host, start, end, step name)
Steps = Sequence[tuple[Any, ...]]


def write_run(reports: Path, name: str, nodes: int, gpus: int, plays: Plays, steps: Steps,
              tags: tuple[str, ...] = ("all",), skip_tags: tuple[str, ...] = ()
              ) -> Path:  # fmt: skip
    run = reports / name
    for index, (host, start, end, *named) in enumerate(steps):
        folder = run / "raw" / host
        folder.mkdir(parents=True, exist_ok=True)
        step = named[0] if named else f"step{index}"
        sidecar = {"name": step, "started_at": at(start), "ended_at": at(end),
                   "duration_s": end - start, "exit_code": 0}  # fmt: skip
        (folder / f"{step}.meta.json").write_text(json.dumps(sidecar))
    run.mkdir(parents=True, exist_ok=True)
    document = {"schema_version": 1, "tags": list(tags), "skip_tags": list(skip_tags), "plays": [
        {"name": n, "phase": p, "started_at": at(s), "duration_s": d} for n, p, s, d in plays
    ]}  # fmt: skip
    (run / PLAYS_FILE).write_text(json.dumps(document))
    with sqlite3.connect(reports / "history.sqlite") as db:
        if not db.execute("SELECT name FROM sqlite_master WHERE name='runs'").fetchall():
            db.executescript(TABLES)
        db.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, 'pass', NULL, NULL, ?, 1, 0)",
            (name, str(run), at(0), at(60), nodes),
        )
        for host in range(nodes):
            db.execute("INSERT INTO hosts VALUES (?, ?, 'pass', 'H100', ?, NULL, NULL)",
                       (name, f"n{host + 1}", gpus))  # fmt: skip
    return run


@pytest.fixture
def history(tmp_path: Path) -> Path:
    write_run(tmp_path, "a", 2, 8, PLAYS, STEPS)
    # The same shape again: its preflight took 8 s with no step at all.
    write_run(tmp_path, "b", 2, 8, [("Start the run", "start", 0, 1.0),
                                    ("Preflight", "preflight", 1, 8.0)], [])  # fmt: skip
    write_run(tmp_path, "c", 3, 8, PLAYS, [])  # three nodes: not this plan's
    write_run(tmp_path, "d", 2, 4, PLAYS, [])  # four GPUs a node: not this plan's
    # --tags: every play starts, but plays only its tagged tasks (and argument checks).
    write_run(tmp_path, "e", 2, 8, PLAYS, [], tags=("preflight",))
    # --skip-tags install: the install play ran its argument checks alone, 0.25 s.
    write_run(tmp_path, "f", 2, 8, [("Install", "install", 0, 0.25)], [], skip_tags=("install",))
    return tmp_path / "history.sqlite"


def test_each_phase_is_its_plays_less_the_time_a_step_ran(history: Path) -> None:
    learned = measured_phase_overheads(history, 8, 2)
    assert {key: sorted(seconds) for key, seconds in learned.items()} == {
        ("start", 0): [1.0, 2.0],
        ("preflight", 0): [10.0 - 6.0, 8.0],
        ("health", 0): [5.0 - 2.0],
        ("install", 0): [3.0],
        ("health", 1): [6.0 - 2.5],
        ("report", 0): [3.5],
    }


def test_the_plan_takes_the_median_and_the_setup_steps_are_within_it(history: Path) -> None:
    shape = plan_model.Shape(("n1", "n2"), 8, 0, controller_cores=2)
    default = duration.estimate(shape, DEFAULTS, {})
    learned = duration.estimate_from_history(shape, DEFAULTS, history)
    ansible = [(p.name, p.steps[0].each_s, p.steps[0].source) for p in learned.phases
               if p.steps and p.steps[0].source != "default"]  # fmt: skip
    assert all(p.steps[0].key == "phase-overhead" for p in learned.phases if p.steps)
    assert ansible == [
        ("start", 1.5, "history: median of 2"),
        ("preflight", 6.0, "history: median of 2"),
        ("health", 3.0, "history: median of 1"),
        ("install", 3.0, "history: median of 1"),
        ("health", 3.5, "history: median of 1"),  # the second health phase: its own
        ("report", 3.5, "history: median of 1"),
    ]
    install = next(p for p in learned.phases if p.name == "install")
    assert [(s.key, s.each_s, s.source) for s in install.steps[1:]] == [
        ("install", 0.0, "history: in Ansible's own time")
    ]
    build = next(p for p in learned.phases if p.name == "build")  # no run kept a build play
    assert build == next(p for p in default.phases if p.name == "build")
    assert "phase-overhead" in learned.defaults_used  # build and the rest still use it


def test_busy_time_counts_concurrent_steps_once_and_only_inside_the_window() -> None:
    intervals = [(T0 + timedelta(seconds=a), T0 + timedelta(seconds=b)) for _, a, b in STEPS]
    # [3, 8] + [11, 14] + [21, 23.5]
    assert busy_seconds(intervals) == 5.0 + 3.0 + 2.5
    # the preflight's window, [2, 12]: [3, 8] and [11, 12]
    assert busy_seconds(intervals, T0 + timedelta(seconds=2), T0 + timedelta(seconds=12)) == 6.0
    assert busy_seconds([]) == 0.0


def iperf3(round_: int, a: str, b: str, there: tuple[float, float], back: tuple[float, float],
           attempt: int = 1) -> list[tuple[str, float, float, str]]:  # fmt: skip
    """A pair's two iperf3 steps, both on its first host: a->b, then b->a."""
    return [(a, *there, f"pair-iperf3-r{round_}-{a}--{b}-try{attempt}"),
            (a, *back, f"pair-iperf3-r{round_}-{b}--{a}-try{attempt}")]  # fmt: skip


# Four nodes, all pairs, the pairs of a round at once. Round 1 is busy [10, 14.2] and
# [14.5, 18.4] (8.1 s) and round 2 starts 11 s after it: 2.9 s of Ansible; round 2 is busy
# [21, 25.1] and [25.4, 29.2] (7.9 s), round 3 starts 11 s after it: 3.1 s. Round 3 is the last:
# what follows it (the health after) is no round's.
PARALLEL = [
    *iperf3(1, "n1", "n4", (10, 14), (14.5, 18)),
    *iperf3(1, "n2", "n3", (10.2, 14.2), (14.6, 18.4)),
    *iperf3(2, "n1", "n3", (21, 25), (25.5, 29)),
    *iperf3(2, "n4", "n2", (21.3, 25.1), (25.4, 29.2)),
    *iperf3(3, "n1", "n2", (32, 36), (36.5, 40)),
    *iperf3(3, "n3", "n4", (32.1, 36), (36.4, 40.1)),
    ("n1", 45, 46, "health-kernel-log-after"),
]
# The same nodes, one pair after another: each pair's try is a round of two hosts. 5 s from the
# first to the second, 4 s busy: 1 s; 5.5 s to the third, 4 s busy: 1.5 s. The second node's
# side (a peer- step) is the pair's own.
SEQUENTIAL = [
    *iperf3(1, "n1", "n4", (0, 2), (2, 4)), ("n4", 1, 2, "peer-allreduce-r1-n1--n4-try1"),
    *iperf3(1, "n2", "n3", (5, 7), (7, 9)), *iperf3(2, "n1", "n3", (10.5, 12.5), (12.5, 14.5)),
]  # fmt: skip
# Staged: the screen's all-nodes test, a round of pairs [8, 12], a group test starting at 14,
# a round [20, 24], another 7 s after it: 3 s; the first round's time holds the group test's
# Ansible too, and is left out.
STAGED = [
    ("n1", 0, 5, steps.group_allreduce(1)), *iperf3(1, "n1", "n2", (8, 10), (10, 12)),
    ("n1", 14, 16, steps.group_allreduce(2)), *iperf3(2, "n1", "n3", (20, 22), (22, 24)),
    *iperf3(3, "n1", "n4", (27, 29), (29, 30)),
]  # fmt: skip


@pytest.fixture
def rounds_history(tmp_path: Path) -> Path:
    write_run(tmp_path, "parallel", 4, 8, [], PARALLEL)
    write_run(tmp_path, "sequential", 4, 8, [], SEQUENTIAL)
    write_run(tmp_path, "staged", 4, 8, [], STAGED)
    write_run(tmp_path, "three", 3, 8, [], PARALLEL)  # three nodes: not this plan's
    return tmp_path / "history.sqlite"


def test_a_round_of_pairs_is_its_time_to_the_next_less_the_time_its_steps_ran(
    rounds_history: Path,
) -> None:
    learned = measured_round_overheads(rounds_history, 8, 4)
    assert {
        tested: sorted(round(s, 6) for s in seconds) for tested, seconds in learned.items()
    } == {
        4: [2.9, 3.1],
        2: [1.0, 1.5, 3.0],
    }


def test_the_plan_prices_each_round_of_as_many_hosts_at_the_median_learned(
    rounds_history: Path,
) -> None:
    shape = plan_model.Shape(("n1", "n2", "n3", "n4"), 8, 0, controller_cores=2)
    learned = duration.estimate_from_history(shape, DEFAULTS, rounds_history)
    pairs = next(p for p in learned.phases if p.name == "pairs")
    ansible = [(s.key, s.count, round(s.each_s, 6), s.source) for s in pairs.steps[1:]
               if not s.key.startswith("pair-")]  # fmt: skip
    # three rounds of the four hosts at once, the controller's share within what was learned
    assert ansible == [("round-overhead", 3, 3.0, "history: median of 2 round(s)")]
    one_at_a_time = duration.estimate_from_history(
        shape, {**DEFAULTS, "bench_pairs_parallel": False}, rounds_history
    )
    pairs = next(p for p in one_at_a_time.phases if p.name == "pairs")
    assert [(s.count, s.each_s) for s in pairs.steps if s.key == "round-overhead"] == [
        (6, 1.5)  # six pairs, the median of 1, 1.5 and 3 s
    ]


def test_a_plays_file_that_cannot_be_read_teaches_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert read_play_times(run).plays == []
    good = {"name": "Preflight", "phase": "preflight", "started_at": at(0), "duration_s": 4}
    for text in ("{", "[]", '{"schema_version": 2, "plays": []}', '{"schema_version": 1}',
                 json.dumps({"schema_version": 1, "tags": "all", "skip_tags": [],
                             "plays": [good]})):  # fmt: skip
        (run / PLAYS_FILE).write_text(text)
        assert read_play_times(run).plays == []
    bad = {**good, "duration_s": -1}
    (run / PLAYS_FILE).write_text(json.dumps({
        "schema_version": 1, "tags": [], "skip_tags": ["install"],
        "plays": [good, bad, {**good, "phase": "health"}],
    }))  # fmt: skip
    # the list ends at the first play it cannot read: a later phase's occurrence would be wrong
    recorded = read_play_times(run)
    assert recorded.plays == [PlayTime("Preflight", "preflight", at(0), 4.0)]
    assert (recorded.tags, recorded.skip_tags) == (("all",), ("install",))


def test_a_start_time_without_its_offset_ends_the_windows() -> None:
    plays = [PlayTime("Preflight", "preflight", at(0), 4.0),
             PlayTime("Health", "health", "2026-11-20T10:00:04", 1.0)]  # fmt: skip
    assert [(w.phase, w.duration_s) for w in phase_windows(plays)] == [("preflight", 4.0)]


CALLBACK = runpy.run_path(str(ROOT / "plugins/callback/gpuval_play_times.py"))


def play(name: str, phase: str | None) -> Any:
    variables = {} if phase is None else {"gpuval_plan_phase": phase}
    return SimpleNamespace(vars=variables, get_name=lambda: name)


def run_folder_made(run_dir: Path, created: list[str]) -> Any:
    task = SimpleNamespace(action="gpuval.cluster.gpuval_run_folder")
    return SimpleNamespace(_task=task, _result={"run_dir": str(run_dir), "created": created})


def test_the_callback_keeps_the_plays_of_a_runs_first_start(tmp_path: Path) -> None:
    callback = CALLBACK["CallbackModule"]()
    callback.v2_playbook_on_play_start(play("Start the run", "start"))
    callback.v2_runner_on_ok(run_folder_made(tmp_path, [str(tmp_path / "run.json")]))
    callback.v2_playbook_on_play_start(play("The run's Slurm allocation", None))
    callback.v2_playbook_on_play_start(play("Preflight", "preflight"))
    callback.v2_playbook_on_stats(None)
    recorded = read_play_times(tmp_path)
    assert (recorded.tags, recorded.skip_tags) == (("all",), ())
    plays = recorded.plays
    assert [(p.name, p.phase) for p in plays] == [("Start the run", "start"),
                                                  ("Preflight", "preflight")]  # fmt: skip
    assert all(p.duration_s >= 0 for p in plays)
    assert [w.phase for w in phase_windows(plays)] == ["start", "preflight"]


def test_a_start_again_under_the_same_run_id_keeps_the_first_starts_times(tmp_path: Path) -> None:
    callback = CALLBACK["CallbackModule"]()
    callback.v2_playbook_on_play_start(play("Start the run", "start"))
    callback.v2_runner_on_ok(run_folder_made(tmp_path, []))  # run.json was there
    callback.v2_playbook_on_stats(None)
    assert not (tmp_path / PLAYS_FILE).exists()
