"""Independent pieces of work spread over the controller's cores, in forked processes.

Forked, not spawned: a worker starts with the parent's modules already imported and its memory
shared until written (copy on write), so neither the parsers nor the inputs are sent to it; only
results come back, pickled. Where fork is not offered (Windows; macOS offers it) or only one
core is usable, the work runs in this process, as it is asked for.

Worth it only for large work: a fork and a pickled result cost milliseconds, a thousand nodes'
files tens of seconds of CPU. Callers fork from FORK_FROM_HOSTS hosts on.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

FORK_FROM_HOSTS = 16

_Result = TypeVar("_Result")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not offered on macOS
        return os.cpu_count() or 1


def _can_fork() -> bool:
    return (
        usable_cores() > 1
        and "fork" in multiprocessing.get_all_start_methods()
        # a daemonic process (as some hosts of plugins run) may not start processes of its own
        and not multiprocessing.current_process().daemon
    )


class _HereExecutor(Executor):
    """Runs each task in this process when it is submitted."""

    def submit(self, fn: Callable[..., _Result], /, *args: Any, **kwargs: Any) -> Future[_Result]:
        future: Future[_Result] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as problem:
            future.set_exception(problem)
        return future


@contextmanager
def worker_pool(tasks: int, cores_left: int = 0) -> Iterator[Executor]:
    """An executor for `tasks` tasks: a forked process for each usable core but the
    `cores_left` that this process keeps busy meanwhile (no more processes than tasks), or this
    process when that is all: one task, or one core for all the work. A task's function must be
    importable by name (a module's function) and its arguments and result picklable."""
    workers = min(usable_cores() - cores_left, tasks)
    if workers < 1 or workers + cores_left < 2 or not _can_fork():
        yield _HereExecutor()
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        yield pool
