"""The controller's parse cache (gpuval.files.parse_cache): a run read through it is the run read
from its files, verdict included; an entry serves only the file it was made from, read by the
code that made it; a cache from elsewhere runs nothing and is ignored; the collect fills it
beside raw/, never in it, and so does a report written into its run folder."""

from __future__ import annotations

import logging
import os
import pickle
import shutil
from array import array
from pathlib import Path
from typing import Any

import pytest

from gpuval import parsers, plugin_api
from gpuval.files import parse_cache
from gpuval.files.atomic import write_output
from gpuval.pipeline import judge, report
from gpuval.records.base import Diagnostic
from gpuval.records.nccl import NcclHalf, NcclRow, NcclRun, NcclTable
from gpuval.runfolder import (
    CACHED_MODULES,
    RawFile,
    RunFolder,
    read_run_folder,
    update_parse_cache,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "tests" / "data" / "sample-run"
SUITE = Path(__file__).parents[1] / "data" / "device" / "h100-x1-suite-2026-11-23"
GENERATED_AT = "2026-11-26T00:00:00+00:00"


def copied(source: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(source, run)
    return run


def fill(run: Path) -> None:
    for host in sorted(p.name for p in (run / "raw").iterdir()):
        update_parse_cache(run, host)


def cached_entries(path: Path) -> tuple[bytes, dict[str, Any]]:
    """A cache file's first line (its code) and its entries."""
    header, _, pickled = path.read_bytes().partition(b"\n")
    entries: dict[str, Any] = pickle.loads(pickled)
    return header + b"\n", entries


def read(folder: RunFolder) -> tuple[list[RawFile], list[Diagnostic], list[Diagnostic]]:
    return folder.files, folder.diagnostics, folder.refused


@pytest.mark.parametrize("source", [SAMPLE, SUITE], ids=["sample-run", "h100-suite"])
def test_a_run_read_through_the_cache_is_the_run_read_from_its_files(
    source: Path, tmp_path: Path
) -> None:
    run = copied(source, tmp_path)
    cold = read_run_folder(run)
    fill(run)
    assert sorted(p.name for p in (run / parse_cache.CACHE_DIR).iterdir()) == sorted(
        f"{p.name}{parse_cache.CACHE_SUFFIX}" for p in (run / "raw").iterdir()
    )
    assert read(read_run_folder(run, cached=True)) == read(cold)


def test_the_verdict_is_the_same_cold_and_warm(tmp_path: Path) -> None:
    run = copied(SUITE, tmp_path)
    cold = judge(run, generated_at=GENERATED_AT)
    fill(run)
    warm = judge(run, generated_at=GENERATED_AT)
    assert (warm.verdict, warm.checks) == (cold.verdict, cold.checks)


def test_a_warm_read_parses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = copied(SAMPLE, tmp_path)
    fill(run)
    cold = read_run_folder(run)

    def no_parsing(*_: object, **__: object) -> None:
        raise AssertionError("parsed although cached")

    monkeypatch.setattr(parsers, "parse_text", no_parsing)
    assert read(read_run_folder(run, cached=True)) == read(cold)


def test_a_file_rewritten_with_its_old_size_and_time_is_read_again(tmp_path: Path) -> None:
    run = copied(SAMPLE, tmp_path)
    fill(run)
    topo = run / "raw" / "dual-gpu-pcie" / "nvidia-smi-topo.txt"
    before = topo.stat()
    # the same size and modification time (what a node can send), other content
    topo.write_bytes(b"x" * before.st_size)
    os.utime(topo, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert read(read_run_folder(run, cached=True)) == read(read_run_folder(run))


def test_a_cache_of_other_code_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = copied(SAMPLE, tmp_path)
    fill(run)
    monkeypatch.setattr(parse_cache, "code_digest", lambda: "0.0.0:edited parsers")

    def no_parsing(*_: object, **__: object) -> None:
        raise RuntimeError("parsed")

    monkeypatch.setattr(parsers, "parse_text", no_parsing)
    crashed = [
        d for d in read_run_folder(run, cached=True).diagnostics if "parser crashed" in d.message
    ]
    assert crashed  # every file parsed again (here by a parser that crashes)


class _Planted:
    """What a foreign cache file could make unpickling call."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch planted",))


def test_a_cache_naming_anything_but_records_runs_nothing_and_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = copied(SAMPLE, tmp_path)
    fill(run)
    monkeypatch.chdir(tmp_path)
    for path in (run / parse_cache.CACHE_DIR).iterdir():
        header, entries = cached_entries(path)
        planted = {name: (*entry[:2], _Planted()) for name, entry in entries.items()}
        path.write_bytes(header + pickle.dumps(planted))
    assert read(read_run_folder(run, cached=True)) == read(read_run_folder(run))
    assert not (tmp_path / "planted").exists()


def test_a_broken_cache_file_is_ignored(tmp_path: Path) -> None:
    run = copied(SAMPLE, tmp_path)
    fill(run)
    for path in (run / parse_cache.CACHE_DIR).iterdir():
        header, _ = cached_entries(path)
        path.write_bytes(header + b"not a pickle")
    assert read(read_run_folder(run, cached=True)) == read(read_run_folder(run))


def test_a_cache_file_without_the_code_line_is_read_as_none_silently(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cache written before the first line named its code: the first report after the
    upgrade reads everything again and says nothing of the thousand files it does not use."""
    run = copied(SAMPLE, tmp_path)
    fill(run)
    hosts = sorted(p.name for p in (run / "raw").iterdir())
    for path in (run / parse_cache.CACHE_DIR).iterdir():
        _, entries = cached_entries(path)
        path.write_bytes(pickle.dumps({"code": parse_cache.code_digest(), "entries": entries}))
    assert not any(parse_cache.HostCache.of_this_code(run, host) for host in hosts)
    with caplog.at_level(logging.WARNING):
        assert read(read_run_folder(run, cached=True)) == read(read_run_folder(run))
    assert caplog.records == []


def test_a_host_has_a_cache_of_this_code_only_once_one_was_written_by_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = copied(SAMPLE, tmp_path)
    host = sorted(p.name for p in (run / "raw").iterdir())[0]
    assert not parse_cache.HostCache.of_this_code(run, host)
    update_parse_cache(run, host)
    assert parse_cache.HostCache.of_this_code(run, host)
    monkeypatch.setattr(parse_cache, "code_digest", lambda: "0.0.0:edited parsers")
    assert not parse_cache.HostCache.of_this_code(run, host)


def test_a_link_where_a_cache_goes_is_never_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A symbolic link in parse-cache/ to a valid cache of this code: neither counted as the
    host's cache nor read, by both readers alike; the host's files are parsed instead."""
    run = copied(SAMPLE, tmp_path)
    host = sorted(p.name for p in (run / "raw").iterdir())[0]
    update_parse_cache(run, host)
    cache_file = run / parse_cache.CACHE_DIR / f"{host}{parse_cache.CACHE_SUFFIX}"
    elsewhere = tmp_path / "elsewhere.pickle"
    cache_file.rename(elsewhere)
    cache_file.symlink_to(elsewhere)
    assert not parse_cache.HostCache.of_this_code(run, host)
    with caplog.at_level(logging.WARNING):
        assert parse_cache.HostCache(run, host, CACHED_MODULES).found == {}
    assert caplog.records == []


def test_a_cache_file_cut_short_is_ignored(tmp_path: Path) -> None:
    """What a power loss may leave of a cache file (they are written without fsync)."""
    run = copied(SAMPLE, tmp_path)
    fill(run)
    for path in (run / parse_cache.CACHE_DIR).iterdir():
        whole = path.read_bytes()
        path.write_bytes(whole[: len(whole) // 2])
    assert read(read_run_folder(run, cached=True)) == read(read_run_folder(run))


def test_cache_files_are_written_without_fsync_unlike_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    run = copied(SAMPLE, tmp_path)
    fill(run)
    assert synced == []
    write_output(tmp_path / "summary.json", "{}\n")
    assert synced != []


def test_the_collect_reads_ahead_beside_raw_never_in_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    dest = run / "raw" / "dual-gpu-pcie"
    shutil.copytree(SAMPLE / "raw" / "dual-gpu-pcie", dest)
    sent = sorted(p.name for p in dest.iterdir())
    assert plugin_api.read_ahead(dest) == []
    assert sorted(p.name for p in dest.iterdir()) == sent
    assert [p.name for p in (run / parse_cache.CACHE_DIR).iterdir()] == ["dual-gpu-pcie.pickle"]
    assert plugin_api.read_ahead(tmp_path / "elsewhere") == []  # not a run folder's raw/<host>/
    assert not (tmp_path / parse_cache.CACHE_DIR).exists()


def test_nccl_tests_runs_are_cached_too(tmp_path: Path) -> None:
    # Their halves share one empty `extra` mapping: it must pickle (a MappingProxyType did not,
    # and every host with an nccl-tests log went uncached).
    run = copied(SAMPLE, tmp_path)
    update_parse_cache(run, "lambda-4xh100")
    assert (run / parse_cache.CACHE_DIR / f"lambda-4xh100{parse_cache.CACHE_SUFFIX}").is_file()


def test_a_report_into_its_run_folder_keeps_what_it_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a gpuval upgrade every cache is of other code: the first report parses everything
    # and keeps it, so the next one parses nothing and judges the same.
    run = copied(SUITE, tmp_path)
    first = report(run, quiet=True)
    assert sorted(p.name for p in (run / parse_cache.CACHE_DIR).iterdir()) == sorted(
        f"{p.name}{parse_cache.CACHE_SUFFIX}" for p in (run / "raw").iterdir()
    )

    def no_parsing(*_: object, **__: object) -> None:
        raise AssertionError("parsed although the first report kept it")

    monkeypatch.setattr(parsers, "parse_text", no_parsing)
    second = report(run, quiet=True)
    assert first.judgement and second.judgement
    assert (second.exit_code, second.judgement.checks) == (first.exit_code, first.judgement.checks)


def test_a_report_written_elsewhere_leaves_the_run_folder_as_it_was(tmp_path: Path) -> None:
    run = copied(SAMPLE, tmp_path)
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    report(run, out_dir=tmp_path / "out", quiet=True)
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


def test_a_cache_that_cannot_be_written_changes_nothing_and_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = copied(SAMPLE, tmp_path)
    expected = report(copied(SAMPLE, tmp_path / "writable"), quiet=True)
    (run / parse_cache.CACHE_DIR).write_text("not a folder")
    with caplog.at_level(logging.DEBUG, logger=parse_cache.__name__):
        reported = report(run, quiet=True)
    assert reported.judgement and expected.judgement
    assert reported.exit_code == expected.exit_code
    assert reported.judgement.checks == expected.judgement.checks
    assert not [r for r in caplog.records if r.name == parse_cache.__name__]


def test_a_cached_nccl_tests_host_reads_back_its_tables(tmp_path: Path) -> None:
    """Tables are stored as numbers (NcclTable): they come back row for row, still numbers."""
    run = copied(SAMPLE, tmp_path)
    cold = read_run_folder(run)
    update_parse_cache(run, "lambda-4xh100")
    warm = read_run_folder(run, cached=True)
    assert read(warm) == read(cold)
    tables = [r.rows for f in warm.files if f.parse is not None for r in f.parse.runs
              if isinstance(r, NcclRun) and r.rows]  # fmt: skip
    assert tables and all(t.kept is None and isinstance(t.numbers, array) for t in tables)


def test_a_cache_with_a_table_of_inconsistent_sizes_is_ignored(tmp_path: Path) -> None:
    run = copied(SAMPLE, tmp_path)
    update_parse_cache(run, "lambda-4xh100")
    path = run / parse_cache.CACHE_DIR / f"lambda-4xh100{parse_cache.CACHE_SUFFIX}"
    header, entries = cached_entries(path)
    broken = NcclTable.of([NcclRow(8, out_of_place=NcclHalf(1.0))])
    broken.numbers.append(1.0)  # a row's numbers one short
    entries["extra.txt"] = ((0, 0, 0, 0), (None,), broken)
    path.write_bytes(header + pickle.dumps(entries))
    assert parse_cache.HostCache(run, "lambda-4xh100", CACHED_MODULES).found == {}
