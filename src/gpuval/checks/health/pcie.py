"""PCIe: RDMA NICs' link width and speed, every device's AER counters (sysfs), the PCIe errors and
link notices of the kernel log on a GPU or a port above one, and ACS redirect on the switch ports
between a GPU and an RDMA NIC (lspci -vvv)."""

from __future__ import annotations

from collections import Counter

from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check, health_gpus, missing_probe
from gpuval.checks.health.xid import event_age_hours
from gpuval.checks.model import Status
from gpuval.evidence import HostEvidence
from gpuval.evidence.model import pci_key
from gpuval.records.health import (
    KernelEvent,
    LspciDevice,
    PciDevice,
)

PCI_AER_SOURCE = "Linux Documentation/ABI/testing/sysfs-bus-pci-devices-aer"
# ACS redirect sends peer-to-peer requests up to the root complex: GPUDirect slows or hangs.
PCI_AER_LOG_SOURCE = (
    "https://docs.kernel.org/PCI/pcieaer-howto.html (uncorrectable errors: fatal ones make the "
    "link unreliable, non-fatal ones lose a transaction)"
)
# The kernel prints AER messages through a rate limit of 10 per 5 s per device
# (drivers/pci/pcie/aer.c, DEFAULT_RATELIMIT_BURST): a device that filled it is in a storm.
AER_CORRECTED_STORM = 10
PCI_ACS_SOURCE = (
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
    "#pci-access-control-services-acs"
)


def _aer_total(device: PciDevice, kind: str) -> int:
    counts = device.aer.get(kind, {})
    totals = [v for k, v in counts.items() if k.startswith("TOTAL_")]
    return totals[0] if totals else sum(counts.values())


def _device_name(host: HostEvidence, device: PciDevice) -> str:
    if device.is_gpu:
        return host.health.gpu_name(device.address)
    return f"NIC {device.address}" if device.is_rdma_nic else f"PCI device {device.address}"


def _known_gpus(host: HostEvidence) -> set[str]:
    """The GPUs' PCI keys from every probe that lists them, the kernel log's own lines included."""
    keys = set(host.health.gpu_names_by_pci)
    if parsed := host.health.pci.latest:
        keys |= {pci_key(d.address) or "" for d in parsed.record.devices if d.is_gpu}
    if host.health.lspci:
        keys |= {pci_key(d.address) or "" for d in host.health.lspci.record.devices if d.is_gpu}
    if log := host.health.kernel_log.latest:
        keys |= {pci_key(address) or "" for address in log.record.gpus}
    return keys - {""}


def _gpus_below(host: HostEvidence, device: str, gpus: set[str]) -> list[str] | None:
    """The GPUs behind a port, from the PCI tree (lspci -vvv); None without the tree."""
    if host.health.lspci is None:
        return None
    devices = host.health.lspci.record.devices
    port = next((d for d in devices if pci_key(d.address) == pci_key(device)), None)
    if port is None:
        return None
    return sorted(pci_key(d.address) or "" for d in devices if pci_key(d.address) in gpus
                  and d.domain == port.domain and port.bridges_bus(d.bus))  # fmt: skip


def _aer_problem(host: HostEvidence, found: list[KernelEvent], gpus: set[str],
                 old: bool) -> Problem:  # fmt: skip
    """The uncorrectable AER errors of one device: fail on a GPU or on a port above one (warn
    when older than the window), warn elsewhere."""
    event = min(found, key=lambda e: (e.device or "", e.line))
    lines = ", ".join(str(e.line) for e in found[:6]) + (", ..." if len(found) > 6 else "")
    what = "; ".join(dict.fromkeys(e.message for e in found)) + f" (kernel log lines {lines})"
    key = pci_key(event.device) or ""
    if key in gpus:
        target = host.health.gpu_name(event.device)
        status: Status = "warn" if old else "fail"
        return (status, f"{target}: {what}", f"drain the node; reseat {target}, check its slot "
                "and riser; RMA it if the error returns")  # fmt: skip
    below = _gpus_below(host, event.device or "", gpus)
    if below:
        names = ", ".join(host.health.gpu_name(g) for g in below)
        status = "warn" if old else "fail"
        return (status, f"port {event.device} above {names}: {what}",
                f"drain the node; check the link of port {event.device} (riser, cable, "
                f"retimer) and reseat {names}")  # fmt: skip
    where = (
        "no GPU below it in the PCI tree"
        if below is not None
        else "which GPUs sit below it is unknown: the PCI tree (lspci -vvv) was not read"
    )
    return ("warn", f"PCI device {event.device} ({where}): {what}",
            f"check the device at {event.device} and its slot")  # fmt: skip


