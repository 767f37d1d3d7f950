"""Records for the network tools: ibstat / ibv_devinfo (RDMA adapters) and iperf3 (TCP/UDP)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class IbPort:
    """One adapter port. `attributes` keeps every `key: value` line of the port as printed."""

    port: int
    state: str | None = None  # ibstat "Active"; ibv_devinfo "PORT_ACTIVE"
    state_code: int | None = None  # ibv_devinfo's "(4)"
    physical_state: str | None = None  # "LinkUp", "Disabled", "Polling"
    rate_gbps: float | None = None  # ibstat `Rate` (Gb/s); ibv_devinfo: width x lane speed
    active_width: str | None = None  # ibv_devinfo -v: "4X"
    active_speed: str | None = None  # ibv_devinfo -v: "25.0 Gbps"
    link_layer: str | None = None  # "InfiniBand", or "Ethernet" for RoCE
    base_lid: int | None = None
    sm_lid: int | None = None
    active_mtu: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    line: int | None = None


@dataclass
class IbDevice:
    """One adapter (ibstat `CA 'mlx5_0'`, ibv_devinfo `hca_id: mlx5_0`)."""

    name: str
    ca_type: str | None = None  # ibstat "MT4129"; ibv_devinfo has vendor_part_id instead
    firmware: str | None = None
    node_guid: str | None = None
    ports: list[IbPort] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)
    line: int | None = None


@dataclass
class InfinibandRun:
    devices: list[IbDevice] = field(default_factory=list)


@dataclass
class IperfSum:
    """A whole-test total (`end.sum_sent`, `end.sum_received`, UDP `end.sum`)."""

    bytes: int | None = None
    bits_per_second: float | None = None
    seconds: float | None = None
    retransmits: int | None = None  # TCP sender side only
    jitter_ms: float | None = None  # UDP
    lost_packets: int | None = None
    packets: int | None = None
    lost_percent: float | None = None


@dataclass
class IperfInterval:
    """One reporting interval's all-streams sum. `bidir_reverse` marks the server-to-client
    channel of a `--bidir` test (`sum_bidir_reverse`)."""

    start: float | None
    end: float | None
    bytes: int | None
    bits_per_second: float | None
    retransmits: int | None
    omitted: bool | None
    bidir_reverse: bool = False


@dataclass
class Iperf3Run:
    """One iperf3 JSON document (`-J`, or `--json-stream` events put back together)."""

    role: Literal["client", "server"] | None
    version: str | None
    system_info: str | None
    timestamp: str | None
    title: str | None
    remote_host: str | None
    remote_port: int | None
    local_host: str | None
    protocol: str | None
    num_streams: int | None
    duration: float | None
    reverse: bool
    bidir: bool
    sent: IperfSum | None
    received: IperfSum | None
    sent_bidir_reverse: IperfSum | None
    received_bidir_reverse: IperfSum | None
    udp_sum: IperfSum | None
    intervals: list[IperfInterval]
    host_cpu_percent: float | None
    remote_cpu_percent: float | None
    sender_tcp_congestion: str | None
    receiver_tcp_congestion: str | None
    error: str | None
    complete: bool  # an `end` section with totals and no error
    line: int


@dataclass
class PerftestRow:
    """One message size of a perftest bandwidth table, in Gbit/s whatever unit was printed."""

    size_bytes: int
    iterations: int
    peak_gbit: float | None  # 0.00 when perftest did not measure the peak (-D, -b)
    average_gbit: float
    msg_rate_mpps: float | None
    line: int


@dataclass
class PerftestRun:
    """One ib_write_bw test: its header (device, queue pairs, link), the CUDA device it used
    (--use_cuda), and its table."""

    test: str  # "RDMA_Write BW Test", "RDMA_Write Bidirectional BW Test", ...
    device: str | None
    qps: int | None
    transport: str | None
    link_type: str | None  # "IB", or "Ethernet" for RoCE
    gid_index: int | None
    bidirectional: bool
    cuda_device: str | None  # the GPU's name from the CUDA set-up lines; None for host memory
    unit: str  # as printed: "Gb/sec" or "MB/sec"
    rows: list[PerftestRow]
    line: int

    @property
    def best_average_gbit(self) -> float | None:
        return max((row.average_gbit for row in self.rows), default=None)
