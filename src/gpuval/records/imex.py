"""The IMEX domain as `nvidia-imex-ctl -N` (text) or `-N -j` (JSON) reports it (schema:
run-nvidia-imex-ctl)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ImexNode:
    """One node of the IMEX domain: its daemon's state and its connection to every peer."""

    index: int
    host: str | None = None  # the IP the node config lists
    status: str | None = None  # READY, UNAVAILABLE, ... as printed
    version: str | None = None
    # Peer index -> connection state as a word: CONNECTED, NEVER_CONNECTED, INVALID,
    # RECOVERING, DISCONNECTED, AUTHENTICATING, VERSION_MISMATCH, NODE_MAP_MISMATCH.
    connections: dict[int, str] = field(default_factory=dict)


@dataclass
class ImexDomainRun:
    domain_state: str | None = None  # UP, DOWN, DEGRADED; None when not printed
    nodes: list[ImexNode] = field(default_factory=list)
    form: str = "text"  # "text" (-N) or "json" (-N -j)
