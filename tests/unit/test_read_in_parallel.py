"""A run folder of many hosts is parsed in worker processes (gpuval.runfolder with
gpuval.files.workers): what it gives is what reading every host here gives, in the same order;
hosts whose parse cache is of this code are read here, the others shared between this process
(one in every `cores`) and the workers; what the workers parse is kept in the parse cache when
asked."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.bench.report_at_scale import write_run_folder

from gpuval import runfolder
from gpuval.files import workers
from gpuval.files.parse_cache import HostCache
from gpuval.runfolder import read_run_folder, update_parse_cache

HOSTS = workers.FORK_FROM_HOSTS + 2


def forked(to_parse: int) -> int:
    """How many of `to_parse` hosts the workers parse: all but one in every usable core."""
    cores = workers.usable_cores()
    return to_parse - -(-to_parse // cores)


@pytest.fixture(scope="module")
def many_hosts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HOSTS copies of an 8-GPU H100 node's real outputs, a third of them read ahead."""
    run = tmp_path_factory.mktemp("many") / "run"
    write_run_folder(run, HOSTS)
    for host in hosts_of(run)[::3]:
        update_parse_cache(run, host)
    return run


def hosts_of(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "raw").iterdir())


@pytest.fixture
def pool_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of tasks each worker pool was asked for."""
    asked: list[int] = []
    real = runfolder.worker_pool

    @contextmanager
    def counted(tasks: int, cores_left: int = 0) -> Iterator[Executor]:
        asked.append(tasks)
        with real(tasks, cores_left) as pool:
            yield pool

    monkeypatch.setattr(runfolder, "worker_pool", counted)
    return asked


def test_hosts_parsed_in_workers_read_as_hosts_read_here(
    many_hosts: Path, pool_sizes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    in_workers = read_run_folder(many_hosts, cached=True)
    uncached = [h for h in hosts_of(many_hosts) if not HostCache.of_this_code(many_hosts, h)]
    assert len(uncached) == HOSTS - len(range(0, HOSTS, 3))
    assert pool_sizes == [forked(len(uncached))]
    monkeypatch.setattr(runfolder, "FORK_FROM_HOSTS", HOSTS + 1)
    here = read_run_folder(many_hosts, cached=True)
    assert pool_sizes == [forked(len(uncached)), 0]
    hosts_in_order = [f.host for f in in_workers.files]
    assert hosts_in_order == sorted(hosts_in_order) and set(hosts_in_order) == set(
        hosts_of(many_hosts)
    )
    assert (in_workers.files, in_workers.diagnostics, in_workers.refused) == (
        here.files,
        here.diagnostics,
        here.refused,
    )


def test_what_the_workers_parse_is_kept_when_asked(
    many_hosts: Path, tmp_path: Path, pool_sizes: list[int]
) -> None:
    run = tmp_path / "run"
    write_run_folder(run, HOSTS)
    cold = read_run_folder(run, cached=True, write_back=True)
    assert pool_sizes == [forked(HOSTS)]
    assert all(HostCache.of_this_code(run, host) for host in hosts_of(run))
    warm = read_run_folder(run, cached=True)
    assert pool_sizes == [forked(HOSTS), 0]
    assert (warm.files, warm.diagnostics) == (cold.files, cold.diagnostics)


def test_fewer_hosts_are_read_here(tmp_path: Path, pool_sizes: list[int]) -> None:
    run = tmp_path / "run"
    write_run_folder(run, workers.FORK_FROM_HOSTS - 1)
    assert read_run_folder(run).files
    assert pool_sizes == [0]
