"""What the health subjects share: a check made of a list of problems, the check of a probe
that left no trace, the GPUs nvidia-smi reported health for, and GPUs grouped by what they
printed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from gpuval.checks.context import JudgeState
from gpuval.checks.model import Category, Check, Status, rank
from gpuval.checks.wording import listed
from gpuval.evidence import HostEvidence, Parsed
from gpuval.plan.steps import after_step
from gpuval.records.nvidia_smi import NvidiaSmiRun, SmiGpu

Problem = tuple[Status, str, str | None]  # status, what was found, what to do


def add_check(
    judge: JudgeState,
    host: HostEvidence | str,
    check_id: str,
    problems: list[Problem],
    passed: str,
    source: str | None,
    measured: float | str | None = None,
    reference: float | str | None = None,
    unit: str | None = None,
    category: Category = "health",
) -> Status:
    """One check from a list of problems: the worst status, every problem listed, the actions of
    the worst ones; `passed` is the reason when there is none. `host`: a host or CLUSTER."""
    problems = sorted(problems, key=lambda p: rank(p[0]))  # the worst named first
    status = problems[0][0] if problems else "pass"
    actions = list(dict.fromkeys(p[2] for p in problems if p[0] == status and p[2]))
    judge.add(Check(
        check_id=check_id, host=host if isinstance(host, str) else host.name,
        category=category, status=status,
        reason=listed([p[1] for p in problems], limit=4) if problems else passed,
        source=source, action="; ".join(actions) or None, measured=measured,
        reference=reference, unit=unit,
    ))  # fmt: skip
    return status


def missing_probe(
    judge: JudgeState, host: HostEvidence, check_id: str, what: str, step: str
) -> None:
    """Unjudged when the health phase ran on the host but left no trace of the probe's step,
    before or after the benchmarks (a probe that failed or was skipped is its step's check)."""
    if not host.health.ran or {step, after_step(step)} & host.health.steps:
        return
    judge.add(Check(
        check_id=check_id, host=host.name, category="health", status="unjudged",
        reason=f"the health phase ran but left no {what}: nothing to judge (see its step)",
        action="rerun the health phase; check the step's sidecar for why it failed",
    ))  # fmt: skip


def health_gpus(parsed: Parsed[NvidiaSmiRun]) -> Iterable[tuple[str, SmiGpu]]:
    for i, gpu in enumerate(parsed.record.gpus):
        if gpu.health is not None:
            yield f"GPU{gpu.index if gpu.index is not None else i}", gpu


def grouped(by_gpu: dict[str, tuple[str, ...]], named: bool = False,
            ) -> list[tuple[str, tuple[str, ...]]]:  # fmt: skip
    """(who, sentences) per distinct tuple of sentences, the most common first: who is
    '8 GPU(s)' when every GPU shares them (unless `named`), else the GPUs' names."""
    lines = []
    for value, count in Counter(by_gpu.values()).most_common():
        names = [name for name, v in by_gpu.items() if v == value]
        more = f" (and {len(names) - 8} more)" if len(names) > 8 else ""
        every = count == len(by_gpu) and not named
        who = f"{count} GPU(s)" if every else ", ".join(names[:8]) + more
        lines.append((who, value))
    return lines
