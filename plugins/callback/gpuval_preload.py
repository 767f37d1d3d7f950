# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Callback gpuval_preload: import what gpuval's action plugins need once, before any task."""

from __future__ import annotations

from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
---
name: gpuval_preload
type: notification
short_description: Import gpuval once in ansible-playbook's main process
description:
  - ansible-playbook forks a worker for every task and host, and gpuval's action plugins run
    there; each worker imported gpuval's parsers and planners anew. This callback imports them
    once at the start (C(gpuval.plugin_api.preload)), so every worker forked later has them.
  - It changes no output. Where gpuval, or a part of it, cannot be imported it stops there;
    the action plugins then say why when they run.
  - Enabled in the repository's ansible.cfg; from the collection, add
    C(gpuval.cluster.gpuval_preload) to ANSIBLE_CALLBACKS_ENABLED.
requirements:
  - enable in configuration
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "gpuval_preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only a saving: a gpuval that cannot be imported, whole or in part, is the action
        # plugins' to report when they run, never a reason for the run not to start.
        try:
            from gpuval.plugin_api import preload

            preload()
        except ImportError:
            return
