"""Facts in NCCL_DEBUG=INFO output: library version per host, transports, algorithms, warnings,
and the HCA ports each host's NCCL found.

Lines look like `host:pid:tid [dev] NCCL INFO message`; NCCL_DEBUG=VERSION prints a bare
`NCCL version 2.19.3+cuda12.2`. These lines run to millions in big logs, so `feed` only keeps
them (WARN and version lines, which need their line number, are read at once), reads them in
batches with a few regular expressions over their joined text, and `digest` weighs what the
batches found.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from gpuval.parsers.text import Line
from gpuval.records.nccl import NcclWarning

_VIA = re.compile(r" via (\S+)")
# `... via NET/IBext/3/GDRDMA`: numbered path parts are channel/device indices, not transport kinds.
_INDEX_PART = re.compile(r"/\d+(?=/|$)")
_NET_USING = re.compile(r"NCCL INFO (NET/\S+) : Using")
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
# `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:10.0.0.1<0>`: the active ports
# NCCL found, one `[index]device:port/link` each ("[RO]" and "OOB" follow; NCCL 2.4 prints
# "Using [0]mlx5_0:1/IB ; OOB"). NCCL lists only ports in state ACTIVE, so a port that is down
# is absent (https://github.com/NVIDIA/nccl src/transport/net_ib/init.cc, ncclIbInitDevices).
# The sharp plugin appends `/SHARP`; newer NCCL puts `:rail` and `:plane` after the port
# (`[0]mlx5_0:1:2/IB`); a data-direct NIC is `mlx5_0_dma`. The Socket transport's list names
# interfaces and addresses, no link layer, and is not read here.
_IB_USING = re.compile(r"NCCL INFO NET/IB\S* : Using([^\n]*)")
_HCA_PORT = re.compile(r"\[\d+\]([^\s:\[\];/]+):(\d+)[\d:]*/(?:IB|RoCE)\b")
# `32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, ...`; the
# literal lead keeps the scan fast, the counts are read from the few distinct tails. Only the
# NVLS count says an algorithm is set up: NCCL 2.28 prints "64 collnet channels" on a lone
# H100 with no CollNet network at all (tests/data/device recordings).
_CHANNEL_TAIL = re.compile(r" coll channels, (.*)")
_NVLS_CHANNELS = re.compile(r"(\d+) nvls channels")
_ALGO_ENV = re.compile(r"NCCL_ALGO set by environment to (\S+)")
_NRANKS = re.compile(r"NCCL INFO comm .*?\bn[Rr]anks (\d+)")
# NCCL 2.2x says whether a communicator uses multi-node NVLink: `comm 0x9a39870 rank 0 nRanks 4
# nNodes 1 localRanks 4 localRank 0 MNNVL 1` and `MNNVL 1 cliqueId 2786 cliqueSize 4 ...`
# (MNNVL 0 with NCCL_MNNVL_ENABLE=0; https://github.com/NVIDIA/nccl/issues/2303). The
# `MNNVL busId ... fabric UUID ...` line every GPU prints, H100s too, says nothing of use.
_MNNVL_USED = re.compile(r"\bMNNVL ([01])\b")


@dataclass
class DebugFacts:
    """What NCCL_DEBUG lines told about one run."""

    versions_by_host: dict[str, str] = field(default_factory=dict)
    version: str | None = None
    transports: set[str] = field(default_factory=set)
    # Only what `Channel ... via X` lines named: the paths data took, not the network plugin
    # NCCL loaded (`Using network IB` is printed on an MNNVL rack whose data never leaves NVLink).
    channel_transports: set[str] = field(default_factory=set)
    # Whether a communicator said it uses multi-node NVLink (MNNVL 1) or not (MNNVL 0); None:
    # not said (NCCL before 2.2x, or NCCL_DEBUG below INFO).
    mnnvl: bool | None = None
    algorithms: set[str] = field(default_factory=set)
    warnings: list[NcclWarning] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    nranks: int | None = None
    version_conflicts: list[tuple[int, str]] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    # What `NET/IB : Using` and `Using network X` lines named, weighed against each other once
    # every line is read.
    nets_using: set[str] = field(default_factory=set)
    networks: set[str] = field(default_factory=set)
    # Per host, the HCA ports (`mlx5_0:1`) of its `NET/IB : Using` lines, in the order printed;
    # a port that one of the host's lines lacks is left out. A host that listed none is absent.
    hcas_by_host: dict[str, list[str]] = field(default_factory=dict)

    def merge(self, other: DebugFacts) -> None:
        for host, version in other.versions_by_host.items():
            self.versions_by_host.setdefault(host, version)
        self.version = self.version or other.version
        self.transports |= other.transports
        self.channel_transports |= other.channel_transports
        self.mnnvl = _mnnvl(self.mnnvl, other.mnnvl)
        self.algorithms |= other.algorithms
        self.warnings.extend(other.warnings)
        self.hosts |= other.hosts
        self.nranks = self.nranks or other.nranks
        self.version_conflicts.extend(other.version_conflicts)
        self.kept.extend(other.kept)
        self.nets_using |= other.nets_using
        self.networks |= other.networks
        for host, hcas in other.hcas_by_host.items():
            _hcas_seen(self, host, hcas)


def is_debug_line(text: str) -> bool:
    """True for NCCL_DEBUG output (`NCCL INFO`, `NCCL WARN`, bare `NCCL version`, and
    `Channel 00/0 : 0[0] -> 1[1] via P2P/IPC` lines whose prefix was cut when quoted)."""
    return (
        "NCCL INFO" in text
        or "NCCL WARN" in text
        or text.startswith("NCCL version")
        or (text.startswith("Channel ") and " via " in text)
    )


# `host:pid:tid [dev]`, also after a timestamp or launcher tag printed before it
# ("Fri Aug 11 12:31:45 2023[1,0]<stdout>:host:1850301:1881341 [0] ...").
_HOST_PREFIX = re.compile(r"([^\s:<>\[\]]+):\d+:\d+ \[\d+\]")


def _host(text: str) -> str | None:
    """The host of an NCCL_DEBUG line's `host:pid:tid [dev]` prefix; None when it has none."""
    found = _HOST_PREFIX.search(text)
    return found.group(1) if found else None


