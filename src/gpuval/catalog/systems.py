"""Systems (boards), not only GPUs: which link each GPU pair of a node should show.

The expected link matrix belongs to the board: an H100 SXM sits on an 8-GPU NVSwitch board (NV18
between every pair) or on a 4-GPU board (NV6 between every pair); a V100 SXM2 on a DGX-1's hybrid
cube mesh (NV1/NV2 to four peers, PCIe to the rest); a PCIe card talks to its peers through PCIe,
or through an NVLink bridge to one partner. A node's system is what it declares, else the
catalog system of its GPU model and count that best matches its `nvidia-smi topo -m`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from gpuval.catalog.catalog import (
    PCIE_CELLS,
    GpuModel,
    Peak,
    collective_peak,
    document,
    nvlink_count,
    pair_peak,
    pcie_peak,
    source_text,
)

Fabric = Literal["nvswitch", "mesh", "cube-mesh", "xgmi", "bridge", "pcie", "single"]
Matrix = Sequence[Sequence[str]]


@dataclass(frozen=True)
class PublishedResult:
    """A healthy all_reduce busbw published for a system: what the judge's bands must pass."""

    busbw_gbps: float
    ranks: int
    what: str
    source: str


@dataclass(frozen=True)
class System:
    name: str
    gpu_models: tuple[str, ...] | None  # None: any model
    gpus: int | None  # GPUs on the board; None: any count
    fabric: Fabric
    links_per_pair: int | None  # nvswitch / mesh: the bond every pair shows (NV18)
    links_per_gpu: int | None  # cube-mesh: NVLinks each GPU spreads over its peers
    aliases: tuple[str, ...]
    source: str
    matrix: tuple[tuple[str, ...], ...] | None = None  # a board wired one fixed way (DGX-1 V100)
    # Nodes of one multi-node NVLink domain (18 trays of an NVL72 rack); None: the node's own.
    nvlink_domain_nodes: int | None = None
    published_all_reduce: tuple[PublishedResult, ...] = ()

    def fits(self, gpu: GpuModel, count: int) -> bool:
        """Whether a node of `count` GPUs of model `gpu` can be this system. An NVSwitch board
        also serves a virtual machine given part of it (4 GPUs of an 8-GPU board)."""
        if self.gpu_models is not None and gpu.model not in self.gpu_models:
            return False
        if self.fabric == "pcie" and gpu.interconnect and not gpu.nvlink_optional:
            return False  # an SXM or OAM module sits on its board, never in a PCIe slot
        if self.gpus is None:
            return count >= 1
        if self.fabric == "nvswitch":  # a virtual machine may get part of the board
            return 1 <= count <= self.gpus
        return count == self.gpus

    def partition(self, count: int) -> bool:
        return self.gpus is not None and count < self.gpus


@dataclass(frozen=True)
class LinkProblem:
    """One place where the node's topology differs from its system's."""

    what: str  # "GPU0-GPU5 NV12 where the board has NV18"
    gpus: tuple[int, ...]


@cache
def systems() -> tuple[System, ...]:
    return tuple(
        System(
            name=entry["name"],
            gpu_models=tuple(entry["gpu_models"]) if entry["gpu_models"] is not None else None,
            gpus=entry["gpus"],
            fabric=entry["fabric"],
            links_per_pair=entry.get("links_per_pair"),
            links_per_gpu=entry.get("links_per_gpu"),
            aliases=tuple(entry.get("aliases", ())),
            source=source_text(entry["source"]),
            matrix=tuple(tuple(row) for row in entry["matrix"]) if "matrix" in entry else None,
            nvlink_domain_nodes=entry.get("nvlink_domain_nodes"),
            published_all_reduce=tuple(
                PublishedResult(**result) for result in entry.get("published_all_reduce", ())
            ),
        )
        for entry in document()["systems"]
    )


