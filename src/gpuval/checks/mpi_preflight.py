"""The MPI preflight: every rank of every host answered, the all-to-all and allreduce correct.

One failed try is not a verdict on a host (a launcher can crash once, as Open MPI's did under
srun here): the role runs a failed preflight once more, and the two are judged together. A
retry that passed turns the first failure into a warning; a host fails only where both tries
name it, or where the only try does (the retry turned off)."""

from __future__ import annotations

from collections.abc import Iterable

from gpuval.checks.model import Check, Status
from gpuval.evidence import MpiPreflightTries, Parsed
from gpuval.plan.host_order import natural_key
from gpuval.records.collective_bench import MpiPreflightRun

NO_LONG_BENCHMARK = "run no long benchmark until this passes"


def mpi_preflight_checks(tries: Iterable[MpiPreflightTries]) -> list[Check]:
    """One check per launcher's preflight, and one per host a failing try names."""
    checks = []
    for preflight in tries:
        first, retry = preflight.first, preflight.retry
        if first is not None and retry is not None and not first.record.passed:
            checks += _two_tries(first, retry)
        elif only := first or retry:
            checks += _one_try(only)
    return checks


def _one_try(parsed: Parsed[MpiPreflightRun]) -> list[Check]:
    file, run = parsed.file, parsed.record
    if parsed.record.passed:
        hosts = sorted({r.host for r in run.ranks}, key=natural_key)
        return [Check(
            check_id="mpi-preflight", host=file.host, category="completeness", status="pass",
            reason=f"{run.world_size} ranks on {len(hosts)} host(s) ({', '.join(hosts)}) "
            f"answered; all-to-all between {run.alltoall_pairs} rank pairs and the allreduce "
            f"({run.allreduce_sum}) correct", measured=run.world_size, source=file.path,
        )]  # fmt: skip
    summary = _summary(parsed, "fail", f"MPI preflight failed: {_failure(parsed)}")
    return [summary, *(_host_check(parsed, host, "fail", "the MPI preflight") for host in
                       _named(run))]  # fmt: skip


def _two_tries(first: Parsed[MpiPreflightRun], retry: Parsed[MpiPreflightRun]) -> list[Check]:
    earlier = f"the first try failed ({first.file.path}): {_failure(first)}"
    if retry.record.passed:
        summary = _summary(retry, "warn", f"MPI preflight passed on its second try; {earlier}")
        return [summary, *(
            _host_check(first, host, "warn", "the first try of the MPI preflight, which its "
                        "second try passed")
            for host in _named(first.record)
        )]  # fmt: skip
    same = _failure(first) == _failure(retry)
    summary = _summary(
        retry, "fail", f"MPI preflight failed twice: {_failure(retry)}"
        + ("; the first try the same way" if same else f"; {earlier}"),
    )  # fmt: skip
    named_first, named_retry = set(_named(first.record)), set(_named(retry.record))
    checks = [summary]
    for host in sorted(named_first | named_retry, key=natural_key):
        if host in named_first and host in named_retry:
            checks.append(_host_check(retry, host, "fail", "both tries of the MPI preflight"))
        else:
            which = "first" if host in named_first else "second"
            checks.append(_host_check(
                first if host in named_first else retry, host, "warn",
                f"only the {which} of two failed tries of the MPI preflight",
            ))  # fmt: skip
    return checks


def _named(run: MpiPreflightRun) -> list[str]:
    return sorted({p.host for p in run.problems if p.host}, key=natural_key)


def _failure(parsed: Parsed[MpiPreflightRun]) -> str:
    run = parsed.record
    missing = (
        f"; rank(s) {', '.join(map(str, run.missing_ranks))} never reported"
        if run.missing_ranks
        else ""
    )
    first = run.problems[0].message if run.problems else "no OK line (did not finish)"
    return f"host(s) {', '.join(_named(run)) or 'unknown'}; {first}{missing}"


def _summary(parsed: Parsed[MpiPreflightRun], status: Status, reason: str) -> Check:
    file, run = parsed.file, parsed.record
    return Check(
        check_id="mpi-preflight", host=file.host, category="completeness", status=status,
        reason=reason if status != "fail" else f"{reason} ({NO_LONG_BENCHMARK})",
        measured=len(run.ranks), reference=run.world_size, source=file.path,
    )  # fmt: skip


def _host_check(parsed: Parsed[MpiPreflightRun], host: str, status: Status, by: str) -> Check:
    """A host that `by` (which try, in words) names, with what that try said of it."""
    file, run = parsed.file, parsed.record
    said = [p for p in run.problems if p.host == host]
    return Check(
        check_id="mpi-preflight.host", host=host, category="completeness", status=status,
        reason=f"named by {by}: " + "; ".join(p.message for p in said)[:300],
        source=f"{file.path}:{said[0].line}",
    )  # fmt: skip
