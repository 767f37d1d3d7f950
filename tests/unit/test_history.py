"""History of a reports folder: every judged run indexed in SQLite, trends per host and figure,
rebuilt from the run folders when the database is gone, fast at hundreds of runs; compare
names what got worse; prune keeps the judgement of old runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.sample_runs import sample_copy

from gpuval.cli import main
from gpuval.files.archive import KEPT_WHEN_TRIMMED, Archive
from gpuval.history.compare import compare_runs, comparison_lines
from gpuval.history.store import RunEntry, connect, index_run
from gpuval.history.trends import history_table, load_history, render_history
from gpuval.records.key_figures import KeyFigure

LAMBDA = "lambda-4xh100"


@pytest.fixture
def three_runs(tmp_path: Path) -> Path:
    """Three judged copies of the sample run, one day apart."""
    for day in (1, 2, 3):
        run = sample_copy(tmp_path, f"run-{day}", f"2026-11-0{day}T02:00:00Z")
        assert main(["report", str(run), "--quiet"]) == 1  # the sample fails (its README)
    return tmp_path


def test_every_report_is_indexed_and_history_shows_the_figures(
    three_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["history", "--reports", str(three_runs), "--host", LAMBDA]) == 0
    out = capsys.readouterr().out
    assert "#1   run-1  2026-11-01T02:00:00Z  FAIL" in out
    assert "#3   run-3  2026-11-03T02:00:00Z  FAIL" in out
    # the published 4x H100 all_reduce's plateau floor, 339.81 GB/s at 256 MiB, in every run
    row = next(line for line in out.splitlines() if line.startswith("busbw.all_reduce "))
    assert row.split() == ["busbw.all_reduce", LAMBDA, "GB/s", "339.8", "339.8", "339.8", "+0", "%"]
    page = (three_runs / "history.html").read_text()
    assert '<a href="run-1/report.html">run-1</a>' in page
    assert "busbw.all_reduce (GB/s)" in page


def test_history_survives_a_deleted_database(three_runs: Path) -> None:
    archive = Archive(three_runs)
    before = load_history(archive)
    archive.history_path.unlink()
    assert main(["history", "--reports", str(three_runs), "--rebuild"]) == 0
    after = load_history(archive)
    assert after == before
    assert [run.run_id for run in after.runs] == ["run-1", "run-2", "run-3"]
    with connect(archive.history_path) as db:
        counts = [db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("runs", "hosts")]
        assert counts == [3, 15]  # 5 hosts per run


def test_a_rerendered_run_replaces_its_rows(three_runs: Path) -> None:
    assert main(["report", str(three_runs / "run-2"), "--quiet"]) == 1
    assert [run.run_id for run in load_history(Archive(three_runs)).runs] == [
        "run-1", "run-2", "run-3",
    ]  # fmt: skip


def _entry(n: int, hosts: int, figures: list[str]) -> RunEntry:
    return RunEntry(
        run_id=f"run-{n:04d}",
        run_dir=f"/nowhere/run-{n:04d}",
        started_at=f"2026-{1 + n // 28 % 12:02d}-{1 + n % 28:02d}T{n % 24:02d}:00:00Z",
        generated_at="2026-12-31T00:00:00Z",
        verdict="pass" if n % 7 else "fail",
        profile="h100-sxm-8x",
        baseline=None,
        hosts=[{"name": f"node{h:02d}", "status": "pass"} for h in range(hosts)],
        checks=[
            {"check_id": "nccl-tests.all_reduce.busbw", "host": f"node{h:02d}", "status": "pass"}
            for h in range(hosts)
        ],
        figures=[
            KeyFigure(f"node{h:02d}", name, 350.0 + (n * 7 + h) % 13, "GB/s", True)
            for h in range(hosts)
            for name in figures
        ],
    )


def test_with_hundreds_of_runs_history_shows_the_last_twenty(tmp_path: Path) -> None:
    archive = Archive(tmp_path)
    figures = [
        "busbw.all_reduce", "busbw.all_gather", "busbw.reduce_scatter", "busbw.alltoall",
        "busbw.internode.all_reduce", "p2p.min", "pair.iperf3", "pair.nccl",
    ]  # fmt: skip
    with connect(archive.history_path):
        pass
    for n in range(300):
        index_run(archive, _entry(n, 16, figures))
    # `gpuval history` as it runs by default: the last 20 runs, a table and the page
    history = load_history(archive)
    table = history_table(history)
    page = render_history(history, tmp_path, "reports")
    assert [run.run_id for run in history.runs] == [f"run-{n:04d}" for n in range(280, 300)]
    assert len(history.trends) == 16 * len(figures)
    assert all(len(t.values) == 20 for t in history.trends)
    assert len(table) == 1 + 20 + 2 + 60 + 1  # runs, header, 60 rows shown, "and N more"
    assert "min-max of 16 hosts" in page


def test_compare_names_a_regression_with_both_numbers(tmp_path: Path) -> None:
    def judged_run(name: str, busbw: float, status: str) -> Path:
        run = tmp_path / name
        run.mkdir()
        check = {
            "check_id": "nccl-tests.all_reduce.busbw", "host": "node1", "status": status,
            "measured": busbw, "reference": 450.0, "unit": "GB/s", "reason": f"{busbw} GB/s",
        }  # fmt: skip
        (run / "results.json").write_text(json.dumps({
            "run_id": name, "generated_at": "2026-11-01T00:00:00Z", "verdict": status,
            "checks": [check], "meta": {}, "hosts": [{"name": "node1"}],
        }))  # fmt: skip
        (run / "summary.json").write_text(json.dumps({
            "run_id": name, "verdict": status,
            "figures": [
                {"host": "node1", "name": "busbw.all_reduce", "value": busbw, "unit": "GB/s",
                 "higher_is_better": True},
                {"host": "node1", "name": "health.ecc_corrected", "value": 0, "unit": "count",
                 "higher_is_better": False},
            ],
        }))  # fmt: skip
        return run

    week_ago = judged_run("week-ago", 355.9, "pass")
    today = judged_run("today", 213.5, "fail")  # 40 % below
    comparison = compare_runs(week_ago, today)
    assert comparison.verdict == "fail"
    assert [(f.host, f.figure) for f in comparison.regressions] == [("node1", "busbw.all_reduce")]
    lines = comparison_lines(comparison)
    assert (
        "  FAIL node1 busbw.all_reduce 355.9 -> 213.5 GB/s (-40 %, beyond the 10 % allowed)"
        in lines
    )
    assert any(
        line.startswith("  FAIL node1 nccl-tests.all_reduce.busbw: pass -> fail (measured 355.9 ->"
                        " 213.5 GB/s)")
        for line in lines
    )  # fmt: skip
    assert compare_runs(week_ago, week_ago).verdict == "pass"
    assert compare_runs(today, week_ago).improvements[0].figure == "busbw.all_reduce"
    assert main(["compare", str(week_ago), str(today)]) == 1
    assert "beyond the 10 % allowed" in (today / "compare.html").read_text()
    assert main(["compare", str(today), str(week_ago)]) == 0
    assert main(["compare", str(today), "no-such-run", "--reports", str(tmp_path)]) == 2


def test_prune_keeps_the_newest_runs_whole_and_the_judgement_of_the_others(
    three_runs: Path,
) -> None:
    assert main(["prune", "--keep", "1", "--reports", str(three_runs), "--yes"]) == 0
    for name in ("run-1", "run-2"):
        kept = {p.name for p in (three_runs / name).iterdir()}
        assert {"run.json", "results.json", "summary.json"} <= kept <= set(KEPT_WHEN_TRIMMED)
    newest = three_runs / "run-3"
    assert (newest / "raw").is_dir() and (newest / "report.html").is_file()
    (three_runs / "history.sqlite").unlink()
    assert main(["history", "--reports", str(three_runs), "--rebuild"]) == 0
    assert len(load_history(Archive(three_runs)).runs) == 3
