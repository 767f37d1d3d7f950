"""Which Slurm nodes a judged run takes out of service, and which of them it may give back.

Only a `fail` of a node's own check drains it: an `error` or `unjudged` check (nothing measured,
nothing trustworthy to compare with) is no evidence against the node, and a check about the
cluster or a link (host `cluster`) names no one node. A node Slurm already holds drained or down
for a reason gpuval did not write is left alone: its reason is a person's, and a gpuval reason
over it would let `gpuval resume` hand it back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuval.checks.model import CLUSTER, Check, at_least_as_bad, worst
from gpuval.judgement.model import RunJudgement
from gpuval.slurm.nodes import SlurmNode
from gpuval.slurm.scontrol import drain_reason, is_ours


@dataclass(frozen=True)
class NodeAction:
    """What gpuval does to one node, or why it does nothing."""

    host: str  # as the run names it (the inventory host)
    node: str  # as Slurm names it
    act: bool  # False: left as it is (`note` says why)
    reason: str = ""  # the drain reason gpuval writes
    note: str = ""


def failing_checks(judgement: RunJudgement) -> dict[str, list[Check]]:
    """Each host with failing checks of its own -> those checks, in the run's host order."""
    failing: dict[str, list[Check]] = {}
    for check in judgement.checks:
        if check.status == "fail" and check.host != CLUSTER:
            failing.setdefault(check.host, []).append(check)
    order = {host: index for index, host in enumerate(judgement.host_names)}
    return dict(sorted(failing.items(), key=lambda item: order.get(item[0], len(order))))


def _reason(checks: list[Check], prefix: str) -> str:
    first = checks[0]
    more = f" (+{len(checks) - 1} more)" if len(checks) > 1 else ""
    return drain_reason(prefix, first.check_id + more, first.reason)


def _held_by_someone_else(current: SlurmNode | None, prefix: str) -> str:
    """Why Slurm holds the node out for a reason gpuval did not write; "" when it does not."""
    if current is None or current.available or is_ours(current.reason, prefix):
        return ""
    return f"already {'+'.join(current.states)} for another reason ({current.reason!r}): left so"


def drain_actions(
    judgement: RunJudgement, slurm_names: Mapping[str, str], current: Mapping[str, SlurmNode],
    prefix: str,
) -> list[NodeAction]:  # fmt: skip
    """One action per failing host: drain it, unless Slurm holds it out for another reason.
    `slurm_names`: host -> Slurm node name (the host's own name when absent); `current`: the
    nodes as Slurm reports them now, by node name (empty when unknown)."""
    actions = []
    for host, checks in failing_checks(judgement).items():
        node = slurm_names.get(host, host)
        held = _held_by_someone_else(current.get(node), prefix)
        actions.append(NodeAction(host, node, not held, _reason(checks, prefix), held))
    return actions


def not_passed(judgement: RunJudgement) -> dict[str, str]:
    """Each host the run did not pass (a check worse than warn, or no check at all) -> why:
    only a node the run passed again is given back."""
    statuses: dict[str, list[Check]] = {host: [] for host in judgement.host_names}
    for check in judgement.checks:
        if check.host != CLUSTER:
            statuses.setdefault(check.host, []).append(check)
    held = {}
    for host, checks in statuses.items():
        verdict = worst([check.status for check in checks])
        if at_least_as_bad(verdict, "unjudged"):
            bad = next((c for c in checks if c.status == verdict), None)
            what = f"{bad.check_id}: {bad.reason}" if bad else "no check of it"
            held[host] = (
                f"stays drained: run {judgement.run_id} did not pass it ({verdict}: {what})"
            )
    return held


def _passed_again(judgement: RunJudgement, host: str, check_id: str) -> bool:
    """Whether the run passed `check_id` on the host: the check itself passed, or, when the run
    has no such check, the check it details did (a per-GPU check such as
    health.xid.0000:b3:00 exists only while failing; a clean kernel log is one health.xid pass).
    """
    own = [c for c in judgement.checks if c.host == host]
    exact = [c.status for c in own if c.check_id == check_id]
    if exact:
        return worst(exact) in ("pass", "warn")
    parents = [c.status for c in own if check_id.startswith(c.check_id + ".")]
    return bool(parents) and worst(parents) in ("pass", "warn")


def not_rechecked(
    judgement: RunJudgement, reasons: Mapping[str, str], prefix: str
) -> dict[str, str]:
    """Each host whose gpuval drain reason names a check this run did not pass on it -> why it
    stays drained: a run that never repeated the test a node was drained for (a preflight-only
    run, another profile) is no evidence that the node recovered. `reasons`: host -> the reason
    Slurm holds its node with; the check is the reason's first word after the prefix (a check
    id may hold colons, health.xid.0000:b3:00, so only the one that ends the word is cut)."""
    held = {}
    for host, reason in reasons.items():
        if not is_ours(reason, prefix):
            continue
        check_id = reason.removeprefix(f"{prefix}: ").split(" ", 1)[0].removesuffix(":")
        if not _passed_again(judgement, host, check_id):
            held[host] = (
                f"stays drained: run {judgement.run_id} did not pass {check_id} on it, the check "
                "it was drained for"
            )
    return held


def resume_actions(nodes: Iterable[SlurmNode], keep: Mapping[str, str], prefix: str
                   ) -> list[NodeAction]:  # fmt: skip
    """Resume the nodes gpuval drained; `keep`: node -> why it stays drained (it still fails)."""
    actions = []
    for node in nodes:
        drained = {"DRAIN", "DRAINED", "DRAINING"} & set(node.states)
        if not drained:
            actions.append(NodeAction(node.name, node.name, False, note="not drained"))
        elif not is_ours(node.reason, prefix):
            note = f"stays drained: drained for another reason ({node.reason!r}), not by gpuval"
            actions.append(NodeAction(node.name, node.name, False, note=note))
        elif node.name in keep:
            actions.append(NodeAction(node.name, node.name, False, note=keep[node.name]))
        else:
            actions.append(NodeAction(node.name, node.name, True, node.reason))
    return actions
