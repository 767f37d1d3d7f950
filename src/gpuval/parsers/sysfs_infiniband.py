"""`grep -H . /sys/class/infiniband/*/fw_ver ... /sys/class/infiniband/*/ports/*/counters/*
/sys/class/infiniband/*/ports/*/hw_counters/*`: each RDMA adapter's firmware and board, and each
port's state, rate, error counters (`counters/`, the IBA PortCounters) and driver counters
(`hw_counters/`: on mlx5 the RoCE transport counters local_ack_timeout_err, out_of_sequence,
packet_seq_err, np_cnp_sent ...).

Lines are `<path>:<value>`; the path may be the /sys/class link or the /sys/devices path it
resolves to (`.../0000:5e:00.0/infiniband/mlx5_0/ports/1/counters/link_downed:0`). Counters of
adapters without a performance-management agent read `N/A (no PMA)` (iWARP). Port state is
printed `4: ACTIVE`, physical state `5: LinkUp`, rate `400 Gb/sec (4X NDR)`. Both counter
folders land in the same shape: one dict of name -> count per port.
"""

from __future__ import annotations

import re

from gpuval.parsers.text import iter_lines, parse_int
from gpuval.records.base import ParseResult
from gpuval.records.health import IbSysfsDevice, IbSysfsPort, SysfsInfinibandRun

TOOLS = ("sysfs-infiniband",)
_LINE = re.compile(
    r"^\S*/infiniband/(?P<device>[^/\s]+)/(?:ports/(?P<port>\d+)/)?"
    r"(?:(?P<group>counters|hw_counters)/)?(?P<key>[^/:\s]+):(?P<value>.*)$"
)
_DEVICE_KEYS = {"fw_ver", "board_id", "hca_type"}
_PORT_KEYS = {"state", "phys_state", "rate", "link_layer"}


def detect(text: str) -> tuple[str, int] | None:
    if re.search(r"^\S*/infiniband/[^/\s]+/(?:fw_ver|ports/\d+/)", text[:65536], re.M):
        return ("sysfs-infiniband", 80)
    return None


def _state(value: str) -> str | None:
    """'4: ACTIVE' -> 'ACTIVE'."""
    return value.split(":", 1)[-1].strip() or None


def _rate(value: str) -> float | None:
    found = re.match(r"\s*(\d+(?:\.\d+)?)\s*Gb/sec", value)
    return float(found.group(1)) if found else None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult("sysfs-infiniband", source)
    devices: dict[str, IbSysfsDevice] = {}
    ports: dict[tuple[str, int], IbSysfsPort] = {}
    for line in iter_lines(text):
        stripped = line.text.strip()
        if not stripped or stripped.startswith("grep:"):  # an unreadable file: nothing to say
            continue
        match = _LINE.match(stripped)
        if match is None:
            result.warn(f"not a /sys/class/infiniband/<device>/...:<value> line: {stripped!r}",
                        line.number)  # fmt: skip
            continue
        name, key, value = match["device"], match["key"], match["value"].strip()
        device = devices.setdefault(name, IbSysfsDevice(name, line=line.number))
        if match["port"] is None:
            if key in _DEVICE_KEYS:
                setattr(device, key, value or None)
            continue
        number = int(match["port"])
        port = ports.get((name, number))
        if port is None:
            port = ports[(name, number)] = IbSysfsPort(number, line=line.number)
            device.ports.append(port)
        if match["group"]:
            count = parse_int(value) if re.fullmatch(r"\d+", value) else None
            if count is None and not value.upper().startswith("N/A"):
                result.warn(f"{name} port {number} {key}: not a count: {value!r}", line.number)
            target = port.counters if match["group"] == "counters" else port.hw_counters
            target[key] = count
        elif key == "state":
            port.state = _state(value)
        elif key == "phys_state":
            port.physical_state = _state(value)
        elif key == "rate":
            port.rate_gbit = _rate(value)
        elif key == "link_layer":
            port.link_layer = value or None
    if not devices:
        result.error("no /sys/class/infiniband/<device> line: no RDMA adapter listed")
        return result
    for device in devices.values():
        device.ports.sort(key=lambda p: p.port)
    result.runs.append(SysfsInfinibandRun(sorted(devices.values(), key=lambda d: d.name)))
    return result
