"""What `nvidia-smi topo -m` (or `topo -p2p`) printed (schema: run-nvidia-smi-topo)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TopologyRun:
    # "topology" for `topo -m` (X, NV#, PIX, PXB, PHB, NODE, SYS, old SOC) or "p2p-capability"
    # for `topo -p2p` (X, OK, NS, CNS, GNS, TNS, DR, U).
    matrix: str = "topology"
    # Column names in printed order: GPUs, then NICs (NICn, or mlx5_N on older drivers).
    devices: list[str] = field(default_factory=list)
    # links[row][column] cell as printed ("X", "NV18", "PHB", ...); None where a row lacks it.
    links: list[list[str | None]] = field(default_factory=list)
    # The multi-word columns printed after the devices, in order ("CPU Affinity", ...).
    columns: list[str] = field(default_factory=list)
    # Per row device: the value as printed ("0-23,48-71", "0") or None for N/A. A device whose
    # row did not print the column (NIC rows never do) has no key.
    cpu_affinity: dict[str, str | None] = field(default_factory=dict)
    numa_affinity: dict[str, str | None] = field(default_factory=dict)
    gpu_numa_id: dict[str, str | None] = field(default_factory=dict)
    # "NIC Legend:" block: {"NIC0": "mlx5_0"}.
    nic_legend: dict[str, str] = field(default_factory=dict)
    # "Legend:" block: {"X": "Self", "NV#": "Connection traversing a bonded set of # NVLinks"}.
    legend: dict[str, str] = field(default_factory=dict)


# Square matrix [row device][column device] in `AmdTopologyRun.devices` order.
AmdMatrix = list[list[str | None]]


@dataclass
class AmdTopologyRun:
    """What `rocm-smi --showtopo` (or one of its --showtopo* parts), `amd-smi topology` or
    `amd-smi topology --json` printed (schema: run-amd-topology).

    Cells are kept as printed, None where N/A or not printed; the diagonal as printed too
    (rocm-smi "0", amd-smi "SELF" or 0). Numbers are still text in `tables`; `weights` and
    `hops` hold them as integers.
    """

    format: str  # "rocm-smi", "amd-smi" or "amd-smi-json"
    # As the output names them: "GPU0" (rocm-smi), a BDF "0000:0c:00.0" (amd-smi), or
    # "gpu_1" (the first amd-smi JSON format, which names no BDF).
    devices: list[str] = field(default_factory=list)
    # "XGMI", "PCIE" (rocm-smi "XXXX": unknown); amd-smi also "SELF".
    link_types: AmdMatrix = field(default_factory=list)
    # Abstract steps: 1 over XGMI (also when not directly linked), 2 through one CPU socket,
    # 3 across sockets (AMD's MI200 guide).
    hops: list[list[int | None]] = field(default_factory=list)
    # Relative cost from the kernel's io_link weights: lower is closer (15 per XGMI hop).
    weights: list[list[int | None]] = field(default_factory=list)
    # P2P access: amd-smi ENABLED/DISABLED, rocm-smi --showtopoaccess True/False.
    access: AmdMatrix = field(default_factory=list)
    # amd-smi NUMA BW: "<min>-<max>" as printed.
    bandwidth: AmdMatrix = field(default_factory=list)
    # Every other table by its printed title (amd-smi CACHE COHERANCY, ATOMICS, DMA,
    # BI-DIRECTIONAL), cells as printed.
    tables: dict[str, AmdMatrix] = field(default_factory=dict)
    numa_node: dict[str, int | None] = field(default_factory=dict)  # rocm-smi Numa Nodes
    numa_affinity: dict[str, int | None] = field(default_factory=dict)
