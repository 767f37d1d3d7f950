# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Callback gpuval_play_times: how long each phase's plays took, kept in the run folder."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ansible.plugins.callback import CallbackBase

if TYPE_CHECKING:
    from gpuval.plan.play_times import PlayTime

DOCUMENTATION = r"""
---
name: gpuval_play_times
type: notification
short_description: Keep each phase's play times in the run folder (plays.json)
description:
  - Times every play that names its phase of the plan (the play variable C(gpuval_plan_phase),
    set in C(playbooks/phases/*.yml)) on the controller's clock, and writes the times to
    C(<run folder>/plays.json) after each play, whole or not at all.
  - With the plays, the run's C(--tags) and C(--skip-tags), since a phase they leave out, or
    cut short, teaches a plan nothing.
  - Only a run's first start is kept, the one that wrote its run.json (C(gpuval_run_folder));
    a start again under the same run id, a report of an existing run, or a playbook without
    a run folder writes nothing.
  - C(gpuval plan) and the plan printed at a run's start read it back from the runs the
    history database lists, to learn Ansible's own time per phase on this controller and
    cluster (C(gpuval.plan.step_history)).
  - Enabled in the repository's ansible.cfg; from the collection, add
    C(gpuval.cluster.gpuval_play_times) to ANSIBLE_CALLBACKS_ENABLED.
requirements:
  - enable in configuration
"""

RUN_FOLDER_ACTION = "gpuval_run_folder"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "gpuval_play_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.run_dir: Path | None = None
        self.plays: list[PlayTime] = []  # the plays that ended
        self.current: tuple[str, str, str, float] | None = None  # name, phase, start, monotonic

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._end_play()
        phase = play.vars.get("gpuval_plan_phase")
        if isinstance(phase, str) and phase and "{" not in phase:
            started = datetime.now(UTC).isoformat(timespec="microseconds")
            self.current = (play.get_name(), phase, started, time.monotonic())

    def v2_runner_on_ok(self, result: Any) -> None:
        if str(result._task.action).rsplit(".", 1)[-1] != RUN_FOLDER_ACTION:
            return
        outcome = result._result
        run_dir = outcome.get("run_dir")
        if isinstance(run_dir, str) and str(Path(run_dir) / "run.json") in outcome.get(
            "created", []
        ):
            self.run_dir = Path(run_dir)

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._end_play()

    def _end_play(self) -> None:
        if self.current is None:
            return
        from ansible import context

        from gpuval.files.atomic import OutputError, json_text, write_output
        from gpuval.plan.play_times import PLAYS_FILE, PlayTime, RecordedPlays, plays_document

        name, phase, started, monotonic_start = self.current
        self.current = None
        seconds = round(time.monotonic() - monotonic_start, 3)
        self.plays.append(PlayTime(name, phase, started, seconds))
        if self.run_dir is None:
            return
        tags = tuple(context.CLIARGS.get("tags") or ("all",))
        recorded = RecordedPlays(self.plays, tags, tuple(context.CLIARGS.get("skip_tags") or ()))
        try:
            # Not synced to disk: a crash loses a later plan's lesson, never a measurement.
            write_output(
                self.run_dir / PLAYS_FILE, json_text(plays_document(recorded)), durable=False
            )
        except OutputError as problem:
            # Only a later plan's lesson is lost: never a reason for the run to stop.
            self._display.warning(f"gpuval_play_times: {problem}")
