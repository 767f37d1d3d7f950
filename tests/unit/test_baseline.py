"""Baselines: made from a known-good run, they judge later runs as well as the hardware does,
with SuperBench-style rules (variance against the baseline, absolute values, fleet statistics).
Expected numbers are the arithmetic of the rules on the figures given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.sample_runs import sample_copy

from gpuval.checks.baseline import (
    DEFAULT_RULES,
    Baseline,
    BaselineError,
    Rule,
    baseline_checks,
    create_baseline,
    list_baselines,
    load_baseline,
    value_checks,
)
from gpuval.cli import main
from gpuval.files.archive import Archive
from gpuval.records.key_figures import KeyFigure

LAMBDA = "lambda-4xh100"


def busbw(host: str, value: float) -> KeyFigure:
    return KeyFigure(host, "busbw.all_reduce", value, "GB/s", True)


def counter(host: str, name: str, value: float) -> KeyFigure:
    return KeyFigure(host, f"health.{name}", value, "count", False)


BASELINE = Baseline(
    name="accepted",
    created_at="2026-11-01T00:00:00+00:00",
    run_id="run-0",
    run_dir="/reports/run-0",
    verdict="pass",
    gpu_models={"a": "H100 SXM", "b": "H100 SXM"},
    figures=[
        busbw("a", 355.9),
        busbw("b", 350.0),
        counter("a", "ecc_uncorrected", 0),
        counter("a", "ecc_corrected", 0),
        KeyFigure("a", "p2p.min", 376.0, "GB/s", True),
    ],
)
MODELS = {"a": "H100 SXM", "b": "H100 SXM", "c": "H100 SXM", "d": "A100 SXM"}


def judged(figures: list[KeyFigure]) -> dict[tuple[str, str], tuple[str, str]]:
    checks = baseline_checks(figures, BASELINE, DEFAULT_RULES, MODELS)
    return {(c.host, c.check_id): (c.status, c.reason) for c in checks}


@pytest.mark.parametrize(
    ("value", "status"),
    [(355.9, "pass"), (340.0, "pass"), (330.0, "warn"), (320.0, "fail"), (300.0, "fail")],
)
def test_variance_warns_beyond_5_percent_below_and_fails_beyond_10(
    value: float, status: str
) -> None:
    # 340 is 4.5 % below 355.9, 330 is 7.3 %, 320 is 10.1 %, 300 is 15.7 %
    found = judged([busbw("a", value), busbw("b", 350.0)])
    assert found[("a", "baseline.variance.busbw.all_reduce")][0] == status


def test_the_reason_gives_both_numbers_and_the_percent_of_baseline() -> None:
    status, reason = judged([busbw("a", 300.0)])[("a", "baseline.variance.busbw.all_reduce")]
    assert status == "fail"
    assert reason == (
        "busbw.all_reduce 300 GB/s = 84 % of baseline 'accepted' (356 GB/s): 16 % below "
        "(fail: more than 10 % below)"
    )


def test_an_error_counter_that_grew_from_zero_fails_or_warns() -> None:
    found = judged([counter("a", "ecc_uncorrected", 2), counter("a", "ecc_corrected", 5)])
    assert found[("a", "baseline.variance.health.ecc_uncorrected")] == (
        "fail",
        "health.ecc_uncorrected 2 count, baseline 'accepted' 0 count: grew from nothing "
        "(fail: any growth)",
    )
    assert found[("a", "baseline.variance.health.ecc_corrected")][0] == "warn"
    clean = judged([counter("a", "ecc_uncorrected", 0)])
    assert clean[("a", "baseline.variance.health.ecc_uncorrected")][0] == "pass"


def test_a_host_the_baseline_does_not_know_is_judged_against_its_fleet() -> None:
    # median of the baseline's H100 hosts: (355.9 + 350.0) / 2 = 352.95
    found = judged([busbw("c", 270.0), busbw("d", 100.0)])
    status, reason = found[("c", "baseline.fleet.busbw.all_reduce")]
    assert status == "fail"  # 23.5 % below the fleet median
    assert "= 76 % of the median of baseline 'accepted''s H100 SXM hosts (353 GB/s)" in reason
    assert "c is not in the baseline" in reason
    # an A100 host has no fleet of its model in the baseline: nothing to compare with
    assert ("d", "baseline.fleet.busbw.all_reduce") not in found


def test_figures_of_the_baseline_the_run_did_not_measure_warn() -> None:
    found = judged([busbw("a", 355.9), busbw("b", 350.0)])
    status, reason = found[("a", "baseline.coverage")]
    assert status == "warn"
    assert "3 figure(s) of baseline 'accepted' (run run-0) not measured" in reason
    assert "health.ecc_corrected, health.ecc_uncorrected, p2p.min" in reason


def test_a_value_rule_needs_no_baseline() -> None:
    gate = Rule("value", ("busbw.all_reduce",), warn_below=460.0, source="https://example.org")
    checks = value_checks([busbw("a", 455.0), busbw("b", 470.0)], [gate])
    assert [(c.host, c.status, c.reference) for c in checks] == [
        ("a", "warn", 460.0),
        ("b", "pass", 460.0),
    ]
    assert checks[0].reason == ("busbw.all_reduce 455 GB/s: warn: below 460 [https://example.org]")


def test_a_baseline_is_made_from_a_good_run_only(tmp_path: Path) -> None:
    archive = Archive(tmp_path)
    good = sample_copy(tmp_path, "good", "2026-11-01T02:00:00Z", hosts=[LAMBDA])
    bad = sample_copy(tmp_path, "bad", "2026-11-02T02:00:00Z")
    assert main(["report", str(good), "--quiet"]) == 0
    assert main(["report", str(bad), "--quiet"]) == 1  # fail (the sample's README)
    with pytest.raises(BaselineError, match="verdict FAIL: a baseline is a known-good run"):
        create_baseline(archive, "bad", "accepted")
    baseline = create_baseline(archive, "good", "accepted")
    # the published 4x H100 outputs' large-message plateau floor (the judged busbw, at 256 MiB):
    # nccl-tests all_reduce 339.81 GB/s, all_reduce_bench 335.62 GB/s
    assert {(f.name, f.value) for f in baseline.figures} == {
        ("busbw.all_reduce", 339.81),
        ("busbw.all_reduce_bench.all_reduce", 335.62),
    }
    assert baseline.gpu_models == {LAMBDA: "H100 SXM"}
    assert [b.name for b in list_baselines(archive)] == ["accepted"]
    assert load_baseline(archive, "accepted") == baseline


def test_a_broken_baseline_file_is_an_error_naming_it(tmp_path: Path) -> None:
    archive = Archive(tmp_path)
    archive.baselines_dir.mkdir()
    archive.baseline_path("cut").write_text('{"name": "cut", "figures": [')
    with pytest.raises(BaselineError, match=r"baselines/cut.json: not valid JSON: .*line 1"):
        load_baseline(archive, "cut")
    archive.baseline_path("old").write_text(json.dumps({"name": "old"}))
    with pytest.raises(BaselineError, match=r"old.json: baseline: .* violation"):
        load_baseline(archive, "old")
    with pytest.raises(BaselineError, match=r"no baseline 'nope'.*gpuval baseline create"):
        load_baseline(archive, "nope")


def test_report_judges_against_the_default_baseline_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = sample_copy(tmp_path, "first", "2026-11-01T02:00:00Z", hosts=[LAMBDA])
    second = sample_copy(tmp_path, "second", "2026-11-02T02:00:00Z", hosts=[LAMBDA])
    assert main(["report", str(first), "--quiet"]) == 0
    assert main(["baseline", "create", "first", "--reports", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["report", str(second)]) == 0
    err = capsys.readouterr().err
    assert "judged with baseline default (run first)" in err
    results = json.loads((second / "results.json").read_text())
    assert results["baseline"] == "default"
    variance = {c["check_id"]: c for c in results["checks"] if c["check_id"].startswith("baseline")}
    assert set(variance) == {
        "baseline.variance.busbw.all_reduce",
        "baseline.variance.busbw.all_reduce_bench.all_reduce",
    }
    check = variance["baseline.variance.busbw.all_reduce"]
    assert (check["status"], check["measured"], check["reference"]) == ("pass", 339.81, 339.81)
    assert "= 100 % of baseline 'default'" in check["reason"]
    assert main(["report", str(second), "--baseline", "none", "--quiet"]) == 0
    results = json.loads((second / "results.json").read_text())
    assert results["baseline"] is None
    assert not any(c["check_id"].startswith("baseline") for c in results["checks"])
    assert main(["report", str(second), "--baseline", "missing", "--quiet"]) == 2
    assert "no baseline 'missing'" in capsys.readouterr().err
