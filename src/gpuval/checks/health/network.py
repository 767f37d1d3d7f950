"""InfiniBand / RoCE: RDMA port error counters and RoCE transport counters over the run (sysfs
counters/ and hw_counters/), congestion marks as the fabric's finding, and GPUDirect RDMA's
kernel module."""

from __future__ import annotations

from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check
from gpuval.checks.model import CLUSTER, Check, Status
from gpuval.checks.wording import listed
from gpuval.evidence import HostEvidence
from gpuval.records.health import IbSysfsPort, SysfsInfinibandRun

# InfiniBand port counters (IBA PortCounters) whose growth during a run is a fault, with the
# status it earns and what to do. link_downed: the link dropped and retrained.
IB_ERRORS: dict[str, tuple[Status, str]] = {
    "link_downed": ("fail", "reseat or replace the cable of {port}; check the switch port"),
    "link_error_recovery": ("warn", "the link of {port} retrained: check its cable"),
    "symbol_error": ("warn", "symbol errors on {port}: a marginal cable or transceiver"),
    "port_rcv_errors": ("warn", "receive errors on {port}: check its cable"),
    "port_rcv_remote_physical_errors": (
        "warn",
        "corrupted packets reached {port}: check the links along the path",
    ),
    "local_link_integrity_errors": ("warn", "link integrity errors on {port}: check its cable"),
    "excessive_buffer_overrun_errors": (
        "warn",
        "buffer overruns on {port}: flow control trouble, check the switch port",
    ),
    "port_xmit_discards": ("warn", "{port} discarded packets: congestion or a peer that stopped"),
}
# Bit widths of those counters (IBA PortCounters); at the top they stop counting (saturate).
IB_COUNTER_BITS = {
    "link_downed": 8, "link_error_recovery": 8, "symbol_error": 16, "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16, "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4, "port_xmit_discards": 16,
}  # fmt: skip
IB_COUNTER_SOURCE = (
    "InfiniBand Architecture Specification vol. 1, PortCounters attribute (counter widths); "
    "https://enterprise-support.nvidia.com/s/article/understanding-mlx5-linux-counters-and-"
    "status-parameters"
)
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
PEERMEM_SOURCE = (
    "https://docs.nvidia.com/cuda/gpudirect-rdma/ (GPUDirect RDMA needs nvidia-peermem)"
)


# RoCE transport counters (mlx5 hw_counters) that count retries and lost packets, with the
# packets they are a share of ("sent": the requester's retries; "received": the responder's view)
# and what they mean (NVIDIA, "Understanding mlx5 Linux counters and status parameters":
# https://enterprise-support.nvidia.com/s/article/understanding-mlx5-linux-counters-and-status-parameters).
RETRY_COUNTERS: dict[str, tuple[str, str]] = {
    "local_ack_timeout_err": ("sent", "the ACK timer expired and packets were sent again"),
    "packet_seq_err": ("sent", "the peer NAKed lost packets (sequence errors)"),
    "implied_nak_seq_err": ("sent", "a response skipped packets (implied NAK)"),
    "out_of_sequence": ("received", "packets towards this port were lost (out of sequence)"),
    "req_transport_retries_exceeded": ("sent", "a queue pair ran out of retries"),
}
# Retries per packet from which a port fails: a tenth of the 1 % loss at which Go-Back-N RoCE
# throughput falls to nearly zero (Wang et al., "Error Recovery of RDMA Packets in Data Center
# Networks", ICCCN 2019: https://doi.org/10.1109/ICCCN.2019.8846946). Smaller growth warns: the
# counters above count errors the queue pair recovered from (NVIDIA, as above).
RETRY_FAIL_RATE = 1e-3
# Completions with an error, less those flushed when a queue pair is torn down (which real dumps
# show making up nearly all of them on healthy ports).
CQE_COUNTERS = (
    ("req_cqe_error", "req_cqe_flush_error"),
    ("resp_cqe_error", "resp_cqe_flush_error"),
)
# The receiver had no buffer posted: the peer application, not the link.
RNR_COUNTER = "rnr_nak_retry_err"
# Congestion notifications (DCQCN): the switches marked ECN on full queues, so the finding is the
# fabric's (incast, oversubscription, ECN/PFC settings), never the NIC's.
CONGESTION_COUNTERS = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled")
PACKET_COUNTERS = {"sent": "port_xmit_packets", "received": "port_rcv_packets"}
TRANSPORT_SOURCE = (
    "https://enterprise-support.nvidia.com/s/article/understanding-mlx5-linux-counters-and-"
    f"status-parameters; fail at {RETRY_FAIL_RATE:g} retries per packet: "
    "https://doi.org/10.1109/ICCCN.2019.8846946"
)

Counters = dict[str, int | None]


def _ports(run: SysfsInfinibandRun) -> dict[str, IbSysfsPort]:
    return {f"{d.name} port {p.port}": p for d in run.devices for p in d.ports}


