"""Live progress of `gpuval run` from ansible-runner's events: the phase (from the role that is
running), host, step, elapsed time and a bar over the steps run.json expects.

A step is done when a task's result names its sidecar (`gpuval_capture` returns `sidecar_path`,
several steps in one call return `results` with a `name` each): captured, skipped with a reason
or timed out alike, since each leaves its evidence. Lines are printed when a phase starts, a step
is done and a host fails or cannot be reached; on a terminal a status line below them shows the
task running now and the elapsed time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

# The phase a role's tasks belong to (playbooks/benchmark.yml's tags).
PHASE_OF_ROLE = {
    "run_context": "start",
    "preflight": "preflight",
    "cuda": "install",
    "nccl": "install",
    "openmpi": "install",
    "nccl_tests": "build",
    "cuda_samples": "build",
    "bench_intranode": "intranode",
    "mpi_preflight": "mpi-preflight",
    "bench_internode": "internode",
    "bench_pairs": "pairs",
    "health": "health",
    "collect": "collect",
    "report": "report",
}
SIDECAR_SUFFIX = ".meta.json"
DONE_EVENTS = ("runner_on_ok", "runner_item_on_ok", "runner_on_failed", "runner_item_on_failed")
BAR_WIDTH = 24
MAX_MESSAGE = 160


def clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes:02d}:{seconds:02d}"


def steps_in_result(result: Any) -> list[str]:
    """The step names a task result reports done (its sidecars)."""
    if not isinstance(result, dict):
        return []
    found = []
    sidecar = result.get("sidecar_path")
    if isinstance(sidecar, str) and sidecar.endswith(SIDECAR_SUFFIX):
        found.append(Path(sidecar).name[: -len(SIDECAR_SUFFIX)])
    elif isinstance(result.get("name"), str) and "rc" in result:
        found.append(result["name"])
    for item in result.get("results") or []:
        found += steps_in_result(item)
    return found


@dataclass
class Progress:
    """Follows the events of one playbook run and prints what a person watching needs."""

    run_json: Path
    out: TextIO
    interactive: bool  # a terminal: keep a status line up to date below the printed lines
    started: float = field(default_factory=time.monotonic)
    expected: dict[str, set[str]] = field(default_factory=dict)  # host -> steps
    done: set[tuple[str, str]] = field(default_factory=set)
    phase: str = ""
    play: str = ""
    play_phase: str = ""
    task: str = ""
    task_phase: str = ""  # the phase of the running task's role (a nested role: its own)
    host: str = ""
    playbook_pid: int | None = None
    failures: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _status_shown: bool = False

    # ---------------------------------------------------------------- what is known

    def _load_expected(self) -> None:
        if self.expected or not self.run_json.is_file():
            return
        try:
            document = json.loads(self.run_json.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # being written: read at a later event
        expected = document.get("expected") if isinstance(document, dict) else None
        if isinstance(expected, dict):
            self.expected = {str(h): {str(s) for s in steps} for h, steps in expected.items()}

    @property
    def total(self) -> int:
        return sum(len(steps) for steps in self.expected.values())

    def bar(self) -> str:
        total = self.total
        if not total:
            return f"[{'?' * BAR_WIDTH}] steps: run.json not read yet"
        done = len(self.done)
        filled = round(BAR_WIDTH * done / total)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        return f"[{bar}] {done}/{total} steps {100 * done / total:3.0f} %"

    def _mark_done(self, host: str, step: str) -> bool:
        if step in self.expected.get(host, ()):
            key = (host, step)
        else:  # a step run on the host's behalf (delegated): the one host that expects it
            owners = [h for h, steps in self.expected.items() if step in steps]
            if len(owners) != 1:
                return False
            key = (owners[0], step)
        if key in self.done:
            return False
        self.done.add(key)
        return True

    # ---------------------------------------------------------------------- printing

    def _line(self, text: str) -> None:
        if self._status_shown:
            self.out.write("\r\033[K")
            self._status_shown = False
        self.out.write(text + "\n")
        self._status()

    def _status(self) -> None:
        if not self.interactive:
            self.out.flush()
            return
        elapsed = clock(time.monotonic() - self.started)
        where = " ".join(part for part in (self.phase, self.host, self.task) if part)
        self.out.write(f"\r\033[K{self.bar()}  {elapsed}  {where}"[:200])
        self._status_shown = True
        self.out.flush()

    def tick(self) -> None:
        """Redraw the status line (a terminal's clock between events)."""
        with self._lock:
            self._status()

    def finish(self) -> None:
        with self._lock:
            if self._status_shown:
                self.out.write("\r\033[K")
                self._status_shown = False
            missing = self.total - len(self.done)
            elapsed = clock(time.monotonic() - self.started)
            summary = f"{self.bar()}  {elapsed}  playbook ended"
            if self.total and missing:
                summary += f"; {missing} expected step(s) left no result"
            self.out.write(summary + "\n")
            self.out.flush()

    # ----------------------------------------------------------------------- events

    def on_event(self, event: dict[str, Any]) -> bool:
        """ansible-runner's event_handler: True keeps the event in the artifacts."""
        with self._lock:
            self._follow(event)
        return True

    def _follow(self, event: dict[str, Any]) -> None:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if self.playbook_pid is None and isinstance(event.get("pid"), int):
            self.playbook_pid = event["pid"]
        self._load_expected()
        if kind == "playbook_on_play_start":
            self.play, self.play_phase = str(data.get("play") or ""), ""
        elif kind == "playbook_on_task_start":
            checking = str(data.get("task_action") or "").endswith("validate_argument_spec")
            # A play's phase is its first role's (collect runs inside pairs); roles check their
            # arguments even when --tags leaves their phase out (those tasks are tagged always),
            # and a phase's own tasks before its role (leaving out a failed node) have none.
            role = str(data.get("role") or "")
            if not self.play_phase and not checking and role:
                self.play_phase = PHASE_OF_ROLE.get(role) or role
                if self.play_phase != self.phase:
                    self.phase = self.play_phase
                    self._line(f"{clock(time.monotonic() - self.started)}  phase {self.phase}")
            self.task = str(data.get("task") or "")
            self.task_phase = PHASE_OF_ROLE.get(str(data.get("role") or "")) or self.phase
            self.host = ""
            self._status()
        elif kind == "runner_on_start":
            self.host = str(data.get("host") or "")
            self._status()
        elif kind in DONE_EVENTS:
            host = str(data.get("host") or "")
            for step in steps_in_result(data.get("res")):
                if self._mark_done(host, step):
                    elapsed = clock(time.monotonic() - self.started)
                    self._line(f"{self.bar()}  {elapsed}  {self.phase}  {host}  {step}")
            if kind == "runner_on_failed" and not data.get("ignore_errors"):
                self._failure(host, "failed", data.get("res"))
        elif kind == "runner_on_unreachable":
            self._failure(str(data.get("host") or ""), "unreachable", data.get("res"))

    def _failure(self, host: str, what: str, result: Any) -> None:
        message = result.get("msg") if isinstance(result, dict) else None
        text = " ".join(str(message or "").split())[:MAX_MESSAGE]
        line = f"{host} {what.upper()} in {self.phase} ({self.task})" + (
            f": {text}" if text else ""
        )
        self.failures.append(line)
        self._line(f"{clock(time.monotonic() - self.started)}  {line}")


def ticking(progress: Progress, every_s: float = 1.0) -> Callable[[], None]:
    """Redraw the status line every second on a terminal; the returned function stops it."""
    if not progress.interactive:
        return lambda: None
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            progress.tick()

    thread = threading.Thread(target=loop, name="gpuval-progress", daemon=True)
    thread.start()
    return stop.set
