"""The hardware catalog: GPU identification from printed names, per-direction peaks, systems
(which link each GPU pair of a board should show) and the network's bounds per collective.
Expected numbers are the specs' (references in the catalog and references.md)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from gpuval.catalog import (
    Port,
    across_nodes_bound,
    collective_peak,
    detect_system,
    find_system,
    identify_gpu,
    link_problems,
    nic_peak,
    node_bandwidth,
    pair_peak,
    pcie_peak,
    system_collective_peak,
    system_ring_neighbour_peak,
    systems,
)
from gpuval.catalog.nccl_warnings import classify


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
    assert "NV18 per GPU" in peak.basis


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


def test_nic_peaks() -> None:
    assert nic_peak(400).per_direction_gbps == 50.0
    assert nic_peak(400).link == "NDR InfiniBand"
    assert nic_peak(200).link == "HDR InfiniBand"
    assert nic_peak(100, "Ethernet").link == "100G Ethernet"
    assert nic_peak(100, "Ethernet").per_direction_gbps == 12.5


NDR8 = [Port(400, "InfiniBand", f"mlx5_{i}/1") for i in range(8)]


def test_node_bandwidth_is_the_sum_of_its_ports_never_divided_by_gpus() -> None:
    node = node_bandwidth(NDR8)
    assert node is not None and node.per_direction_gbps == 400.0
    assert "400 GB/s per node" in node.basis
    assert node_bandwidth([]) is None


@pytest.mark.parametrize(
    ("collective", "ranks", "nodes", "ports", "bound"),
    [
        # references.md: 2 x 8 GPUs with 8x NDR: 400 x (30/16) / 1 = 750 GB/s
        ("all_reduce", 16, 2, NDR8, 750.0),
        # 8x 200G (B = 200) at 2 nodes: 375 GB/s
        ("all_reduce", 16, 2, [Port(200, "InfiniBand", "p")] * 8, 375.0),
        ("all_gather", 16, 2, NDR8, 750.0),
        ("reduce_scatter", 16, 2, NDR8, 750.0),
        ("broadcast", 16, 2, NDR8, 400.0),
        # nccl-tests issue 130: N/(N-1) x the bandwidth per GPU: 2 x 50
        ("alltoall", 16, 2, NDR8, 100.0),
        # one GPU's rail
        ("sendrecv", 16, 2, NDR8, 50.0),
        # 4 nodes: 400 x (2 x 31/32) / (2 x 3/4) = 516.67
        ("all_reduce", 32, 4, NDR8, 400 * (62 / 32) / 1.5),
    ],
)
def test_across_nodes_bound_per_collective(
    collective: str, ranks: int, nodes: int, ports: list[Port], bound: float
) -> None:
    node = node_bandwidth(ports)
    assert node is not None
    found = across_nodes_bound(collective, ranks, nodes, node)
    assert found is not None and found[0] == pytest.approx(bound)
    assert "PERFORMANCE.md" in found[1]


def test_no_bound_for_one_node_or_an_unknown_collective() -> None:
    node = node_bandwidth(NDR8)
    assert node is not None
    assert across_nodes_bound("all_reduce", 8, 1, node) is None
    assert across_nodes_bound("hypothetical", 16, 2, node) is None


def _square(size: int, cell: str) -> list[list[str]]:
    return [["X" if i == j else cell for j in range(size)] for i in range(size)]


# A real DGX-1 (V100) hybrid cube mesh as nvidia-smi topo -m prints it: NV1/NV2 to four peers
# (six links per GPU), SYS to the other three (NVIDIA DGX-1 system architecture white paper).
DGX1 = [
    ["X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"],
    ["NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"],
    ["NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"],
    ["NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"],
    ["NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"],
    ["SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"],
    ["SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"],
    ["SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"],
]


@pytest.mark.parametrize(
    ("gpu", "links", "system", "collective_peak_gbps"),
    [
        ("NVIDIA H100 80GB HBM3", _square(8, "NV18"), "HGX H100 8-GPU", 450.0),
        # Lambda's 4x H100 instances show NV18 between all four: part of an NVSwitch board
        ("NVIDIA H100 80GB HBM3", _square(4, "NV18"), "HGX H100 8-GPU", 450.0),
        # HGX H100 4-GPU: 18 links / 3 peers = NV6 each; all_reduce spreads over all 18
        ("NVIDIA H100 80GB HBM3", _square(4, "NV6"), "HGX H100 4-GPU", 450.0),
        # ALCF Polaris: 4x A100 SXM4, NV4 between every pair: 12 links x 25 = 300
        ("NVIDIA A100-SXM4-40GB", _square(4, "NV4"), "HGX A100 4-GPU", 300.0),
        ("NVIDIA A100-SXM4-80GB", _square(8, "NV12"), "HGX A100 8-GPU", 300.0),
        ("Tesla V100-SXM2-32GB", DGX1, "DGX-1 V100", 150.0),
        ("NVIDIA L40S", _square(4, "SYS"), "PCIe server", 31.0),
        (
            "NVIDIA H100 PCIe",
            [
                ["X", "NV12", "SYS", "SYS"],
                ["NV12", "X", "SYS", "SYS"],
                ["SYS", "SYS", "X", "NV12"],
                ["SYS", "SYS", "NV12", "X"],
            ],
            "PCIe server with NVLink bridges",
            63.0,
        ),
    ],
)
def test_healthy_boards_match_their_system_without_problems(
    gpu: str, links: list[list[str]], system: str, collective_peak_gbps: float
) -> None:
    model = identify_gpu(gpu)
    assert model is not None
    found = detect_system(model, links)
    assert found is not None and found.name == system
    assert link_problems(found, links, model) == []
    peak = system_collective_peak(found, links, model)
    assert peak is not None and peak.per_direction_gbps == collective_peak_gbps


def test_a_degraded_board_still_matches_its_board_and_names_the_pair() -> None:
    model = identify_gpu("NVIDIA H100 80GB HBM3")
    assert model is not None
    links = _square(8, "NV18")
    links[0][5] = links[5][0] = "NV12"
    system = detect_system(model, links)
    assert system is not None and system.name == "HGX H100 8-GPU"
    problems = link_problems(system, links, model)
    assert [p.what for p in problems] == ["GPU0-GPU5 NV12 where the HGX H100 8-GPU has NV18"]
    # judged against what the board is built with, not the degraded link
    peak = system_collective_peak(system, links, model)
    assert peak is not None and peak.per_direction_gbps == 450.0


def test_dgx1_lost_link_is_named_by_pair_against_the_published_matrix() -> None:
    model = identify_gpu("Tesla V100-SXM2-32GB")
    system = find_system("DGX-1 (V100)")
    assert model is not None and system is not None and system.name == "DGX-1 V100"
    links = [list(row) for row in DGX1]
    links[0][3] = links[3][0] = "NV1"  # one of GPU0-GPU3's two NVLinks is down
    problems = link_problems(system, links, model)
    assert [p.what for p in problems] == ["GPU0-GPU3 NV1 where the DGX-1 V100 has NV2"]


def test_cloud_machine_types_name_their_board() -> None:
    for name in ("a3-megagpu-8g", "p5.48xlarge", "DGX H100"):
        found = find_system(name)
        assert found is not None and found.name == "HGX H100 8-GPU"
    assert find_system("a2-ultragpu-8g") == find_system("HGX A100 8-GPU")
    assert find_system("no such board") is None


def test_sendrecv_inside_a_mesh_is_bound_by_the_neighbour_link() -> None:
    model = identify_gpu("NVIDIA H100 80GB HBM3")
    mesh = find_system("HGX H100 4-GPU")
    switch = find_system("hgx h100 8-gpu")
    assert model is not None and mesh is not None and switch is not None
    neighbour = system_ring_neighbour_peak(mesh, _square(4, "NV6"), model)
    assert neighbour is not None and neighbour.per_direction_gbps == 150.0
    full = system_ring_neighbour_peak(switch, _square(8, "NV18"), model)
    assert full is not None and full.per_direction_gbps == 450.0
    assert find_system("DGX H100") is switch


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("Cuda failure 'unspecified launch failure'", "fatal"),
        ("NET/IB : Got async event : port error", "fatal"),
        ("NET/IB : Got completion from peer 10.0.0.2<37948> with error 12, opcode 2", "fatal"),
        ("P2P is disabled between NVLINK connected GPUs 1 and 0.", "fatal"),
        (
            'Missing "iommu=pt" from kernel command line which can lead to system instability',
            "config",
        ),
        ("[Service thread] Accept failed Resource temporarily unavailable", "benign"),
        ("something no rule knows", "unknown"),
    ],
)
def test_nccl_warn_lines_are_classified(message: str, kind: str) -> None:
    assert classify(message).kind == kind


def test_every_catalog_number_names_its_source() -> None:
    text = resources.files("gpuval.catalog").joinpath("hardware.json").read_text("utf-8")
    document = json.loads(text)
    entries = [
        *document["links"].values(), *document["nics"].values(), *document["gpus"],
        *document["systems"],
    ]  # fmt: skip
    assert entries
    assert all(entry.get("source") for entry in entries)
    for link in document["links"].values():
        if "duplex_gbps" in link:
            assert link["duplex_gbps"] == 2 * link["per_gpu_per_direction_gbps"]


def test_boards_cite_a_url() -> None:
    for system in systems():
        if system.fabric not in ("pcie", "single", "bridge"):
            assert "https://" in system.source, system.name
