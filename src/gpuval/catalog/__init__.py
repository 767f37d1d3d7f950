"""What the hardware can do: interconnect peaks and GPU models (hardware.json), and the
expected per-direction peak for a GPU pair, a node's collectives, or a node's NICs."""

from gpuval.catalog.catalog import (
    GpuModel,
    Peak,
    collective_peak,
    identify_gpu,
    internode_peak,
    nic_peak,
    pair_peak,
    pcie_peak,
)

__all__ = [
    "GpuModel",
    "Peak",
    "collective_peak",
    "identify_gpu",
    "internode_peak",
    "nic_peak",
    "pair_peak",
    "pcie_peak",
]
