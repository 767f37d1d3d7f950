"""Work spread over forked processes (gpuval.files.workers): each result comes back where it is
asked for, from another process; what a worker raises is raised there; with one task or one
core, the work runs here."""

from __future__ import annotations

import os

import pytest

from gpuval.files import workers
from gpuval.files.workers import usable_cores, worker_pool

needs_two_cores = pytest.mark.skipif(
    usable_cores() < 2, reason="forks only with two usable cores or more"
)


def pid_and_square(number: int) -> tuple[int, int]:
    return os.getpid(), number * number


def refuse(number: int) -> int:
    raise ValueError(f"no {number}")


@needs_two_cores
def test_a_pool_gives_each_result_in_order_from_other_processes() -> None:
    with worker_pool(40) as pool:
        futures = [pool.submit(pid_and_square, n) for n in range(40)]
        results = [f.result() for f in futures]
    assert [square for _, square in results] == [n * n for n in range(40)]
    assert os.getpid() not in {pid for pid, _ in results}


@needs_two_cores
def test_a_pool_that_leaves_this_process_a_core_forks_the_others() -> None:
    with worker_pool(40, cores_left=1) as pool:
        futures = [pool.submit(pid_and_square, n) for n in range(40)]
        results = [f.result() for f in futures]
    assert [square for _, square in results] == [n * n for n in range(40)]
    assert os.getpid() not in {pid for pid, _ in results}
    assert len({pid for pid, _ in results}) <= usable_cores() - 1


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
    with worker_pool(8, cores_left=1) as pool:
        assert pool.submit(pid_and_square, 2).result() == (os.getpid(), 4)