def _after(text: str, marker: str) -> str:
    return text.split(marker, 1)[1].strip()


@lru_cache(maxsize=4096)
def _transport_name(via: str) -> str:
    """`P2P/direct` -> `P2P/direct`; `NET/IB/0/GDRDMA` -> `NET/IB/GDRDMA`."""
    return _INDEX_PART.sub("", via.rstrip(","))


def warning(text: str, number: int) -> NcclWarning:
    """The `NCCL WARN` line `text`: its host and everything after `NCCL WARN`."""
    return NcclWarning(_host(text), _after(text, "NCCL WARN"), number)


def warnings_in(lines: Iterable[Line]) -> list[NcclWarning]:
    """Every `NCCL WARN` line among `lines`, for tools whose logs carry NCCL_DEBUG output."""
    return [warning(line.text, line.number) for line in lines if "NCCL WARN" in line.text]


class _WithWarnings(Protocol):
    line: int
    nccl_warnings: list[NcclWarning]


def assign_warnings(warnings: list[NcclWarning], runs: Sequence[_WithWarnings]) -> None:
    """Each warning to the first run printed after it (NCCL warns while the communicator is
    made, before the result), warnings after the last run to the last run."""
    for found in warnings:
        run = next((r for r in runs if r.line >= found.log_line), runs[-1] if runs else None)
        if run is not None:
            run.nccl_warnings.append(found)


