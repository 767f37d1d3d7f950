"""What the hardware can do, every number with its source (hardware.json): interconnect peaks,
GPU models, systems (boards and their expected links), and the network's bounds per collective."""

from gpuval.catalog.catalog import (
    GpuModel,
    Peak,
    collective_peak,
    identify_gpu,
    nic_peak,
    nvlink_count,
    pair_peak,
    pcie_peak,
)
from gpuval.catalog.network import Port, across_nodes_bound, node_bandwidth
from gpuval.catalog.systems import (
    LinkProblem,
    System,
    detect_system,
    find_system,
    link_problems,
    system_collective_peak,
    system_ring_neighbour_peak,
    systems,
)

__all__ = [
    "GpuModel",
    "LinkProblem",
    "Peak",
    "Port",
    "System",
    "across_nodes_bound",
    "collective_peak",
    "detect_system",
    "find_system",
    "identify_gpu",
    "link_problems",
    "nic_peak",
    "node_bandwidth",
    "nvlink_count",
    "pair_peak",
    "pcie_peak",
    "system_collective_peak",
    "system_ring_neighbour_peak",
    "systems",
]
