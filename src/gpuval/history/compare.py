"""`gpuval compare RUN_A RUN_B`: what got better or worse from one judged run to another, per key
figure and host and per check, in the terminal and as an HTML page.

A figure that moved the wrong way by more than the threshold (bandwidth down, an error counter
up), a figure of A that B did not measure, and a check that B fails where A did not are
regressions: each a failure that names both numbers.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from gpuval.checks.model import STATUSES, Status, rank
from gpuval.records.key_figures import figures_from_summary
from gpuval.report.pages import render_page

# Healthy run-to-run spread is 5-10 % (gpuval.checks.thresholds): a larger move is not noise.
REGRESSION_FRACTION = 0.10
FAILING = ("error", "fail")


def _rank(status: str | None) -> int:
    """The checks' status order; a status an older results.json may lack counts as pass."""
    return rank(cast(Status, status)) if status in STATUSES else rank("pass")


@dataclass(frozen=True)
class RunSide:
    run_id: str
    run_dir: Path
    verdict: str
    started_at: str


@dataclass(frozen=True)
class FigureChange:
    host: str
    figure: str
    unit: str
    higher_is_better: bool
    before: float | None  # None: not measured in A
    after: float | None  # None: not measured in B

    @property
    def change(self) -> float | None:
        """Signed fraction of A's value; growth from 0 is +inf."""
        if self.before is None or self.after is None:
            return None
        if self.before == 0:
            return 0.0 if self.after == 0 else math.copysign(math.inf, self.after)
        return (self.after - self.before) / abs(self.before)

    def worse_by(self) -> float | None:
        """How much worse B is, as a positive fraction (negative: better)."""
        change = self.change
        if change is None:
            return None
        return -change if self.higher_is_better else change

    def regression(self, threshold: float) -> bool:
        if self.before is not None and self.after is None:
            return True  # measured before, not now: fail closed
        worse = self.worse_by()
        return worse is not None and worse > threshold

    def improvement(self, threshold: float) -> bool:
        worse = self.worse_by()
        return worse is not None and -worse > threshold

    def sentence(self, threshold: float) -> str:
        if self.after is None:
            return f"{self.figure} {_number(self.before)} {self.unit} -> not measured"
        if self.before is None:
            return f"{self.figure} new: {_number(self.after)} {self.unit}"
        change = self.change
        moved = "no change" if not change else (
            "grew from 0" if math.isinf(change) else f"{change * 100:+.0f} %"
        )  # fmt: skip
        said = f"{self.figure} {_number(self.before)} -> {_number(self.after)} {self.unit} ({moved}"
        if self.regression(threshold):
            return said + f", beyond the {threshold * 100:.0f} % allowed)"
        return said + ")"


@dataclass(frozen=True)
class CheckChange:
    check_id: str
    host: str
    before: str | None  # status in A; None: no such check in A
    after: str | None
    measured_before: Any
    measured_after: Any
    unit: str | None
    reason: str  # B's reason (A's when B has no such check)

    def direction(self) -> int:
        """-1 worse, +1 better, 0 same status."""
        rank_a, rank_b = _rank(self.before), _rank(self.after)
        return (rank_b > rank_a) - (rank_b < rank_a)

    @property
    def newly_failing(self) -> bool:
        return self.after in FAILING and self.before not in FAILING


@dataclass(frozen=True)
class Comparison:
    a: RunSide
    b: RunSide
    threshold: float
    figures: list[FigureChange]
    checks: list[CheckChange]  # those whose status changed, or that exist in one run only

    @property
    def regressions(self) -> list[FigureChange]:
        return [f for f in self.figures if f.regression(self.threshold)]

    @property
    def improvements(self) -> list[FigureChange]:
        return [f for f in self.figures if f.improvement(self.threshold)]

    @property
    def newly_failing(self) -> list[CheckChange]:
        return [c for c in self.checks if c.newly_failing]

    @property
    def verdict(self) -> str:
        return "fail" if self.regressions or self.newly_failing else "pass"


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 10000 else f"{value:.0f}"
    return "-" if value is None else str(value)


def _read(run_dir: Path) -> tuple[RunSide, dict[str, Any], dict[str, Any]]:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    started = results.get("meta", {}).get("started_at") or results.get("generated_at", "")
    side = RunSide(str(summary["run_id"]), run_dir, str(summary["verdict"]), str(started))
    return side, summary, results


def compare_runs(run_a: Path, run_b: Path, threshold: float = REGRESSION_FRACTION) -> Comparison:
    """Compare two judged run folders (results.json and summary.json in each)."""
    side_a, summary_a, results_a = _read(run_a)
    side_b, summary_b, results_b = _read(run_b)
    before = {(f.host, f.name): f for f in figures_from_summary(summary_a)}
    after = {(f.host, f.name): f for f in figures_from_summary(summary_b)}
    figures = []
    for key in sorted(before.keys() | after.keys()):
        known = after.get(key) or before[key]
        figures.append(
            FigureChange(
                known.host, known.name, known.unit, known.higher_is_better,
                before[key].value if key in before else None,
                after[key].value if key in after else None,
            )
        )  # fmt: skip
    checks_a = {(c["check_id"], c["host"]): c for c in results_a.get("checks", [])}
    checks_b = {(c["check_id"], c["host"]): c for c in results_b.get("checks", [])}
    checks = []
    for key in sorted(checks_a.keys() | checks_b.keys()):
        a, b = checks_a.get(key), checks_b.get(key)
        if a and b and a["status"] == b["status"]:
            continue
        checks.append(
            CheckChange(
                key[0], key[1], a["status"] if a else None, b["status"] if b else None,
                a.get("measured") if a else None, b.get("measured") if b else None,
                (b or a or {}).get("unit"), str((b or a or {}).get("reason", "")),
            )
        )  # fmt: skip
    return Comparison(side_a, side_b, threshold, figures, checks)


def comparison_lines(comparison: Comparison) -> list[str]:
    c = comparison
    lines = [
        f"compare {c.a.run_id} ({c.a.verdict.upper()}) -> {c.b.run_id} ({c.b.verdict.upper()}): "
        f"{len(c.regressions)} regression(s) beyond {c.threshold * 100:.0f} %, "
        f"{len(c.improvements)} improvement(s), {len(c.newly_failing)} check(s) newly failing"
    ]
    for figure in c.regressions:
        lines.append(f"  FAIL {figure.host} {figure.sentence(c.threshold)}")
    for check in c.newly_failing:
        lines.append(
            f"  FAIL {check.host} {check.check_id}: {check.before or 'absent'} -> {check.after}"
            f" (measured {_number(check.measured_before)} -> {_number(check.measured_after)}"
            f" {check.unit or ''}".rstrip()
            + f"): {check.reason}"
        )
    for figure in c.improvements:
        lines.append(f"  better {figure.host} {figure.sentence(c.threshold)}")
    for check in c.checks:
        if not check.newly_failing and check.direction():
            word = "worse" if check.direction() < 0 else "better"
            lines.append(
                f"  {word} {check.host} {check.check_id}: {check.before or 'absent'} -> "
                f"{check.after or 'absent'}"
            )
    lines.append(f"verdict: {c.verdict.upper()}")
    return lines


def render_comparison(comparison: Comparison) -> str:
    hosts = sorted({f.host for f in comparison.figures} | {c.host for c in comparison.checks})
    return render_page(
        "compare.html.j2",
        {
            "c": comparison,
            "hosts": hosts,
            "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "number": _number,
        },
    )
