"""Facts in NCCL_DEBUG=INFO output: library version per host, transports, algorithms, warnings.

Lines look like `host:pid:tid [dev] NCCL INFO message`; NCCL_DEBUG=VERSION prints a bare
`NCCL version 2.19.3+cuda12.2`. These lines run to millions in big logs, so each test here is a
substring check; a regular expression only runs on the few lines that carry a fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpuval.records.nccl import NcclWarning

# `... via NET/IBext/3/GDRDMA`: numbered path parts are channel/device indices, not transport kinds.
_INDEX_PART = re.compile(r"/\d+(?=/|$)")
_CHANNEL_COUNTS = re.compile(r"(\d+) (coll|collnet|nvls|p2p) channels")
_NRANKS = re.compile(r"\bn[Rr]anks (\d+)")


@dataclass
class DebugFacts:
    """What NCCL_DEBUG lines told about one run."""

    versions_by_host: dict[str, str] = field(default_factory=dict)
    version: str | None = None
    transports: set[str] = field(default_factory=set)
    algorithms: set[str] = field(default_factory=set)
    warnings: list[NcclWarning] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    nranks: int | None = None
    version_conflicts: list[tuple[int, str]] = field(default_factory=list)

    def merge(self, other: DebugFacts) -> None:
        for host, version in other.versions_by_host.items():
            self.versions_by_host.setdefault(host, version)
        self.version = self.version or other.version
        self.transports |= other.transports
        self.algorithms |= other.algorithms
        self.warnings.extend(other.warnings)
        self.hosts |= other.hosts
        self.nranks = self.nranks or other.nranks
        self.version_conflicts.extend(other.version_conflicts)


def is_debug_line(text: str) -> bool:
    """True for NCCL_DEBUG output (`NCCL INFO`, `NCCL WARN`, bare `NCCL version`, and
    `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC` lines whose prefix was cut when quoted)."""
    return (
        "NCCL INFO" in text
        or "NCCL WARN" in text
        or text.startswith("NCCL version")
        or (text.startswith("Channel ") and " via " in text)
    )


def _host(text: str) -> str | None:
    """`host:pid:tid [dev] NCCL ...` -> host; None for lines without that prefix."""
    head, sep, _ = text.partition(":")
    if not sep or " " in head or not head:
        return None
    return head


def _after(text: str, marker: str) -> str:
    return text.split(marker, 1)[1].strip()


def _transport_name(via: str) -> str:
    """`P2P/direct pointer` -> `P2P/direct`; `NET/IB/0/GDRDMA` -> `NET/IB/GDRDMA`."""
    first = via.split()[0] if via.split() else via
    return _INDEX_PART.sub("", first.rstrip(","))


def feed(facts: DebugFacts, text: str, number: int) -> None:
    """Record what one NCCL_DEBUG line says into `facts`."""
    host = _host(text)
    if host is not None:
        facts.hosts.add(host)
    if "NCCL WARN" in text:
        facts.warnings.append(NcclWarning(host, _after(text, "NCCL WARN"), number))
        return
    if "NCCL version" in text:
        _version(facts, host, _after(text, "NCCL version"), number)
        return
    if " via " in text:
        facts.transports.add(_transport_name(_after(text, " via ")))
        return
    if "NET/" in text and " : Using" in text:
        # `NET/IB : Using [0]mlx5_0:1/IB ...`, `NET/Socket : Using [0]eth0:...`
        facts.transports.add(text[text.index("NET/") :].split(" ", 1)[0])
        return
    if "Using network " in text:
        facts.transports.add("NET/" + _after(text, "Using network ").split(" ", 1)[0])
        return
    if " channels" in text:
        _channels(facts, text)
        return
    if "NVLS multicast support is available" in text:
        facts.algorithms.add("NVLS")
        return
    if "NCCL_ALGO set by environment to " in text:
        for name in _after(text, "NCCL_ALGO set by environment to ").rstrip(".").split(","):
            if name.strip():
                facts.algorithms.add(name.strip())
        return
    if "NVLSTree" in text:
        facts.algorithms.add("NVLSTree")
    if facts.nranks is None and "ranks " in text:
        match = _NRANKS.search(text)
        if match:
            facts.nranks = int(match.group(1))


def _version(facts: DebugFacts, host: str | None, rest: str, number: int) -> None:
    words = rest.split()
    if not words:
        return
    version = words[0]
    facts.version = facts.version or version
    if host is None:
        return
    known = facts.versions_by_host.get(host)
    if known is None:
        facts.versions_by_host[host] = version
    elif known != version:
        facts.version_conflicts.append((number, f"{host}: NCCL version {version} after {known}"))


def _channels(facts: DebugFacts, text: str) -> None:
    """`16 coll channels, 16 collnet channels, 16 nvls channels, 32 p2p channels`."""
    for count, kind in _CHANNEL_COUNTS.findall(text):
        if int(count) == 0:
            continue
        if kind == "nvls":
            facts.algorithms.add("NVLS")
        elif kind == "collnet":
            facts.algorithms.add("CollNet")
