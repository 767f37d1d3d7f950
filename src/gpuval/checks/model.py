"""What a judgement is: a Check with its status, and the peaks (Expectations) checks used.

Statuses, worst first: `error` (the run could not be judged), `fail`, `unjudged` (something was
measured but there is no trustworthy reference for it: shown, never counted as a pass), `warn`,
`pass`. A run's verdict is the worst status among its checks; no check at all is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Status = Literal["pass", "warn", "unjudged", "fail", "error"]

# Worst first: a run's verdict is the worst status among its checks.
STATUS_ORDER: tuple[Status, ...] = ("error", "fail", "unjudged", "warn", "pass")
_RANKS: dict[Status, int] = {status: index for index, status in enumerate(STATUS_ORDER)}
STATUSES: frozenset[str] = frozenset(get_args(Status))

CLUSTER = "cluster"  # the `host` of checks about the whole cluster (or a link) rather than a node

Category = Literal[
    "correctness",
    "completeness",
    "bandwidth",
    "p2p",
    "topology",
    "transport",
    "consistency",
    "network",
    "hardware",
    "health",
]


def rank(status: Status) -> int:
    """0 for the worst status (error), growing towards pass."""
    return _RANKS[status]


def worst(statuses: list[Status]) -> Status:
    """The most severe status; an empty list is an error (no evidence is never a pass)."""
    return min(statuses, key=rank) if statuses else "error"


def at_least_as_bad(status: Status, threshold: Status) -> bool:
    """Whether `status` is `threshold` or worse (fail is at least as bad as warn)."""
    return rank(status) <= rank(threshold)


@dataclass
class Check:
    """One judgement, readable on its own: what was measured, against what, and why it matters."""

    check_id: str  # stable, e.g. "nccl-tests.all_reduce.busbw"
    host: str  # a host name, or CLUSTER
    category: Category
    status: Status
    reason: str  # one line a person understands
    measured: float | str | None = None
    reference: float | str | None = None
    unit: str | None = None
    source: str | None = None  # raw file relative to the run folder, ":line" when known
    action: str | None = None  # what an operator should do, when the check is not a pass


@dataclass
class Expectation:
    """The per-direction (unidirectional) peak a measurement is judged against, and its source."""

    host: str
    subject: str  # e.g. "intranode all_reduce", "p2p NV18", "internode all_reduce"
    per_direction_gbps: float
    duplex_gbps: float
    basis: str  # how it was derived, e.g. "NVLink 4 x 18 links (NV18) = 450 GB/s per direction"
    source: str | None = None  # where the peak's numbers come from (catalog "source")