def _ib_counters(run: SysfsInfinibandRun) -> dict[str, Counters]:
    return {name: port.counters for name, port in _ports(run).items()}


def _grew(port: str, counter: str, start: int | None, value: int | None) -> Problem | int | None:
    """The growth of a counter read before and after (None when either is missing), or the
    problem of a counter that went down (cleared, reset or wrapped during the run)."""
    if start is None or value is None:
        return None
    if value < start:
        return (
            "unjudged",
            f"{port} {counter} went down from {start} to {value} during the "
            "run (cleared or reset): its growth cannot be judged",
            None,
        )
    return value - start


def ib_counter_checks(judge: JudgeState, host: HostEvidence) -> None:
    ib = host.health.infiniband
    parsed = ib.latest
    if parsed is None:
        return
    problems: list[Problem] = []
    first = _ib_counters(ib.before.record) if ib.before and ib.after else {}
    read: set[str] = set()
    unread: set[str] = set()
    for port, counters in _ib_counters(parsed.record).items():
        readable = [c for c in IB_ERRORS if counters.get(c) is not None]
        read.update(readable)
        unread.update(c for c in IB_ERRORS if c not in readable)
        if not readable:
            problems.append(
                (
                    "unjudged",
                    f"{port} printed none of the error counters "
                    f"({', '.join(IB_ERRORS)}): nothing to judge",
                    f"read the link errors of {port} elsewhere (the switch port's counters, "
                    "perfquery): adapters without a PMA print N/A in sysfs",
                )
            )
        elif first and port not in first:
            problems.append(("unjudged", f"{port} is not in the capture before the run", None))
        for counter in readable:
            problems += _pma_problems(port, counter, counters, first.get(port))
    if not first and not problems and host.health.ran:
        problems.append(
            (
                "unjudged",
                "no capture of the port counters before the run: their growth cannot be judged",
                None,
            )
        )
    ports = len(_ib_counters(parsed.record))
    names = [c for c in IB_ERRORS if c in read]
    missing = [c for c in IB_ERRORS if c in unread]
    passed = (
        f"{ports} RDMA port(s): no error counter grew during the run (read before and "
        f"after: {', '.join(names)})"
    )
    if missing:
        passed += f"; not printed: {', '.join(missing)}"
    if not any(p.hw_counters for p in _ports(parsed.record).values()):
        passed += "; RoCE transport counters (hw_counters) not captured"
    add_check(
        judge,
        host,
        "health.network.counters",
        problems,
        passed,
        parsed.source(),
        reference=IB_COUNTER_SOURCE,
    )
    transport_checks(judge, host)


def _pma_problems(
    port: str, counter: str, counters: Counters, before: Counters | None
) -> list[Problem]:
    status, action = IB_ERRORS[counter]
    value = counters[counter] or 0
    grown = _grew(port, counter, (before or {}).get(counter), value)
    problems: list[Problem] = []
    if isinstance(grown, tuple):
        problems.append(grown)
    elif grown:
        problems.append(
            (
                status,
                f"{port} {counter} {value - grown} -> {value} during the run",
                action.format(port=port),
            )
        )
    elif before is None and value and counter == "link_downed":
        problems.append(
            (
                "warn",
                f"{port} link_downed {value} since the counters were cleared "
                "(no capture before the run to compare)",
                action.format(port=port),
            )
        )
    if value >= (1 << IB_COUNTER_BITS[counter]) - 1:
        problems.append(
            (
                "warn",
                f"{port} {counter} saturated at {value}: it can no longer count",
                f"clear the counters of {port} (perfquery -x -R) to see new errors",
            )
        )
    return problems