def _plain(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def find_system(name: str) -> System | None:
    """The catalog system called `name` or one of its aliases (cloud machine types among them);
    case, spaces and punctuation ignored: "DGX-1 (V100)" is the "DGX-1 V100"."""
    wanted = _plain(name)
    for system in systems():
        if wanted in (_plain(n) for n in (system.name, *system.aliases)):
            return system
    for system in systems():  # "GCP a3-megagpu-8g": a machine type inside a longer name
        if any(len(_plain(a)) >= 8 and _plain(a) in wanted for a in system.aliases):
            return system
    return None


def _is_pcie(cell: str) -> bool:
    return cell.strip().upper() in PCIE_CELLS


def _pairs(size: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(size) for j in range(i + 1, size)]


def link_problems(system: System, links: Matrix, gpu: GpuModel) -> list[LinkProblem]:
    """Where a node's GPU-by-GPU topo matrix differs from what `system` is built with."""
    size = len(links)
    found: list[LinkProblem] = []
    if system.fabric in ("nvswitch", "mesh"):
        expected = f"NV{system.links_per_pair}"
        for i, j in _pairs(size):
            cell = links[i][j].strip()
            if cell != expected:
                found.append(LinkProblem(
                    f"GPU{i}-GPU{j} {cell or '?'} where the {system.name} has {expected}", (i, j)
                ))  # fmt: skip
    elif system.fabric == "cube-mesh" and system.matrix and size == len(system.matrix):
        for i, j in _pairs(size):
            cell, expected = links[i][j].strip(), system.matrix[i][j]
            if cell != expected:
                found.append(LinkProblem(
                    f"GPU{i}-GPU{j} {cell or '?'} where the {system.name} has {expected}", (i, j)
                ))  # fmt: skip
    elif system.fabric == "xgmi":
        for i, j in _pairs(size):
            if links[i][j].strip().upper() != "XGMI":
                found.append(LinkProblem(
                    f"GPU{i}-GPU{j} {links[i][j] or '?'} where the {system.name} has XGMI", (i, j)
                ))  # fmt: skip
    elif system.fabric == "cube-mesh":
        for i in range(size):
            total = sum(nvlink_count(links[i][j]) or 0 for j in range(size) if j != i)
            if total < (system.links_per_gpu or 0):
                found.append(LinkProblem(
                    f"GPU{i} uses {total} of its {system.links_per_gpu} NVLinks (the "
                    f"{system.name}'s hybrid cube mesh gives each GPU all of them)", (i,)
                ))  # fmt: skip
    elif system.fabric == "bridge":
        bridged = [(i, j) for i, j in _pairs(size) if nvlink_count(links[i][j]) is not None]
        if not bridged:
            found.append(LinkProblem("no GPU pair shows an NVLink bridge", ()))
        for i, j in bridged:
            count = nvlink_count(links[i][j])
            if count != gpu.nvlink_links:
                found.append(LinkProblem(
                    f"GPU{i}-GPU{j} NV{count} where a {gpu.model} bridge has "
                    f"NV{gpu.nvlink_links} (a bridge half-seated or broken)", (i, j)
                ))  # fmt: skip
    elif system.fabric == "pcie":
        for i, j in _pairs(size):
            if not _is_pcie(links[i][j]):
                found.append(LinkProblem(
                    f"GPU{i}-GPU{j} shows {links[i][j] or '?'} where GPUs of a PCIe server "
                    "reach each other through PCIe", (i, j)
                ))  # fmt: skip
    return found


def _score(system: System, links: Matrix, gpu: GpuModel) -> tuple[int, int, int]:
    """Higher is a better match: fewer link problems, a whole board before a partition, a
    specific model list before 'any model'."""
    problems = len(link_problems(system, links, gpu))
    specific = system.gpu_models is not None
    whole = not system.partition(len(links))
    return (-problems, int(whole), int(specific))


def detect_system(gpu: GpuModel, links: Matrix) -> System | None:
    """The catalog system of this GPU model and count whose link pattern fits `links` best; a
    degraded board (one pair at NV12 on an NV18 board) still matches its board, whose problems
    `link_problems` then names. None when no system takes this model and count."""
    size = len(links)
    candidates = [s for s in systems() if s.fits(gpu, size)]
    if size == 1:
        candidates = [s for s in candidates if s.fabric in ("single", "pcie")] or candidates
    if gpu.interconnect is None:  # no NVLink or XGMI at all
        candidates = [s for s in candidates if s.fabric in ("pcie", "single")]
    if not candidates:
        return None
    return max(candidates, key=lambda s: _score(s, links, gpu))


def system_matrix(system: System, size: int) -> list[list[str]] | None:
    """What `size` GPUs of the system are wired with, when the system fixes it: the bond of an
    NVSwitch board or full mesh, the DGX-1's published matrix; None where it varies by node
    (bridges, PCIe paths)."""
    if system.fabric in ("nvswitch", "mesh"):
        bond = f"NV{system.links_per_pair}"
        return [["X" if i == j else bond for j in range(size)] for i in range(size)]
    if system.fabric == "xgmi":
        return [["X" if i == j else "XGMI" for j in range(size)] for i in range(size)]
    if system.matrix and size == len(system.matrix):
        return [list(row) for row in system.matrix]
    return None


def expected_links(system: System, links: Matrix) -> list[list[str]]:
    """The matrix the node should show: the system's where it fixes one, a PCIe path between
    every pair of a PCIe server, else the cells the node shows (bridges vary by node)."""
    size = len(links)
    fixed = system_matrix(system, size)
    if fixed is not None:
        return fixed
    if system.fabric == "pcie":
        return [["X" if i == j else "SYS" for j in range(size)] for i in range(size)]
    return [[str(c) for c in row] for row in links]


def _with_system(peak: Peak | None, system: System, links: Matrix) -> Peak | None:
    if peak is None:
        return None
    partition = f" ({len(links)} of its {system.gpus} GPUs)" if system.partition(len(links)) else ""
    return Peak(
        peak.per_direction_gbps,
        f"{peak.basis} on a {system.name}{partition}",
        f"{peak.source}; system: {system.source}",
        peak.link,
    )


def system_collective_peak(system: System, links: Matrix, gpu: GpuModel) -> Peak | None:
    """Per-GPU per-direction peak of a collective spread over all peers (all_reduce, all_gather,
    reduce_scatter, alltoall, broadcast) on what the board is built with."""
    return _with_system(collective_peak(expected_links(system, links), gpu), system, links)


def system_ring_neighbour_peak(system: System, links: Matrix, gpu: GpuModel) -> Peak | None:
    """Peak of sendrecv inside a node: each rank sends to the next only, so the slowest link
    between ring neighbours (rank i to i+1) bounds it: NV6 = 150 GB/s on a 4-GPU H100 mesh,
    where all_reduce spreads over all 18 links."""
    expected = expected_links(system, links)
    size = len(expected)
    if size < 2:
        return None
    peaks = [pair_peak(expected[i][(i + 1) % size], gpu) for i in range(size)]
    if any(p is None for p in peaks):
        return _with_system(pcie_peak(gpu.pcie_gen), system, links)
    slowest = min((p for p in peaks if p is not None), key=lambda p: p.per_direction_gbps)
    return _with_system(slowest, system, links)
