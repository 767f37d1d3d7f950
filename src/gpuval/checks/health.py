"""Node health: the hardware evidence that bandwidth tests miss. A node whose kernel log shows a
GPU that fell off the bus, whose GPU waits for a row remap, or whose InfiniBand link went down
during the run fails here, however good its bandwidth looked.

Subjects (check ids `health.<subject>...`, each non-pass check with an `action`):
- xid: the kernel log's Xid/SXid lines, each code's meaning and action from the catalog
  (xid.json), judged within the current boot and `xid_window_hours`;
- memory: ECC mode and counts, retired pages, row remapping, repairs pending (nvidia-smi -q);
- clocks: slowdown reasons and their counters over the run, temperatures against the slowdown
  threshold, power limit against the default, persistence and MIG modes;
- pcie: RDMA NICs' link width and speed and every device's AER counters (sysfs); GPUs' links
  are judged by topology.pcie-link (NVML) and only fall back to sysfs here; ACS redirect on
  the PCIe switch ports between a GPU and an RDMA NIC (lspci -vvv);
- nvlink: NVSwitch fabric registration (the fabric manager did its job) and the NVLink error
  counters over the run (nvidia-smi nvlink -e; link states are topology.nvlink-state's);
- network: RDMA port error counters over the run (sysfs), GPUDirect RDMA's kernel module,
  the same NIC firmware and OFED (ofed_info -s) on every node;
- software: VBIOS and kernel the same on every node;
- burn: the GEMM burn per GPU, against the catalog's dense peak and the node's siblings;
- dcgm: DCGM diagnostics, each failed test named per GPU.
Checks of other modules that belong in the node health table are mapped by HEALTH_SUBJECTS.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from gpuval.catalog.health import XidMeaning, compute_of, sxid_meaning, xid_meaning
from gpuval.checks.consistency import mixed_values_checks
from gpuval.checks.context import Judge
from gpuval.checks.model import Check, Status, rank
from gpuval.checks.wording import listed, percent
from gpuval.evidence import HostEvidence, Parsed, runs_of
from gpuval.evidence.model import BeforeAfter, pci_key
from gpuval.records.health import (
    GemmBurnRun,
    KernelEvent,
    LspciDevice,
    NvlinkErrorsRun,
    PciDevice,
    SysfsInfinibandRun,
)
from gpuval.records.nvidia_smi import EccCounts, NvidiaSmiRun, SmiGpu
from gpuval.records.software import SoftwareVersionRun
from gpuval.runfolder import RawFile
from gpuval.steps import after_step

# The node health table: (subject, column title), in column order.
HEALTH_SUBJECTS = (
    ("xid", "Xid / SXid"),
    ("memory", "Memory"),
    ("clocks", "Clocks & heat"),
    ("pcie", "PCIe"),
    ("nvlink", "NVLink"),
    ("network", "InfiniBand / RoCE"),
    ("software", "Versions"),
    ("burn", "GPU burn"),
    ("dcgm", "DCGM"),
    ("bandwidth", "HBM & host copies"),
)
# Checks of other modules shown in the node health table, with what to do when they fail.
OTHER_SUBJECTS: dict[str, tuple[str, str]] = {
    "topology.pcie-link": (
        "pcie",
        "reseat the GPU (or its riser) and check the slot's link "
        "settings in the BIOS; RMA the GPU if the link stays narrow",
    ),
    "topology.nvlink-state": (
        "nvlink",
        "reset the GPUs and restart nvidia-fabricmanager; if "
        "the link stays down, check the NVLink connections or "
        "RMA the GPU or baseboard",
    ),
    "network.rdma-ports": (
        "network",
        "reseat or replace the port's cable or transceiver and check the switch port",
    ),
    "nvbandwidth.": (
        "bandwidth",
        "compare with the node's siblings; check the GPU's PCIe link and NUMA placement",
    ),
}
# Slowdown reasons (nvidia-smi -q -x names) that mean the hardware protects itself.
HW_SLOWDOWNS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
SW_SLOWDOWNS = ("sw_thermal_slowdown", "sync_boost")
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
PCI_AER_SOURCE = "Linux Documentation/ABI/testing/sysfs-bus-pci-devices-aer"
# ACS redirect sends peer-to-peer requests up to the root complex: GPUDirect slows or hangs.
PCI_ACS_SOURCE = (
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
    "#pci-access-control-services-acs"
)
# NVLink counters (NVML's nvmlNvLinkErrorCounter_t): replay = the data link retransmitted,
# recovery = the link retrained, CRC = a flow-control unit or data arrived corrupted.
NVLINK_COUNTER_SOURCE = (
    "https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html "
    "(nvmlNvLinkErrorCounter_t); https://docs.nvidia.com/deploy/nvidia-smi/index.html (nvlink -e)"
)
# Judged counter kinds, by a word of the printed name ("Data CRC Errors", "Lane 3 CRC Errors"),
# with what to do when one grows. Other names are kept in the record and not judged.
NVLINK_ERRORS = {
    "crc": "reseat or replace the NVLink bridge or board of {gpu}; RMA {gpu} if errors recur",
    "recovery": "reseat or replace the NVLink bridge or board of {gpu}; RMA {gpu} if the link "
    "keeps retraining",
    "replay": "a marginal NVLink: reseat the NVLink bridge or board of {gpu}; RMA {gpu} if "
    "replays keep growing",
}

Problem = tuple[Status, str, str | None]  # status, what was found, what to do


def health_subject(check_id: str) -> str | None:
    """The node health column of a check, None for checks outside the table."""
    if check_id.startswith("health."):
        return check_id.split(".")[1]
    return next((s for prefix, (s, _) in OTHER_SUBJECTS.items()
                 if check_id == prefix or (prefix.endswith(".") and check_id.startswith(prefix))),
                None)  # fmt: skip


def suggested_action(check: Check) -> str | None:
    """The check's own action, else its subject's for a check of another module that did not
    pass."""
    if check.action or check.status == "pass":
        return check.action
    subject = health_subject(check.check_id)
    return next((action for prefix, (s, action) in OTHER_SUBJECTS.items()
                 if s == subject and check.check_id.startswith(prefix)), None)  # fmt: skip


def _add(
    judge: Judge,
    host: HostEvidence,
    check_id: str,
    problems: list[Problem],
    passed: str,
    source: str | None,
    measured: float | str | None = None,
    reference: float | str | None = None,
    unit: str | None = None,
) -> None:
    """One check from a list of problems: the worst status, every problem listed, the actions of
    the worst ones; `passed` is the reason when there is none."""
    problems = sorted(problems, key=lambda p: rank(p[0]))  # the worst named first
    status = problems[0][0] if problems else "pass"
    actions = list(dict.fromkeys(p[2] for p in problems if p[0] == status and p[2]))
    judge.add(Check(
        check_id=check_id, host=host.name, category="health", status=status,
        reason=listed([p[1] for p in problems], limit=4) if problems else passed,
        source=source, action="; ".join(actions) or None, measured=measured,
        reference=reference, unit=unit,
    ))  # fmt: skip


def _missing(judge: Judge, host: HostEvidence, check_id: str, what: str, step: str) -> None:
    """Unjudged when the health phase ran on the host but left no trace of the probe's step,
    before or after the benchmarks (a probe that failed or was skipped is its step's check)."""
    if not host.health.ran or {step, after_step(step)} & host.health.steps:
        return
    judge.add(Check(
        check_id=check_id, host=host.name, category="health", status="unjudged",
        reason=f"the health phase ran but left no {what}: nothing to judge (see its step)",
        action="rerun the health phase; check the step's sidecar for why it failed",
    ))  # fmt: skip


# --------------------------------------------------------------------- Xid / SXid


def _captured_at(raw: RawFile) -> datetime | None:
    started = raw.sidecar.started_at if raw.sidecar else None
    try:
        moment = datetime.fromisoformat(started) if started else None
    except ValueError:
        return None
    return moment if moment and moment.tzinfo else None


def _age_hours(event: KernelEvent, captured: datetime | None) -> float | None:
    if event.time_iso is None or captured is None:
        return None
    return (captured - datetime.fromisoformat(event.time_iso)).total_seconds() / 3600


def _event_status(meaning: XidMeaning, recent: bool) -> Status:
    if meaning.kind == "hardware":
        return "fail" if recent else "warn"
    if meaning.kind in ("application", "unknown"):
        return "warn" if recent or meaning.kind == "unknown" else "pass"
    return "pass"


def _when(event: KernelEvent, age: float | None) -> str:
    if age is not None:
        return f"{age:.1f} h before the log was read"
    if event.uptime_s is not None:
        return f"{event.uptime_s:.0f} s after boot"
    if event.timestamp:
        return f"at {event.timestamp} (time zone unknown: judged as current)"
    return "undated: judged as current"


def _event_text(event: KernelEvent, meaning: XidMeaning) -> str:
    what = "SXid" if event.kind == "sxid" else "Xid"
    return f"{what} {event.code} ({meaning.mnemonic or meaning.meaning})"


def xid_checks(judge: Judge, host: HostEvidence) -> None:
    parsed = host.health.kernel_log.latest
    if parsed is None:
        _missing(
            judge, host, "health.xid", "kernel log (dmesg / journalctl -k)", "health-kernel-log"
        )
        return
    log, window = parsed.record, judge.thresholds.xid_window_hours
    if log.unreadable:
        judge.add(Check(
            check_id="health.xid", host=host.name, category="health", status="unjudged",
            source=parsed.source(), reference=f"no hardware Xid within {window:g} h",
            reason=f"the kernel log could not be read ({log.unreadable}): Xid and SXid events "
            "unseen, nothing to judge",
            action="run the health phase as root (dmesg needs CAP_SYSLOG), or let the user read "
            "the journal (group systemd-journal or adm)",
        ))  # fmt: skip
        return
    captured = _captured_at(parsed.file)
    by_device: dict[str, list[KernelEvent]] = {}
    xid79 = {pci_key(e.device) for e in log.events if e.kind == "xid" and e.code == 79}
    for event in log.events:
        if event.kind == "off-bus" and pci_key(event.device) in xid79:
            continue  # the Xid 79 line of the same GPU says it already
        key = event.switch if event.kind == "sxid" else pci_key(event.device) or event.device
        by_device.setdefault(key or "unknown", []).append(event)
    benign = set(judge.thresholds.xid_benign_codes)
    for device, events in sorted(by_device.items()):
        judged: list[tuple[Status, KernelEvent, XidMeaning, float | None]] = []
        for event in events:
            meaning = sxid_meaning(event.severity) if event.kind == "sxid" else (
                xid_meaning(event.code))  # fmt: skip
            age = _age_hours(event, captured)
            status = "pass" if event.code in benign else _event_status(
                meaning, age is None or age <= window)  # fmt: skip
            judged.append((status, event, meaning, age))
        # The worst event, the latest of equals: its line is the evidence.
        status, event, meaning, age = min(judged, key=lambda j: (rank(j[0]), -j[1].line))
        name = event.switch if event.kind == "sxid" else host.health.gpu_name(event.device)
        counts = Counter((e.kind == "sxid", e.code or 0) for e in events)
        tally = ", ".join(f"{'SXid' if sxid else 'Xid'} {code} x{n}"
                          for (sxid, code), n in sorted(counts.items()))  # fmt: skip
        note = (
            f"; older than {window:g} h: history unless the GPU was not reset since"
            if status == "warn" and meaning.kind == "hardware"
            else "; configured as benign (xid_benign_codes)"
            if event.code in benign
            else ""
        )
        judge.add(Check(
            check_id=f"health.xid.{device}", host=host.name, category="health", status=status,
            measured=_event_text(event, meaning), reference=f"no hardware Xid within {window:g} h",
            source=parsed.source(event.line),
            reason=f"{_event_text(event, meaning)} on {name}: {meaning.meaning}, "
            f"{_when(event, age)}{note} ({tally} in the log)",
            action=None if status == "pass" else meaning.action.format(
                gpu=name, switch=event.switch or "the NVSwitch"),
        ))  # fmt: skip
    if not by_device:
        judge.add(Check(
            check_id="health.xid", host=host.name, category="health", status="pass",
            source=parsed.source(), reference=f"no hardware Xid within {window:g} h",
            reason=f"no Xid, SXid or fallen-off-the-bus line in {log.line_count} kernel log "
            f"lines ({log.format}, {log.first_timestamp or 'undated'} to "
            f"{log.last_timestamp or 'undated'})",
        ))  # fmt: skip


# --------------------------------------------------------------------- memory


def _gpus(parsed: Parsed[NvidiaSmiRun]) -> Iterable[tuple[str, SmiGpu]]:
    for i, gpu in enumerate(parsed.record.gpus):
        if gpu.health is not None:
            yield f"GPU{gpu.index if gpu.index is not None else i}", gpu


def _uncorrectable(counts: EccCounts) -> int:
    found = [counts.dram_uncorrectable, counts.sram_uncorrectable,
             counts.sram_uncorrectable_parity, counts.sram_uncorrectable_secded]  # fmt: skip
    total = sum(v for v in found if v)
    return total or (counts.uncorrected_total or 0)


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() == "yes"


def _memory_problems(name: str, gpu: SmiGpu, ecc_expected: bool) -> list[Problem]:
    health = gpu.health
    assert health is not None
    found: list[Problem] = []
    reset = f"reset {name} (nvidia-smi -r -i {name.removeprefix('GPU')}) while it is idle"
    if ecc_expected and (gpu.ecc_mode or "").lower() == "disabled":
        found.append(
            (
                "fail",
                f"{name} ECC disabled on a GPU whose memory has ECC",
                f"enable ECC (nvidia-smi -i {name.removeprefix('GPU')} -e 1), then {reset}",
            )
        )
    if health.ecc_mode_pending and gpu.ecc_mode and health.ecc_mode_pending != gpu.ecc_mode:
        found.append(("warn", f"{name} ECC mode changes to {health.ecc_mode_pending} at the "
                              "next reset", reset))  # fmt: skip
    if volatile := _uncorrectable(health.ecc_volatile):
        found.append(
            (
                "fail",
                f"{name} {volatile} uncorrectable ECC error(s) since the driver loaded",
                f"drain the node, {reset}; RMA {name} if they recur",
            )
        )
    elif aggregate := _uncorrectable(health.ecc_aggregate):
        found.append(
            (
                "warn",
                f"{name} {aggregate} uncorrectable ECC error(s) in its life",
                f"watch {name}: RMA it if its remapped rows run out",
            )
        )
    if _yes(health.retired_pages.pending):
        found.append(("fail", f"{name} has retired pages pending", reset))
    rows = health.remapped_rows
    if _yes(rows.failure):
        found.append(
            (
                "fail",
                f"{name} row remapping failed (spare rows used up)",
                f"drain the node and RMA {name}",
            )
        )
    if _yes(rows.pending):
        found.append(
            (
                "fail",
                f"{name} row remap pending (uncorrectable: {rows.uncorrectable}, "
                f"correctable: {rows.correctable})",
                f"{reset} to apply the pending row remap",
            )
        )
    if exhausted := rows.histogram.get("none"):
        found.append(
            (
                "warn",
                f"{name} {exhausted} memory bank(s) without a spare row left",
                f"plan to RMA {name}: the next error in those banks cannot be remapped",
            )
        )
    for label, flag in (
        ("SRAM errors over the field-diagnostic threshold", health.sram_threshold_exceeded),
        ("unrepairable memory", health.unrepairable_memory),
    ):
        if _yes(flag):
            found.append(("fail", f"{name} {label}", f"drain the node and RMA {name}"))
    for label, flag in (
        ("channel repair pending", health.channel_repair_pending),
        ("TPC repair pending", health.tpc_repair_pending),
        ("reset required", health.reset_required),
        ("drain and reset recommended", health.drain_and_reset_recommended),
    ):
        if _yes(flag):
            found.append(("fail", f"{name} {label}", f"drain the node, {reset}"))
    if health.recovery_action and health.recovery_action.lower() not in ("none", "n/a"):
        found.append(
            (
                "fail",
                f"{name} recovery action {health.recovery_action}",
                f"{health.recovery_action.lower()} {name} as NVML asks",
            )
        )
    return found


def memory_checks(judge: Judge, host: HostEvidence) -> None:
    parsed = host.health.smi.latest
    if parsed is None:
        _missing(judge, host, "health.memory", "nvidia-smi -q -x output", "nvidia-smi-query")
        return
    compute = compute_of(host.model.model if host.model else None)
    problems = [p for name, gpu in _gpus(parsed)
                for p in _memory_problems(name, gpu, bool(compute and compute.ecc))]  # fmt: skip
    gpus = sum(1 for _ in _gpus(parsed))
    _add(judge, host, "health.memory", problems, f"{gpus} GPU(s): no uncorrectable ECC error, no "
         "retired page or row remap pending, no remap failure", parsed.source(),
         reference="GPU Memory Error Management (NVIDIA)")  # fmt: skip


# --------------------------------------------------------------------- clocks and heat


def _temperature_problems(name: str, gpu: SmiGpu, margin_c: float) -> list[Problem]:
    t = gpu.health.temperature if gpu.health else None
    if t is None:
        return []
    action = f"check the cooling of {name} (airflow, fans, inlet temperature)"
    # 535+ print margins below T.Limit; the slowdown threshold is itself a margin.
    pairs = [(t.tlimit_c, t.slowdown_tlimit_c, "T.Limit margin"),
             (None if t.gpu_c is None or t.slowdown_c is None else t.slowdown_c - t.gpu_c, 0.0,
              "below slowdown")]  # fmt: skip
    for value, threshold, label in pairs:
        if value is None or threshold is None:
            continue
        room = value - threshold
        if room <= 0:
            return [
                (
                    "fail",
                    f"{name} at its slowdown temperature ({label} {value:g} °C, "
                    f"slowdown at {threshold:g})",
                    action,
                )
            ]
        if room < margin_c:
            return [("warn", f"{name} {room:g} °C from its slowdown temperature", action)]
    return []


def _counter_growth(before: Parsed[NvidiaSmiRun] | None, after: Parsed[NvidiaSmiRun] | None,
                    ) -> dict[tuple[str, str], float]:  # fmt: skip
    """(GPU, reason) -> microseconds spent in that slowdown between the two captures."""
    if before is None or after is None:
        return {}
    first = {name: gpu.health.clock_event_reason_counters_us for name, gpu in _gpus(before)
             if gpu.health}  # fmt: skip
    grown = {}
    for name, gpu in _gpus(after):
        for reason, value in (gpu.health.clock_event_reason_counters_us if gpu.health else {}
                              ).items():  # fmt: skip
            start = first.get(name, {}).get(reason)
            if value is not None and start is not None and value > start:
                grown[(name, reason)] = value - start
    return grown


def clock_checks(judge: Judge, host: HostEvidence) -> None:
    smi: BeforeAfter[NvidiaSmiRun] = host.health.smi
    parsed = smi.latest
    if parsed is None:
        return  # memory_checks already says the output is missing
    problems: list[Problem] = []
    margin = judge.thresholds.temperature_margin_warn_c
    for name, gpu in _gpus(parsed):
        health = gpu.health
        assert health is not None
        active = [r for r, v in health.clock_event_reasons.items() if (v or "").lower() == "active"]
        for reason in active:
            if reason in HW_SLOWDOWNS:
                problems.append(
                    (
                        "fail",
                        f"{name} {reason} active",
                        f"check the cooling and power supply of {name}",
                    )
                )
            elif reason in SW_SLOWDOWNS:
                problems.append(("warn", f"{name} {reason} active",
                                 f"check the cooling of {name}" if "thermal" in reason else
                                 "sync boost holds the group to its slowest GPU"))  # fmt: skip
        problems += _temperature_problems(name, gpu, margin)
        power = health.power
        for limit, label in (
            (power.limit_w, "power limit"),
            (power.enforced_limit_w, "enforced power limit"),
        ):
            if limit and power.default_limit_w and limit < power.default_limit_w - 1:
                problems.append(("warn", f"{name} {label} {limit:g} W below its default "
                                         f"{power.default_limit_w:g} W",
                                 f"restore it: nvidia-smi -i {name.removeprefix('GPU')} -pl "
                                 f"{power.default_limit_w:g}"))  # fmt: skip
        if (gpu.persistence_mode or "").lower() == "disabled":
            problems.append(
                (
                    "warn",
                    f"{name} persistence mode off",
                    "run nvidia-persistenced (or nvidia-smi -pm 1)",
                )
            )
        if (gpu.mig_mode or "").lower() == "enabled" or (health.mig_mode_pending or "").lower(
                ) == "enabled":  # fmt: skip
            problems.append(
                (
                    "warn",
                    f"{name} MIG mode enabled: whole-GPU benchmarks see MIG instances",
                    f"disable MIG (nvidia-smi -i "
                    f"{name.removeprefix('GPU')} -mig 0) unless it is meant",
                )
            )
    for (name, reason), micros in sorted(_counter_growth(smi.before, smi.after).items()):
        if reason in HW_SLOWDOWNS or reason == "sw_thermal_slowdown":
            status: Status = "fail" if reason in HW_SLOWDOWNS else "warn"
            problems.append(
                (
                    status,
                    f"{name} spent {micros / 1e6:.1f} s in {reason} during the run",
                    f"check the cooling and power supply of {name}",
                )
            )
    _add(
        judge,
        host,
        "health.clocks",
        problems,
        "no slowdown active, temperatures clear of "
        "slowdown, power limits at their defaults, persistence mode on",
        parsed.source(),
    )


# --------------------------------------------------------------------- PCIe


def _aer_total(device: PciDevice, kind: str) -> int:
    counts = device.aer.get(kind, {})
    totals = [v for k, v in counts.items() if k.startswith("TOTAL_")]
    return totals[0] if totals else sum(counts.values())


def _device_name(host: HostEvidence, device: PciDevice) -> str:
    if device.is_gpu:
        return host.health.gpu_name(device.address)
    return f"NIC {device.address}" if device.is_rdma_nic else f"PCI device {device.address}"


def pcie_health_checks(judge: Judge, host: HostEvidence) -> None:
    pci = host.health.pci
    parsed = pci.latest
    if parsed is None:
        _missing(judge, host, "health.pcie", "PCI sysfs listing", "health-pci")
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
        replays = {n: g.health.pcie_replays for n, g in _gpus(smi.before) if g.health}
        for name, gpu in _gpus(smi.after):
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
    _add(judge, host, "health.pcie", problems, f"{nics} RDMA NIC(s) at full PCIe width, no "
         "uncorrectable AER error" + (", no correctable error during the run" if before else ""),
         parsed.source(), reference=PCI_AER_SOURCE)  # fmt: skip


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


def pcie_acs_checks(judge: Judge, host: HostEvidence) -> None:
    """ACS on the PCIe switch between a GPU and an RDMA NIC: with ReqRedir or CmpltRedir on, the
    switch sends their peer-to-peer traffic (GPUDirect RDMA) up to the root complex."""
    parsed = host.health.lspci
    if parsed is None:
        sysfs = host.health.pci.latest
        listed_in_sysfs = sysfs.record.devices if sysfs else []
        if any(d.is_gpu for d in listed_in_sysfs) and any(d.is_rdma_nic for d in listed_in_sysfs):
            _missing(judge, host, "health.pcie.acs", "PCI tree (lspci -vvv)", "health-lspci")
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
    _add(judge, host, "health.pcie.acs", problems,
         f"{meetings['switch']} GPU-NIC pair(s) under a PCIe switch with no ACS redirect on the "
         f"path; {meetings['root complex']} meet only at the root complex, where ACS does not "
         "change their path", parsed.source(), reference=PCI_ACS_SOURCE)  # fmt: skip


# --------------------------------------------------------------------- NVLink fabric


def nvlink_fabric_checks(judge: Judge, host: HostEvidence) -> None:
    parsed = host.health.smi.latest
    if parsed is None:
        return
    problems: list[Problem] = []
    registered = 0
    for name, gpu in _gpus(parsed):
        fabric = gpu.health.fabric if gpu.health else None
        if fabric is None or fabric.state is None:
            continue
        if fabric.state.lower() != "completed" or (fabric.status or "").lower() != "success":
            problems.append(
                (
                    "fail",
                    f"{name} fabric state {fabric.state}, status "
                    f"{fabric.status}: not registered with the NVSwitch fabric",
                    "start (or restart) nvidia-fabricmanager, then reset the GPUs",
                )
            )
        else:
            registered += 1
    if registered or problems:
        _add(
            judge,
            host,
            "health.nvlink.fabric",
            problems,
            f"{registered} GPU(s) registered with "
            "the NVSwitch fabric (fabric manager: Completed, Success)",
            parsed.source(),
        )


def _nvlink_counts(run: NvlinkErrorsRun) -> dict[tuple[str, int, str], int | None]:
    return {(f"GPU{gpu.index}", link.link, name): value for gpu in run.gpus
            for link in gpu.links for name, value in link.counters.items()}  # fmt: skip


def _nvlink_kind(name: str) -> str | None:
    return next((kind for kind in NVLINK_ERRORS if kind in name.lower()), None)


def nvlink_error_checks(judge: Judge, host: HostEvidence) -> None:
    """`nvidia-smi nvlink -e` before and after the benchmarks: a replay, recovery or CRC counter
    that grew is a link that corrupted traffic during the run."""
    captures = host.health.nvlink_errors
    parsed = captures.latest
    if parsed is None:
        _missing(judge, host, "health.nvlink.errors", "NVLink error counters (nvidia-smi "
                 "nvlink -e)", "health-nvlink-errors")  # fmt: skip
        return
    if not parsed.record.gpus:
        # nvlink -e prints nothing where no GPU has NVLink peers (a lent single H100 did so):
        # no counter applies. Whether links should be there is the topology checks' to say;
        # only links that nvlink -s lists and nvlink -e does not leave counters unread.
        listed = sum(len(gpu.links) for gpu in host.nvlinks)
        if listed:
            judge.add(Check(
                check_id="health.nvlink.errors", host=host.name, category="health",
                status="unjudged", source=parsed.source(), reference=NVLINK_COUNTER_SOURCE,
                reason=f"nvidia-smi nvlink -e listed no NVLink where nvlink -s lists {listed}: "
                "their error counters were not read",
            ))  # fmt: skip
        return
    paired = captures.before is not None and captures.after is not None
    first = _nvlink_counts(captures.before.record) if captures.before and paired else {}
    problems: list[Problem] = []
    judged = 0
    for (gpu, link, name), value in _nvlink_counts(parsed.record).items():
        kind = _nvlink_kind(name)
        if kind is None or value is None:
            continue
        judged += 1
        start = first.get((gpu, link, name))
        action = NVLINK_ERRORS[kind].format(gpu=gpu)
        if start is not None and value > start:
            problems.append(("fail", f"{gpu} link {link} {name} {start} -> {value} during the run",
                             action))  # fmt: skip
        elif start is not None and value < start:
            problems.append(("unjudged", f"{gpu} link {link} {name} fell {start} -> {value}: "
                             "the counters were reset during the run", None))  # fmt: skip
        elif start is None and value:
            problems.append(("warn", f"{gpu} link {link} {name} {value} since the counters were "
                             "cleared (no capture before the run to compare)", action))  # fmt: skip
    if not judged:
        problems.append(("unjudged", "no replay, recovery or CRC counter with a value (N/A or "
                         "other names only)", None))  # fmt: skip
    links = len({(gpu, link) for gpu, link, _ in _nvlink_counts(parsed.record)})
    _add(judge, host, "health.nvlink.errors", problems,
         f"{links} NVLink(s), {judged} replay/recovery/CRC counter(s): none grew during the run"
         if paired else f"{links} NVLink(s), {judged} replay/recovery/CRC counter(s), all zero "
         "(one capture only)", parsed.source(), reference=NVLINK_COUNTER_SOURCE)  # fmt: skip


# --------------------------------------------------------------------- InfiniBand / RoCE


def _ib_counters(run: SysfsInfinibandRun) -> dict[str, dict[str, int | None]]:
    return {f"{d.name} port {p.port}": p.counters for d in run.devices for p in d.ports}


def ib_counter_checks(judge: Judge, host: HostEvidence) -> None:
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
    _add(
        judge,
        host,
        "health.network.counters",
        problems,
        f"{ports} RDMA port(s): no error counter grew during the run",
        parsed.source(),
        reference=IB_COUNTER_SOURCE,
    )


def peermem_checks(judge: Judge, host: HostEvidence) -> None:
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


# --------------------------------------------------------------------- versions across nodes


def version_consistency_checks(judge: Judge) -> None:
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
            versions = sorted({g.health.vbios_version for _, g in _gpus(smi)
                               if g.health and g.health.vbios_version})  # fmt: skip
            if versions:
                vbios[host.name] = "/".join(versions)
        for os in runs_of(host.files, SoftwareVersionRun):
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


# --------------------------------------------------------------------- GEMM burn


def _burn_problems(judge: Judge, host: HostEvidence, run: GemmBurnRun,
                   ) -> dict[int, list[Problem]]:  # fmt: skip
    t = judge.thresholds
    found: dict[int, list[Problem]] = {gpu.index: [] for gpu in run.gpus}
    measured = [g.tflops for g in run.gpus if g.tflops and not g.error]
    median = statistics.median(measured) if len(measured) >= 2 else None
    compute = compute_of(host.model.model if host.model else None)
    peak = compute.dense_tflops.get(run.dtype or "") if compute else None
    for gpu in run.gpus:
        name, problems = f"GPU{gpu.index}", found[gpu.index]
        drain = f"drain the node; run DCGM diagnostics (level 3) on {name}, RMA it if they fail"
        if gpu.error:
            problems.append(("fail", f"{name} could not be burnt: {gpu.error}", drain))
            continue
        if gpu.correct is False:
            why = (
                f"{gpu.mismatches} product(s) differed from the first"
                if gpu.mismatches
                else f"reference block off by {gpu.max_abs_error:.2g} (relative)"
            )
            problems.append(("fail", f"{name} computed wrong results: {why}", drain))
        if gpu.tflops is not None and peak:
            fraction = gpu.tflops / peak
            status: Status = (
                "pass"
                if fraction >= t.burn_pass_fraction
                else "warn"
                if fraction >= t.burn_fail_fraction
                else "fail"
            )
            if status != "pass":
                problems.append(
                    (
                        status,
                        f"{name} {gpu.tflops:.0f} TFLOPS = {percent(fraction)}"
                        f" of the {peak:g} dense {run.dtype} peak",
                        f"check the clocks, power limit and cooling of {name}",
                    )
                )
        if gpu.tflops is not None and median:
            fraction = gpu.tflops / median
            if fraction < t.burn_sibling_warn_fraction:
                problems.append(("fail" if fraction < t.burn_sibling_fail_fraction else "warn",
                                 f"{name} {gpu.tflops:.0f} TFLOPS = {percent(fraction)} of its "
                                 f"siblings' median {median:.0f}",
                                 f"compare the clocks and temperature of {name} with its "
                                 "siblings"))  # fmt: skip
        for sample in gpu.samples:
            hard = [r for r in sample.throttle if r in HW_SLOWDOWNS]
            soft = [r for r in sample.throttle if r == "sw_thermal_slowdown"]
            if hard or soft:
                problems.append(
                    (
                        "fail" if hard else "warn",
                        f"{name} {', '.join(hard or soft)} at {sample.elapsed_s:g} s "
                        f"of the burn ({sample.temperature_c or '?'} °C, "
                        f"{sample.sm_clock_mhz or '?'} MHz)",
                        f"check the cooling and power supply of {name}",
                    )
                )
                break
    return found


def burn_checks(judge: Judge, host: HostEvidence) -> None:
    for parsed in host.health.burn:
        run = parsed.record
        if run.error or not run.gpus:
            judge.add(Check(
                check_id="health.burn", host=host.name, category="health", status="fail",
                source=parsed.source(), reason=f"the GEMM burn did not run: "
                f"{run.error or 'no GPU listed'}",
                action="check the node's driver and torch's CUDA build (python -c 'import "
                "torch; print(torch.cuda.is_available())')",
            ))  # fmt: skip
            continue
        compute = compute_of(host.model.model if host.model else None)
        peak = compute.dense_tflops.get(run.dtype or "") if compute else None
        problems = _burn_problems(judge, host, run)
        for gpu in run.gpus:
            found = problems[gpu.index]
            if run.device_type != "cuda":
                found.append(("unjudged", f"the burn ran on {run.device_type}, not a GPU", None))
            elif not peak and not found:
                found.append(("unjudged", f"GPU{gpu.index} {gpu.tflops} TFLOPS: no dense "
                                          f"{run.dtype} peak in the catalog for "
                                          f"{host.model.model if host.model else 'this GPU'}",
                              None))  # fmt: skip
            hottest = max((s.temperature_c for s in gpu.samples if s.temperature_c), default=None)
            _add(
                judge,
                host,
                f"health.burn.GPU{gpu.index}",
                found,
                f"GPU{gpu.index} {gpu.tflops or 0:.0f} TFLOPS {run.dtype}, results checked, no "
                f"slowdown{f', up to {hottest:g} °C' if hottest else ''}",
                parsed.source(),
                measured=gpu.tflops,
                reference=peak,
                unit="TFLOPS",
            )


# --------------------------------------------------------------------- DCGM


def dcgm_checks(judge: Judge, host: HostEvidence) -> None:
    for parsed in host.health.dcgm:
        run = parsed.record
        if run.runtime_error:
            judge.add(Check(
                check_id="health.dcgm", host=host.name, category="health", status="fail",
                source=parsed.source(), reason=f"DCGM could not run: {run.runtime_error}",
                action="check nv-hostengine and the DCGM version against the driver",
            ))  # fmt: skip
            continue
        problems: list[Problem] = []
        for test in run.tests:
            status = (test.status or "").lower()
            if status not in ("fail", "warn"):
                continue
            bad = [r for r in test.results if r.status.lower() == status] or test.results
            entities = ", ".join(r.entity for r in bad) or "all GPUs"
            why = next((w for r in bad for w in r.warnings), "")
            problems.append(("fail" if status == "fail" else "warn",
                             f"{test.name}: {test.status} on {entities}"
                             + (f" ({why})" if why else ""),
                             f"drain the node; run dcgmi diag -r 3 again on {entities}, RMA "
                             "what fails twice" if status == "fail" else
                             f"read DCGM's warning for {entities}"))  # fmt: skip
        skipped = [t.name for t in run.tests if (t.status or "").lower() == "skip"]
        passed = f"{len(run.tests) - len(skipped)} DCGM test(s) passed (DCGM {run.dcgm_version})"
        if skipped:
            passed += f"; skipped: {', '.join(skipped)}"
        _add(judge, host, "health.dcgm", problems, passed, parsed.source())


def health_checks(judge: Judge) -> None:
    for host in judge.evidence.hosts.values():
        if not host.reachable:
            continue
        xid_checks(judge, host)
        memory_checks(judge, host)
        clock_checks(judge, host)
        pcie_health_checks(judge, host)
        pcie_acs_checks(judge, host)
        nvlink_fabric_checks(judge, host)
        nvlink_error_checks(judge, host)
        ib_counter_checks(judge, host)
        peermem_checks(judge, host)
        burn_checks(judge, host)
        dcgm_checks(judge, host)
    version_consistency_checks(judge)
