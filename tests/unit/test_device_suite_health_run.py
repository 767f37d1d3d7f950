"""The suite with the quick health level on a lent H100
(tests/data/device/h100-x1-suite-2026-11-23): judged again from its raw outputs, the verdict is
what its README says the outputs show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuval.pipeline import report_run

RUN = Path(__file__).parents[1] / "data" / "device" / "h100-x1-suite-2026-11-23"


@pytest.fixture(scope="module")
def checks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    out = tmp_path_factory.mktemp("judged")
    assert report_run(RUN, out_dir=out, quiet=True) == 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["verdict"] == "warn"
    return {c["check_id"]: c for c in results["checks"] if c["host"] == "localhost"}


def test_the_burn_ran_through_the_health_role_and_passes(
    checks: dict[str, dict[str, object]],
) -> None:
    burn = checks["health.burn.GPU0"]
    assert burn["status"] == "pass"
    assert burn["measured"] == pytest.approx(678.38, abs=0.01)
    assert burn["reference"] == 989.4  # H100 SXM dense BF16


def test_nothing_fails_and_every_warning_is_a_step_the_node_could_not_run(
    checks: dict[str, dict[str, object]],
) -> None:
    assert not [k for k, c in checks.items() if c["status"] in ("fail", "error", "unjudged")]
    skipped = {k: str(c["reason"]) for k, c in checks.items() if k.startswith("step.")}
    assert "lspci not found" in skipped["step.health-lspci"]
    assert "ofed_info not found" in skipped["step.health-ofed"]
    assert "dcgmi not found" in skipped["step.health-dcgm-diag"]
    assert "the openmpi role did not run" in skipped["step.mpi-preflight"]
    assert "health.nvlink.errors" not in checks  # no NVLink on this GPU: no counter to judge
    for subject in ("xid", "memory", "clocks"):
        assert checks[f"health.{subject}"]["status"] == "pass"
