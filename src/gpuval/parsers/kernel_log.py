"""The kernel log (`journalctl -k`, `dmesg` in any of its time formats, syslog copies): the lines
where the NVIDIA driver reports a GPU problem (`NVRM: Xid (PCI:0000:3b:00): 79, ...`), an
NVSwitch problem (`nvidia-nvswitch3: SXid (PCI:0000:c5:00.0): 20034, Fatal, ...`) or a GPU that
fell off the bus. Every other line is context and only counted.

How lines are dated varies: `journalctl -o short-iso` and `dmesg --time-format iso` print an
ISO-8601 time with its UTC offset (the only form whose age can be judged); `dmesg -T` prints
`[Sun Nov 22 19:01:01 2026]` and syslog `May 18 19:02:39 host kernel:`, both local times of an
unknown zone; plain `dmesg` prints seconds since boot (`[ 5107.644336]`). Lines may carry
prefixes before the time (a host name and facility, as Talos prints them).

A log that holds no kernel line (journald without kernel messages prints `-- No entries --`,
dmesg without CAP_SYSLOG `read kernel buffer failed`, or nothing printed at all) is a run marked
`unreadable`: Xid events unseen, never a clean log and never a parse error.
"""

from __future__ import annotations

import re
from datetime import datetime

from gpuval.parsers.text import clean_lines
from gpuval.records.base import ParseResult
from gpuval.records.health import KernelEvent, KernelLogRun

TOOLS = ("kernel-log",)
# dmesg exits 1 when it may not read the kernel buffer: the output still says why (unreadable).
NORMAL_EXIT_CODES = frozenset({0, 1})

_PCI = r"(?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"
_XID = re.compile(rf"NVRM: Xid \({_PCI}\): (?P<code>\d+)\b,?\s*(?P<rest>.*)$")
_SXID = re.compile(
    rf"(?P<switch>nvidia-nvswitch\d+): SXid \({_PCI}\): (?P<code>\d+)\b,?\s*(?P<rest>.*)$"
)
_OFF_BUS = re.compile(rf"NVRM: GPU (?:at )?{_PCI}:? (?:GPU )?has fallen off the bus")
_ISO = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[T ](?P<time>\d{2}:\d{2}:\d{2})(?:[.,](?P<fraction>\d+))?"
    r"(?P<zone>Z|[+-]\d{2}:?\d{2})?"
)
_CTIME = re.compile(r"\[(?P<stamp>[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]")
_SYSLOG = re.compile(r"^(?P<stamp>[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}) ")
_UPTIME = re.compile(r"\[\s*(?P<seconds>\d+\.\d+)\]")
_MARKERS = ("NVRM: Xid", ": SXid (", "has fallen off the bus")
_KERNEL_LOG = re.compile(
    r"^(?:\[\s*\d+\.\d+\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\]|"
    r"\S+ kernel: |[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \S+ kernel:)",
    re.M,
)
# What journalctl and dmesg print instead of kernel lines (journalctl(1), systemd's journalctl.c,
# util-linux's dmesg.c): the reason the log holds nothing.
_READ_FAILED = re.compile(
    r"^(?:-- No entries --|No journal files were (?:found|opened)|"
    r"dmesg: (?:read kernel buffer failed|klogctl failed))"
)
# journalctl's own marker lines ("-- Boot 3f2a... --", "-- Logs begin at ... --", "-- Reboot --").
_JOURNAL_MARKER = re.compile(r"^-- .* --$")
# What the lines of both kinds start with: any other line is a kernel line without a test.
_NOT_KERNEL_STARTS = frozenset("-Nd")
# Text that each event pattern holds: a line without either is no event without a search.
_EVENT_MARKS = ("Xid (", "fallen off the bus")


def detect(text: str) -> tuple[str, int] | None:
    head = text[: 1 << 20]
    if any(marker in head for marker in _MARKERS):
        return ("kernel-log", 70)
    if len(_KERNEL_LOG.findall(head[:65536])) >= 3:
        return ("kernel-log", 40)
    return None


