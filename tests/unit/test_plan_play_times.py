"""gpuval plan learns Ansible's own time per phase from earlier runs: each phase's play times
(plays.json, written by the gpuval_play_times callback) less the seconds a step of some node was
running (its sidecars). The expected seconds are worked out by hand from the times written here."""

from __future__ import annotations

import json
import runpy
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpuval.history.store import TABLES
from gpuval.plan import duration, inputs, plan_model
from gpuval.plan.play_times import PLAYS_FILE, PlayTime, phase_windows, read_play_times
from gpuval.plan.step_history import busy_seconds, measured_phase_overheads

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


def write_run(reports: Path, name: str, nodes: int, gpus: int, plays: Plays,
              steps: list[tuple[str, float, float]], tags: tuple[str, ...] = ("all",),
              skip_tags: tuple[str, ...] = ()) -> Path:  # fmt: skip
    run = reports / name
    for index, (host, start, end) in enumerate(steps):
        folder = run / "raw" / host
        folder.mkdir(parents=True, exist_ok=True)
        sidecar = {"name": f"step{index}", "started_at": at(start), "ended_at": at(end),
                   "duration_s": end - start, "exit_code": 0}  # fmt: skip
        (folder / f"step{index}.meta.json").write_text(json.dumps(sidecar))
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
