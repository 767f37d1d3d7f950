"""InfiniBand / RoCE: RDMA port error counters over the run (sysfs) and GPUDirect RDMA's kernel
module."""

from __future__ import annotations

from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check
from gpuval.checks.model import Check, Status
from gpuval.evidence import HostEvidence
from gpuval.records.health import (
    SysfsInfinibandRun,
)

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


def _ib_counters(run: SysfsInfinibandRun) -> dict[str, dict[str, int | None]]:
    return {f"{d.name} port {p.port}": p.counters for d in run.devices for p in d.ports}


def ib_counter_checks(judge: JudgeState, host: HostEvidence) -> None:
    ib = host.health.infiniband
    parsed = ib.latest
    if parsed is None:
        return
    problems: list[Problem] = []
    first = _ib_counters(ib.before.record) if ib.before and ib.after else {}
    for port, counters in _ib_counters(parsed.record).items():
        for counter, (status, action) in IB_ERRORS.items():
            value = counters.get(counter)
            if value is None:
                continue
            start = first.get(port, {}).get(counter)
            top = (1 << IB_COUNTER_BITS[counter]) - 1
            if start is not None and value > start:
                problems.append(
                    (
                        status,
                        f"{port} {counter} {start} -> {value} during the run",
                        action.format(port=port),
                    )
                )
            elif not first and value and counter == "link_downed":
                problems.append(
                    (
                        "warn",
                        f"{port} link_downed {value} since the counters were "
                        "cleared (no capture before the run to compare)",
                        action.format(port=port),
                    )
                )
            if value >= top:
                problems.append(
                    (
                        "warn",
                        f"{port} {counter} saturated at {value}: it can no longer count",
                        f"clear the counters of {port} (perfquery -x -R) to see new errors",
                    )
                )
    if not first and not problems and host.health.ran:
        problems.append(
            (
                "unjudged",
                "no capture of the port counters before the run: their growth cannot be judged",
                None,
            )
        )
    ports = len(_ib_counters(parsed.record))
    add_check(
        judge,
        host,
        "health.network.counters",
        problems,
        f"{ports} RDMA port(s): no error counter grew during the run",
        parsed.source(),
        reference=IB_COUNTER_SOURCE,
    )


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
