"""What a collective can reach: inside a node, the board's links; across nodes, the smaller of
the board's links and what the network lets through for that collective."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuval.catalog import (
    Peak,
    across_nodes_bound,
    node_bandwidth,
    system_collective_peak,
    system_ring_neighbour_peak,
)
from gpuval.catalog.network import Port
from gpuval.evidence import HostEvidence, Parsed, ParsedFile
from gpuval.records.nccl import COLLECTIVES, NcclRun

RING_NEIGHBOUR_COLLECTIVES = frozenset({"sendrecv"})
_PERF_PROGRAM = re.compile(r"\b(?P<name>[a-z_]+?)_perf\b")


@dataclass(frozen=True)
class Reference:
    peak: Peak | None
    subject: str  # "intranode all_reduce", "internode sendrecv"
    why_none: str  # when there is no peak: what is missing, and what to do


def named_collective(run: NcclRun, file: ParsedFile) -> tuple[str, bool]:
    """(collective, whether only the table suggested it): what the output says it ran
    (`# Collective test starting: X_perf`), else the sidecar's command (`sendrecv_perf ...`),
    else the table's guess, else "unknown". A table alone cannot tell sendrecv from all_reduce."""
    if run.collective and not run.collective_inferred:
        return run.collective, False
    match = _PERF_PROGRAM.search(file.command or "")
    if match and match["name"] in COLLECTIVES:
        return match["name"], False
    return run.collective or "unknown", True


def collective_name(run: NcclRun, file: ParsedFile) -> str:
    return named_collective(run, file)[0]


def is_multinode(file: ParsedFile, hosts: list[str]) -> bool:
    return file.phase == "internode" or len(hosts) > 1


def run_hosts(run: NcclRun) -> list[str]:
    return sorted({*(h for h in run.hosts if h), *(d.host for d in run.devices if d.host)})


def _node_links(host: HostEvidence, gpus: int | None) -> list[list[str]] | None:
    topo = host.topology
    if topo is None:
        return None
    count = gpus if gpus and gpus <= len(topo.gpus) else len(topo.gpus)
    return [row[:count] for row in topo.links[:count]]


def node_peak(host: HostEvidence, collective: str, gpus: int | None) -> Reference:
    """The board's bound for `collective` over its first `gpus` GPUs."""
    subject = f"intranode {collective}"
    model, system = host.model, host.system
    if model is None:
        return Reference(None, subject, (
            "GPU model unknown: no nvidia-smi output names it; declare gpu_model for the host "
            "(inventory gpuval_gpu_model)"
        ))  # fmt: skip
    links = _node_links(host, gpus)
    if links is None and system is not None and system.links_per_pair:
        size = gpus or system.gpus or 2
        bond = f"NV{system.links_per_pair}"
        links = [["X" if i == j else bond for j in range(size)] for i in range(size)]
    if links is None or system is None:
        why = (
            "no nvidia-smi topo -m output to tell the board from"
            if links is None
            else (
                f"no catalog system takes {len(links)} {model.model} GPU(s) with these links; "
                "declare the system (inventory gpuval_system)"
            )
        )
        return Reference(None, subject, why)
    if collective in RING_NEIGHBOUR_COLLECTIVES:
        peak = system_ring_neighbour_peak(system, links, model)
    else:
        peak = system_collective_peak(system, links, model)
    return Reference(peak, subject, "one GPU: nothing to communicate with")


def _declared_ports(host: HostEvidence) -> list[Port]:
    declared = host.declared
    if declared.nic_count and declared.nic_rate_gbit:
        return [
            Port(declared.nic_rate_gbit, None, f"declared port {i}")
            for i in range(declared.nic_count)
        ]
    return []


def _tcp_ports(host: HostEvidence) -> list[Port]:
    interface = host.tcp_interface()
    if interface and interface.speed_mbit and interface.speed_mbit > 0:
        return [Port(interface.speed_mbit / 1000, "Ethernet", interface.name)]
    return []


def network_ports(host: HostEvidence, over_sockets: bool) -> tuple[list[Port], str]:
    """The ports a run across nodes could use, and where that came from: the declared contract,
    else the active RDMA ports, else (or when NCCL used TCP sockets) the TCP interface."""
    if over_sockets and (tcp := _tcp_ports(host)):
        return tcp, "TCP interface (NCCL used sockets)"
    if declared := _declared_ports(host):
        return declared, "declared nic_count x nic_rate_gbit"
    if rails := host.active_rails():
        return rails, "active RDMA ports (ibstat)"
    return _tcp_ports(host), "TCP interface"


def network_peak(host: HostEvidence, collective: str, ranks: int, nodes: int,
                 over_sockets: bool) -> Peak | None:  # fmt: skip
    ports, origin = network_ports(host, over_sockets)
    node = node_bandwidth(ports)
    if node is None:
        return None
    bound = across_nodes_bound(collective, ranks, nodes, node)
    if bound is None:
        return None
    value, how = bound
    return Peak(
        value, f"network: {node.basis} ({origin}); {collective} across {nodes} nodes: {how}",
        node.source, f"network ({node.link})",
    )  # fmt: skip


def internode_reference(
    host: HostEvidence, collective: str, ranks: int | None, nodes: int, over_sockets: bool
) -> Reference:
    """The smaller of the board's and the network's bound for a run across `nodes` nodes."""
    subject = f"internode {collective}"
    if not ranks or nodes < 2:
        return Reference(None, subject, "ranks or nodes of the run unknown")
    network = network_peak(host, collective, ranks, nodes, over_sockets)
    if network is None:
        return Reference(None, subject, (
            "the nodes' network bandwidth is unknown: add ibstat (RDMA) or sysfs-net (TCP) "
            "preflight steps, or declare nic_count and nic_rate_gbit"
            if collective in ("all_reduce", "all_gather", "reduce_scatter", "alltoall",
                              "broadcast", "reduce", "sendrecv")
            else f"no known network bound for {collective}"
        ))  # fmt: skip
    board = node_peak(host, collective, ranks // nodes).peak
    if board is None or network.per_direction_gbps <= board.per_direction_gbps:
        return Reference(network, subject, "")
    return Reference(
        Peak(board.per_direction_gbps,
             f"{board.basis}; the network allows more ({network.per_direction_gbps:.0f} GB/s: "
             f"{network.basis})", f"{board.source}; {network.source}", board.link),
        subject, "",
    )  # fmt: skip


def nccl_reference(
    host: HostEvidence, parsed: Parsed[NcclRun], collective: str, cluster_size: int
) -> Reference:
    """The run's reference; a run across nodes whose output names fewer than two hosts spans
    the cluster (`cluster_size` hosts in run.json)."""
    run = parsed.record
    hosts = run_hosts(run)
    if is_multinode(parsed.file, hosts):
        over_sockets = any("socket" in t.lower() for t in run.transports) and not any(
            t.upper().startswith(("NET/IB", "NET/OFI", "NET/GDR")) for t in run.transports
        )
        nodes = len(hosts) if len(hosts) > 1 else cluster_size
        return internode_reference(host, collective, run.nranks, nodes, over_sockets)
    return node_peak(host, collective, run.nranks)
