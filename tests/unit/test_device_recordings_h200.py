"""Outputs recorded on a lent H200 (tests/data/device/h200-x1-2026-11-27), read by gpuval's parsers
(test_device_recordings checks every file of every manifest parses without a problem). The
truths checked here were read off the outputs before they were parsed, and agree with NVIDIA's
H200 page (https://www.nvidia.com/en-us/data-center/h200/): 141 GB of HBM3e (143771 MiB as
the driver counts it), up to 700 W for the SXM board, bf16 989 TFLOPS dense (1,979 with
sparsity)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuval import parsers

H200 = Path(__file__).resolve().parents[1] / "data" / "device" / "h200-x1-2026-11-27"


def run_of(name: str) -> Any:
    result = parsers.parse_file(H200 / name)
    assert result is not None
    (run,) = result.runs
    return run


def test_every_inventory_form_names_the_same_h200() -> None:
    forms = ["nvidia-smi.txt", "nvidia-smi-q.txt", "nvidia-smi-q-x.xml", "nvidia-smi-query-gpu.csv"]
    gpus = [run_of(name).gpus for name in forms]
    assert all(len(found) == 1 for found in gpus)
    for (gpu,) in gpus:
        assert (gpu.name, gpu.pci_bus_id, gpu.memory_total_mib) == (
            "NVIDIA H200", "00000000:00:06.0", 143771.0,
        )  # fmt: skip
    for name in forms[1:]:
        (gpu,) = run_of(name).gpus
        assert gpu.pcie is not None
        assert (gpu.pcie.gen_current, gpu.pcie.width_current) == (5, 16)
        assert (gpu.pcie.gen_max, gpu.pcie.width_max) == (5, 16)
    assert run_of("nvidia-smi-q.txt").driver_version == "580.159.04"


def test_the_topology_header_underlined_with_escape_codes_still_reads() -> None:
    assert "\x1b[4m" in (H200 / "nvidia-smi-topo-m.txt").read_text()
    topology = run_of("nvidia-smi-topo-m.txt")
    assert (topology.devices, topology.links) == (["GPU0"], [["X"]])
    assert topology.cpu_affinity == {"GPU0": "0-15"}


def test_the_bf16_burn_is_correct_and_held_at_the_700_w_limit() -> None:
    (gpu,) = run_of("gemm-burn-bf16-20s.json").gpus
    assert gpu.correct and gpu.mismatches == 0 and gpu.error is None
    # 668 of 989 dense TFLOPS: a board at its power limit, as the H100's 678 was
    assert gpu.tflops == 668.11758
    capped = [sample for sample in gpu.samples if "sw_power_cap" in sample.throttle]
    assert capped and max(sample.power_w for sample in capped) <= 700.0
    assert all("sw_power_cap" in sample.throttle for sample in gpu.samples[2:])
