"""The hardware catalog: peaks per direction (unidirectional) for each link, and GPU models.

Numbers live in hardware.json, each with its source. Everything here works per direction,
because that is what a benchmark's busbw measures; `Peak.duplex_gbps` is kept only to explain
readings against advertised (duplex) figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

# `nvidia-smi topo -m` cells that mean "through PCIe" (SOC is the pre-2017 spelling of SYS)
PCIE_CELLS = frozenset({"PIX", "PXB", "PHB", "NODE", "SYS", "SOC", "PCIE"})  # PCIE: amd-smi
XGMI_CELL = "XGMI"
_NVLINK_CELL = re.compile(r"^NV(\d+)$")


@dataclass(frozen=True)
class Peak:
    """A theoretical per-direction peak, how it was derived, and where the numbers come from."""

    per_direction_gbps: float
    basis: str  # e.g. "NVLink 4: 18 links (NV18) x 25 GB/s"
    source: str
    link: str  # short name for sentences: "NVLink 4", "PCIe 5 x16", "NDR InfiniBand"

    @property
    def duplex_gbps(self) -> float:
        return 2 * self.per_direction_gbps


@dataclass(frozen=True)
class GpuModel:
    """One GPU model: its NVLink generation and link count, PCIe generation, name patterns."""

    model: str
    vendor: str
    patterns: tuple[str, ...]
    interconnect: str | None  # key into the catalog's links ("nvlink4", "xgmi-mi300x"), or None
    nvlink_links: int
    nvlink_optional: bool  # bridge-connected cards: NVLink may legitimately be absent
    pcie_gen: int
    pcie_width: int  # lanes of the card's host link by its spec (16), whatever the slot gives
    source: str
    nvlink_per_link_per_direction_gbps: float | None = None  # overrides the generation's rate

    @property
    def nvlink_generation(self) -> int | None:
        link = _links().get(self.interconnect or "")
        if link is None or link["kind"] != "nvlink":
            return None
        return int(link["generation"])

    def per_link_gbps(self) -> float | None:
        """Per NVLink link, per direction; None for GPUs without NVLink."""
        if self.nvlink_per_link_per_direction_gbps is not None:
            return self.nvlink_per_link_per_direction_gbps
        link = _links().get(self.interconnect or "")
        if link is None or link["kind"] != "nvlink":
            return None
        return float(link["per_link_per_direction_gbps"])


@cache
def document() -> dict[str, Any]:
    text = resources.files("gpuval.catalog").joinpath("hardware.json").read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def source_text(source: str) -> str:
    """A catalog `source` with each leading source key ("ml-eng", "nvidia-dgx-1") of its
    '; '-separated parts spelled out from the catalog's `sources` (which hold the URLs)."""
    named: dict[str, str] = document()["sources"]
    parts = []
    for part in source.split("; "):
        key = part.split(" ", 1)[0].rstrip(":")
        parts.append(part.replace(key, f"{key} [{named[key]}]", 1) if key in named else part)
    return "; ".join(parts)


def _links() -> dict[str, dict[str, Any]]:
    links: dict[str, dict[str, Any]] = document()["links"]
    return links


@cache
def gpu_models() -> tuple[GpuModel, ...]:
    """The catalog's GPU models, in matching order (specific names before general ones)."""
    return tuple(
        GpuModel(
            model=entry["model"],
            vendor=entry["vendor"],
            patterns=tuple(entry["patterns"]),
            interconnect=entry["interconnect"],
            nvlink_links=entry["nvlink_links"],
            nvlink_optional=entry["nvlink_optional"],
            pcie_gen=entry["pcie_gen"],
            pcie_width=entry["pcie_width"],
            source=source_text(entry["source"]),
            nvlink_per_link_per_direction_gbps=entry.get("nvlink_per_link_per_direction_gbps"),
        )
        for entry in document()["gpus"]
    )


def identify_gpu(name: str | None) -> GpuModel | None:
    """The model of a GPU from an nvidia-smi / nccl-tests / rocm name, or a catalog model name.

    "NVIDIA H100 80GB HBM3" -> H100 SXM, "NVIDIA A100-SXM4-80GB" -> A100 SXM,
    "Tesla V100-SXM2-32GB" -> V100 SXM2; None when unknown (no guess).
    """
    if not name:
        return None
    text = name.strip()
    for model in gpu_models():
        if any(re.search(pattern, text, re.IGNORECASE) for pattern in model.patterns):
            return model
    return None


def pcie_peak(generation: int, width: int = 16) -> Peak | None:
    """Per-direction peak of a PCIe link of `generation` trained at x`width` (lanes scale it)."""
    link = _links().get(f"pcie{generation}")
    if link is None or width <= 0:
        return None
    x16 = float(link["x16_per_direction_gbps"])
    return Peak(
        per_direction_gbps=round(x16 * width / 16, 4),
        basis=f"PCIe {generation} x{width}: {x16:g} GB/s per direction at x16"
        + ("" if width == 16 else f", scaled to {width} lanes"),
        source=source_text(str(link["source"])),
        link=f"PCIe {generation} x{width}",
    )


