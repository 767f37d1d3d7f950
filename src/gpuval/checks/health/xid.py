"""Xid / SXid: the kernel log's lines, each code's meaning and action from the catalog; a GPU
that fell off the bus or that the driver could not initialise, with or without an Xid line."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime

from gpuval.catalog.health import XidMeaning, driver_event_meaning, sxid_meaning, xid_meaning
from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import missing_probe
from gpuval.checks.health.memory import kernel_log_remap_problem
from gpuval.checks.model import Check, Status, rank
from gpuval.evidence import HostEvidence, ParsedFile
from gpuval.evidence.model import pci_key
from gpuval.records.health import (
    KernelEvent,
)

# Xid 45 (preemptive cleanup) names the Xid that caused it: "... caused by previous Xid 149".
_CAUSE = re.compile(r"caused by previous Xid (\d+)")
# What the log kinds handled here are called in a tally.
_GPU_EVENTS = ("xid", "sxid", "off-bus", "init-failed")


def _captured_at(file: ParsedFile) -> datetime | None:
    started = file.started_at
    try:
        moment = datetime.fromisoformat(started) if started else None
    except ValueError:
        return None
    return moment if moment and moment.tzinfo else None


def event_age_hours(event: KernelEvent, file: ParsedFile) -> float | None:
    """Hours between the event and the log's capture; None when either time is unknown."""
    return _age_hours(event, _captured_at(file))


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


def _cause(event: KernelEvent) -> int | None:
    """The Xid an Xid 45 line names as its cause, when the catalog knows it. Row remapping
    (63/64) is judged by the memory rule, so a 45 after one stays a 45."""
    found = _CAUSE.search(event.message) if event.kind == "xid" and event.code == 45 else None
    code = int(found[1]) if found else None
    return code if code is not None and code not in (63, 64) and (
        xid_meaning(code).code == code) else None  # fmt: skip


def _meaning(event: KernelEvent) -> XidMeaning:
    if event.kind == "sxid":
        return sxid_meaning(event.severity)
    if event.kind == "init-failed":
        return driver_event_meaning("init-failed")
    cause = _cause(event)
    return xid_meaning(cause if cause is not None else event.code)


def _event_text(event: KernelEvent, meaning: XidMeaning) -> str:
    name = meaning.mnemonic or meaning.meaning
    if event.kind == "init-failed":
        return f"GPU initialisation failed ({event.message})"
    if event.kind == "off-bus":
        return f"fallen off the bus (as Xid 79, {name})"
    if (cause := _cause(event)) is not None:
        return f"Xid 45 caused by Xid {cause} ({name})"
    what = "SXid" if event.kind == "sxid" else "Xid"
    return f"{what} {event.code} ({name})"


def _action(meaning: XidMeaning, name: str | None, event: KernelEvent) -> str:
    action = meaning.action.format(gpu=name, switch=event.switch or "the NVSwitch")
    follow_up = meaning.investigatory
    return f"{action}; if it recurs, NVIDIA's follow-up: {follow_up}" if follow_up else action


def _tally_name(event: KernelEvent) -> str:
    if event.kind == "off-bus":
        return "fallen off the bus"
    if event.kind == "init-failed":
        return "initialisation failure"
    return f"{'SXid' if event.kind == 'sxid' else 'Xid'} {event.code}"


def xid_checks(judge: JudgeState, host: HostEvidence) -> None:
    parsed = host.health.kernel_log.latest
    if parsed is None:
        missing_probe(
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
    gpu_events = [e for e in log.events if e.kind in _GPU_EVENTS]
    xid79 = {pci_key(e.device) for e in gpu_events if e.kind == "xid" and e.code == 79}
    # A probe failure that names no GPU follows the line that named it (fallen off the bus,
    # RmInitAdapter): alone, it is the only word that a GPU is unusable.
    named = any(e.device for e in gpu_events if e.kind in ("off-bus", "init-failed"))
    for event in gpu_events:
        if event.kind == "off-bus" and pci_key(event.device) in xid79:
            continue  # the Xid 79 line of the same GPU says it already
        if event.kind == "init-failed" and not event.device and named:
            continue
        key = event.switch if event.kind == "sxid" else pci_key(event.device) or event.device
        by_device.setdefault(key or "unknown", []).append(event)
    benign = set(judge.thresholds.xid_benign_codes)
    for device, events in sorted(by_device.items()):
        judged: list[tuple[Status, KernelEvent, XidMeaning, float | None]] = []
        for event in events:
            meaning = _meaning(event)
            age = _age_hours(event, captured)
            recent = age is None or age <= window
            # Xid 63 / 64: memory.py's rule for a pending remap and a remap failure.
            remap = event.kind == "xid" and kernel_log_remap_problem(event.code, recent, "", "")
            status = "pass" if event.code in benign else remap[0] if remap else _event_status(
                meaning, recent)  # fmt: skip
            judged.append((status, event, meaning, age))
        # The worst event, the latest of equals: its line is the evidence.
        status, event, meaning, age = min(judged, key=lambda j: (rank(j[0]), -j[1].line))
        name = event.switch if event.kind == "sxid" else host.health.gpu_name(event.device)
        remap = event.kind == "xid" and kernel_log_remap_problem(
            event.code, age is None or age <= window, host.health.gpu_name(event.device),
            f"{device}.0")  # fmt: skip
        counts = Counter((e.kind == "sxid", e.code or 0, _tally_name(e)) for e in events)
        tally = ", ".join(f"{what} x{n}" for (_, _, what), n in sorted(counts.items()))
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
            reason=f"{_event_text(event, meaning)} on {name}: "
            f"{remap[1] if remap else meaning.meaning}, {_when(event, age)}{note} ({tally} in "
            "the log)",
            action=None if status == "pass" else remap[2] if remap else _action(
                meaning, name, event),
        ))  # fmt: skip
    if not by_device:
        judge.add(Check(
            check_id="health.xid", host=host.name, category="health", status="pass",
            source=parsed.source(), reference=f"no hardware Xid within {window:g} h",
            reason=f"no Xid, SXid, fallen-off-the-bus or GPU initialisation failure line in "
            f"{log.line_count} kernel log "
            f"lines ({log.format}, {log.first_timestamp or 'undated'} to "
            f"{log.last_timestamp or 'undated'})",
        ))  # fmt: skip
