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

Besides Xid lines, a failing GPU shows in lines of other shapes, read here as events too:
- current drivers print "The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this
  system has fallen off the bus" over several lines, `NVRM:` repeated on each (joined here);
- a GPU the driver could not bring up: "RmInitAdapter failed! (0x24:0x72:1568)",
  "rm_init_adapter failed, device minor number 5", a failed probe;
- the kernel's AER driver (drivers/pci/pcie/aer.c): "PCIe Bus Error: severity=Uncorrected
  (Fatal), type=..." with the error names on the lines below it, "AER: can't recover", "AER:
  device recovery failed";
- the PCI core's boot notice (drivers/pci/pci.c, __pcie_print_link_status): "... available PCIe
  bandwidth, limited by 8.0 GT/s PCIe x8 link at 0000:00:01.0 (capable of ... x16 link)".
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
# dmesg -d / -H: the time since the previous line ("[  +0.000844]"), no time of its own.
_RELATIVE = re.compile(r"\[\s*(?P<stamp>\+\d+\.\d+)\]")
_MARKERS = ("NVRM: Xid", ": SXid (", "has fallen off the bus", "RmInitAdapter failed")
_KERNEL_LOG = re.compile(
    r"^(?:\[\s*\+?\d+\.\d+\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\]|"
    r"\S+ kernel: |[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \S+ kernel:|"
    r"\d{4}-\d{2}-\d{2}T\S+ \S+ kernel: )",
    re.M,
)
_BDF = r"(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
# "NVRM: The NVIDIA GPU 0000:b3:00.0 / NVRM: (PCI ID: 10de:26b5) installed in this system has /
# NVRM: fallen off the bus ...": matched on the line joined with its continuations.
_OFF_BUS_NEW = re.compile(
    rf"NVRM: The NVIDIA GPU {_BDF}\s+(?:\(PCI ID: [^)]*\)\s+)?installed in this system has\s+"
    r"fallen off the bus"
)
_INIT_FAILED = re.compile(
    rf"NVRM: (?:GPU {_BDF}: )?(?P<what>RmInitAdapter failed! \([^)]*\)|rm_init_adapter failed"
    r"(?:, device minor number \d+| for device bearing minor number \d+)?)"
)
_PROBE_FAILED = re.compile(
    rf"nvidia(?:: probe of {_BDF}| {_BDF.replace('pci', 'pci2')}: probe with driver nvidia) "
    r"failed with error (?P<error>-?\d+)|NVRM: The NVIDIA probe routine failed for (?P<count>\d+) "
    r"device"
)
_AER = re.compile(
    rf"{_BDF}: (?:PCIe Bus Error: severity=(?P<severity>[^,]+),\s*type=(?P<type>[^,(]+)|"
    r"AER: (?P<unrecovered>can't recover[^\n]*|device recovery failed))"
)
_AER_DETAIL = re.compile(r"\s\[\s*\d+\] (?P<name>\S.*?)\s*(?:\(First\))?\s*$")
_LIMITED = re.compile(
    rf"{_BDF}: [\d.]+ Gb/s available PCIe bandwidth, limited by (?P<speed>[\d.]+) GT/s "
    r"(?:PCIe )?x(?P<width>\d+) link at (?P<port>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}"
    r"\.[0-7]) \(capable of [\d.]+ Gb/s with (?P<capable_speed>[\d.]+) GT/s (?:PCIe )?"
    r"x(?P<capable_width>\d+) link\)"
)
_NVIDIA_GPU = re.compile(rf"pci {_BDF}: \[10de:[0-9a-f]{{4}}\] type 00 class 0x03")
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
# Text that each event's line holds: a line without any is no event without a search. Only the
# marks the whole text holds are looked for on each line; few, as each costs a scan of the text.
_EVENT_MARKS = ("NVRM", "SXid (", "failed with error", "AER: ", "PCIe Bus Error", "PCIe bandwidth")
# The boot line that shows a device is an NVIDIA GPU: only wanted for a bandwidth notice.
_GPU_MARK = "[10de:"
_CONTINUED = "NVRM: The NVIDIA GPU"  # the off-bus message of current drivers, over lines


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
    if relative := _RELATIVE.search(before):
        return "dmesg-relative", relative["stamp"], None, None
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
    if match := _OFF_BUS.search(text) or _OFF_BUS_NEW.search(text):
        return KernelEvent("off-bus", 79, match["pci"], "GPU has fallen off the bus",
                           number), match.start()  # fmt: skip
    return _pci_event(text, number)


