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