def transport_checks(judge: JudgeState, host: HostEvidence) -> None:
    """RoCE transport counters (hw_counters) over the run, on hosts whose probe captured them:
    retries and lost packets by their share of the packets, completions with errors, and
    congestion marks as one warning about the fabric."""
    ib = host.health.infiniband
    parsed = ib.latest
    if parsed is None or not any(p.hw_counters for p in _ports(parsed.record).values()):
        return
    before = _ports(ib.before.record) if ib.before and ib.after else {}
    problems: list[Problem] = []
    congestion: list[str] = []
    read: set[str] = set()
    ports = {name: port for name, port in _ports(parsed.record).items() if port.hw_counters}
    for name, port in ports.items():
        start = before.get(name)
        if start is None or not start.hw_counters:
            problems.append(
                (
                    "unjudged",
                    f"{name}: no transport counters captured before the "
                    "run: their growth cannot be judged",
                    None,
                )
            )
            continue
        read.update(c for c in port.hw_counters if c in start.hw_counters)
        problems += _transport_problems(name, port, start)
        congestion += _congestion(name, port, start)
    names = [c for c in (*RETRY_COUNTERS, RNR_COUNTER, *(c for c, _ in CQE_COUNTERS)) if c in read]
    passed = (
        f"no transport error grew during the run on {len(ports)} port(s) (read before and "
        f"after: {', '.join(names) or 'none of the error counters'})"
    )
    if not names:
        problems.append(
            (
                "unjudged",
                "the transport counters captured hold none of "
                f"{', '.join(RETRY_COUNTERS)}: nothing to judge",
                None,
            )
        )
    add_check(
        judge,
        host,
        "health.network.transport",
        problems,
        passed,
        parsed.source(),
        reference=TRANSPORT_SOURCE,
    )
    if congestion:
        judge.add(
            Check(
                check_id="health.network.congestion",
                host=CLUSTER,
                category="health",
                status="warn",
                reason=f"congestion marks at {host.name} {listed(congestion)} during the run: the "
                f"fabric was congested (an incast, oversubscription or the switches' ECN/PFC "
                f"settings), not a fault of {host.name}'s NIC",
                source=parsed.source(),
                reference=TRANSPORT_SOURCE,
                action="check the switches' congestion control (ECN thresholds, PFC) and whether "
                "the traffic pattern oversubscribes the fabric",
            )
        )


def _packets(port: IbSysfsPort, start: IbSysfsPort, direction: str) -> int | None:
    counter = PACKET_COUNTERS[direction]
    grown = _grew("", counter, start.counters.get(counter), port.counters.get(counter))
    return grown if isinstance(grown, int) and grown > 0 else None


def _transport_problems(name: str, port: IbSysfsPort, start: IbSysfsPort) -> list[Problem]:
    problems: list[Problem] = []
    after, before = port.hw_counters, start.hw_counters
    for counter, (direction, meaning) in RETRY_COUNTERS.items():
        grown = _grew(name, counter, before.get(counter), after.get(counter))
        if isinstance(grown, tuple) or not grown:
            problems += [grown] if isinstance(grown, tuple) else []
            continue
        packets = _packets(port, start, direction)
        rate = grown / packets if packets else None
        share = (
            f"{rate * 100:.2g} % of {packets} packets {direction}"
            if rate is not None
            else "no packet counters: rate unknown"
        )
        status: Status = "fail" if rate is not None and rate >= RETRY_FAIL_RATE else "warn"
        problems.append(
            (
                status,
                f"{name} {counter} {before[counter]} -> {after[counter]} during "
                f"the run ({share}): {meaning}",
                f"check the cable, transceiver and switch port of {name} and compare "
                "the peer's counters; a rate that stays high on one port is the link",
            )
        )
    for counter in (RNR_COUNTER, *(c for c, _ in CQE_COUNTERS)):
        grown = _grew(name, counter, before.get(counter), after.get(counter))
        flush = dict(CQE_COUNTERS).get(counter)
        if flush is not None and isinstance(grown, int):
            flushed = _grew(name, flush, before.get(flush), after.get(flush))
            grown = grown - flushed if isinstance(flushed, int) else None
        if isinstance(grown, tuple) or (grown or 0) > 0:
            problems.append(
                grown
                if isinstance(grown, tuple)
                else (
                    "warn",
                    f"{name} {counter} grew by {grown} during the run"
                    + ("" if flush is None else " beyond flushed completions"),
                    "see the job's log for the failed work requests (a peer that stopped, or a "
                    "receiver without buffers posted)",
                )
            )
    return problems


def _congestion(name: str, port: IbSysfsPort, start: IbSysfsPort) -> list[str]:
    marks = []
    for counter in CONGESTION_COUNTERS:
        grown = _grew(name, counter, start.hw_counters.get(counter), port.hw_counters.get(counter))
        if isinstance(grown, int) and grown:
            marks.append(f"{counter} {start.hw_counters[counter]} -> {port.hw_counters[counter]}")
    return [f"{name} ({', '.join(marks)})"] if marks else []


def peermem_checks(judge: JudgeState, host: HostEvidence) -> None:
    """GPUDirect RDMA needs nvidia_peermem on nodes with GPUs and RDMA adapters."""
    modules = host.health.modules
    rdma = host.ib_ports or host.health.infiniband.latest
    if modules is None or not rdma or not host.gpu_count:
        return
    loaded = [m for m in PEERMEM_MODULES if m in modules.record.modules]
    judge.add(Check(
        check_id="health.network.peermem", host=host.name, category="health",
        status="pass" if loaded else "warn", source=modules.source(), reference=PEERMEM_SOURCE,
        reason=f"{loaded[0]} loaded: GPUDirect RDMA available" if loaded else "neither "
        "nvidia_peermem nor nv_peer_mem is loaded: RDMA traffic is staged through host memory "
        "(no GPUDirect RDMA)",
        action=None if loaded else "modprobe nvidia-peermem (and load it at boot)",
    ))  # fmt: skip
