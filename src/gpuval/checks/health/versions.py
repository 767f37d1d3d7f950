"""Versions across nodes: VBIOS, kernel, NIC firmware and OFED the same on every node."""

from __future__ import annotations

from gpuval.checks.consistency import mixed_values_checks
from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import health_gpus
from gpuval.checks.model import Check
from gpuval.records.software import SoftwareVersionRun


def version_consistency_checks(judge: JudgeState) -> None:
    hosts = [h for h in judge.evidence.hosts.values() if h.reachable]
    firmware: dict[str, str] = {}
    vbios: dict[str, str] = {}
    kernel: dict[str, str] = {}
    ofed: dict[str, str] = {}
    for host in hosts:
        if ib := host.health.infiniband.latest:
            versions = sorted({d.fw_ver for d in ib.record.devices if d.fw_ver})
            if versions:
                firmware[host.name] = "/".join(versions)
        if smi := host.health.smi.latest:
            versions = sorted({g.health.vbios_version for _, g in health_gpus(smi)
                               if g.health and g.health.vbios_version})  # fmt: skip
            if versions:
                vbios[host.name] = "/".join(versions)
        for os in host.runs.of(SoftwareVersionRun):
            if os.record.component == "os" and "kernel" in os.record.details:
                kernel[host.name] = os.record.details["kernel"]
            elif os.record.component == "ofed" and os.record.version:
                ofed[host.name] = f"{os.record.implementation}-{os.record.version}"
    for key, label, values in (
        ("health.network.firmware", "NIC firmware", firmware),
        ("health.software.vbios", "VBIOS", vbios),
        ("health.software.kernel", "kernel", kernel),
        ("health.network.ofed", "OFED (ofed_info -s)", ofed),
    ):
        mixed_values_checks(judge, key, "health", label, values)
    for name, value in sorted(vbios.items()):
        if "/" in value:
            judge.add(Check(
                check_id="health.software.vbios-node", host=name, category="health",
                status="warn", measured=value,
                reason=f"GPUs of one node run different VBIOS versions: {value}",
                action="flash the GPUs to one VBIOS version (the vendor's)",
            ))  # fmt: skip
