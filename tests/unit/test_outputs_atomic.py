"""Outputs are written whole or not at all, a report's files all or none, never through a link
(issue 14, items 5 and 6, and the lows about writing): a full disk (a small tmpfs) or a renderer
that fails leaves the previous outputs byte for byte; a symbolic link where an output goes is
refused and what it points at is left alone; a reader never sees a truncated file; history,
compare and report --out say clearly what they cannot write."""

from __future__ import annotations

import errno
import os
import re
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.sample_runs import sample_copy

import gpuval.report.writers
from gpuval import pipeline
from gpuval.cli import main
from gpuval.files import atomic
from gpuval.files.archive import Archive
from gpuval.files.atomic import OutputError, OutputSet, write_output
from gpuval.history.store import HistoryError, RunEntry, index_run

RUN_ID = "nightly"
# What `gpuval report` writes into a run folder (profile.json only with a profile).
OUTPUTS = (
    "results.json", "measurements.csv", "report.html", "summary.json", "junit.xml", "gpuval.prom",
)  # fmt: skip
EARLIER = datetime(2026, 1, 1, tzinfo=UTC)


class Earlier(datetime):
    """The clock of the first render, so that a re-render differs from it (generated_at)."""

    @classmethod
    def now(cls, tz: Any = None) -> Earlier:
        return cls.fromtimestamp(EARLIER.timestamp(), tz)


