"""What a run launched, kept in its run folder (`reports/<run-id>/lambda/state.json`).

Every launched instance id is written before anything else happens to it, so whatever ends the
run (a failure, Ctrl-C, the guard, a later `lambda_teardown.yml`) knows exactly what to terminate.
Writes are atomic (gpuval.files.atomic: a temporary file renamed into place) and serialised by a
lock
file, since the playbook and the guard process may both write.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuval.files.atomic import write_json

STATE_DIR = "lambda"
STATE_FILE = "state.json"


class StateError(ValueError):
    """A state file that cannot be read: names the file and what is wrong."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


@dataclass
class LaunchedInstance:
    id: str
    name: str
    launched_at: str
    ip: str | None = None
    private_ip: str | None = None
    terminated_at: str | None = None
    terminated_by: str | None = None


@dataclass
class RunState:
    run_id: str
    # Instances of this run are named <name_prefix>-<n>; teardown also sweeps that prefix.
    name_prefix: str
    plan: dict[str, Any]
    created_at: str = field(default_factory=now_iso)
    instances: list[LaunchedInstance] = field(default_factory=list)
    # End of the run's time-to-live: the guard and the instances' watchdogs act then.
    deadline: str | None = None
    guard_pid: int | None = None
    # Teardown done: the guard has nothing left to do.
    finished: bool = False
    cost: dict[str, Any] | None = None

    def live(self) -> list[LaunchedInstance]:
        return [i for i in self.instances if i.terminated_at is None]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def state_path(run_dir: Path) -> Path:
    return run_dir / STATE_DIR / STATE_FILE


def _instance(document: Any, where: str) -> LaunchedInstance:
    if not isinstance(document, dict) or not {"id", "name", "launched_at"} <= document.keys():
        raise StateError(f"{where}: an instance needs id, name and launched_at")
    known = LaunchedInstance.__dataclass_fields__.keys()
    return LaunchedInstance(**{k: v for k, v in document.items() if k in known})


def read_state(path: Path) -> RunState:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StateError(f"{path}: no such state file (was anything launched?)") from None
    except (OSError, ValueError) as problem:
        raise StateError(f"{path}: unreadable state file: {problem}") from None
    required = {"run_id", "name_prefix", "plan"}
    if not isinstance(document, dict) or not required <= document.keys():
        raise StateError(f"{path}: not a gpuval state file (needs {', '.join(sorted(required))})")
    known = RunState.__dataclass_fields__.keys()
    fields = {k: v for k, v in document.items() if k in known}
    instances = fields.pop("instances", [])
    if not isinstance(instances, list):
        raise StateError(f"{path}: key 'instances' must be a list")
    state = RunState(**fields)
    state.instances = [
        _instance(entry, f"{path}: instances[{number}]") for number, entry in enumerate(instances)
    ]
    return state


def write_state(path: Path, state: RunState) -> None:
    write_json(path, state.to_dict())


@contextmanager
def state_lock(path: Path) -> Iterator[None]:
    """Exclusive access to the state file between processes (playbook, guard)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Opened without truncating and never through a link: the lock file holds nothing.
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(path.with_name(f".{path.name}.lock"), flags, 0o644), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