def pcie_kernel_log_checks(judge: JudgeState, host: HostEvidence) -> None:
    """The kernel log's PCIe lines: AER errors on a GPU or on a port above one, and the boot
    notice of a GPU's link trained narrower than it can be."""
    parsed = host.health.kernel_log.latest
    if parsed is None or parsed.record.unreadable:
        return  # the Xid check says the log is missing or unreadable
    events = [e for e in parsed.record.events if e.kind in ("aer", "pcie-limited")]
    if not events:
        return
    gpus = _known_gpus(host)
    window = judge.thresholds.xid_window_hours
    problems: list[Problem] = []
    corrected: Counter[str] = Counter()
    uncorrectable: dict[str, list[KernelEvent]] = {}
    speed_only = 0
    for event in events:
        key = pci_key(event.device) or ""
        if event.kind == "aer" and event.severity == "corrected":
            if key in gpus or _gpus_below(host, event.device or "", gpus):
                corrected[event.device or ""] += 1
        elif event.kind == "aer":
            uncorrectable.setdefault(key, []).append(event)
        elif key in gpus and event.severity == "width":
            name = host.health.gpu_name(event.device)
            problems.append(("warn", f"{name} PCIe link at boot {event.message}, limited at "
                             f"{event.port} (kernel log line {event.line})",
                             f"reseat {name} (and its riser); confirm with nvidia-smi -q "
                             "(GPU Link Info)"))  # fmt: skip
        elif key in gpus:
            speed_only += 1
    for found in uncorrectable.values():
        age = event_age_hours(found[-1], parsed.file)
        problems.append(_aer_problem(host, found, gpus, age is not None and age > window))
    for device, count in sorted(corrected.items()):
        if count >= AER_CORRECTED_STORM:
            problems.append(("warn", f"{count} corrected PCIe errors on {device} in the kernel "
                             f"log (a storm: {AER_CORRECTED_STORM} or more)",
                             f"signal integrity: reseat the GPU below {device}, check its riser "
                             "and slot"))  # fmt: skip
    few = sum(n for n in corrected.values() if n < AER_CORRECTED_STORM)
    passed = (f"no uncorrectable PCIe error or narrowed GPU link in the kernel log; "
              f"{few} corrected error line(s) on GPU paths; {speed_only} boot notice(s) of a "
              "GPU link below full speed (GPUs train at 2.5 GT/s at boot and their driver "
              "raises it: topology.pcie-link judges the running link)")  # fmt: skip
    add_check(judge, host, "health.pcie.kernel-log", problems, passed,
              parsed.source(), reference=PCI_AER_LOG_SOURCE)  # fmt: skip


def pcie_health_checks(judge: JudgeState, host: HostEvidence) -> None:
    pcie_kernel_log_checks(judge, host)
    pci = host.health.pci
    parsed = pci.latest
    if parsed is None:
        missing_probe(judge, host, "health.pcie", "PCI sysfs listing", "health-pci")
        return
    before = {d.address: d for d in pci.before.record.devices} if pci.before and pci.after else {}
    problems: list[Problem] = []
    for device in parsed.record.devices:
        name = _device_name(host, device)
        judged_by_nvml = device.is_gpu and bool(host.pcie)
        if (device.is_rdma_nic or (device.is_gpu and not judged_by_nvml)) and (
                device.current_width and device.max_width
                and device.current_width < device.max_width):  # fmt: skip
            problems.append(("fail", f"{name} PCIe link at x{device.current_width} of "
                                     f"x{device.max_width}",
                             f"reseat {name} (and its riser); check the slot"))  # fmt: skip
        if device.is_rdma_nic and device.current_speed_gts and device.max_speed_gts and (
                device.current_speed_gts < device.max_speed_gts):  # fmt: skip
            problems.append(
                (
                    "warn",
                    f"{name} PCIe link at {device.current_speed_gts:g} GT/s of "
                    f"{device.max_speed_gts:g} (NICs keep their speed at idle)",
                    f"check the slot of {name} and its BIOS link settings",
                )
            )
        for kind in ("fatal", "nonfatal"):
            if count := _aer_total(device, kind):
                problems.append(
                    (
                        "fail",
                        f"{name} {count} uncorrectable ({kind}) PCIe error(s)",
                        f"drain the node; reseat {name}, check its slot and riser",
                    )
                )
        old = before.get(device.address)
        grown = _aer_total(device, "correctable") - (_aer_total(old, "correctable") if old else 0)
        if old is not None and grown > 0:
            problems.append(
                (
                    "warn",
                    f"{name} {grown} correctable PCIe error(s) during the run",
                    f"signal integrity: reseat {name}, check its riser and slot",
                )
            )
    smi = host.health.smi
    if smi.before and smi.after:
        replays = {n: g.health.pcie_replays for n, g in health_gpus(smi.before) if g.health}
        for name, gpu in health_gpus(smi.after):
            start, end = replays.get(name), gpu.health.pcie_replays if gpu.health else None
            if start is not None and end is not None and end > start:
                problems.append(
                    (
                        "warn",
                        f"{name} {end - start} PCIe replay(s) during the run",
                        f"signal integrity: reseat {name}, check its riser",
                    )
                )
    nics = sum(d.is_rdma_nic for d in parsed.record.devices)
    passed = f"{nics} RDMA NIC(s) at full PCIe width, no uncorrectable AER error" + (
        ", no correctable error during the run" if before else ""
    )
    add_check(judge, host, "health.pcie", problems, passed, parsed.source(),
              reference=PCI_AER_SOURCE)  # fmt: skip


