"""What the network lets a collective reach across nodes, per collective.

nccl-tests scales busbw so that it compares with the bandwidth of the hardware
(https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md). Across N nodes, each with
R/N ranks and B GB/s of RDMA bandwidth per direction (active ports x rate), the traffic that has
to leave a node sets the bound:
- all_reduce: each node sends 2(N-1)/N x S, so algbw <= B / (2(N-1)/N) and
  busbw = algbw x 2(R-1)/R <= B x (2(R-1)/R) / (2(N-1)/N) (2 x 8 GPUs, 8x NDR: 750 GB/s);
- all_gather, reduce_scatter: half the traffic and half the busbw factor: the same bound;
- broadcast, reduce: every node receives (sends) S once: busbw = algbw <= B;
- alltoall: only one NIC per GPU carries its traffic, busbw <= N/(N-1) x B/G (maintainer's rule,
  https://github.com/NVIDIA/nccl-tests/issues/130 and /issues/267);
- sendrecv: one GPU's rail carries a rank's traffic: busbw <= B/G.
The node's NVLink bound applies as well; the reference is the smaller of the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuval.catalog.catalog import Peak, nic_peak

NCCL_TESTS_PERFORMANCE = "https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md"
ALLTOALL_RULE = "https://github.com/NVIDIA/nccl-tests/issues/130"


@dataclass(frozen=True)
class Port:
    """One active RDMA port (or the TCP interface) of a node: its rate and link layer."""

    rate_gbit: float
    link_layer: str | None  # "InfiniBand", "Ethernet" (RoCE or TCP)
    name: str  # "mlx5_0/1", "eth0"


def node_bandwidth(ports: Sequence[Port]) -> Peak | None:
    """A node's RDMA bandwidth per direction: the sum of its active ports."""
    if not ports:
        return None
    peaks = [nic_peak(p.rate_gbit, p.link_layer) for p in ports]
    total = sum(peak.per_direction_gbps for peak in peaks)
    kinds = sorted({peak.link for peak in peaks})
    return Peak(
        per_direction_gbps=total,
        basis=f"{len(ports)} active port(s) ({', '.join(kinds)}) = {total:g} GB/s per node "
        "per direction",
        source="; ".join(sorted({peak.source for peak in peaks})),
        link=", ".join(kinds),
    )


def across_nodes_bound(
    collective: str, ranks: int, nodes: int, node: Peak
) -> tuple[float, str] | None:
    """(busbw bound in GB/s, how it was derived) for `collective` over `ranks` ranks on `nodes`
    nodes of `node` bandwidth each; None for a collective without a known bound."""
    if nodes < 2 or ranks < nodes:
        return None
    b = node.per_direction_gbps
    per_node = ranks // nodes
    if collective in ("all_reduce", "all_gather", "reduce_scatter"):
        bound = b * (2 * (ranks - 1) / ranks) / (2 * (nodes - 1) / nodes)
        how = f"B x (2(R-1)/R) / (2(N-1)/N) with B = {b:g}, R = {ranks}, N = {nodes}"
    elif collective in ("broadcast", "reduce"):
        bound, how = b, f"B = {b:g} (every node receives the whole message once)"
    elif collective == "alltoall":
        bound = nodes / (nodes - 1) * b / per_node
        how = (
            f"N/(N-1) x B/G with B = {b:g}, G = {per_node} GPUs per node, N = {nodes} (one NIC "
            f"per GPU carries its traffic; {ALLTOALL_RULE})"
        )
    elif collective == "sendrecv":
        bound, how = b / per_node, f"B/G = {b:g}/{per_node} (one GPU's rail)"
    else:
        return None
    return bound, f"{how}; {NCCL_TESTS_PERFORMANCE}"
