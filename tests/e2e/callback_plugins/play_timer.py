"""Ansible callback for the tests: each play's wall time, written as JSON to the file named by
$GPUVAL_PLAY_TIMES when the playbook ends (enable with ANSIBLE_CALLBACKS_ENABLED=play_timer)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "play_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.plays: list[dict[str, Any]] = []
        self.started = 0.0

    def _close(self) -> None:
        if self.plays and "seconds" not in self.plays[-1]:
            self.plays[-1]["seconds"] = round(time.monotonic() - self.started, 3)

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._close()
        self.started = time.monotonic()
        self.plays.append({"name": play.get_name()})

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._close()
        if target := os.environ.get("GPUVAL_PLAY_TIMES"):
            with open(target, "w", encoding="utf-8") as handle:
                json.dump(self.plays, handle, indent=1)