def _nvlink_peak(links: int, gpu: GpuModel, cell: str) -> Peak | None:
    per_link = gpu.per_link_gbps()
    if per_link is None:
        return None
    generation = gpu.nvlink_generation
    return Peak(
        per_direction_gbps=links * per_link,
        basis=f"NVLink {generation}: {links} links ({cell}) x {per_link:g} GB/s per direction",
        source=gpu.source,
        link=f"NVLink {generation}",
    )


def nvlink_count(cell: str) -> int | None:
    """The number of bonded NVLinks in a topo cell ("NV18" -> 18); None for anything else."""
    match = _NVLINK_CELL.match(cell.strip())
    return int(match.group(1)) if match else None


def pair_peak(cell: str, gpu: GpuModel | None) -> Peak | None:
    """Per-direction peak between two GPUs joined by topo cell `cell` ("NV18", "PHB", ...).

    NV# = # links x the per-link rate of the GPU's NVLink generation; PCIe paths = the GPU's PCIe
    generation at x16 (the slowest hop bounds P2P through bridges and the CPU). None when the GPU
    model is unknown (no guessed reference) or the cell is not a link.
    """
    if gpu is None:
        return None
    links = nvlink_count(cell)
    if links is not None:
        return _nvlink_peak(links, gpu, cell.strip())
    if cell.strip().upper() == XGMI_CELL and (gpu.interconnect or "").startswith("xgmi"):
        link = _links()[gpu.interconnect or ""]
        return Peak(
            per_direction_gbps=float(link["per_peer_per_direction_gbps"]),
            basis=f"AMD XGMI {gpu.model}: {link['per_peer_per_direction_gbps']:g} GB/s per peer",
            source=source_text(str(link["source"])),
            link="XGMI",
        )
    if cell.strip().upper() in PCIE_CELLS:
        return pcie_peak(gpu.pcie_gen)
    return None


def _per_gpu_links(row: Sequence[str], gpu: GpuModel) -> int:
    """NVLinks one GPU uses for a collective: the sum over its peers on a point-to-point mesh,
    the full bond when every peer shows it (NVSwitch: each cell repeats the GPU's total)."""
    counts = [nvlink_count(cell) or 0 for cell in row]
    total = sum(counts)
    if gpu.nvlink_links and total > gpu.nvlink_links:
        return max(counts)
    return total


def _nvlink_connected(links: Sequence[Sequence[str]]) -> bool:
    """Whether every GPU reaches every other over NVLink alone (else a ring crosses PCIe)."""
    size = len(links)
    seen = {0}
    frontier = [0]
    while frontier:
        current = frontier.pop()
        for other in range(size):
            if other not in seen and nvlink_count(links[current][other]) is not None:
                seen.add(other)
                frontier.append(other)
    return len(seen) == size


def collective_peak(links: Sequence[Sequence[str]], gpu: GpuModel | None) -> Peak | None:
    """Per-direction peak for a node's collectives over the GPUs of the square GPU-only topo
    matrix `links` (diagonal "X"): the slowest GPU's NVLink bandwidth when NVLink connects them
    all, else PCIe of the GPU's generation at x16. None for an unknown model or one GPU."""
    if gpu is None or len(links) < 2:
        return None
    if gpu.interconnect and gpu.interconnect.startswith("xgmi"):
        link = _links()[gpu.interconnect]
        return Peak(
            per_direction_gbps=float(link["per_gpu_per_direction_gbps"]),
            basis=f"AMD XGMI {gpu.model}: {link['per_peer_per_direction_gbps']:g} GB/s x "
            f"{link['peers']} peers per direction",
            source=source_text(str(link["source"])),
            link="XGMI",
        )
    if not _nvlink_connected(links):
        return pcie_peak(gpu.pcie_gen)
    per_gpu = [_per_gpu_links(row, gpu) for row in links]
    slowest = min(per_gpu)
    return _nvlink_peak(slowest, gpu, f"NV{slowest} per GPU")


def nic_peak(rate_gbit: float, link_layer: str | None = None) -> Peak:
    """Per-direction peak of one NIC port from its signalling rate in Gb/s (ibstat "Rate")."""
    kind = "ethernet" if (link_layer or "").lower() == "ethernet" else "infiniband"
    for key, nic in document()["nics"].items():
        if nic["kind"] == kind and float(nic["gbit_per_s"]) == rate_gbit:
            name = key.split("-", 1)[1].upper()
            label = f"{name} InfiniBand" if kind == "infiniband" else f"{name} Ethernet"
            basis = f"{label}: {rate_gbit:g} Gb/s / 8"
            return Peak(rate_gbit / 8, basis, str(nic["source"]), label)
    return Peak(rate_gbit / 8, f"{rate_gbit:g} Gb/s / 8", "line rate", f"{rate_gbit:g} Gb/s NIC")
