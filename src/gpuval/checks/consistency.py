"""Across hosts: one driver, CUDA, NCCL and MPI version (mixed NCCL versions hang collectives,
mpirun needs the same MPI everywhere), and no host well below the others on the same check."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gpuval.checks.context import JudgeState
from gpuval.checks.model import CLUSTER, Category, Check
from gpuval.checks.thresholds import Thresholds
from gpuval.checks.wording import percent


def mixed_values_checks(
    judge: JudgeState, check_id: str, category: Category, label: str, values: dict[str, str]
) -> None:
    """One cluster check when hosts disagree on `values` (host -> value), plus one per host of a
    minority value; with no clear majority, no host can be blamed and only the cluster fails.
    One cluster pass otherwise."""
    seen: dict[str, list[str]] = {}
    for host, value in sorted(values.items()):
        seen.setdefault(value, []).append(host)
    if len(seen) <= 1:
        if seen and len(next(iter(seen.values()))) > 1:
            ((value, hosts),) = seen.items()
            judge.add(Check(
                check_id=check_id, host=CLUSTER, category=category, status="pass",
                measured=value, reason=f"{label}: {value} on all {len(hosts)} host(s) that "
                "report it",
            ))  # fmt: skip
        return
    listed = "; ".join(f"{v} on {', '.join(h)}" for v, h in sorted(seen.items()))
    sizes = sorted((len(h) for h in seen.values()), reverse=True)
    majority = max(seen, key=lambda v: len(seen[v])) if sizes[0] > sizes[1] else None
    for value, hosts in sorted(seen.items()):
        if majority is None or value == majority:
            continue
        for host in hosts:
            judge.add(Check(
                check_id=check_id, host=host, category=category, status="fail", measured=value,
                reference=majority,
                reason=f"{label}: {value} here, the other hosts' {majority} ({listed})",
            ))  # fmt: skip
    judge.add(Check(
        check_id=check_id, host=CLUSTER, category=category, status="fail",
        reason=f"mixed {label} across hosts: {listed}",
    ))  # fmt: skip


VERSION_LABELS = {"nccl": "NCCL", "driver": "driver", "cuda": "CUDA", "mpi": "MPI"}


def version_checks(judge: JudgeState) -> None:
    for key, label in VERSION_LABELS.items():
        values = {h.name: h.versions[key] for h in judge.evidence.hosts.values()
                  if key in h.versions}  # fmt: skip
        mixed_values_checks(judge, f"consistency.{key}_version", "consistency",
                            f"{label} versions", values)  # fmt: skip


def below_median(
    values: Sequence[float], hosts: int, thresholds: Thresholds
) -> tuple[float, list[int]] | None:
    """The one outlier rule, for checks and host metrics alike: the median of `values` and the
    positions of those below host_outlier_fraction of it; None when the values come from fewer
    than host_outlier_min_hosts hosts."""
    if hosts < thresholds.host_outlier_min_hosts:
        return None
    median = statistics.median(values)
    cutoff = thresholds.host_outlier_fraction * median
    return median, [i for i, value in enumerate(values) if median and value < cutoff]


def outlier_checks(judge: JudgeState) -> None:
    """A host whose bandwidth lies well below the median of the same check on other hosts.
    Check ids keep single-node and across-node runs apart, so they never mix here."""
    groups: dict[str, list[Check]] = {}
    for check in judge.checks:
        if (
            check.category in ("bandwidth", "p2p")
            and isinstance(check.measured, float)
            and check.host != CLUSTER
            and check.check_id.endswith((".busbw", ".unidirectional"))
        ):
            groups.setdefault(check.check_id, []).append(check)
    for check_id, checks in sorted(groups.items()):
        values = [float(c.measured or 0) for c in checks]
        judged = below_median(values, len({c.host for c in checks}), judge.thresholds)
        if judged is None:
            continue
        median, low = judged
        for check, value in ((checks[i], values[i]) for i in low):
            judge.add(Check(
                check_id=f"{check_id}.outlier", host=check.host, category="bandwidth",
                status="warn", measured=value, reference=round(median, 2), unit="GB/s",
                source=check.source, reason=f"{value:.1f} GB/s is "
                f"{percent(value / median)} of the median {median:.1f} GB/s of "
                f"{len(checks)} hosts",
            ))  # fmt: skip
