"""Network interfaces as sysfs describes them (schema: run-sysfs-net)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NetInterface:
    """One /sys/class/net/<name>: its speed (Mb/s) and operational state, as printed."""

    name: str
    speed_mbit: int | None = None  # None: not printed, or -1 / unreadable (down, virtual)
    operstate: str | None = None  # "up", "down", "unknown", ...
    line: int | None = None  # the first line naming the interface


@dataclass
class NetInterfacesRun:
    interfaces: list[NetInterface] = field(default_factory=list)
