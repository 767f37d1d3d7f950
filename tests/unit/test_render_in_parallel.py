"""A report of many hosts is rendered in forked workers (gpuval.pipeline with
gpuval.files.workers): each file is byte for byte what rendering it here gives; a renderer that
fails in a worker fails the whole set, nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from pathlib import Path

import pytest
from tests.bench.report_at_scale import write_run_folder

from gpuval import pipeline
from gpuval.files import workers
from gpuval.judgement.model import RunJudgement
from gpuval.pipeline import RENDERERS, RenderError, judge, write_outputs

HOSTS = workers.FORK_FROM_HOSTS + 1
GENERATED_AT = "2026-11-27T12:00:00+00:00"


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> RunJudgement:
    run = tmp_path_factory.mktemp("many") / "run"
    write_run_folder(run, HOSTS)
    return judge(run, generated_at=GENERATED_AT)


@pytest.fixture
def pool_sizes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of tasks each worker pool was asked for."""
    asked: list[int] = []
    real = workers.worker_pool

    @contextmanager
    def counted(tasks: int) -> Iterator[Executor]:
        asked.append(tasks)
        with real(tasks) as pool:
            yield pool

    monkeypatch.setattr(workers, "worker_pool", counted)
    return asked


def written(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_files_rendered_in_workers_are_the_files_rendered_here(
    judged: RunJudgement, tmp_path: Path, pool_sizes: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    write_outputs(judged, tmp_path / "workers")
    assert pool_sizes == [len(RENDERERS)]
    monkeypatch.setattr(pipeline, "FORK_FROM_HOSTS", HOSTS + 1)
    write_outputs(judged, tmp_path / "here")
    assert pool_sizes == [len(RENDERERS), 1]
    in_workers = written(tmp_path / "workers")
    assert sorted(in_workers) == sorted(RENDERERS)
    assert in_workers == written(tmp_path / "here")


def test_a_renderer_failing_in_a_worker_writes_nothing(
    judged: RunJudgement, tmp_path: Path, pool_sizes: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    def broken(_: RunJudgement) -> str:
        raise RuntimeError("a renderer bug")

    monkeypatch.setitem(RENDERERS, "summary.json", broken)  # the others render meanwhile
    with pytest.raises(RenderError, match="RuntimeError: a renderer bug; verdict FAIL"):
        write_outputs(judged, tmp_path / "out")
    assert pool_sizes == [len(RENDERERS)]
    assert not (tmp_path / "out").exists()
