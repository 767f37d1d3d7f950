"""PCIe links and AER counters of every PCI device, read from /sys/bus/pci/devices, in either
of two forms. The health role's `grep -H . /sys/bus/pci/devices/*/{class,vendor,...}`, one line
per line of each file:

    /sys/bus/pci/devices/0000:00:06.0/current_link_speed:32.0 GT/s PCIe
    /sys/bus/pci/devices/0000:00:06.0/aer_dev_correctable:RxErr 0

or a loop over the devices (the form recorded on a lent H100, tests/data/device): a device line,
then each readable file as `-- <name>` followed by its content:

    == /sys/bus/pci/devices/0000:00:06.0 class=0x030200 vendor=0x10de device=0x2330
    -- current_link_speed
    32.0 GT/s PCIe

The AER files hold `<error name> <count>` lines ending with a TOTAL_ERR_* line (Linux
Documentation/ABI/testing/sysfs-bus-pci-devices-aer).
"""

from __future__ import annotations

import re

from gpuval.parsers.text import iter_lines, parse_int
from gpuval.records.base import ParseResult
from gpuval.records.health import PciDevice, SysfsPciRun

TOOLS = ("sysfs-pci",)
_DEVICE = re.compile(r"^== \S*/(?P<address>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
                     r"(?P<attributes>(?:\s+\w+=\S*)*)\s*$")  # fmt: skip
_FILE = re.compile(r"^-- (?P<name>\w+)\s*$")
_GREP = re.compile(r"^\S*/(?P<address>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])/"
                   r"(?P<name>\w+):(?P<value>.*)$")  # fmt: skip
_IDENTITY = ("class", "vendor", "device")
_AER = {"aer_dev_correctable": "correctable", "aer_dev_fatal": "fatal",
        "aer_dev_nonfatal": "nonfatal"}  # fmt: skip


def detect(text: str) -> tuple[str, int] | None:
    loop = re.search(r"^== /sys/bus/pci/devices/\S+ class=", text[:65536], re.M)
    grep = re.search(r"^/sys/bus/pci/devices/[0-9a-f:.]+/(?:class|vendor):", text[:65536], re.M)
    return ("sysfs-pci", 85) if loop or grep else None


def _speed(value: str) -> float | None:
    found = re.match(r"\s*(\d+(?:\.\d+)?)\s*GT/s", value)
    return float(found.group(1)) if found else None


def _assign(device: PciDevice, name: str, value: str, line: int, result: ParseResult) -> None:
    if name in _IDENTITY:
        setattr(device, "class_code" if name == "class" else name, value.strip() or None)
    elif name in _AER:
        counts = device.aer.setdefault(_AER[name], {})
        parts = value.split()
        count = parse_int(parts[-1]) if len(parts) == 2 else None
        if count is None:
            result.warn(f"{device.address} {name}: not '<error> <count>': {value!r}", line)
        else:
            counts[parts[0]] = count
    elif name in ("current_link_speed", "max_link_speed"):
        setattr(device, name.replace("link_speed", "speed_gts"), _speed(value))
    elif name in ("current_link_width", "max_link_width"):
        width = parse_int(value)
        # 255 is how sysfs shows "unknown" for devices without a link (root complex integrated).
        setattr(device, name.replace("link_", ""), width if width not in (None, 0, 255) else None)


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult("sysfs-pci", source)
    devices: list[PciDevice] = []
    by_address: dict[str, PciDevice] = {}
    current: PciDevice | None = None
    name: str | None = None
    for line in iter_lines(text):
        stripped = line.text.strip()
        if not stripped or stripped.startswith("grep:"):  # an unreadable file: nothing to say
            continue
        if match := _GREP.match(stripped):
            address = match["address"]
            if address not in by_address:
                by_address[address] = PciDevice(address, line=line.number)
                devices.append(by_address[address])
            _assign(by_address[address], match["name"], match["value"].strip(), line.number,
                    result)  # fmt: skip
        elif match := _DEVICE.match(stripped):
            attributes = dict(pair.split("=", 1) for pair in match["attributes"].split())
            current = PciDevice(match["address"], attributes.get("class") or None,
                                attributes.get("vendor") or None, attributes.get("device") or None,
                                line=line.number)  # fmt: skip
            devices.append(current)
            name = None
        elif match := _FILE.match(stripped):
            name = match["name"]
        elif current is not None and name is not None:
            _assign(current, name, stripped, line.number, result)
        else:
            result.warn(f"line outside a device block: {stripped!r}", line.number)
    if not devices:
        result.error("no /sys/bus/pci/devices/<address> line: no PCI device read")
        return result
    result.runs.append(SysfsPciRun(devices))
    return result
