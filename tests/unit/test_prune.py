"""gpuval prune: lists what it would delete and asks (or --yes), removes only from gpuval run
folders of the reports folder, never through a link, and keeps old runs never judged."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from gpuval.cli import main


def _run(reports: Path, run_id: str, day: int, judged: bool = True) -> Path:
    """A run folder as gpuval run and report leave it (run.json, raw/, outputs)."""
    run = reports / run_id
    (run / "raw" / "node1").mkdir(parents=True)
    (run / "raw" / "node1" / "nccl-all_reduce.txt").write_text("raw output\n")
    (run / "run.json").write_text(
        json.dumps({"run_id": run_id, "started_at": f"2026-11-0{day}T02:00:00Z"})
    )
    if judged:
        for name in ("results.json", "summary.json"):
            (run / name).write_text("{}")
        (run / "report.html").write_text("<html></html>")
    return run


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    reports = tmp_path / "reports"
    for day in (1, 2, 3):
        _run(reports, f"run-{day}", day)
    return reports


class _Terminal(io.StringIO):
    """stdin as a person at a terminal answers."""

    def isatty(self) -> bool:
        return True


def test_without_a_terminal_or_yes_it_lists_and_refuses_saying_what_to_type(
    reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prune", "--keep", "1", "--reports", str(reports)]) == 2
    out, err = capsys.readouterr()
    assert f"{reports / 'run-1'}/: raw, report.html" in out
    assert f"{reports / 'run-2'}/: raw, report.html" in out
    assert "run-3" not in out
    assert f"gpuval prune --keep 1 --reports {reports} --yes" in err
    assert (reports / "run-1" / "raw").is_dir() and (reports / "run-2" / "report.html").is_file()


def test_on_a_terminal_it_asks_and_only_yes_deletes(
    reports: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    assert main(["prune", "--keep", "1", "--reports", str(reports)]) == 0
    assert "nothing deleted" in capsys.readouterr().out
    assert (reports / "run-1" / "raw").is_dir()
    monkeypatch.setattr("sys.stdin", _Terminal(""))  # Ctrl-D
    assert main(["prune", "--keep", "1", "--reports", str(reports)]) == 0
    assert (reports / "run-1" / "raw").is_dir()
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    assert main(["prune", "--keep", "1", "--reports", str(reports)]) == 0
    assert "delete? [y/N]" in capsys.readouterr().out
    assert sorted(p.name for p in (reports / "run-1").iterdir()) == [
        "results.json", "run.json", "summary.json",
    ]  # fmt: skip
    assert (reports / "run-3" / "raw").is_dir()


def test_a_dry_run_lists_and_deletes_nothing(
    reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prune", "--keep", "0", "--reports", str(reports), "--dry-run"]) == 0
    assert "run-3" in capsys.readouterr().out
    assert all((reports / f"run-{day}" / "raw").is_dir() for day in (1, 2, 3))


def test_a_linked_run_folder_or_entry_never_leads_the_deletion_out_of_the_reports_folder(
    reports: Path,
) -> None:
    outside = reports.parent / "outside"
    marker = _run(outside, "planted", 1)  # a run folder outside, looking old
    (reports / "linked").symlink_to(marker, target_is_directory=True)
    kept = outside / "kept-by-link"
    kept.mkdir()
    (kept / "evidence.txt").write_text("marker")
    (reports / "run-1" / "logs").symlink_to(kept, target_is_directory=True)
    assert main(["prune", "--keep", "0", "--reports", str(reports), "--yes"]) == 0
    assert (marker / "raw" / "node1" / "nccl-all_reduce.txt").read_text() == "raw output\n"
    assert (marker / "report.html").is_file()
    assert (kept / "evidence.txt").read_text() == "marker"
    assert not (reports / "run-1" / "logs").exists()  # the link itself went
    assert not (reports / "run-1" / "raw").exists()


def test_only_gpuval_run_folders_are_touched(reports: Path) -> None:
    stray = reports / "not-a-run"  # raw/ inside, but no run.json naming a run id
    (stray / "raw").mkdir(parents=True)
    nameless = _run(reports, "nameless", 1)
    (nameless / "run.json").write_text(json.dumps({"started_at": "2026-11-01T00:00:00Z"}))
    assert main(["prune", "--keep", "0", "--reports", str(reports), "--yes"]) == 0
    assert (stray / "raw").is_dir()
    assert (nameless / "raw").is_dir()
    assert not (reports / "run-3" / "raw").exists()


def test_an_old_run_never_judged_keeps_its_raw_outputs_unless_told(
    reports: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unjudged = _run(reports, "run-0", 0, judged=False)
    assert main(["prune", "--keep", "1", "--reports", str(reports), "--yes"]) == 0
    assert f"keeping {unjudged}: never judged" in capsys.readouterr().out
    assert (unjudged / "raw" / "node1").is_dir()
    assert not (reports / "run-1" / "raw").exists()
    argv = ["prune", "--keep", "1", "--reports", str(reports), "--yes", "--include-unjudged"]
    assert main(argv) == 0
    assert [p.name for p in unjudged.iterdir()] == ["run.json"]


def test_keep_must_be_a_whole_number(reports: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["prune", "--keep", "-1", "--reports", str(reports), "--yes"])
    assert stopped.value.code == 2
    assert "argument --keep: '-1' is not allowed: a whole number, 0 or more" in (
        capsys.readouterr().err
    )
