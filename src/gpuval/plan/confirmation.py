"""The one rule that flags a node from its partners' pairs. The staged search
(gpuval.plan.group_testing) and the report's pair judge (gpuval.checks.pairs) both call it, so a
search and its report never disagree about a suspect.

A node is flagged only when at least MIN_PARTNERS distinct partners measured it, every one of
them low or failed: one failed pair may be the partner's or the link's. A node that passed with
all of them (at least MIN_PARTNERS) is cleared. Anything between, or fewer partners, is
unconfirmed: never flagged on one measurement, never a pass either (fail closed). Google's
cluster health scanner confirms the same way: a node that failed its first pass is paired with
nodes that passed before it is failed (run_nccl_random_pair_healthcheck in
https://github.com/GoogleCloudPlatform/cluster-health-scanner/blob/main/src/health_runner/nccl_runner.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Verdict = Literal["flagged", "cleared", "unconfirmed", "pending"]
# Fewer partners than this confirm nothing: one failed pair may be the partner's or the link's.
MIN_PARTNERS = 2


def confirmation_verdict(passed: Iterable[bool | None]) -> Verdict:
    """A node's verdict from its distinct partners' pairs: True passed, False low or failed,
    None not measured yet (pending until it is)."""
    outcomes = list(passed)
    if any(o is None for o in outcomes):
        return "pending"
    if len(outcomes) < MIN_PARTNERS or any(outcomes) != all(outcomes):
        return "unconfirmed"
    return "cleared" if all(outcomes) else "flagged"
