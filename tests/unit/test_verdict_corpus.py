"""The verdict corpus: every case folder of tests/data/verdicts judged through the real pipeline.

Each case is a run folder plus `expected.json`, written from hardware specs, physics and
published outputs before gpuval judged it (tests/data/verdicts/README.md gives the sources and
the reasoning): the run's verdict, exactly the hosts with a failing or erroring check ("cluster"
for cluster-wide and link findings), hosts that must not fail, and what a person must find in a
host's reasons. A mention "a|b" is found when any alternative is, case-insensitively; for a
fail or error verdict the host's failing checks are searched, otherwise its non-passing ones.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuval.checks.rack_tests import rack_subject
from gpuval.pipeline import report_run

CORPUS = Path(__file__).parents[1] / "data" / "verdicts"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "expected.json").is_file())
CLUSTER = "cluster"
FAILING = frozenset({"fail", "error"})
EXIT_CODES = {"pass": 0, "warn": 0, "unjudged": 3, "fail": 1, "error": 2}  # --fail-on default
# A size budget for the repository, not a verdict bound: ~70 text cases of ~30 KB. A case that
# needs more is cut to the lines its verdict reads (each case's README says what was cut).
MAX_CORPUS_BYTES = 2_500_000


@dataclass(frozen=True)
class BusbwChoice:
    exit_code: int
    verdict: str
    checks: list[dict[str, Any]]


def judge(case_dir: Path, out_dir: Path, capsys: pytest.CaptureFixture[str]) -> BusbwChoice:
    """The case judged by gpuval.pipeline.report_run. A folder so broken that no results are
    written (bad input) counts as one error of the whole run whose reason is what gpuval printed."""
    exit_code = report_run(case_dir, out_dir=out_dir, quiet=True)
    printed = capsys.readouterr().err
    summary = out_dir / "summary.json"
    if not summary.is_file():
        assert exit_code == EXIT_CODES["error"], f"no summary.json, yet exit status {exit_code}"
        error = {"check_id": "run-folder", "host": CLUSTER, "status": "error", "reason": printed}
        return BusbwChoice(exit_code, "error", [error])
    verdict = json.loads(summary.read_text())["verdict"]
    checks: list[dict[str, Any]] = json.loads((out_dir / "results.json").read_text())["checks"]
    return BusbwChoice(exit_code, verdict, checks)


def listing(checks: list[dict[str, Any]]) -> str:
    lines = (f"  {c['status']:8} {c['host']} {c['check_id']}: {c['reason']}" for c in checks)
    return "\n".join(lines)


@pytest.mark.parametrize("case", CASES)
def test_verdict(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = json.loads((CORPUS / case / "expected.json").read_text())
    judged = judge(CORPUS / case, tmp_path, capsys)
    context = f"{case}: {expected['why']}\nchecks:\n{listing(judged.checks)}"

    assert judged.verdict == expected["verdict"], context
    assert judged.exit_code == EXIT_CODES[expected["verdict"]], context
    failing = {c["host"] for c in judged.checks if c["status"] in FAILING}
    assert failing == set(expected["failing_hosts"]), context
    assert not failing & set(expected["not_failing_hosts"]), context
    searched = FAILING if expected["verdict"] in FAILING else {"warn", "unjudged", *FAILING}
    for host, mentions in expected["mentions"].items():
        reasons = " ".join(
            c["reason"] for c in judged.checks if c["host"] == host and c["status"] in searched
        ).lower()
        for mention in mentions:
            found = any(a in reasons for a in mention.lower().split("|"))
            assert found, f"{host} never says {mention!r}\n{context}"


def test_every_case_is_explained_in_the_readme() -> None:
    readme = (CORPUS / "README.md").read_text()
    assert [c for c in CASES if f"## {c}\n" not in readme] == []


def test_expectations_name_only_the_run_hosts() -> None:
    for case in CASES:
        expected = json.loads((CORPUS / case / "expected.json").read_text())
        run = json.loads((CORPUS / case / "run.json").read_text())
        hosts = run["hosts"] if isinstance(run.get("hosts"), list) else []
        named = {*expected["failing_hosts"], *expected["not_failing_hosts"], *expected["mentions"]}
        declared = run.get("declared") or {}
        racks = {rack_subject(d["nvl_domain"]) for d in declared.values() if d.get("nvl_domain")}
        assert named <= {*hosts, *racks, CLUSTER}, case
        assert expected["verdict"] in EXIT_CODES, case


def test_corpus_stays_small() -> None:
    size = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    assert size < MAX_CORPUS_BYTES
