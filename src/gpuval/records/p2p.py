"""One run of cuda-samples' p2pBandwidthLatencyTest (schema: run-p2pBandwidthLatencyTest)."""

from __future__ import annotations

from dataclasses import dataclass, field

# Row-major square matrix, indexed [source row][destination column] as printed; None where the
# cell was missing or unreadable (a warning names the line).
Matrix = list[list[float | None]]

# The keys of `P2PRun.matrices`, fixed by the contract with the external checker. A "P2P Reads"
# variant of an enabled matrix gets READS_SUFFIX appended to its key.
MATRIX_KEYS = (
    "bandwidth_unidirectional_p2p_disabled",
    "bandwidth_unidirectional_p2p_enabled",
    "bandwidth_bidirectional_p2p_disabled",
    "bandwidth_bidirectional_p2p_enabled",
    "latency_gpu_p2p_disabled",
    "latency_gpu_p2p_enabled",
    "latency_cpu_p2p_disabled",
    "latency_cpu_p2p_enabled",
)
READS_SUFFIX = "_reads"


@dataclass
class P2PDevice:
    """A `Device: 0, NAME, pciBusID: 5d, pciDeviceID: 0, pciDomainID:0` line; ids as printed."""

    index: int
    name: str
    pci_bus_id: str | None = None
    pci_device_id: str | None = None
    pci_domain_id: str | None = None


@dataclass
class PeerAccess:
    """A `Device=0 CAN Access Peer Device=1` (ok) or `... CANNOT Access Peer ...` (not ok) line."""

    src: int
    dst: int
    ok: bool


@dataclass
class P2PRun:
    num_gpus: int | None = None
    devices: list[P2PDevice] = field(default_factory=list)
    # The "P2P Connectivity Matrix": 1 where peer access works, 0 where not, None where missing.
    connectivity: list[list[int | None]] | None = None
    can_access_peer: list[PeerAccess] = field(default_factory=list)
    matrices: dict[str, Matrix] = field(default_factory=dict)
    cuda_driver_version: str | None = None
    cuda_runtime_version: str | None = None
    # True once the closing "NOTE: The CUDA Samples are not meant for performance measurements"
    # line was seen; False for truncated or partial outputs.
    complete: bool = False
    # Lines that report a CUDA error or a failed/waived test, as printed.
    failures: list[str] = field(default_factory=list)
