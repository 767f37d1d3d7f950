"""The two active tests of NVL72 racks and the transport rule that keeps them apart.

On a GB200/GB300 NVL72 rack NCCL picks multi-node NVLink (MNNVL) by itself, so a test across
trays may measure NVLink where it claims the network, or fall back to the network where it
claims NVLink; either way it did not measure what it claims. The step name says which test a
run is (gpuval.plan.steps.rack_test), and the NCCL_DEBUG=INFO lines say which transport it used:

- the rack test (`rack-nccl-<collective>`, NCCL_MNNVL_ENABLE=1 on one rack) must show MNNVL:
  NCCL's `MNNVL 1` or channels `via P2P/MNNVL`, and no channel over the network
  (https://github.com/NVIDIA/nccl/issues/2303 prints both). A channel `via NET/...` or NCCL's
  `MNNVL 0` fails it; it is judged against the rack's NVLink, the board reference of its trays;
- the network-only test (`xrack-nccl-<collective>`, MNNVL and NVLS off, one node per rack)
  must show channels over the RDMA network (NET/IB, which RoCE shows too); MNNVL, or channels
  over TCP sockets only, fail it. It is judged against the NIC references, as every test across
  nodes is.

Without NCCL_DEBUG=INFO lines nothing says which transport a run used: unjudged, never passed.
"""

from __future__ import annotations

import dataclasses

from gpuval.checks.model import CLUSTER, Status
from gpuval.checks.references import Reference, nccl_reference, node_peak
from gpuval.evidence import HostEvidence, Parsed
from gpuval.plan.steps import RackTest
from gpuval.records.nccl import NcclRun

RDMA_TRANSPORTS = ("NET/IB", "NET/OFI", "NET/GDR")  # NET/OFI: AWS EFA through the OFI plugin
RULE_SOURCE = (
    "https://github.com/NVIDIA/nccl/issues/2303 (NCCL_DEBUG=INFO on GB200: `comm ... MNNVL 1` "
    "and `via P2P/MNNVL` with NCCL_MNNVL_ENABLE=1, `MNNVL 0` and `via P2P/CUMEM` without)"
)
RACK_ACTION = (
    "run the rack test with NCCL_MNNVL_ENABLE=1 and the IMEX channel (/dev/nvidia-caps-imex-"
    "channels) in the job; check the trays' fabric state and IMEX domain"
)
ACROSS_RACKS_ACTION = (
    "run the network-only test with NCCL_MNNVL_ENABLE=0 NCCL_NVLS_ENABLE=0 and one node per rack"
)


def rack_subject(rack: str) -> str:
    """The subject a rack's own checks are filed under (its trays, its rack test), as a host is
    for a node's: a report, junit and Prometheus name the failing rack, where CLUSTER would
    leave it to the reason."""
    return f"rack {rack}"


def rack_test_owner(test: RackTest | None, rack: str | None, owner: str) -> str:
    """Who a run's checks belong to: the rack test of a declared rack to that rack; the
    network-only test across racks, and every other run, stay with `owner`."""
    return rack_subject(rack) if test == "rack" and rack and owner == CLUSTER else owner


def _shows_mnnvl(run: NcclRun) -> bool:
    return run.mnnvl is True or any("MNNVL" in t.upper() for t in run.channel_transports)


def _over(run: NcclRun, prefixes: tuple[str, ...]) -> list[str]:
    return [t for t in run.channel_transports if t.upper().startswith(prefixes)]


def _said(run: NcclRun) -> str:
    said = [f"channels via {', '.join(run.channel_transports)}"] if run.channel_transports else []
    if run.mnnvl is not None:
        said.append(f"NCCL said MNNVL {int(run.mnnvl)}")
    return "; ".join(said)


def _rack_verdict(run: NcclRun, rack: str) -> tuple[Status, str]:
    network = _over(run, ("NET/",))
    if network:
        return "fail", (
            f"the {rack} test fell back to the network ({_said(run)}): it measured the NICs, "
            f"not multi-node NVLink; do: {RACK_ACTION}"
        )
    if run.mnnvl is False or not _shows_mnnvl(run):
        return "fail", (
            f"the {rack} test shows no multi-node NVLink ({_said(run)}; MNNVL 1 or P2P/MNNVL "
            f"expected): it did not measure what it claims; do: {RACK_ACTION}"
        )
    return "pass", f"the {rack} test ran over multi-node NVLink ({_said(run)})"


def _across_racks_verdict(run: NcclRun) -> tuple[Status, str]:
    if _shows_mnnvl(run):
        return "fail", (
            f"the network-only test used multi-node NVLink ({_said(run)}): NVLink hides the "
            f"InfiniBand rails it claims to measure; do: {ACROSS_RACKS_ACTION}"
        )
    if not _over(run, RDMA_TRANSPORTS):
        return "fail", (
            f"the network-only test shows no channel over the RDMA network ({_said(run)}; "
            "NET/IB expected): it did not measure the rails it claims; check NCCL_IB_DISABLE, "
            "NCCL_NET, NCCL_IB_HCA, the IB plugin"
        )
    return "pass", f"the network-only test ran over the RDMA network ({_said(run)})"


def rack_transport(test: RackTest, run: NcclRun, rack: str | None) -> tuple[Status, str]:
    """The transport rule for one run of a rack test: (status, reason with its source)."""
    if not run.channel_transports and run.mnnvl is None:
        what = "rack" if test == "rack" else "network-only"
        return "unjudged", (
            f"no NCCL_DEBUG=INFO channel or MNNVL lines: nothing says which transport the "
            f"{what} test used; rerun it with NCCL_DEBUG=INFO [{RULE_SOURCE}]"
        )
    if test == "rack":
        status, reason = _rack_verdict(run, f"rack {rack}" if rack else "rack")
    else:
        status, reason = _across_racks_verdict(run)
    return status, f"{reason} [{RULE_SOURCE}]"


def rack_reference(
    test: RackTest, host: HostEvidence, parsed: Parsed[NcclRun], collective: str, cluster: int
) -> Reference:
    """The rack test against the rack's NVLink (its trays' board: every GPU of the domain
    reaches every other over all its links); the network-only test against the NICs."""
    if test == "across-racks":
        return nccl_reference(host, parsed, collective, cluster)
    board = node_peak(host, collective, parsed.record.nranks)
    return dataclasses.replace(board, subject=f"rack {collective} over multi-node NVLink")
