"""`grep -H . /sys/class/net/*/speed /sys/class/net/*/operstate`: each interface's line rate.

The preflight reads the TCP interface's speed here because every Linux node has sysfs, while
ethtool is often missing. Lines look like `/sys/class/net/eth0/speed:10000` (Mb/s; -1 or an
error for an interface that is down or has no fixed rate, such as a bridge).
"""

from __future__ import annotations

import re

from gpuval.parsers.text import iter_lines
from gpuval.records.base import ParseResult
from gpuval.records.interfaces import NetInterface, NetInterfacesRun

TOOLS = ("sysfs-net",)
# grep exits 2 when some file could not be read (lo and bridges have no speed): output is whole
NORMAL_EXIT_CODES = frozenset({0, 2})
_LINE = re.compile(r"^/sys/class/net/(?P<name>[^/\s]+)/(?P<key>speed|operstate):(?P<value>.*)$")


def detect(text: str) -> tuple[str, int] | None:
    head = text[:4096]
    if re.search(r"^/sys/class/net/[^/\s]+/(?:speed|operstate):", head, re.M):
        return ("sysfs-net", 80)
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult("sysfs-net", source)
    found: dict[str, NetInterface] = {}
    for line in iter_lines(text):
        stripped = line.text.strip()
        if not stripped:
            continue
        match = _LINE.match(stripped)
        if match is None:
            if stripped.startswith("grep:"):  # an unreadable speed file: the interface has none
                continue
            result.warn(f"not a /sys/class/net/<interface>/<key>:<value> line: {stripped!r}",
                        line.number)  # fmt: skip
            continue
        interface = found.setdefault(match["name"], NetInterface(match["name"], line=line.number))
        value = match["value"].strip()
        if match["key"] == "operstate":
            interface.operstate = value or None
        elif re.fullmatch(r"\d+", value):
            interface.speed_mbit = int(value)
    if not found:
        result.error("no /sys/class/net/<interface>/speed or operstate line")
        return result
    result.runs.append(NetInterfacesRun(sorted(found.values(), key=lambda i: i.name)))
    return result
