"""The words of the checks that outputs show: the node health subjects and the action a check
asks for (gpuval.checks.health), the pair kinds and what a pair check's reference is
(gpuval.checks.pairs). Outputs name them through this module, the judgement's interface, and
never reach into the check modules themselves."""

from __future__ import annotations

from gpuval.checks.health import HEALTH_SUBJECTS, health_subject, suggested_action
from gpuval.checks.pairs import KINDS, PairKind, reference_name, row_kind

__all__ = [
    "HEALTH_SUBJECTS",
    "KINDS",
    "PairKind",
    "health_subject",
    "reference_name",
    "row_kind",
    "suggested_action",
]
