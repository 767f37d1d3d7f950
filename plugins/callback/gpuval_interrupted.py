# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Callback gpuval_interrupted: after Ctrl-C, collect what the nodes hold and render the report."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from ansible import context
from ansible.executor.playbook_executor import PlaybookExecutor
from ansible.executor.process.worker import WorkerProcess
from ansible.executor.task_queue_manager import FinalQueue, TaskQueueManager
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import PluginLoader
from ansible.utils.context_objects import CLIArgs

DOCUMENTATION = r"""
---
name: gpuval_interrupted
type: notification
short_description: A gpuval run that is interrupted still collects and reports
description:
  - When Ctrl-C stops a play of a run that has a run id (gpuval_run_id, set by run_context) and
    has not begun its report, runs C(finish.yml) beside the playbook (the collect and report
    phases) in the same process, with the same inventory, variables and facts, before the
    interruption ends ansible-playbook. The exit status stays that of an interrupted run (99).
  - Enabled in the repository's ansible.cfg; from the collection, set
    C(ANSIBLE_CALLBACKS_ENABLED=gpuval.cluster.gpuval_interrupted).
requirements:
  - enable in configuration
"""

FINISH_PLAYBOOK = "finish.yml"
REPORT_TAG = "report"
# One finish at a time: a second Ctrl-C during it ends the process.
FINISHING: list[str] = []


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "gpuval_interrupted"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._playbook_file: str | None = None
        self._play: Any = None
        self._ended = False
        _watch_for_interruption(self)
        _closed_workers_are_not_alive()
        _results_are_sent_whole()
        _forks_hold_interruptions()
        _interrupted_plugin_imports_are_forgotten()
        _workers_stopped_by_ctrl_c_are_an_interruption()

    def v2_playbook_on_start(self, playbook: Any) -> None:
        self._playbook_file = playbook._file_name

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._play = play
        # Interrupted while reporting: the report is what was being made, do not start again.
        self._ended = self._ended or REPORT_TAG in (play.tags or [])

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._ended = True

    def finish_after_interruption(self) -> None:
        """Collect and report the interrupted run (the finish playbook), once."""
        if self._ended or FINISHING or self._play is None or self._playbook_file is None:
            return
        finish = Path(self._playbook_file).parent / FINISH_PLAYBOOK
        variables = self._play.get_variable_manager()
        run_id = variables._nonpersistent_fact_cache.get("localhost", {}).get("gpuval_run_id")
        if not run_id or not finish.is_file():
            return
        self._ended = True
        self._display.warning(
            f"gpuval: the run stopped before its end; collecting run {run_id} and rendering "
            f"its report ({finish})"
        )
        # Every phase of the finish playbook, whatever --tags the interrupted run had.
        context.CLIARGS = CLIArgs({
            **context.CLIARGS, "tags": ("all",), "skip_tags": (), "start_at_task": None,
            "step": False, "listtasks": False, "listtags": False, "listhosts": False,
            "syntax": False,
        })  # fmt: skip
        FINISHING.append(run_id)
        PlaybookExecutor(
            playbooks=[str(finish)],
            inventory=variables._inventory,
            variable_manager=variables,
            loader=self._play._loader,
            passwords={},
        ).run()


def _watch_for_interruption(callback: CallbackModule) -> None:
    """Make every play's run hand a Ctrl-C to the callback first (the play's own clean-up has
    run by then); the newest callback is the one asked."""
    run = getattr(TaskQueueManager.run, "gpuval_original", TaskQueueManager.run)

    def run_then_finish(manager: TaskQueueManager, play: Any) -> Any:
        try:
            return run(manager, play)
        except KeyboardInterrupt:
            callback.finish_after_interruption()
            raise

    run_then_finish.gpuval_original = run  # type: ignore[attr-defined]
    TaskQueueManager.run = run_then_finish


def _closed_workers_are_not_alive() -> None:
    """ansible-core's strategy closes a finished worker's process object before its successor
    takes the slot; a Ctrl-C between the two had the signal handler and the clean-up ask the
    closed object is_alive(), which raises ValueError: the run ended in a traceback, neither
    collected nor reported. A closed process is not alive."""
    is_alive = getattr(WorkerProcess.is_alive, "gpuval_original", WorkerProcess.is_alive)

    def is_alive_unless_closed(worker: WorkerProcess) -> bool:
        try:
            return bool(is_alive(worker))
        except ValueError:  # "process object is closed"
            return False

    is_alive_unless_closed.gpuval_original = is_alive  # type: ignore[attr-defined]
    WorkerProcess.is_alive = is_alive_unless_closed


