"""RDMA adapter state: `ibstat` (infiniband-diags) and `ibv_devinfo [-v]` (rdma-core).

ibstat prints per adapter `CA 'mlx5_0'`, indented `CA type:`, `Number of ports:`,
`Firmware version:`, `Node GUID:` ..., then per port `Port 1:` with `State: Active`,
`Physical state: LinkUp`, `Rate: 200` (Gb/s), `Base lid:`, `SM lid:`, `Link layer: InfiniBand`
(or `Ethernet` for RoCE). ibv_devinfo prints `hca_id: mlx5_0`, `transport:`, `fw_ver:`,
`node_guid:`, `phys_port_cnt:` ..., then `port: 1` with `state: PORT_ACTIVE (4)`,
`phys_state: LINK_UP (5)` and, with -v, `active_width: 4X (2)`, `active_speed: 25.0 Gbps (32)`;
-v also lists capability flags on indented lines without a colon (kept as continuations).
Indentation is tabs or spaces; copies may collapse it. `ibwarn:` debug lines are skipped,
`ibpanic:` lines become errors.
"""

from __future__ import annotations

import re

from gpuval.parsers.text import Line, iter_lines, parse_int, parse_number
from gpuval.records.base import ParseResult
from gpuval.records.network import IbDevice, IbPort, InfinibandRun

TOOLS = ("ibstat", "ibv_devinfo")

_CA = re.compile(r"^CA '(?P<name>[^']+)'\s*$")
_HCA = re.compile(r"^hca_id:\s*(?P<name>\S+)\s*$")
_IBSTAT_PORT = re.compile(r"^Port (?P<port>\d+):\s*$")
_KEY_VALUE = re.compile(r"^(?P<key>[A-Za-z][\w .]*?):\s*(?P<value>.*)$")
_CODED = re.compile(r"^(?P<text>.*?)\s*\((?P<code>\d+)\)\s*$")  # "PORT_ACTIVE (4)"
_WIDTH = re.compile(r"^(?P<lanes>\d+)X$")
_SPEED = re.compile(r"^(?P<gbps>\d+(?:\.\d+)?)\s*Gbps$")

_DEVICE_FIELDS = {
    "CA type": "ca_type",
    "Firmware version": "firmware",
    "fw_ver": "firmware",
    "Node GUID": "node_guid",
    "node_guid": "node_guid",
}
_PORT_COUNT_KEYS = ("Number of ports", "phys_port_cnt")
# every key either tool prints at device or port level, for copies whose indentation was lost
_KNOWN_KEYS = frozenset(
    {
        *_DEVICE_FIELDS,
        *_PORT_COUNT_KEYS,
        "Hardware version",
        "System image GUID",
        "State",
        "Physical state",
        "Rate",
        "Base lid",
        "LMC",
        "SM lid",
        "Capability mask",
        "Port GUID",
        "Link layer",
        "transport",
        "sys_image_guid",
        "vendor_id",
        "vendor_part_id",
        "hw_ver",
        "board_id",
        "state",
        "phys_state",
        "max_mtu",
        "active_mtu",
        "sm_lid",
        "port_lid",
        "port_lmc",
        "link_layer",
        "active_width",
        "active_speed",
    }
)


def detect(text: str) -> tuple[str, int] | None:
    head = text[:1_000_000]
    if "hca_id:" in head and ("phys_port_cnt" in head or "transport:" in head):
        return "ibv_devinfo", 90
    if "CA '" in head and ("CA type:" in head or "Physical state:" in head):
        return "ibstat", 90
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult(tool=tool or _tool_of(text), source=source)
    run = InfinibandRun()
    reader = _Reader(run, result)
    for line in iter_lines(text):
        reader.read(line)
    reader.finish_device()
    if run.devices:
        result.runs.append(run)
    else:
        result.error(f"no adapter block (`CA '...'` or `hca_id:`) found in {result.tool} output")
    return result


def _tool_of(text: str) -> str:
    found = detect(text)
    return found[0] if found else "ibstat"


