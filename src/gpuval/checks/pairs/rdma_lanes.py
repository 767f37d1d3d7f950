"""The rdma kind, judged per lane (rail i of each node, host or GPU memory): which lanes ran,
GPUDirect held against host memory on the same rail, and a node low on every rail."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuval.checks.model import Check
from gpuval.checks.pairs.kinds import KINDS, PairKind, PairThresholds
from gpuval.checks.pairs.tries import Try, natural
from gpuval.checks.pairs.verdicts import PairVerdict, is_low
from gpuval.checks.wording import number_text, percent_of
from gpuval.plan.steps import RdmaLane


def kinds_and_lanes(tries: Sequence[Try]) -> list[tuple[str, RdmaLane | None, PairKind]]:
    """Each kind, and for rdma each rail and memory found (host memory first on each rail, so
    GPUDirect can be held against it)."""
    lanes = sorted({t.lane for t in tries if t.kind == "rdma" and t.lane}, key=lambda ln: ln.order)
    return [
        (name, lane, kind.on(lane))
        for name, kind in KINDS.items()
        for lane in (lanes if name == "rdma" else [None])
    ]


def note_gpudirect(
    verdict: PairVerdict, host_value: float | None, thresholds: PairThresholds
) -> None:
    """GPUDirect far below host memory on the same rail and pair: the NIC and cable are fine,
    the GPU-NIC path is not (nvidia_peermem not loaded, or PCIe ACS routing peer traffic
    through the CPU)."""
    if is_low(verdict.value, host_value, thresholds.low_fraction):
        verdict.reason += (
            f"; GPUDirect {percent_of(verdict.value or 0.0, host_value or 0.0)} of host memory "
            f"({number_text(host_value or 0.0)} Gb/s) on the same rail: check that "
            "nvidia_peermem is loaded and that PCIe ACS does not route GPU-NIC traffic "
            "through the CPU"
        )
        if verdict.status == "pass":
            verdict.status = "warn"


def rdma_whole_node_checks(tries: Sequence[Try], flagged: Mapping[str, set[int]]) -> list[Check]:
    """A node flagged on every rail it has is the node itself (its PCIe, CPU or software), not
    one HCA or cable."""
    rails: dict[str, set[int]] = {}
    for t in tries:
        if t.kind == "rdma" and t.lane:
            for node in (t.a, t.b):
                rails.setdefault(node, set()).add(t.lane.rail)
    return [
        Check(
            check_id="pairs.rdma.node",
            host=node,
            category="bandwidth",
            status="fail",
            reason=(
                f"ib_write_bw: all {len(rails[node])} rails of {node} low with host memory: "
                "the node, not one HCA or cable"
            ),
        )
        for node in sorted(flagged, key=natural)
        if flagged[node] == rails.get(node)
    ]
