"""The library API: `judge` makes one RunJudgement whose key figures the baseline rules judge,
`write_outputs` writes every output from it without judging again, and no output module reaches
below the judgement (run folder, parsers, check modules)."""

from __future__ import annotations

import ast
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from gpuval.checks.baseline import Baseline
from gpuval.checks.model import worst
from gpuval.judgement.model import Outlier, RunJudgement
from gpuval.pipeline import Judging, judge, write_outputs
from gpuval.records.key_figures import KeyFigure, figures_from_summary

REPO = Path(__file__).parents[2]
SAMPLE = REPO / "tests" / "data" / "sample-run"
REPORT = REPO / "src" / "gpuval" / "report"
# What an output may read: the judgement and the words it is made of, never what it was made
# from (the run folder, the parsers, the evidence, the check modules).
BELOW_THE_JUDGEMENT = ("gpuval.runfolder", "gpuval.parsers", "gpuval.evidence", "gpuval.checks.")
ALLOWED_CHECK_MODULES = ("gpuval.checks.model",)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("api") / "sample-run"
    shutil.copytree(SAMPLE, run)
    return run


@pytest.fixture(scope="module")
def judged(sample: Path) -> RunJudgement:
    return judge(sample, Judging(), "2026-11-25T00:00:00+00:00")


def test_judge_returns_one_judgement_with_its_verdict_figures_and_series(
    judged: RunJudgement,
) -> None:
    assert judged.verdict == worst([c.status for c in judged.checks]) == "fail"
    busbw = {(f.host, f.name): f.value for f in judged.figures if f.family == "busbw"}
    # The figure is the busbw the check judged: the same number, for the same host.
    judged_busbw = {
        (c.host, c.measured)
        for c in judged.checks
        if c.check_id == "nccl-tests.all_reduce.busbw" and isinstance(c.measured, float)
    }
    assert judged_busbw and judged_busbw <= {(h, v) for (h, _), v in busbw.items()}
    assert {s.host for s in judged.busbw_series} >= {h for h, _ in busbw}
    assert all(s.large_message_gbps == busbw[(s.host, "busbw." + s.key.replace(" ", "."))]
               for s in judged.busbw_series if s.large_message_gbps is not None)  # fmt: skip


def test_the_baseline_rules_judge_the_judges_key_figures(
    sample: Path, judged: RunJudgement
) -> None:
    """A baseline at twice this run's busbw: every busbw figure fails its variance rule, the
    check's measured value is the judgement's figure, and the verdict stays fail."""
    doubled = [
        dataclasses.replace(f, value=f.value * 2) for f in judged.figures if f.family == "busbw"
    ]
    models = {h.name: h.gpu_model for h in judged.hosts}
    baseline = Baseline("twice", "2026-11-24", "earlier", "reports/earlier", "pass", models,
                        doubled)  # fmt: skip
    against = judge(sample, Judging(baseline=baseline), "2026-11-25T00:00:00+00:00")
    variance = {
        (c.host, c.check_id.removeprefix("baseline.variance.")): c
        for c in against.checks
        if c.check_id.startswith("baseline.variance.busbw.")
    }
    figures = {(f.host, f.name): f.value for f in against.figures if f.family == "busbw"}
    assert set(variance) == set(figures)
    for key, check in variance.items():
        assert (check.status, check.measured, check.reference) == (
            "fail", figures[key], figures[key] * 2,
        )  # fmt: skip
    assert against.baseline_name == "twice" and against.verdict == "fail"


def test_outputs_show_the_judgement_and_judge_nothing(judged: RunJudgement, tmp_path: Path) -> None:
    """Outputs written from a judgement whose figures, outliers and verdict were set by hand
    show exactly those: none of them derives a number or a verdict again."""
    made_up = KeyFigure("dgx-8xh100", "busbw.all_reduce", 1.5, "GB/s", True)
    outlier = Outlier("dgx-8xh100", "busbw_gbps all_reduce", 1.5, 300.0)
    shown = dataclasses.replace(judged, figures=[made_up], outliers=[outlier], verdict="warn")
    write_outputs(shown, tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    results = json.loads((tmp_path / "results.json").read_text())
    assert summary["verdict"] == results["verdict"] == "warn"
    assert figures_from_summary(summary) == [made_up]
    assert summary["outliers"] == [dataclasses.asdict(outlier)]
    prometheus = (tmp_path / "gpuval.prom").read_text()
    assert 'gpuval_busbw_gbps{collective="all_reduce",host="dgx-8xh100"} 1.5' in prometheus
    assert 'gpuval_run_verdict{verdict="warn"} 1.0' in prometheus


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize(
    "module", sorted(REPORT.rglob("*.py")), ids=lambda p: str(p.relative_to(REPORT))
)
def test_no_output_module_reaches_below_the_judgement(module: Path) -> None:
    below = {
        name
        for name in _imports(module)
        if name.startswith(BELOW_THE_JUDGEMENT) and name not in ALLOWED_CHECK_MODULES
    }
    assert below == set()


JUDGE = [*sorted((REPO / "src" / "gpuval" / "judgement").rglob("*.py")),
         *sorted((REPO / "src" / "gpuval" / "checks").rglob("*.py"))]  # fmt: skip


@pytest.mark.parametrize("module", JUDGE, ids=lambda p: str(p.relative_to(REPO / "src" / "gpuval")))
def test_the_verdict_never_depends_on_output_code(module: Path) -> None:
    outputs = {
        name
        for name in _imports(module)
        if name.startswith(("gpuval.report", "gpuval.pipeline", "gpuval.report.results_json"))
    }
    assert outputs == set()
