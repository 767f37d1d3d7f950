"""Facts in NCCL_DEBUG=INFO output: library version per host, transports, algorithms, warnings.

Lines look like `host:pid:tid [dev] NCCL INFO message`; NCCL_DEBUG=VERSION prints a bare
`NCCL version 2.19.3+cuda12.2`. These lines run to millions in big logs, so each test here is a
substring check; a regular expression only runs on the few lines that carry a fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

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


def _after(text: str, marker: str) -> str:
    return text.split(marker, 1)[1].strip()


@lru_cache(maxsize=4096)
def _transport_name(via: str) -> str:
    """`P2P/direct pointer` -> `P2P/direct`; `NET/IB/0/GDRDMA` -> `NET/IB/GDRDMA`."""
    first = via.split()[0] if via.split() else via
    return _INDEX_PART.sub("", first.rstrip(","))


def feed(facts: DebugFacts, text: str, number: int) -> None:
    """Record what one NCCL_DEBUG line says into `facts`. Dispatches on the first character of
    the message so that the many lines carrying nothing cost two or three string tests."""
    head, colon, _ = text.partition(":")  # `host:pid:tid [dev] NCCL ...`
    host = head if colon and head and " " not in head else None
    if host is not None:
        facts.hosts.add(host)
    at = text.find("NCCL INFO ")
    if at < 0:
        if "NCCL WARN" in text:
            facts.warnings.append(NcclWarning(host, _after(text, "NCCL WARN"), number))
        elif "NCCL version" in text:
            _version(facts, host, _after(text, "NCCL version"), number)
        elif " via " in text:
            facts.transports.add(_transport_name(_after(text, " via ")))
        return
    message = text[at + 10 :]
    first = message[:1]
    if first == "C":
        if " via " in message:
            facts.transports.add(_transport_name(_after(message, " via ")))
    elif first == "N":
        _n_message(facts, host, message, number)
    elif first == "U":
        if message.startswith("Using network "):
            facts.transports.add("NET/" + message[14:].split(" ", 1)[0])
    elif first.isdigit():
        if " channels" in message:
            _channels(facts, message)
    elif first == "c" and facts.nranks is None and "ranks " in message:
        match = _NRANKS.search(message)
        if match:
            facts.nranks = int(match.group(1))


def _n_message(facts: DebugFacts, host: str | None, message: str, number: int) -> None:
    if message.startswith("NCCL version"):
        _version(facts, host, message[12:], number)
    elif message.startswith("NET/") and " : Using" in message:
        # `NET/IB : Using [0]mlx5_0:1/IB ...`, `NET/Socket : Using [0]eth0:...`
        facts.transports.add(message.split(" ", 1)[0])
    elif message.startswith("NVLS multicast support is available"):
        facts.algorithms.add("NVLS")
    elif message.startswith("NCCL_ALGO set by environment to "):
        for name in message[32:].strip().rstrip(".").split(","):
            if name.strip():
                facts.algorithms.add(name.strip())


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
