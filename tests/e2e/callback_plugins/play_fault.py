"""Ansible callback for the tests: a fault at a chosen moment of a run. When the first play whose
name starts with $GPUVAL_FAULT_AT_PLAY starts, it runs the command in $GPUVAL_FAULT_COMMAND (a
JSON list, e.g. `python -m tests.simhosts drop --state-dir DIR node2`), once, before the play's
first task (enable with ANSIBLE_CALLBACKS_ENABLED=play_fault)."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "play_fault"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.done = False

    def v2_playbook_on_play_start(self, play: Any) -> None:
        prefix = os.environ.get("GPUVAL_FAULT_AT_PLAY")
        if self.done or not prefix or not play.get_name().startswith(prefix):
            return
        self.done = True
        command = json.loads(os.environ["GPUVAL_FAULT_COMMAND"])
        self._display.display(f"play_fault: {' '.join(command)}")
        subprocess.run(command, check=True)
