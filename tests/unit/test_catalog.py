"""The hardware catalog: GPU identification from printed names, and per-direction peaks."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from gpuval.catalog import (
    collective_peak,
    identify_gpu,
    internode_peak,
    nic_peak,
    pair_peak,
    pcie_peak,
)


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM"),
        ("A100-SXM4-40GB", "A100 SXM"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2"),
        ("Tesla V100-PCIE-16GB", "V100 PCIe"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA RTX A6000", "RTX A6000"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
        ("AMD Instinct MI300X", "MI300X"),
        ("AMD Instinct MI250X", "MI250X"),
        ("A100 SXM", "A100 SXM"),  # a catalog model name, as run.json may declare it
    ],
)
def test_identify_gpu_from_printed_names(name: str, model: str) -> None:
    found = identify_gpu(name)
    assert found is not None and found.model == model


@pytest.mark.parametrize("name", ["NVIDIA Graphics Device", "NVIDIA L40", "", None])
def test_unknown_names_are_not_guessed(name: str | None) -> None:
    assert identify_gpu(name) is None


@pytest.mark.parametrize(
    ("cell", "gpu", "per_direction", "link"),
    [
        ("NV18", "H100 SXM", 450.0, "NVLink 4"),
        ("NV12", "A100 SXM", 300.0, "NVLink 3"),
        ("NV6", "V100 SXM2", 150.0, "NVLink 2"),
        ("NV18", "B200", 900.0, "NVLink 5"),
        ("NV4", "RTX 3090", 56.25, "NVLink 3"),  # 112.5 GB/s duplex bridge
        ("NV2", "RTX A6000", 28.125, "NVLink 3"),
        ("PHB", "H100 SXM", 63.0, "PCIe 5 x16"),
        ("PIX", "A100 PCIe", 31.0, "PCIe 4 x16"),
        ("SYS", "V100 PCIe", 15.75, "PCIe 3 x16"),
        ("SOC", "L40S", 31.0, "PCIe 4 x16"),
    ],
)
def test_pair_peak_from_topo_cell(cell: str, gpu: str, per_direction: float, link: str) -> None:
    peak = pair_peak(cell, identify_gpu(gpu))
    assert peak is not None
    assert peak.per_direction_gbps == pytest.approx(per_direction)
    assert peak.duplex_gbps == pytest.approx(2 * per_direction)
    assert peak.link == link
    assert peak.source


def test_pair_peak_needs_a_known_model_and_a_link_cell() -> None:
    assert pair_peak("NV2", None) is None
    assert pair_peak("X", identify_gpu("H100 SXM")) is None


def test_collective_peak_nvswitch_is_the_per_gpu_bond() -> None:
    eight = [["X" if i == j else "NV18" for j in range(8)] for i in range(8)]
    peak = collective_peak(eight, identify_gpu("NVIDIA H100 80GB HBM3"))
    assert peak is not None and peak.per_direction_gbps == 450.0
    assert "NVSwitch" in peak.basis


def test_collective_peak_point_to_point_mesh_sums_links() -> None:
    # DGX-1 V100 hybrid cube-mesh row: NV1/NV2 to some peers, 6 links per GPU in total
    row = ["X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]
    mesh = [row[-i:] + row[:-i] for i in range(8)]
    peak = collective_peak(mesh, identify_gpu("Tesla V100-SXM2-32GB"))
    assert peak is not None and peak.per_direction_gbps == 150.0


def test_collective_peak_falls_to_pcie_when_nvlink_does_not_join_all_gpus() -> None:
    pairs = [
        ["X", "NV4", "PHB", "PHB"],
        ["NV4", "X", "PHB", "PHB"],
        ["PHB", "PHB", "X", "NV4"],
        ["PHB", "PHB", "NV4", "X"],
    ]
    peak = collective_peak(pairs, identify_gpu("NVIDIA GeForce RTX 3090"))
    assert peak is not None and peak.per_direction_gbps == 31.0


def test_collective_peak_xgmi_and_unknowns() -> None:
    peak = collective_peak([["X", "XGMI"], ["XGMI", "X"]], identify_gpu("AMD Instinct MI300X"))
    assert peak is not None and peak.per_direction_gbps == 448.0
    assert collective_peak([["X", "NV2"], ["NV2", "X"]], None) is None
    assert collective_peak([["X"]], identify_gpu("H100 SXM")) is None


def test_pcie_width_scales_and_unknown_generation_is_none() -> None:
    peak = pcie_peak(5, 8)
    assert peak is not None and peak.per_direction_gbps == 31.5 and peak.link == "PCIe 5 x8"
    assert pcie_peak(2) is None


def test_nic_and_internode_peaks() -> None:
    assert nic_peak(400).per_direction_gbps == 50.0
    assert nic_peak(400).link == "NDR InfiniBand"
    assert nic_peak(200).link == "HDR InfiniBand"
    assert nic_peak(100, "Ethernet").link == "100G Ethernet"
    assert nic_peak(100, "Ethernet").per_direction_gbps == 12.5
    node = internode_peak([(400.0, "InfiniBand")] * 8, 8)
    assert node is not None and node.per_direction_gbps == 50.0
    assert "400 GB/s per node" in node.basis
    assert internode_peak([], 8) is None


def test_every_catalog_number_names_its_source() -> None:
    text = resources.files("gpuval.catalog").joinpath("hardware.json").read_text("utf-8")
    document = json.loads(text)
    entries = [*document["links"].values(), *document["nics"].values(), *document["gpus"]]
    assert entries
    assert all(entry.get("source") for entry in entries)
    for link in document["links"].values():
        if "duplex_gbps" in link:
            assert link["duplex_gbps"] == 2 * link["per_gpu_per_direction_gbps"]
