"""Bad input to history, baseline, compare and profile is a clear message, never a traceback;
names a node chose stay inert text in the charts and in measurements.csv."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from tests.sample_runs import sample_copy

from gpuval.cli import main

# A name a node can give itself (a folder of raw/: no '/'): a formula, and a link to Plotly.
HOSTILE = '=1+<a href="https:evil.example">node1'


def test_history_of_a_file_says_it_is_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "reports"
    afile.write_text("")
    assert main(["history", "--reports", str(afile)]) == 2
    assert f"gpuval history: {afile}: not a folder" in capsys.readouterr().err


def test_history_of_a_missing_folder_says_so_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "reprots"
    assert main(["history", "--reports", str(missing)]) == 2
    assert f"gpuval history: {missing}: no such folder" in capsys.readouterr().err
    assert not missing.exists()


def test_history_rebuild_skips_a_run_whose_results_are_no_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "results.json").write_text("[]")
    (run / "summary.json").write_text("{}")
    assert main(["history", "--rebuild", "--reports", str(tmp_path)]) == 0
    assert "skipped run-1: ValueError: results.json and summary.json must each hold a JSON" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("summary", "results"),
    [
        ({"verdict": "pass", "figures": [1]}, {}),
        ({"verdict": "pass", "figures": [{"host": "n", "name": "x", "value": "fast",
                                          "unit": "GB/s", "higher_is_better": True}]}, {}),
        ({"verdict": "pass", "figures": [{"host": "n", "name": "x", "value": 1.0,
                                          "unit": "GB/s", "higher_is_better": True}]},
         {"hosts": [7]}),
    ],
)  # fmt: skip
def test_a_baseline_of_a_malformed_run_is_refused_naming_the_run(
    tmp_path: Path, summary: dict[str, object], results: dict[str, object],
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(summary))
    (run / "results.json").write_text(json.dumps(results))
    assert main(["baseline", "create", "run-1", "--reports", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"gpuval baseline: {run}: summary.json or results.json is malformed" in err
    assert not (tmp_path / "baselines" / "default.json").exists()


def test_a_profile_that_is_not_utf8_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "lab.yaml"
    profile.write_bytes(b"name: lab\ndescription: \xff\xfe\nphases: [intranode]\n")
    assert main(["profile", "check", str(profile)]) == 2
    assert (
        f"gpuval profile: {profile}:2: not UTF-8 text; save the profile as UTF-8"
        in capsys.readouterr().err
    )


def _judged(folder: Path, busbw: float) -> Path:
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"verdict": "pass", "checks": []}))
    (folder / "summary.json").write_text(json.dumps({
        "run_id": folder.name, "verdict": "pass",
        "figures": [{"host": "node1", "name": "busbw.all_reduce", "value": busbw,
                     "unit": "GB/s", "higher_is_better": True}],
    }))  # fmt: skip
    return folder


def test_compare_honours_a_threshold_of_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The threshold is how much worse a figure may get; 0: none at all (a 2 % drop regresses,
    where the default 10 % would let it pass)."""
    before, after = _judged(tmp_path / "a", 355.9), _judged(tmp_path / "b", 348.8)
    assert main(["compare", str(before), str(after)]) == 0
    assert main(["compare", str(before), str(after), "--threshold", "0"]) == 1
    assert "beyond the 0 % allowed" in capsys.readouterr().out


@pytest.mark.parametrize("threshold", ["-0.1", "nan", "inf", "ten"])
def test_compare_refuses_a_threshold_that_means_nothing(
    tmp_path: Path, threshold: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["compare", "a", "b", "--threshold", threshold, "--reports", str(tmp_path)])
    assert stopped.value.code == 2
    assert f"argument --threshold: '{threshold}' is not allowed: a finite fraction" in (
        capsys.readouterr().err
    )


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A judged run whose one host named itself like a formula and a link."""
    reports = tmp_path_factory.mktemp("reports")
    run = sample_copy(reports, "run-1", "2026-11-01T02:00:00Z", hosts=["lambda-4xh100"])
    (run / "raw" / "lambda-4xh100").rename(run / "raw" / HOSTILE)
    meta = json.loads((run / "run.json").read_text())
    meta |= {"hosts": [HOSTILE], "expected": {HOSTILE: meta["expected"]["lambda-4xh100"]}}
    (run / "run.json").write_text(json.dumps(meta))
    assert main(["report", str(run), "--quiet"]) == 0
    assert main(["history", "--reports", str(reports)]) == 0
    return run


def _chart_texts(page: Path) -> list[str]:
    """Every string of the charts a page hands to Plotly."""
    found = re.search(r'id="gpuval-charts">(.*?)</script>', page.read_text(), re.S)
    assert found is not None
    texts: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(json.loads(found.group(1)))
    return texts


def test_host_names_reach_plotly_as_inert_text(hostile_run: Path) -> None:
    """Plotly reads tags in trace names, tick labels and titles (<a href> is a live link); a
    name a node chose reaches it as entities, which Plotly shows as the characters."""
    inert = HOSTILE.replace("<", "&lt;").replace(">", "&gt;")
    for page in (hostile_run / "report.html", hostile_run.parent / "history.html"):
        texts = _chart_texts(page)
        assert inert in texts, page
        assert not [text for text in texts if "<a" in text], page


def test_measurements_csv_cells_never_start_a_formula(hostile_run: Path) -> None:
    with (hostile_run / "measurements.csv").open(newline="") as table:
        rows = list(csv.DictReader(table))
    assert rows and {row["host"] for row in rows} == {"'" + HOSTILE}
    assert all(row["file"].startswith("raw/") for row in rows)
    numbers = [row["busbw_gbps"] for row in rows if row["busbw_gbps"]]
    assert numbers and all(float(number) >= 0 for number in numbers)


def test_only_text_that_a_spreadsheet_would_run_is_quoted() -> None:
    from gpuval.report.tables import column_cells

    hosts = ["=cmd()", "+A1", "-x", "@SUM(A1)", "\tx", "\rx", "-3.5", "node1"]
    values = [-3.5, 1.0, -0.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert list(column_cells(hosts)) == [
        "'=cmd()", "'+A1", "'-x", "'@SUM(A1)", "'\tx", "'\rx", "-3.5", "node1",
    ]  # fmt: skip
    assert list(column_cells(values)) == values
