"""The node's network ports as ibstat / ibv_devinfo and sysfs show them: a rail that is down or
trained slower than its siblings of the same adapter model (or than declared) is named with its
port, ports that are not rails are reported but never failed, and the TCP interface's line rate
is the reference of the TCP pair tests."""

from __future__ import annotations

from collections import Counter

from gpuval.checks.context import JudgeState
from gpuval.checks.model import Check, Status, worst
from gpuval.checks.wording import listed
from gpuval.evidence import HostEvidence
from gpuval.evidence.model import IbPortState


def _rails(host: HostEvidence) -> tuple[list[IbPortState], list[IbPortState], str]:
    """The ports judged as rails, the RDMA ports that are not, and why: the declared HCAs
    (gpuval_ib_hcas), else the ports of the adapter model with the most ports (a node's second
    model is its storage or front-end NIC, whose rate says nothing about the rails')."""
    ports = host.rdma_ports()
    if host.declared.ib_hcas:
        return ports, [p for p in host.ib_ports if p not in ports], "outside the declared rails"
    counts = Counter(p.adapter for p in ports if p.adapter)
    most = max(counts.values(), default=0)
    # A port whose model was not printed cannot be shown to be another NIC: it stays a rail.
    rails = [p for p in ports if not p.adapter or counts[p.adapter] == most]
    models = "/".join(sorted({p.adapter for p in rails if p.adapter}))
    return rails, [p for p in ports if p not in rails], f"not of the rails' adapter model {models}"


def _expected_rates(rails: list[IbPortState]) -> dict[str | None, float]:
    """Each adapter model's rate: the one most of its active ports trained at (the higher on a
    tie: a link never trains faster than it can)."""
    rates: dict[str | None, Counter[float]] = {}
    for port in rails:
        if port.active and port.rate_gbit:
            rates.setdefault(port.adapter, Counter())[port.rate_gbit] += 1
    return {
        adapter: max(counts, key=lambda rate: (counts[rate], rate))
        for adapter, counts in rates.items()
    }


def _rail_problems(host: HostEvidence, rails: list[IbPortState]) -> list[tuple[Status, str]]:
    declared = host.declared
    problems: list[tuple[Status, str]] = []
    by_model = _expected_rates(rails)
    for port in rails:
        expected = declared.nic_rate_gbit or by_model.get(port.adapter)
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
            model = f"its {port.adapter} siblings'" if port.adapter else "its siblings'"
            why = "declared" if declared.nic_rate_gbit else f"{model} rate"
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
    if declared.nic_count is not None and host.ib_ports and len(rails) < declared.nic_count:
        problems.append(("fail", f"{len(rails)} RDMA port(s) where {declared.nic_count} are "
                                 "declared"))  # fmt: skip
    return problems


def _not_rails(others: list[IbPortState], why: str) -> str:
    """The ports left out of the judgement, named with their model and state."""
    described = [
        f"{p.name}{f' ({p.adapter})' if p.adapter else ''} {p.state or 'no state'}"
        + (f" at {p.rate_gbit:g} Gb/s" if p.active and p.rate_gbit else "")
        for p in others
    ]
    return f"not judged, {why}: {listed(described)}"


def rail_checks(judge: JudgeState, host: HostEvidence) -> None:
    """Ports as ibstat shows them; without its output (not run, or no RDMA at all) the declared
    ports stand as the across-node reference, and a missing expected step fails on its own."""
    if not host.ib_ports:
        return
    rails, others, why = _rails(host)
    problems = _rail_problems(host, rails)
    active = [p for p in rails if p.active]
    rates = sorted({f"{p.rate_gbit:g}" for p in active if p.rate_gbit})
    reason = listed([p[1] for p in problems]) if problems else (
        f"{len(active)} of {len(rails)} RDMA port(s) active at {'/'.join(rates)} Gb/s"
    )  # fmt: skip
    if others:
        reason += f"; {_not_rails(others, why)}"
    judge.add(Check(
        check_id="network.rdma-ports", host=host.name, category="network",
        status=worst([p[0] for p in problems]) if problems else "pass",
        measured=len(active), reference=host.declared.nic_count or len(rails), unit="ports",
        source=rails[0].source if rails else None, reason=reason,
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