def _results_are_sent_whole() -> None:
    """On Ctrl-C ansible-core signals every worker, whose handler ends it with os._exit at once.
    A worker signalled while it wrote a result to the results queue died holding the queue's
    lock: the play's clean-up then waited forever to write to it, and the run hung, neither
    collected nor reported. A put now holds SIGINT and SIGTERM until the result is written; the
    signal ends the worker right after."""
    put = getattr(FinalQueue.put, "gpuval_original", FinalQueue.put)
    held = {signal.SIGINT, signal.SIGTERM}

    def put_whole(queue: FinalQueue, obj: Any) -> None:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            put(queue, obj)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)

    put_whole.gpuval_original = put  # type: ignore[attr-defined]
    FinalQueue.put = put_whole


def _forks_hold_interruptions() -> None:
    """A Ctrl-C while ansible-core forked a worker ran its signal handler inside the fork's
    after-fork hooks (logging's lock release), where the KeyboardInterrupt it raises is printed
    as ignored and lost: the workers were told to stop, but the play went on, found one dead
    and ended in an error (exit 1), neither collected nor reported. The fork now holds SIGINT
    and SIGTERM: the play takes them as it returns, the worker once its own handlers are set."""
    held = {signal.SIGINT, signal.SIGTERM}
    start = getattr(WorkerProcess.start, "gpuval_original", WorkerProcess.start)
    run = getattr(WorkerProcess._run, "gpuval_original", WorkerProcess._run)

    def start_holding(worker: WorkerProcess) -> None:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            start(worker)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)

    def run_letting_in(worker: WorkerProcess) -> Any:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
        return run(worker)

    start_holding.gpuval_original = start  # type: ignore[attr-defined]
    run_letting_in.gpuval_original = run  # type: ignore[attr-defined]
    WorkerProcess.start = start_holding
    WorkerProcess._run = run_letting_in


def _interrupted_plugin_imports_are_forgotten() -> None:
    """ansible-core removes a plugin whose import failed from sys.modules on Exception, not on
    KeyboardInterrupt: a Ctrl-C during an action plugin's import left the half-run module there,
    and the finish playbook's task then failed with "no attribute 'ActionModule'", neither
    collected nor reported. Such a module is now forgotten and imported again when asked."""
    load = getattr(
        PluginLoader._load_module_source, "gpuval_original", PluginLoader._load_module_source
    )

    def load_or_forget(loader: PluginLoader, *, python_module_name: str, path: str) -> Any:
        try:
            return load(loader, python_module_name=python_module_name, path=path)
        except KeyboardInterrupt:
            sys.modules.pop(python_module_name, None)
            raise

    load_or_forget.gpuval_original = load  # type: ignore[attr-defined]
    PluginLoader._load_module_source = load_or_forget


def _workers_stopped_by_ctrl_c_are_an_interruption() -> None:
    """ansible-core's Ctrl-C handler sets SIGINT back to its default, tells every worker to stop,
    then raises KeyboardInterrupt. Landing where Python prints an exception as ignored and drops
    it (a weak reference's callback, run by the garbage collector), the interruption was lost:
    the play went on, found the stopped workers and ended in "A worker was found in a dead
    state" (exit 1), neither collected nor reported. Dead workers found while SIGINT is left at
    its default are the Ctrl-C's: an interruption."""
    has_dead_workers = getattr(
        TaskQueueManager.has_dead_workers, "gpuval_original", TaskQueueManager.has_dead_workers
    )

    def dead_or_interrupted(manager: TaskQueueManager) -> bool:
        dead = bool(has_dead_workers(manager))
        if dead and signal.getsignal(signal.SIGINT) is signal.SIG_DFL:
            raise KeyboardInterrupt
        return dead

    dead_or_interrupted.gpuval_original = has_dead_workers  # type: ignore[attr-defined]
    TaskQueueManager.has_dead_workers = dead_or_interrupted
