"""Findings: the checks of a run grouped by check and cause, so that one problem shared by a
thousand hosts reads as one line ("FAIL on 256 of 256 hosts: did not complete ..."), expandable
to its hosts, worst first; and the cluster overview, hosts x subjects coloured by the worst
status.

A finding gathers the checks of one status whose check id and reason are the same once what
varies between hosts is set aside: the host's name, numbers, and the check id's last part when
its reason names it (the step of `step.nccl-all_reduce`, "step 'nccl-all_reduce' skipped: ...",
so every step skipped for the same reason is one finding).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuval.checks.model import CLUSTER, STATUS_ORDER, Check, Status, rank
from gpuval.plan.host_order import natural_key

NUMBER = re.compile(r"\d+(?:\.\d+)?")
VARYING = "<...>"
SHARE_UNITS = frozenset({"GB/s", "Gbit/s"})
STATUS_LETTER = {status: status[0].upper() for status in STATUS_ORDER}  # E F U W P


def share(check: Check) -> tuple[float, str] | None:
    """The measured value as a fraction of the reference, and of what: the peak (bandwidth),
    the baseline, what healthy pairs reach, or the hosts' median."""
    measured, reference = check.measured, check.reference
    if not isinstance(measured, (int, float)) or not isinstance(reference, (int, float)):
        return None
    if isinstance(measured, bool) or reference <= 0:
        return None
    if check.check_id.startswith("baseline."):
        of = "of baseline"
    elif check.check_id.startswith("pairs."):
        of = "of healthy pairs"
    elif check.check_id.endswith(".outlier"):
        of = "of the hosts' median"
    elif check.unit in SHARE_UNITS:
        of = "of peak"
    else:
        return None
    return measured / reference, of


def _key(check: Check, known: dict[tuple[str, str, str], tuple[str, str]]) -> tuple[str, str]:
    """(check family, cause): the check id and reason with what varies set aside; `known`: the
    keys found so far (a thousand hosts share a few hundred once their names are set aside)."""
    family, cause = check.check_id, check.reason
    if check.host != CLUSTER:
        family, cause = family.replace(check.host, VARYING), cause.replace(check.host, VARYING)
    found = known.get((check.check_id, family, cause))
    if found is None:
        found = known[check.check_id, family, cause] = _set_aside(check.check_id, family, cause)
    return found


def _set_aside(check_id: str, family: str, cause: str) -> tuple[str, str]:
    """The check's subject (when the reason names it) and the numbers set aside."""
    prefix, _, subject = check_id.rpartition(".")
    if prefix and len(subject) >= 3 and subject in cause:  # the reason names the check's subject
        family, cause = f"{prefix}.{VARYING}", cause.replace(subject, VARYING, 1)
    return NUMBER.sub("#", family), NUMBER.sub("#", cause)


@dataclass(frozen=True)
class Finding:
    status: Status
    family: str  # the check id, what varies between its checks replaced by "<...>"
    checks: list[Check]  # worst first

    @property
    def example(self) -> Check:
        return self.checks[0]

    @property
    def hosts(self) -> list[str]:
        return list(dict.fromkeys(c.host for c in self.checks))

    @property
    def check_ids(self) -> list[str]:
        return sorted(set(c.check_id for c in self.checks), key=natural_key)

    @property
    def label(self) -> str:
        """The check id, or the family when the finding gathers several."""
        ids = self.check_ids
        return ids[0] if len(ids) == 1 else self.family

    def headline(self, host_total: int) -> str:
        """'FAIL on 256 of 256 hosts: <the worst check's reason>'."""
        hosts = [h for h in self.hosts if h != CLUSTER]
        where = f"on {len(hosts)} of {host_total} host{'s' if host_total != 1 else ''}"
        if not hosts:
            where = "cluster" if len(self.checks) == 1 else f"cluster, {len(self.checks)} checks"
        elif len(self.check_ids) > 1:
            where += f", {len(self.check_ids)} checks"
        return f"{self.status.upper()} {where}: {self.example.reason}"


def group_findings(checks: list[Check]) -> list[Finding]:
    """Findings worst status first, then those on the most hosts."""
    grouped: dict[tuple[Status, str, str], list[Check]] = {}
    known: dict[tuple[str, str, str], tuple[str, str]] = {}
    for check in checks:
        grouped.setdefault((check.status, *_key(check, known)), []).append(check)
    host_keys = {host: natural_key(host) for host in {check.host for check in checks}}

    def worst_first(check: Check) -> tuple[float, tuple[list[int | str], str]]:
        found = share(check)
        return (found[0] if found else float("inf"), host_keys[check.host])

    findings = [
        Finding(status, family, sorted(members, key=worst_first))
        for (status, family, _), members in grouped.items()
    ]
    return sorted(
        findings,
        key=lambda f: (rank(f.status), -len(f.hosts), natural_key(f.family)),
    )


@dataclass(frozen=True)
class Overview:
    """Hosts x subjects (check categories), each cell the worst status there ("" none)."""

    hosts: list[str]
    subjects: list[str]
    cells: list[str]  # per host, one letter per subject (STATUS_LETTER, "-" for none)

    def document(self) -> dict[str, object]:
        return {"hosts": self.hosts, "subjects": self.subjects, "cells": self.cells}


def overview(checks: list[Check], hosts: list[str]) -> Overview:
    subjects: list[str] = sorted({c.category for c in checks})
    worst: dict[tuple[str, str], Status] = {}
    for check in checks:
        key = (check.host, check.category)
        if key not in worst or rank(check.status) < rank(worst[key]):
            worst[key] = check.status
    rows = ([CLUSTER] if any(c.host == CLUSTER for c in checks) else []) + hosts
    cells = [
        "".join(STATUS_LETTER[worst[(h, s)]] if (h, s) in worst else "-" for s in subjects)
        for h in rows
    ]
    return Overview(rows, subjects, cells)
