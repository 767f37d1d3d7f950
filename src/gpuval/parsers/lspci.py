"""`lspci -vvv` (the health role runs `lspci -D -nn -vvv`): each device's place in the PCI tree,
its link and its Access Control Services settings.

    0000:02:08.0 PCI bridge [0604]: PLX Technology, Inc. PEX 8725 ... [10b5:8725] (rev ca)
    \tBus: primary=02, secondary=82, subordinate=82, sec-latency=0
    \tCapabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00
    \t\tLnkCap:\tPort #8, Speed 8GT/s, Width x4, ASPM L1, Exit Latency L1 <4us
    \t\tLnkSta:\tSpeed 8GT/s (ok), Width x4 (ok)
    \tCapabilities: [f24 v1] Access Control Services
    \t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+
    \t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-

What varies across pciutils versions and is read either way: the domain (`-D`) or none, the
numeric class and IDs (`-nn`) or names only, tabs or spaces, `MSI 00` or `IntMsgNum 0` after the
port type, `Speed 8GT/s (ok)` or `Speed 8GT/s` in LnkSta, unknown capabilities printed as `#12`.
Without root, lspci prints `Capabilities: <access denied>` in place of them all.
"""

from __future__ import annotations

import re

from gpuval.parsers.text import iter_lines
from gpuval.records.base import ParseResult
from gpuval.records.health import LspciDevice, LspciRun

TOOLS = ("lspci",)
_ADDRESS = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_HEADER = re.compile(rf"^(?P<address>{_ADDRESS}) (?P<class>[^:\[]+?)"
                     r"(?: \[(?P<code>[0-9a-fA-F]{4})\])?: (?P<rest>.*)$")  # fmt: skip
_IDS = re.compile(r"\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]")
_BUS = re.compile(r"^Bus: primary=(?P<primary>[0-9a-fA-F]+), secondary=(?P<secondary>[0-9a-fA-F]+),"
                  r" subordinate=(?P<subordinate>[0-9a-fA-F]+)")  # fmt: skip
_EXPRESS = re.compile(r"^Capabilities: \[[^]]*\] Express (?:\(v\d+\) )?(?P<type>[^,(]+?)"
                      r"\s*(?:\(Slot[+-]\))?(?:,|$)")  # fmt: skip
_LINK = re.compile(r"^(?P<which>LnkCap|LnkSta):\s.*?Speed (?P<speed>[\d.]+)GT/s(?: \([^)]*\))?, "
                   r"Width x(?P<width>\d+)")  # fmt: skip
_ACS = re.compile(r"^(?P<which>ACSCap|ACSCtl):\s*(?P<flags>.*)$")
_FLAG = re.compile(r"(\w+)([+-])")
# Class names as pciutils' pci.ids prints them, for listings without -nn; only the classes the
# checks look for (https://pci-ids.ucw.cz/read/PD/).
_CLASS_CODES = {
    "VGA compatible controller": "0300",
    "3D controller": "0302",
    "Ethernet controller": "0200",
    "Infiniband controller": "0207",
    "PCI bridge": "0604",
}
# Vendor names as pci.ids prints them (https://pci-ids.ucw.cz/read/PC/10de, /15b3).
_VENDORS = {"NVIDIA Corporation": "10de", "Mellanox Technologies": "15b3"}


def detect(text: str) -> tuple[str, int] | None:
    head = text[:65536]
    header = re.search(rf"^{_ADDRESS} [^:\n]+: ", head, re.M)
    block = re.search(r"^\s+(?:Control|Capabilities|Bus|Subsystem): ", head, re.M)
    return ("lspci", 80) if header and block else None


def _address(printed: str) -> str:
    """With the domain lspci leaves out without -D (0000 on single-domain machines)."""
    return printed.lower() if printed.count(":") == 2 else f"0000:{printed.lower()}"


def _device(match: re.Match[str], line: int) -> LspciDevice:
    class_name = match["class"].strip()
    rest = match["rest"]
    ids = _IDS.search(rest)
    vendor = ids["vendor"].lower() if ids else next(
        (code for name, code in _VENDORS.items() if rest.startswith(name)), None)  # fmt: skip
    return LspciDevice(_address(match["address"]), class_name,
                       (match["code"] or "").lower() or _CLASS_CODES.get(class_name), vendor,
                       ids["device"].lower() if ids else None, rest, line=line)  # fmt: skip


def _flags(printed: str) -> dict[str, bool]:
    return {name: sign == "+" for name, sign in _FLAG.findall(printed)}


def _read(device: LspciDevice, text: str, line: int, result: ParseResult) -> None:
    """One indented line of a device's block; lines that say nothing about the tree, the link or
    ACS are passed over."""
    if text.startswith("Capabilities: <access denied>"):
        device.capabilities_denied = True
    elif text.startswith("Bus: "):
        if not (bus := _BUS.match(text)):
            result.warn(f"{device.address}: not `Bus: primary=NN, secondary=NN, "
                        f"subordinate=NN`: {text!r}", line)  # fmt: skip
            return
        primary, secondary, subordinate = (int(bus[k], 16) for k in
                                           ("primary", "secondary", "subordinate"))  # fmt: skip
        if secondary > subordinate:
            result.warn(f"{device.address}: secondary bus {secondary:02x} above subordinate "
                        f"{subordinate:02x}: an unassigned bridge, no range kept",
                        line)  # fmt: skip
            return
        device.primary_bus, device.secondary_bus, device.subordinate_bus = (
            primary, secondary, subordinate)  # fmt: skip
    elif express := _EXPRESS.match(text):
        device.port_type = express["type"]
    elif link := _LINK.match(text):
        speed, width = float(link["speed"]), int(link["width"])
        if link["which"] == "LnkCap":
            device.link_capable_speed_gts, device.link_capable_width = speed, width
        else:
            device.link_speed_gts, device.link_width = speed, width
    elif acs := _ACS.match(text):
        flags = _flags(acs["flags"])
        if not flags:
            result.warn(f"{device.address}: {acs['which']} without `Name+`/`Name-` flags: "
                        f"{text!r}", line)  # fmt: skip
        elif acs["which"] == "ACSCap":
            device.acs_capability = flags
        else:
            device.acs_control = flags


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult("lspci", source)
    devices: list[LspciDevice] = []
    seen: set[str] = set()
    current: LspciDevice | None = None
    warned_outside = False
    for line in iter_lines(text):
        if not line.text.strip():
            continue
        if line.text[:1].isspace():
            if current is not None:
                _read(current, line.text.strip(), line.number, result)
            elif not warned_outside:
                warned_outside = True
                result.warn("indented lines before the first device header (an excerpt that "
                            "starts inside a block?): ignored", line.number)  # fmt: skip
        elif header := _HEADER.match(line.text):
            current = _device(header, line.number)
            if current.address in seen:
                result.warn(f"{current.address} listed twice: the later block kept",
                            line.number)  # fmt: skip
                devices = [d for d in devices if d.address != current.address]
            seen.add(current.address)
            devices.append(current)
        else:
            current = None
            result.warn(f"not a device header (`0000:00:01.0 <class>: <name>`) nor inside a "
                        f"device block: {line.text.strip()!r}", line.number)  # fmt: skip
    if not devices:
        result.error("no device header (`0000:00:01.0 <class>: <name>`) found: not lspci "
                     "output")  # fmt: skip
        return result
    result.runs.append(LspciRun(devices))
    return result
