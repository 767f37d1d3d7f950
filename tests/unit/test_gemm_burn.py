"""The GEMM burn (gpuval.nodebench.gemm_burn) on the CPU: its JSON reads back through the
parser, its checker catches a product that changes or a wrong block, and without a GPU it fails
cleanly (exit 2, the reason in the JSON)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gpuval.nodebench import gemm_burn  # noqa: E402
from gpuval.parsers import gpuval_bench  # noqa: E402
from gpuval.schemas.validation import validate  # noqa: E402


def burn(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    status = gemm_burn.main(list(args))
    document = json.loads(capsys.readouterr().out)
    assert isinstance(document, dict)
    return status, document


def test_cpu_burn_is_correct_and_reads_back(capsys: pytest.CaptureFixture[str]) -> None:
    status, document = burn(capsys, "--device", "cpu", "--size", "64", "--seconds", "0.3",
                            "--dtype", "fp32")  # fmt: skip
    assert status == 0
    (gpu,) = document["gpus"]
    assert gpu["correct"] is True and gpu["mismatches"] == 0 and gpu["iterations"] > 0
    assert gpu["tflops"] > 0 and gpu["max_abs_error"] <= gemm_burn.TOLERANCE["fp32"]
    result = gpuval_bench.parse(json.dumps(document))
    validate(result.to_dict(), "parse-result")
    assert not result.errors and result.runs[0].device_type == "cpu"


def test_without_a_gpu_it_fails_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    status, document = burn(capsys, "--seconds", "1")
    assert status == 2 and document["gpus"] == []
    assert document["error"].startswith("cannot burn:")
    assert "is_available() is False" in document["error"]


def test_a_product_that_changes_between_runs_is_wrong(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A computation fault: the same inputs give other bits after a while (what gpu-burn's
    comparison catches)."""
    real: Callable[..., Any] = torch.matmul
    calls = {"n": 0}

    def flaky(a: Any, b: Any, out: Any = None) -> Any:
        calls["n"] += 1
        result = real(a, b, out=out) if out is not None else real(a, b)
        if calls["n"] > 5:
            result[0, 0] += 1.0
        return result

    monkeypatch.setattr(gemm_burn, "CONSISTENCY_EVERY_S", 0.0)
    monkeypatch.setattr(torch, "matmul", flaky)
    status, document = burn(capsys, "--device", "cpu", "--size", "32", "--seconds", "0.2",
                            "--dtype", "fp32")  # fmt: skip
    assert status == 1
    (gpu,) = document["gpus"]
    assert gpu["correct"] is False and gpu["mismatches"] > 0


def test_reference_block_catches_a_wrong_product() -> None:
    generator = torch.Generator().manual_seed(1)
    a = torch.randn(64, 64, generator=generator)
    b = torch.randn(64, 64, generator=generator)
    c = a @ b
    assert gemm_burn.reference_error(a, b, c) < 1e-5
    c[3, 7] += 0.1 * float(c.abs().max())
    assert gemm_burn.reference_error(a, b, c) == pytest.approx(0.1, rel=1e-3)


def test_throttle_bits_are_named_as_nvidia_smi_names_them() -> None:
    # nvmlClocksEventReasons: 0x8 HW slowdown, 0x40 HW thermal slowdown; 0x1 (idle) is no slowdown
    assert gemm_burn.throttle_names(0x8 | 0x40 | 0x1) == ["hw_slowdown", "hw_thermal_slowdown"]