@pytest.fixture(scope="module")
def rendered_reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reports folder with the sample run judged once (at EARLIER); copied by each test."""
    reports = tmp_path_factory.mktemp("rendered") / "reports"
    run = sample_copy(reports, RUN_ID, "2026-11-22T02:00:00Z")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "datetime", Earlier)
        assert main(["report", str(run), "--quiet"]) == 1  # the sample run fails (its README)
    return reports


@dataclass
class SmallDisk:
    """A 16 MiB tmpfs: room for a reports folder, and a disk that can be filled or made
    read-only (root ignores file permissions, so a read-only mount is what refuses root)."""

    root: Path

    def fill(self) -> None:
        descriptor = os.open(self.root / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for chunk in (1 << 20, 4096, 1):
                try:
                    while True:
                        os.write(descriptor, b"\0" * chunk)
                except OSError as problem:
                    assert problem.errno == errno.ENOSPC
        finally:
            os.close(descriptor)

    def read_only(self) -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(self.root)], check=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    root = tmp_path / "disk"
    root.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(root)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"a small tmpfs cannot be mounted here (needs root): {mounted.stderr.strip()}")
    try:
        yield SmallDisk(root)
    finally:
        subprocess.run(["umount", "--lazy", str(root)], check=True)


def reports_in(folder: Path, rendered: Path) -> Path:
    reports = folder / "reports"
    shutil.copytree(rendered, reports, symlinks=True)
    return reports


def contents(run: Path) -> dict[str, bytes]:
    return {name: (run / name).read_bytes() for name in OUTPUTS}


def temporaries(*folders: Path) -> list[Path]:
    return [p for folder in folders for p in folder.iterdir() if p.name.startswith(".")]


def history_runs(reports: Path) -> list[str]:
    with sqlite3.connect(reports / "history.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return [row[0] for row in db.execute("SELECT run_id FROM runs")]


def test_on_a_full_disk_the_previous_outputs_stay_whole_and_the_message_says_so(
    small_disk: SmallDisk, rendered_reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = reports_in(small_disk.root, rendered_reports)
    run = reports / RUN_ID
    before, history_before = contents(run), (reports / "history.sqlite").read_bytes()
    small_disk.fill()
    capsys.readouterr()
    assert main(["report", str(run), "--quiet"]) == 2
    message = capsys.readouterr().err
    assert f"gpuval report: {run}: the disk is full" in message
    assert "Traceback" not in message
    assert contents(run) == before
    assert (reports / "history.sqlite").read_bytes() == history_before
    assert history_runs(reports) == [RUN_ID]  # the run is not dropped from the history
    assert temporaries(run, reports) == []


def test_a_full_disk_never_corrupts_or_drops_the_history(
    small_disk: SmallDisk, rendered_reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = reports_in(small_disk.root, rendered_reports)
    entry = RunEntry.from_folder(reports / RUN_ID)
    small_disk.fill()
    with pytest.raises(HistoryError, match=f"^{re.escape(str(reports))}: the disk is full"):
        index_run(Archive(reports), entry)
    capsys.readouterr()
    assert main(["history", "--rebuild", "--reports", str(reports)]) == 2
    assert f"gpuval history: {reports}: the disk is full" in capsys.readouterr().err
    assert history_runs(reports) == [RUN_ID]
    assert temporaries(reports) == []
    # no half-made history.rebuilding, no journal
    assert sorted(p.name for p in reports.iterdir()) == ["history.sqlite", RUN_ID]


def test_a_render_that_fails_half_way_leaves_the_previous_set_whole(
    tmp_path: Path, rendered_reports: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    run = reports_in(tmp_path, rendered_reports) / RUN_ID
    before = contents(run)

    def broken(*_: object) -> bytes:
        raise RuntimeError("a renderer bug")

    monkeypatch.setattr(gpuval.report.writers, "junit_xml", broken)  # the last of the report files
    assert main(["report", str(run), "--quiet"]) == 2
    message = capsys.readouterr().err
    assert "could not be rendered (a gpuval bug" in message
    assert "RuntimeError: a renderer bug; verdict FAIL, nothing written" in message
    assert contents(run) == before
    assert temporaries(run) == []


def test_written_behind_each_file_waits_hidden_until_the_commit_or_goes_on_discard(
    tmp_path: Path,
) -> None:
    first, last = tmp_path / "a.json", tmp_path / "b.csv"
    first.write_text("old a\n")
    for ending in ("commit", "discard"):
        written = OutputSet(write_behind=True)
        written.add(first, "new a\n")
        written.add(last, "first b\n")
        written.add(last, "new b\n")  # added twice: the last is written
        assert first.read_text() == "old a\n" and not last.exists()
        if ending == "discard":
            written.discard()
            assert first.read_text() == "old a\n" and not last.exists()
        else:
            written.commit()
            assert (first.read_text(), last.read_text()) == ("new a\n", "new b\n")
            first.write_text("old a\n")
            last.unlink()
        assert temporaries(tmp_path) == []


def test_written_behind_a_link_is_refused_when_added(tmp_path: Path) -> None:
    marker, link = tmp_path / "precious", tmp_path / "a.json"
    marker.write_text("the user's own file\n")
    link.symlink_to(marker)
    written = OutputSet(write_behind=True)
    written.add(tmp_path / "b.json", "b\n")
    with pytest.raises(OutputError, match="a symbolic link; gpuval never writes through a link"):
        written.add(link, "a\n")
    written.discard()
    assert marker.read_text() == "the user's own file\n"
    assert temporaries(tmp_path) == [] and not (tmp_path / "b.json").exists()


def test_a_set_whose_last_file_fails_replaces_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, last = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text("old a\n")
    last.write_text("old b\n")
    real_fsync = os.fsync
    synced: list[int] = []

    def failing_fsync(descriptor: int) -> None:
        synced.append(descriptor)
        if len(synced) == 2:
            raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))
        real_fsync(descriptor)

    monkeypatch.setattr(atomic.os, "fsync", failing_fsync)
    written = OutputSet()
    written.add(first, "new a\n")
    written.add(last, "new b\n")
    with pytest.raises(
        OutputError, match=f"^{re.escape(str(tmp_path))}: the disk is full .*b.json"
    ):
        written.commit()
    assert (first.read_text(), last.read_text()) == ("old a\n", "old b\n")
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize("name", [*OUTPUTS, "history.sqlite"])
def test_a_link_where_an_output_goes_is_refused_and_its_target_left_alone(
    tmp_path: Path, rendered_reports: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = reports_in(tmp_path, rendered_reports)
    run = reports / RUN_ID
    # Empty: SQLite would make a database of an empty file it was pointed at.
    marker = tmp_path / "precious"
    marker.write_bytes(b"" if name == "history.sqlite" else b"the user's own file\n")
    link = (reports if name == "history.sqlite" else run) / name
    link.unlink()
    link.symlink_to(marker)
    before = {other: (run / other).read_bytes() for other in OUTPUTS if other != name}
    capsys.readouterr()
    code = main(["report", str(run), "--quiet"])
    message = capsys.readouterr().err
    assert marker.read_bytes() == (b"" if name == "history.sqlite" else b"the user's own file\n")
    assert link.is_symlink() and link.readlink() == marker
    assert f"{link}: a symbolic link; gpuval never writes through a link" in message
    if name == "history.sqlite":  # the history is never fatal: the verdict (FAIL) decides
        assert code == 1
        assert "gpuval report: history not updated" in message
    else:
        assert code == 2
        assert {other: (run / other).read_bytes() for other in before} == before


def test_a_rerender_replaces_each_file_by_rename_never_truncating_it(
    tmp_path: Path, rendered_reports: Path
) -> None:
    run = reports_in(tmp_path, rendered_reports) / RUN_ID
    before = contents(run)
    inodes = {name: (run / name).stat().st_ino for name in OUTPUTS}
    readers = {name: (run / name).open("rb") for name in OUTPUTS}  # a reader mid-way
    try:
        assert main(["report", str(run), "--quiet"]) == 1
        # each reader still reads the whole old file: it was replaced, never rewritten in place
        assert {name: reader.read() for name, reader in readers.items()} == before
    finally:
        for reader in readers.values():
            reader.close()
    assert all((run / name).stat().st_ino != inodes[name] for name in OUTPUTS)
    assert contents(run)["results.json"] != before["results.json"]  # generated_at moved on


def test_history_html_onto_a_folder_or_a_read_only_disk_says_so(
    small_disk: SmallDisk, rendered_reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = reports_in(small_disk.root, rendered_reports)
    capsys.readouterr()
    assert main(["history", "--reports", str(reports), "--html", str(reports)]) == 2
    assert capsys.readouterr().err == (
        f"gpuval history: {reports}: a folder; name a file to write\n"
    )
    small_disk.read_only()
    page = reports / "trends.html"
    assert main(["history", "--reports", str(reports), "--html", str(page)]) == 2
    assert capsys.readouterr().err == (
        f"gpuval history: {page}: cannot write it: Read-only file system\n"
    )


def test_compare_into_a_read_only_run_folder_says_so(
    small_disk: SmallDisk, rendered_reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = reports_in(small_disk.root, rendered_reports)
    shutil.copytree(reports / RUN_ID, reports / "again")
    small_disk.read_only()
    capsys.readouterr()
    assert main(["compare", RUN_ID, "again", "--reports", str(reports)]) == 2
    assert capsys.readouterr().err == (
        f"gpuval compare: {reports / 'again' / 'compare.html'}: cannot write it: "
        "Read-only file system\n"
    )


def test_report_out_writes_no_history_beside_the_folder_nor_replaces_the_runs_row(
    tmp_path: Path, rendered_reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = reports_in(tmp_path, rendered_reports)
    history = (reports / "history.sqlite").read_bytes()
    elsewhere = tmp_path / "elsewhere"
    out = elsewhere / "rerendered"
    assert main(["report", str(reports / RUN_ID), "--quiet", "--out", str(out)]) == 1
    assert sorted(p.name for p in elsewhere.iterdir()) == ["rerendered"]  # no history.sqlite
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)
    # the reports folder's history still indexes its own run folder, as --rebuild would
    assert (reports / "history.sqlite").read_bytes() == history
    capsys.readouterr()
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert main(["report", str(reports / RUN_ID), "--quiet", "--out", str(a_file)]) == 2
    assert capsys.readouterr().err == (
        f"gpuval report: {a_file}: not a folder; name a folder to write into\n"
    )


def test_a_single_output_refuses_a_link_a_folder_and_a_device(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    marker.write_text("kept\n")
    link = tmp_path / "baseline.json"
    link.symlink_to(marker)
    with pytest.raises(OutputError, match="a symbolic link; gpuval never writes through a link"):
        write_output(link, "{}\n")
    assert marker.read_text() == "kept\n"
    with pytest.raises(
        OutputError, match=f"^{re.escape(str(tmp_path))}: a folder; name a file to write$"
    ):
        write_output(tmp_path, "{}\n")
    with pytest.raises(OutputError, match=r"^/dev/null: not a regular file"):
        write_output(Path("/dev/null"), "{}\n")


def test_baseline_create_refuses_a_link_where_the_baseline_goes(
    tmp_path: Path, rendered_reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = reports_in(tmp_path, rendered_reports)
    marker = tmp_path / "precious"
    marker.write_text("the user's own file\n")
    link = reports / "baselines" / "accepted.json"
    link.parent.mkdir()
    link.symlink_to(marker)
    capsys.readouterr()
    code = main(["baseline", "create", RUN_ID, "--name", "accepted", "--force",
                 "--reports", str(reports)])  # fmt: skip
    assert (code, capsys.readouterr().err) == (
        2,
        f"gpuval baseline: {link}: a symbolic link; gpuval never writes through a link: "
        "remove it, or write somewhere else\n",
    )
    assert marker.read_text() == "the user's own file\n"
