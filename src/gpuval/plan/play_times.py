"""How long each phase's plays took, on the controller's clock, kept in the run folder (plays.json)
so that later plans learn Ansible's own time per phase from it (gpuval.plan.step_history).

The gpuval_play_times callback times every play of a run's first start whose play names its
phase (PHASE_VAR, set in playbooks/phases/*.yml) and rewrites plays.json after each play, whole,
with the run's --tags and --skip-tags: a phase they leave out, or cut short, took no time of its
own in that run.
The plays of one phase next to each other are one phase of the plan (the report phase is the
collect, the ssh clean-up and the report); a phase that comes back later (health, after the
benchmarks) is the phase's next occurrence, as in the plan.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

PLAYS_FILE = "plays.json"
PHASE_VAR = "gpuval_plan_phase"  # a play's variable: the phase of the plan it belongs to
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class PlayTime:
    name: str
    phase: str
    started_at: str  # ISO 8601 with its UTC offset, the controller's clock
    duration_s: float


@dataclass(frozen=True)
class PhaseWindow:
    """The time one occurrence of a phase took: from its first play's start, `duration_s` long."""

    phase: str
    occurrence: int  # 0: the phase's first in the run, 1: its second (health after), ...
    start: datetime
    duration_s: float

    @property
    def end(self) -> datetime:
        return self.start + timedelta(seconds=self.duration_s)


@dataclass(frozen=True)
class RecordedPlays:
    """What plays.json holds: the plays in order, and the tags the run was started with."""

    plays: list[PlayTime]
    tags: tuple[str, ...] = ("all",)
    skip_tags: tuple[str, ...] = ()


def plays_document(recorded: RecordedPlays) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "tags": list(recorded.tags),
        "skip_tags": list(recorded.skip_tags),
        "plays": [asdict(play) for play in recorded.plays],
    }


def _words(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not all(isinstance(word, str) for word in value):
        return None
    return tuple(value)


def _play(item: Any) -> PlayTime | None:
    if not isinstance(item, dict):
        return None
    name, phase, started = item.get("name"), item.get("phase"), item.get("started_at")
    seconds = item.get("duration_s")
    if not (isinstance(name, str) and isinstance(phase, str) and isinstance(started, str)):
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        return None
    return PlayTime(name, phase, started, float(seconds))


def read_play_times(run_dir: Path) -> RecordedPlays:
    """What run_dir/plays.json holds; no plays where it is missing or not of this schema (a
    plan then learns nothing from the run). A play it cannot read ends the list: the phases
    after a gap would be taken for the wrong occurrences."""
    nothing = RecordedPlays([])
    path = run_dir / PLAYS_FILE
    try:
        if path.is_symlink():
            return nothing
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return nothing
    if not isinstance(document, dict) or document.get("schema_version") != SCHEMA_VERSION:
        return nothing
    tags, skip_tags = _words(document.get("tags")), _words(document.get("skip_tags"))
    if tags is None or skip_tags is None:
        return nothing
    items = document.get("plays")
    plays: list[PlayTime] = []
    for item in items if isinstance(items, list) else []:
        play = _play(item)
        if play is None:
            break
        plays.append(play)
    return RecordedPlays(plays, tags or ("all",), skip_tags)


def instant(text: str) -> datetime | None:
    """An ISO 8601 time with its UTC offset (a trailing Z, as sidecars write it, included);
    None for any other text."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def phase_windows(plays: list[PlayTime]) -> list[PhaseWindow]:
    """The plays of one phase next to each other joined into one window, each phase's windows
    numbered in order. A play with no readable start time ends the list."""
    windows: list[PhaseWindow] = []
    seen: dict[str, int] = {}
    for play in plays:
        start = instant(play.started_at)
        if start is None:
            break
        if windows and windows[-1].phase == play.phase:
            last = windows[-1]
            windows[-1] = PhaseWindow(
                last.phase, last.occurrence, last.start, last.duration_s + play.duration_s
            )
            continue
        windows.append(PhaseWindow(play.phase, seen.get(play.phase, 0), start, play.duration_s))
        seen[play.phase] = seen.get(play.phase, 0) + 1
    return windows