class _Reader:
    def __init__(self, run: InfinibandRun, result: ParseResult) -> None:
        self.run = run
        self.result = result
        self.device: IbDevice | None = None
        self.port: IbPort | None = None
        self.last_key: str | None = None
        self.orphan_warned = False

    def read(self, line: Line) -> None:
        stripped = line.text.strip()
        if not stripped or stripped.startswith("ibwarn:"):
            return
        if stripped.startswith("ibpanic:") or stripped == "No IB devices found":
            self.result.error(stripped, line.number)
            self.finish_device()
            return
        start = _CA.match(stripped) or _HCA.match(stripped)
        if start:
            self.finish_device()
            self.device = IbDevice(name=start["name"], line=line.number)
            self.run.devices.append(self.device)
            return
        device = self.device
        indented = line.text[:1].isspace()
        key_value = _KEY_VALUE.match(stripped)
        if device is None:
            if indented and key_value and not self.orphan_warned:
                self.orphan_warned = True
                self.result.warn("adapter data before any adapter header (cut copy?)", line.number)
            return  # otherwise text around the blocks: prompts, headings
        if (port := _IBSTAT_PORT.match(stripped)) is not None:
            self.start_port(device, line, int(port["port"]))
        elif key_value and (indented or key_value["key"] in _KNOWN_KEYS):
            self.key_value(device, line, key_value["key"], key_value["value"].strip())
        elif indented and self.last_key is not None:
            target = self.port.attributes if self.port is not None else device.attributes
            target[self.last_key] = f"{target.get(self.last_key, '')} {stripped}".strip()
        elif indented:
            self.result.warn(f"unreadable line in {device.name}: {stripped!r}", line.number)
        else:
            self.finish_device()  # unindented text: the block is over

    def key_value(self, device: IbDevice, line: Line, key: str, value: str) -> None:
        if key == "port" and value.isdigit():
            self.start_port(device, line, int(value))
            return
        self.last_key = key
        if self.port is not None:
            self.port.attributes[key] = value
            _set_port_field(self.port, key, value)
            return
        device.attributes[key] = value
        if key in _DEVICE_FIELDS:
            setattr(device, _DEVICE_FIELDS[key], value)

    def start_port(self, device: IbDevice, line: Line, number: int) -> None:
        self.port = IbPort(port=number, line=line.number)
        device.ports.append(self.port)
        self.last_key = None

    def finish_device(self) -> None:
        device = self.device
        if device is not None:
            counts = [device.attributes[k] for k in _PORT_COUNT_KEYS if k in device.attributes]
            expected = parse_int(counts[0]) if counts else None
            if expected is not None and expected != len(device.ports):
                printed = len(device.ports)
                self.result.warn(
                    f"{device.name} reports {expected} port(s) but {printed} were printed",
                    device.line,
                )
            elif not device.ports:
                self.result.warn(f"{device.name}: no port printed (cut copy?)", device.line)
            for port in device.ports:
                if port.link_layer is None:  # both tools end a port with its link layer
                    self.result.warn(
                        f"{device.name} port {port.port} is cut short (no link layer line)",
                        port.line,
                    )
        self.device = None
        self.port = None
        self.last_key = None


def _set_port_field(port: IbPort, key: str, value: str) -> None:
    coded = _CODED.match(value)
    text, code = (coded["text"], parse_int(coded["code"])) if coded else (value, None)
    if key in ("State", "state"):
        port.state, port.state_code = text, code
    elif key in ("Physical state", "phys_state"):
        port.physical_state = text
    elif key == "Rate":
        port.rate_gbps = parse_number(value)
    elif key in ("Base lid", "port_lid"):
        port.base_lid = parse_int(value)
    elif key in ("SM lid", "sm_lid"):
        port.sm_lid = parse_int(value)
    elif key in ("Link layer", "link_layer"):
        port.link_layer = value
    elif key == "active_mtu":
        port.active_mtu = text
    elif key == "active_width":
        port.active_width = text
        port.rate_gbps = _lane_rate(port)
    elif key == "active_speed":
        port.active_speed = text
        port.rate_gbps = _lane_rate(port)


def _lane_rate(port: IbPort) -> float | None:
    """ibv_devinfo has no rate line: active_width lanes x active_speed per lane (4X x 25.0)."""
    if port.active_width is None or port.active_speed is None:
        return None
    lanes = _WIDTH.match(port.active_width)
    speed = _SPEED.match(port.active_speed)
    if lanes is None or speed is None:
        return None
    return int(lanes["lanes"]) * float(speed["gbps"])
