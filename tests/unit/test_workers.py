"""Work spread over forked processes (gpuval.files.workers): each result comes back where it is
asked for, from another process; what a worker raises is raised there; with one task or one
core, the work runs here. `with_inherited` hands every worker an object it never pickles."""

from __future__ import annotations

import os
import threading

import pytest

from gpuval.files import workers
from gpuval.files.workers import usable_cores, with_inherited, worker_pool

needs_two_cores = pytest.mark.skipif(
    usable_cores() < 2, reason="forks only with two usable cores or more"
)


def pid_and_square(number: int) -> tuple[int, int]:
    return os.getpid(), number * number


def refuse(number: int) -> int:
    raise ValueError(f"no {number}")


class Unpicklable:
    """A lock cannot be pickled: an object holding one reaches a worker only by inheritance."""

    def __init__(self, base: int) -> None:
        self.base, self.lock = base, threading.Lock()


def pid_and_sum(shared: Unpicklable, number: int) -> tuple[int, int]:
    return os.getpid(), shared.base + number


def refuse_shared(shared: Unpicklable, number: int) -> int:
    raise ValueError(f"no {shared.base + number}")


@needs_two_cores
def test_a_pool_gives_each_result_in_order_from_other_processes() -> None:
    with worker_pool(40) as pool:
        futures = [pool.submit(pid_and_square, n) for n in range(40)]
        results = [f.result() for f in futures]
    assert [square for _, square in results] == [n * n for n in range(40)]
    assert os.getpid() not in {pid for pid, _ in results}


def test_one_task_runs_here() -> None:
    with worker_pool(1) as pool:
        assert pool.submit(pid_and_square, 3).result() == (os.getpid(), 9)


@pytest.mark.parametrize("tasks", [1, 4])
def test_what_a_task_raises_is_raised_where_its_result_is_asked_for(tasks: int) -> None:
    with worker_pool(tasks) as pool:
        future = pool.submit(refuse, 7)
        with pytest.raises(ValueError, match="no 7"):
            future.result()


def test_one_usable_core_means_no_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workers, "usable_cores", lambda: 1)
    with worker_pool(8) as pool:
        assert pool.submit(pid_and_square, 2).result() == (os.getpid(), 4)


@needs_two_cores
def test_with_inherited_gives_each_result_in_order_from_workers_that_inherit_the_object() -> None:
    results = with_inherited(pid_and_sum, Unpicklable(100), list(range(6)))
    assert [total for _, total in results] == [100, 101, 102, 103, 104, 105]
    assert os.getpid() not in {pid for pid, _ in results}


def test_with_inherited_without_fork_runs_here() -> None:
    assert with_inherited(pid_and_sum, Unpicklable(1), [2, 3], fork=False) == [
        (os.getpid(), 3), (os.getpid(), 4)
    ]  # fmt: skip


@pytest.mark.parametrize("fork", [True, False])
def test_what_with_inherited_raises_is_raised_here_and_leaves_nothing_behind(fork: bool) -> None:
    with pytest.raises(ValueError, match="no 8"):
        with_inherited(refuse_shared, Unpicklable(1), [7, 2], fork=fork)
    assert workers._inherited is None
    assert with_inherited(pid_and_sum, Unpicklable(5), [1], fork=fork)[0][1] == 6
