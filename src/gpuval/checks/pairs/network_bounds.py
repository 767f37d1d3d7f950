"""Every pair judged against the network itself: iperf3 against the TCP interface's line rate,
ib_write_bw against the rail's port rate, nccl-tests and the NCCL all-reduce against the
across-node bound of the nodes' RDMA ports (a uniformly slow cluster, or two hosts with one
pair, have nothing else to be compared with)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuval.checks.model import CLUSTER, Check, worst
from gpuval.checks.pairs.kinds import PairKind, PairThresholds
from gpuval.checks.pairs.verdicts import Absolute, PairVerdict
from gpuval.checks.references import Reference, internode_reference
from gpuval.checks.wording import number_text, percent_of
from gpuval.evidence import RunEvidence
from gpuval.records.collective_bench import CollectiveBenchRun
from gpuval.records.nccl import NcclRun

ON_CPUS = "gloo on CPUs is bound by the CPUs' reduction, not the NIC"


def measured_on_cpus(runs: Iterable[object]) -> bool:
    """Whether a pair's all-reduce ran on CPUs (gloo): it then measures the CPUs, not the NIC."""
    bench = [r for r in runs if isinstance(r, CollectiveBenchRun)]
    return bool(bench) and all((r.backend or "").lower() == "gloo" for r in bench)


@dataclass(frozen=True)
class NetworkReferences:
    """Each pair's reference from the network, read from the run's evidence. A host is in as
    many pairs as there are other hosts: what it contributes is worked out once."""

    evidence: RunEvidence
    thresholds: PairThresholds
    _rails: dict[str, list[str]] = field(default_factory=dict)  # node -> HCAs in rail order
    _bounds: dict[tuple[str, str, int | None, bool], Reference] = field(default_factory=dict)

    def iperf3(self, pair: tuple[str, str]) -> Absolute | str:
        hosts = [self.evidence.host(h) for h in pair]
        interfaces = [h.tcp_interface() if h else None for h in hosts]
        speeds = [i.speed_mbit / 1000 for i in interfaces if i and i.speed_mbit and
                  i.speed_mbit > 0]  # fmt: skip
        if len(speeds) < len(pair):
            return ("the TCP interface's speed is unknown (add the sysfs-net preflight step, or "
                    "declare network_interface)")  # fmt: skip
        line = min(speeds)
        named = ", ".join(
            f"{h}: {i.name} {i.speed_mbit / 1000:g} Gb/s"
            for h, i in zip(pair, interfaces, strict=True)
            if i and i.speed_mbit
        )
        return Absolute(line, f"line rate, {named}", self.thresholds.line_rate_warn_fraction,
                        self.thresholds.line_rate_fail_fraction)  # fmt: skip

    def rail_hca(self, node: str, rail: int) -> str | None:
        if node not in self._rails:
            host = self.evidence.host(node)
            self._rails[node] = host.rail_hcas() if host else []
        hcas = self._rails[node]
        return hcas[rail] if rail < len(hcas) else None

    def rdma(self, pair: tuple[str, str], rail: int) -> Absolute | str:
        """The rail's line rate: the slower of the two ports' rates (ibstat / sysfs), else the
        declared gpuval_nic_rate_gbit. InfiniBand rates are per direction (HDR 200, NDR 400)."""
        rates, named = [], []
        for node in pair:
            host = self.evidence.host(node)
            hca = self.rail_hca(node, rail)
            ports = [p for p in (host.ib_ports if host else []) if p.device == hca and p.rate_gbit]
            rate = ports[0].rate_gbit if ports else (host.declared.nic_rate_gbit if host else None)
            if rate:
                rates.append(rate)
                named.append(f"{node}: {hca or f'rail {rail}'} {rate:g} Gb/s"
                             f"{'' if ports else ' (declared)'}")  # fmt: skip
        if len(rates) < len(pair):
            return ("the rail's port rate is unknown (add the ibstat preflight step, or declare "
                    "gpuval_nic_rate_gbit)")  # fmt: skip
        return Absolute(min(rates), f"line rate, {', '.join(named)}",
                        self.thresholds.rdma_line_rate_warn_fraction,
                        self.thresholds.rdma_line_rate_fail_fraction)  # fmt: skip

    def busbw(self, pair: tuple[str, str], runs: list[object]) -> Absolute | str:
        nccl = [r for r in runs if isinstance(r, NcclRun)]
        bench = [r for r in runs if isinstance(r, CollectiveBenchRun)]
        if measured_on_cpus(runs):
            return ON_CPUS
        host = self.evidence.host(pair[0])
        if host is None:
            return "the pair's first host has no evidence"
        ranks = (nccl[0].nranks if nccl else None) or (bench[0].world_size if bench else None)
        collective = (nccl[0].collective if nccl else None) or "all_reduce"
        over_sockets = (
            bool(nccl)
            and any("socket" in t.lower() for t in nccl[0].transports)
            and not any(t.upper().startswith("NET/IB") for t in nccl[0].transports)
        )
        key = (host.name, collective, ranks, over_sockets)
        if key not in self._bounds:
            self._bounds[key] = internode_reference(host, collective, ranks, 2, over_sockets)
        reference = self._bounds[key]
        if reference.peak is None:
            return reference.why_none
        return Absolute(reference.peak.per_direction_gbps, reference.peak.basis,
                        self.thresholds.busbw_pass_fraction,
                        self.thresholds.busbw_fail_fraction)  # fmt: skip


def absolute_check(kind: PairKind, verdicts: list[PairVerdict], why_none: str) -> Check:
    """The pairs against the network itself, less those a flagged node explains."""
    judged = [v for v in verdicts if v.absolute is not None and v.value is not None
              and v.explained_by is None]  # fmt: skip
    name = "line rate" if kind.name in ("iperf3", "rdma") else "network bound"
    if not judged:
        return Check(
            check_id=f"pairs.{kind.check_name}.{name.replace(' ', '-')}", host=CLUSTER,
            category="network", status="unjudged",
            reason=f"{kind.label}: pairs not compared with the network's {name}: {why_none}",
        )  # fmt: skip
    status = worst([v.absolute_status for v in judged])
    lowest = sorted(judged, key=lambda v: (v.value or 0.0) / (v.absolute.value if v.absolute
                                                             else 1.0))  # fmt: skip
    shown = "; ".join(
        f"{v.a}--{v.b} {number_text(v.value or 0.0)} {kind.unit} = "
        f"{percent_of(v.value or 0.0, v.absolute.value if v.absolute else 0.0)}"
        for v in lowest[:3]
    )
    low = [v for v in judged if v.absolute_status != "pass"]
    first = lowest[0].absolute
    bound = f"{number_text(first.value)} {kind.unit}" if first else "?"
    verdict = (
        f"{len(low)} of {len(judged)} pair(s) below "
        f"{first.pass_fraction * 100 if first else 0:.0f} % of the {bound} {name}"
        if low
        else f"all {len(judged)} pair(s) within the {bound} {name}"
    )
    return Check(
        check_id=f"pairs.{kind.check_name}.{name.replace(' ', '-')}", host=CLUSTER,
        category="network", status=status, measured=lowest[0].value,
        reference=round(first.value, 3) if first else None, unit=kind.unit,
        reason=f"{kind.label}: {verdict}; lowest {shown} ({first.basis if first else ''})",
    )  # fmt: skip
