"""The node's network ports as ibstat / ibv_devinfo and sysfs show them: a rail that is down or
trained slower than its siblings (or than declared) is named with its port, and the TCP
interface's line rate is the reference of the TCP pair tests."""

from __future__ import annotations

from collections import Counter

from gpuval.checks.context import JudgeState
from gpuval.checks.model import Check, Status, worst
from gpuval.checks.wording import listed
from gpuval.evidence import HostEvidence


def _rail_problems(host: HostEvidence) -> list[tuple[Status, str]]:
    ports = host.rdma_ports()
    declared = host.declared
    problems: list[tuple[Status, str]] = []
    rates = [p.rate_gbit for p in ports if p.active and p.rate_gbit]
    expected = declared.nic_rate_gbit or (Counter(rates).most_common(1)[0][0] if rates else None)
    for port in ports:
        if not port.active:
            state = port.state or "no state"
            physical = f", physical state {port.physical_state}" if port.physical_state else ""
            problems.append(
                (
                    "fail",
                    f"{port.name} is {state}{physical} ({port.source}): "
                    "reseat or replace its cable, check the switch port",
                )
            )
        elif expected and port.rate_gbit and port.rate_gbit < expected:
            why = "declared" if declared.nic_rate_gbit else "its siblings' rate"
            problems.append(("fail", f"{port.name} at {port.rate_gbit:g} Gb/s where {why} is "
                                     f"{expected:g} Gb/s ({port.source}): a link trained down "
                                     "(cable, transceiver or switch port)"))  # fmt: skip
    if declared.ib_hcas:
        missing = sorted(set(declared.ib_hcas) - {p.device for p in host.ib_ports})
        if missing:
            problems.append(
                (
                    "fail",
                    f"declared HCA(s) {', '.join(missing)} not listed by "
                    "ibstat (missing or its driver did not load)",
                )
            )
    if declared.nic_count is not None and host.ib_ports and len(ports) < declared.nic_count:
        problems.append(("fail", f"{len(ports)} RDMA port(s) where {declared.nic_count} are "
                                 "declared"))  # fmt: skip
    return problems


def rail_checks(judge: JudgeState, host: HostEvidence) -> None:
    """Ports as ibstat shows them; without its output (not run, or no RDMA at all) the declared
    ports stand as the across-node reference, and a missing expected step fails on its own."""
    if not host.ib_ports:
        return
    ports = host.rdma_ports()
    problems = _rail_problems(host)
    active = [p for p in ports if p.active]
    rates = sorted({f"{p.rate_gbit:g}" for p in active if p.rate_gbit})
    judge.add(Check(
        check_id="network.rdma-ports", host=host.name, category="network",
        status=worst([p[0] for p in problems]) if problems else "pass",
        measured=len(active), reference=host.declared.nic_count or len(ports), unit="ports",
        source=ports[0].source if ports else None,
        reason=listed([p[1] for p in problems]) if problems else (
            f"{len(active)} of {len(ports)} RDMA port(s) active at {'/'.join(rates)} Gb/s"
        ),
    ))  # fmt: skip


def interface_checks(judge: JudgeState, host: HostEvidence) -> None:
    """The declared TCP interface must exist and be up."""
    name = host.declared.network_interface
    if not name or not host.interfaces:
        return
    found = host.tcp_interface()
    if found is None or found.operstate != "up":
        state = f"is {found.operstate}" if found else "is not listed"
        judge.add(Check(
            check_id="network.interface", host=host.name, category="network", status="fail",
            reason=f"declared interface {name} {state} in /sys/class/net",
            source=found.source if found else host.interfaces[0].source,
        ))  # fmt: skip


def network_checks(judge: JudgeState) -> None:
    for host in judge.evidence.hosts.values():
        rail_checks(judge, host)
        interface_checks(judge, host)