def _bridges_above(device: LspciDevice, bridges: list[LspciDevice]) -> list[LspciDevice]:
    """The bridges whose bus range holds the device's bus, the nearest (highest secondary bus)
    first."""
    above = [b for b in bridges if b.domain == device.domain and b.bridges_bus(device.bus)]
    return sorted(above, key=lambda b: -(b.secondary_bus or 0))


def _pair_problems(gpu: str, nic: str, gpu_path: list[LspciDevice],
                   nic_path: list[LspciDevice]) -> tuple[str, list[Problem]]:  # fmt: skip
    """Where the pair meets ("switch" or "root complex") and what ACS does on the way: every
    switch port below their lowest common bridge that redirects fails."""
    common = next((b for b in gpu_path if b in nic_path), None)
    if common is None or common.is_root_port:
        return "root complex", []
    below = [b for path in (gpu_path, nic_path) for b in path[: path.index(common)]]
    pair = f"{gpu} and {nic}"
    if any(b.capabilities_denied for b in [common, *below]):
        return "switch", [("unjudged", f"{pair} meet at {common.address}, whose capabilities "
                           "lspci could not read (ran without root?)", None)]  # fmt: skip
    if common.port_type is None:
        return "switch", [("unjudged", f"{pair} meet at {common.address}, of unknown port "
                           "type (no Express capability printed)", None)]  # fmt: skip
    return "switch", [("fail", f"ACS redirect (ReqRedir/CmpltRedir) on {b.address} "
                       f"({b.port_type or 'bridge'}) between {pair}: their P2P traffic goes "
                       "through the root complex",
                       f"disable ACS on {b.address} (setpci, or the BIOS option), as NCCL's "
                       "guide says") for b in below if b.acs_redirects]  # fmt: skip


def pcie_acs_checks(judge: JudgeState, host: HostEvidence) -> None:
    """ACS on the PCIe switch between a GPU and an RDMA NIC: with ReqRedir or CmpltRedir on, the
    switch sends their peer-to-peer traffic (GPUDirect RDMA) up to the root complex."""
    parsed = host.health.lspci
    if parsed is None:
        sysfs = host.health.pci.latest
        listed_in_sysfs = sysfs.record.devices if sysfs else []
        if any(d.is_gpu for d in listed_in_sysfs) and any(d.is_rdma_nic for d in listed_in_sysfs):
            missing_probe(judge, host, "health.pcie.acs", "PCI tree (lspci -vvv)", "health-lspci")
        return
    devices = parsed.record.devices
    gpus = [d for d in devices if d.is_gpu]
    nics = [d for d in devices if d.is_rdma_nic]
    if not gpus or not nics:
        return
    bridges = [d for d in devices if d.secondary_bus is not None]
    problems: list[Problem] = []
    meetings: Counter[str] = Counter()
    if not bridges:
        problems.append(("unjudged", "lspci printed no bridge bus range: where the GPUs and NICs "
                         "sit in the PCI tree is unknown", None))  # fmt: skip
    else:
        for gpu in gpus:
            for nic in nics:
                meeting, found = _pair_problems(
                    host.health.gpu_name(gpu.address), f"NIC {nic.address}",
                    _bridges_above(gpu, bridges), _bridges_above(nic, bridges))  # fmt: skip
                meetings[meeting] += 1
                problems += found
    add_check(judge, host, "health.pcie.acs", problems,
              f"{meetings['switch']} GPU-NIC pair(s) under a PCIe switch with no ACS redirect on "
              f"the path; {meetings['root complex']} meet only at the root complex, where ACS does "
              "not change their path", parsed.source(), reference=PCI_ACS_SOURCE)  # fmt: skip