def _pci_event(text: str, number: int) -> tuple[KernelEvent | None, int]:
    """A GPU the driver could not bring up, an AER error, a link below its capability."""
    if match := _INIT_FAILED.search(text):
        return KernelEvent("init-failed", None, match["pci"], match["what"], number), match.start()
    if match := _PROBE_FAILED.search(text):
        what = (f"probe routine failed for {match['count']} device(s)" if match["count"]
                else f"probe failed with error {match['error']}")  # fmt: skip
        device = match["pci"] or match["pci2"]
        return KernelEvent("init-failed", None, device, what, number), match.start()
    if match := _AER.search(text):
        if match["unrecovered"]:
            return KernelEvent("aer", None, match["pci"], f"AER: {match['unrecovered'].strip()}",
                               number, severity="unrecovered"), match.start()  # fmt: skip
        printed = match["severity"].strip()
        severity = ("corrected" if printed.startswith("Correct") else
                    "non-fatal" if "Non-Fatal" in printed else "fatal")  # fmt: skip
        return KernelEvent("aer", None, match["pci"], f"{printed}, {match['type'].strip()}",
                           number, severity=severity), match.start()  # fmt: skip
    if match := _LIMITED.search(text):
        limit = "width" if int(match["width"]) < int(match["capable_width"]) else "speed"
        message = (f"{match['speed']} GT/s x{match['width']} of {match['capable_speed']} GT/s "
                   f"x{match['capable_width']}")  # fmt: skip
        return KernelEvent("pcie-limited", None, match["pci"], message, number, severity=limit,
                           port=match["port"]), match.start()  # fmt: skip
    return None, 0


def _follows(before: tuple[KernelEvent, int] | None, event: KernelEvent) -> bool:
    """Whether the event is the "rm_init_adapter failed, device minor number N" line that follows
    the "RmInitAdapter failed!" line of the same GPU: its minor number is added to that one."""
    if before is None or event.kind != "init-failed" or not event.message.startswith("rm_init"):
        return False
    first = before[0]
    if first.kind != "init-failed" or first.device != event.device:
        return False
    first.message += f" ({event.message})"
    return True


def _with_continuations(lines: list[str], index: int) -> str:
    """The line joined with the `NVRM:` lines that continue it (at most three)."""
    joined = lines[index]
    for line in lines[index + 1 : index + 4]:
        if "NVRM:" not in line or _CONTINUED in line:
            break
        joined += " " + line.split("NVRM:", 1)[1].strip()
        if "fallen off the bus" in joined:
            break
    return joined


def _aer_details(lines: list[str], index: int, event: KernelEvent) -> None:
    """The error names ("[ 5] Surprise Down Error (First)") printed below an AER line of the same
    device, added to its message."""
    names = []
    device = f"{event.device}:"
    for line in lines[index + 1 : index + 40]:
        if device not in line:
            break
        if detail := _AER_DETAIL.search(line):
            names.append(detail["name"])
        elif "error status/mask" not in line and "TLP Header" not in line:
            break
    if names:
        event.message += ": " + ", ".join(names)


def _marked(text: str) -> Callable[[str], object] | None:
    """The test of a line for the marks the text holds; None when it holds none."""
    marks = [m for m in _EVENT_MARKS if m in text]
    if "\x1b" in text:  # a control sequence removed from a line may join a mark split by it
        marks = [*_EVENT_MARKS, _GPU_MARK]
    elif "PCIe bandwidth" in marks and _GPU_MARK in text:
        marks.append(_GPU_MARK)
    if len(marks) == 1:
        mark = marks[0]
        return lambda line: mark in line
    return re.compile("|".join(map(re.escape, marks))).search if marks else None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult("kernel-log", source)
    run = KernelLogRun(format="plain", line_count=0)
    reasons: list[str] = []
    lines = clean_lines(text)
    kernel: list[int] = []  # indices of the kernel lines (not blank, not a journal marker)
    events: dict[int, tuple[KernelEvent, int]] = {}  # line index -> event, where it starts
    marked = _marked(text)
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
        if marked and marked(line):
            if gpu := _NVIDIA_GPU.search(line):
                run.gpus.append(gpu["pci"])
                continue
            whole = _with_continuations(lines, index) if _CONTINUED in line else line
            event, start = _event(whole, index + 1)
            if event is not None and _follows(events.get(index - 1), event):
                continue
            if event is not None:
                if event.kind == "aer":
                    _aer_details(lines, index, event)
                if f"nvidia {event.device}:" in line:  # a device the nvidia driver holds
                    run.gpus.append(event.device or "")
                events[index] = event, start
    run.gpus = list(dict.fromkeys(run.gpus))
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
