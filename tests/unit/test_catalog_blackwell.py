"""Blackwell in the catalog: B200, B300, GB200, GB300, their boards and NVL72 trays, with the
published healthy all_reduce results that anchor the judge (each with its source).

Truths from NVIDIA's product pages (hardware.json and compute.json name them): NVLink 5 is 18
links x 50 GB/s = 900 GB/s per direction per GPU; an NVL72 rack is one NVLink domain of 18
compute trays x 4 GPUs; dense BF16 per GPU is 2,250 TFLOPS (B200, B300) and 2,500 (GB200,
GB300), half the 'with sparsity' figures."""

from __future__ import annotations

import pytest

from gpuval.catalog.catalog import identify_gpu
from gpuval.catalog.health import compute_of
from gpuval.catalog.systems import find_system, system_collective_peak, system_matrix, systems
from gpuval.checks.thresholds import DEFAULTS


@pytest.mark.parametrize(
    ("name", "model", "pcie_gen"),
    [("NVIDIA B200", "B200", 5), ("NVIDIA GB200", "GB200", 5), ("NVIDIA GB300", "GB300", 6),
     ("NVIDIA B300 SXM6 AC", "B300", 6)],
)  # fmt: skip
def test_blackwell_names_and_nvlink5(name: str, model: str, pcie_gen: int) -> None:
    gpu = identify_gpu(name)
    assert gpu is not None and gpu.model == model
    assert (gpu.nvlink_generation, gpu.nvlink_links, gpu.per_link_gbps()) == (5, 18, 50.0)
    assert gpu.pcie_gen == pcie_gen


@pytest.mark.parametrize(
    ("model", "bf16", "fp8", "hbm_gb"),
    [("B200", 2250, 4500, 180), ("B300", 2250, 4500, 288), ("GB200", 2500, 5000, 186),
     ("GB300", 2500, 5000, 288)],
)  # fmt: skip
def test_blackwell_dense_peaks_and_hbm(model: str, bf16: float, fp8: float, hbm_gb: float) -> None:
    compute = compute_of(model)
    assert compute is not None and compute.ecc
    assert compute.dense_tflops["bf16"] == bf16 and compute.dense_tflops["fp8"] == fp8
    assert (compute.hbm_gb, compute.hbm_tbps) == (hbm_gb, 8.0)
    assert "https://" in compute.source


@pytest.mark.parametrize("name", ["GB200 NVL72 compute tray", "GB300 NVL72 compute tray"])
def test_nvl72_trays_are_one_18_node_domain(name: str) -> None:
    system = find_system(name)
    assert system is not None
    assert (system.gpus, system.nvlink_domain_nodes, system.links_per_pair) == (4, 18, 18)


def test_boards_and_aliases() -> None:
    b300 = find_system("DGX B300")
    assert b300 is not None and b300.name == "HGX B300 8-GPU" and b300.nvlink_domain_nodes is None
    b200 = find_system("DGX B200")
    assert b200 is not None and b200.name == "HGX B200 8-GPU"


def test_published_healthy_all_reduce_passes_the_default_bands() -> None:
    """Every published healthy result sits at or above the pass band of its board's NVLink
    peak (900 GB/s per direction), and below the NVLS allowance."""
    published = [(s, r) for s in systems() for r in s.published_all_reduce]
    assert {s.name for s, _ in published} >= {
        "HGX B200 8-GPU", "HGX B300 8-GPU", "GB200 NVL72 compute tray", "GB300 NVL72 compute tray",
    }  # fmt: skip
    for system, result in published:
        gpu = identify_gpu(system.gpu_models[0] if system.gpu_models else None)
        assert gpu is not None and system.gpus is not None
        matrix = system_matrix(system, system.gpus)
        assert matrix is not None
        peak = system_collective_peak(system, matrix, gpu)
        assert peak is not None and peak.per_direction_gbps == 900.0
        fraction = result.busbw_gbps / peak.per_direction_gbps
        assert DEFAULTS.busbw_pass_fraction <= fraction <= DEFAULTS.nvls_max_over_peak, result
        assert result.source.startswith("https://github.com/")
