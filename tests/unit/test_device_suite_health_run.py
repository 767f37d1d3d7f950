"""The suite with the quick health level on lent GPUs, judged again from its raw outputs: an H100
(tests/data/device/h100-x1-suite-2026-11-23) and an H200 without (h200-x1-suite-2026-11-27) and
with its install phase (h200-x1-mpi-2026-11-27). Each verdict is what the run's README says its
outputs show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuval.pipeline import report_run

DEVICE = Path(__file__).parents[1] / "data" / "device"
# The burn's own figure (health-gemm-burn.txt), against NVIDIA's dense BF16 figure for both
# boards: 989.4 TFLOPS (H100 SXM and H200 SXM share the Hopper SXM compute).
BURN_TFLOPS = {
    "h100-x1-suite-2026-11-23": 678.38,
    "h200-x1-suite-2026-11-27": 666.50,
    "h200-x1-mpi-2026-11-27": 662.11,
}
# Only the run with its install phase has Open MPI's launch contract: its preflight's one rank
# answered ("gpuval-mpi-preflight OK 1 ranks on 1 hosts"), and its library path made nccl-tests
# load the NCCL it was built on; the others have nothing to launch, and load another NCCL.
WITH_INSTALL_PHASE = {"h200-x1-mpi-2026-11-27"}

Checks = dict[str, dict[str, object]]
Judged = tuple[str, list[dict[str, object]]]  # the run's folder name, its localhost checks


@pytest.fixture(scope="module", params=sorted(BURN_TFLOPS))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Judged:
    out = tmp_path_factory.mktemp("judged")
    assert report_run(DEVICE / request.param, out_dir=out, quiet=True) == 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["verdict"] == "warn"
    return request.param, [c for c in results["checks"] if c["host"] == "localhost"]


def by_id(checks: list[dict[str, object]]) -> Checks:
    return {str(c["check_id"]): c for c in checks if c["check_id"] != "parse.warning"}


def test_the_burn_ran_through_the_health_role_and_passes(run: Judged) -> None:
    name, checks = run
    burn = by_id(checks)["health.burn.GPU0"]
    assert burn["status"] == "pass"
    assert burn["measured"] == pytest.approx(BURN_TFLOPS[name], abs=0.01)
    assert burn["reference"] == 989.4


def test_nothing_fails_and_every_warning_is_a_step_the_node_could_not_run(
    run: Judged,
) -> None:
    name, checks = run[0], by_id(run[1])
    assert not [k for k, c in checks.items() if c["status"] in ("fail", "error", "unjudged")]
    skipped = {k: str(c["reason"]) for k, c in checks.items() if k.startswith("step.")}
    assert "lspci not found" in skipped["step.health-lspci"]
    assert "ofed_info not found" in skipped["step.health-ofed"]
    assert "dcgmi not found" in skipped["step.health-dcgm-diag"]
    if name in WITH_INSTALL_PHASE:
        assert checks["mpi-preflight"]["status"] == "pass"
        assert "step.mpi-preflight" not in checks
    else:
        assert "the openmpi role did not run" in skipped["step.mpi-preflight"]
    assert "health.nvlink.errors" not in checks  # no NVLink on this GPU: no counter to judge
    for subject in ("xid", "memory", "clocks"):
        assert checks[f"health.{subject}"]["status"] == "pass"


def test_the_nccl_the_binaries_loaded_is_named_apart_from_the_one_they_were_built_on(
    run: Judged,
) -> None:
    # Both machines' image holds NCCL 2.28.3 in /usr beside the wheel's 2.28.9 (nccl_home): the
    # preflight's nccl-version step finds both. Without the install phase nccl-tests also loaded
    # the other one ("nccl-headers=22809 nccl-library=22803"); with it, the launch contract's
    # library path made it load its own ("nccl-library=22809", "NCCL version 2.28.9").
    name, checks = run
    warnings = [str(c["reason"]) for c in checks if c["check_id"] == "parse.warning"]
    assert any("libnccl.so.2.28.3 differs from header NCCL 2.28.9" in w for w in warnings)
    other = "nccl-tests was built on NCCL 2.28.9 (nccl-headers=22809) and ran on NCCL 2.28.3"
    assert any(other in w for w in warnings) is (name not in WITH_INSTALL_PHASE)
