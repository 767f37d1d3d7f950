"""The judge's working state: the evidence, the thresholds, and what has been concluded."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuval.catalog import Peak
from gpuval.checks.model import Check, Expectation
from gpuval.checks.thresholds import Thresholds
from gpuval.evidence import RunEvidence


@dataclass
class JudgeState:
    """Checks and the expectations (peaks) they were judged against, for one run."""

    evidence: RunEvidence
    thresholds: Thresholds
    checks: list[Check] = field(default_factory=list)
    expectations: dict[tuple[str, str], Expectation] = field(default_factory=dict)

    def add(self, check: Check) -> None:
        self.checks.append(check)

    def expect(self, host: str, subject: str, peak: Peak) -> None:
        self.expectations.setdefault(
            (host, subject),
            Expectation(
                host, subject, peak.per_direction_gbps, peak.duplex_gbps, peak.basis, peak.source
            ),
        )