def _iso(match: re.Match[str]) -> str | None:
    """The ISO time with its offset, normalised for fromisoformat; None without an offset."""
    zone = match["zone"]
    if not zone:
        return None
    fraction = f".{(match['fraction'] or '0')[:6]:0<6}"
    zone = "+00:00" if zone == "Z" else (zone if ":" in zone else f"{zone[:3]}:{zone[3:]}")
    text = f"{match['date']}T{match['time']}{fraction}{zone}"
    try:
        return datetime.fromisoformat(text).isoformat()
    except ValueError:
        return None


def _dated(text: str, end: int) -> tuple[str, str | None, str | None, float | None]:
    """(format, timestamp as printed, ISO time with offset, seconds since boot) of the text
    before position `end` (where the event starts)."""
    before = text[:end]
    uptime = _UPTIME.search(before)
    seconds = float(uptime["seconds"]) if uptime else None
    if iso := _ISO.search(before):
        return "iso", iso.group(0), _iso(iso), seconds
    if ctime := _CTIME.search(before):
        return "dmesg-ctime", ctime["stamp"], None, seconds
    if syslog := _SYSLOG.search(before):
        return "syslog", syslog["stamp"], None, seconds
    if uptime:
        return "dmesg", uptime.group(0).strip("[] "), None, seconds
    return "plain", None, None, None


def _event(text: str, number: int) -> tuple[KernelEvent | None, int]:
    """The event on a line, if any, and where it starts."""
    if match := _XID.search(text):
        return KernelEvent("xid", int(match["code"]), match["pci"], match["rest"].strip(),
                           number), match.start()  # fmt: skip
    if match := _SXID.search(text):
        rest = match["rest"].strip()
        first = rest.split(",", 1)[0].strip().lower()
        severity = first if first in ("fatal", "non-fatal") else None
        return KernelEvent("sxid", int(match["code"]), match["pci"], rest, number,
                           switch=match["switch"], severity=severity), match.start()  # fmt: skip
    if match := _OFF_BUS.search(text):
        return KernelEvent("off-bus", 79, match["pci"], "GPU has fallen off the bus",
                           number), match.start()  # fmt: skip
    return None, 0


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult("kernel-log", source)
    run = KernelLogRun(format="plain", line_count=0)
    reasons: list[str] = []
    lines = clean_lines(text)
    kernel: list[int] = []  # indices of the kernel lines (not blank, not a journal marker)
    events: dict[int, tuple[KernelEvent, int]] = {}  # line index -> event, where it starts
    # A control sequence removed from a line may join a mark that the text holds in two parts.
    may_hold_events = "\x1b" in text or any(mark in text for mark in _EVENT_MARKS)
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped[0] in _NOT_KERNEL_STARTS:
            if _READ_FAILED.match(stripped):
                reasons.append(stripped)
                continue
            if _JOURNAL_MARKER.match(stripped):
                continue
        kernel.append(index)
        if may_hold_events and (_EVENT_MARKS[0] in line or _EVENT_MARKS[1] in line):
            event, start = _event(line, index + 1)
            if event is not None:
                events[index] = event, start
    run.line_count = len(kernel)
    if run.line_count == 0:
        run.unreadable = "; ".join(dict.fromkeys(reasons)) or (
            "journalctl and dmesg printed no kernel line"
        )
    _date_span(run, lines, kernel, events)
    for index, (event, start) in events.items():
        _, event.timestamp, event.time_iso, event.uptime_s = _dated(lines[index], start)
        run.events.append(event)
    result.runs.append(run)
    return result


def _date_span(
    run: KernelLogRun,
    lines: list[str],
    kernel: list[int],
    events: dict[int, tuple[KernelEvent, int]],
) -> None:
    """The log's format and first and last time, from its first and last dated kernel lines:
    only those are dated (from each end), not every line. An event line is dated by the text
    before its event, as the event itself is."""

    def stamp(index: int) -> tuple[str, str | None]:
        line = lines[index]
        found = events.get(index)
        kind, printed, _, _ = _dated(line, found[1] if found else len(line))
        return kind, printed

    for first in range(len(kernel)):
        kind, printed = stamp(kernel[first])
        if printed:
            run.format, run.first_timestamp = kind, printed
            break
    else:
        return
    for index in reversed(kernel[first:]):  # ends at the first dated line at the latest
        printed = stamp(index)[1]
        if printed:
            run.last_timestamp = printed
            return