def feed(facts: DebugFacts, text: str, number: int) -> None:
    """Take one NCCL_DEBUG line: WARN and version lines now, the rest kept for `digest`."""
    if "NCCL WARN" in text:
        found = warning(text, number)
        host = found.host
        facts.warnings.append(found)
    elif "NCCL version" in text:
        host = _host(text)
        _version(facts, host, _after(text, "NCCL version"), number)
    else:
        facts.kept.append(text)
        if len(facts.kept) >= _KEPT_LINES:
            read_kept(facts)
        return
    if host is not None:
        facts.hosts.add(host)


# Kept lines read in batches of this many, so that they never hold a copy of a big log.
_KEPT_LINES = 20_000


def digest(facts: DebugFacts) -> None:
    """Read the kept lines: hosts, transports, algorithms, nranks."""
    read_kept(facts)
    networks = {"NET/" + name for name in facts.networks}
    # "NET/IB : Using [RO]; OOB eth0" follows "NET/IB : No device found." when the IB plugin
    # loads without a device; "Using network Socket" then says what NCCL really chose.
    facts.transports.update(
        net for net in facts.nets_using
        if not networks or any(c.startswith(net) or net.startswith(c) for c in networks)
    )  # fmt: skip
    facts.transports.update(networks)
    facts.nets_using, facts.networks = set(), set()


def read_kept(facts: DebugFacts) -> None:
    """Read a batch of kept lines with a few regular expressions over their joined text."""
    if not facts.kept:
        return
    lines, facts.kept = facts.kept, []
    heads = {line.partition(":")[0].lstrip() for line in lines}
    facts.hosts.update(head for head in heads if head and " " not in head)
    joined = "\n".join(lines)
    del lines
    channels = {_transport_name(via) for via in set(_VIA.findall(joined))}
    facts.channel_transports |= channels
    facts.transports |= channels
    if "MNNVL " in joined:
        for said in set(_MNNVL_USED.findall(joined)):
            facts.mnnvl = _mnnvl(facts.mnnvl, said == "1")
    facts.networks.update(_NETWORK.findall(joined))
    facts.nets_using.update(_NET_USING.findall(joined))
    if "NCCL INFO NET/IB" in joined:
        _read_hca_lists(facts, joined)
    for tail in set(_CHANNEL_TAIL.findall(joined)):
        if any(int(count) > 0 for count in _NVLS_CHANNELS.findall(tail)):
            facts.algorithms.add("NVLS")
    if "NVLS multicast support is available" in joined:
        facts.algorithms.add("NVLS")
    for names in _ALGO_ENV.findall(joined):
        facts.algorithms.update(n for n in names.rstrip(".").split(",") if n)
    if facts.nranks is None:
        match = _NRANKS.search(joined)
        facts.nranks = int(match.group(1)) if match else None


def _read_hca_lists(facts: DebugFacts, joined: str) -> None:
    """Each `NET/IB : Using` line's HCA ports, filed under the host of its line's prefix."""
    for found in _IB_USING.finditer(joined):
        host = _host(joined[joined.rfind("\n", 0, found.start()) + 1 : found.start()])
        hcas = [f"{device}:{port}" for device, port in _HCA_PORT.findall(found.group(1))]
        if host is not None and hcas:
            _hcas_seen(facts, host, hcas)


def _hcas_seen(facts: DebugFacts, host: str, hcas: list[str]) -> None:
    """A host's list of HCA ports, kept where it is its first; where NCCL printed the host
    another, only the ports both name (a port one process did not find is not all there)."""
    known = facts.hcas_by_host.get(host)
    if known is None:
        facts.hcas_by_host[host] = list(dict.fromkeys(hcas))
    else:
        facts.hcas_by_host[host] = [hca for hca in known if hca in hcas]


def _mnnvl(known: bool | None, said: bool | None) -> bool | None:
    """A communicator that used MNNVL outweighs one that did not (a run makes several)."""
    if known is None or said is None:
        return said if known is None else known
    return known or said


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
