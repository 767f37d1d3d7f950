"""Declared against detected: what the inventory says a node is (the contract) is never silently
replaced by what was found, and a cluster's nodes must be alike."""

from __future__ import annotations

from gpuval.catalog import link_problems
from gpuval.checks.consistency import mixed_values_checks
from gpuval.checks.context import JudgeState
from gpuval.checks.model import Check, Status
from gpuval.evidence import HostEvidence


def _links_confirm(host: HostEvidence) -> bool:
    """Whether the node's NVLink matrix is exactly its system's for the declared model: a
    different GPU would show different link counts."""
    model, system, topo = host.declared_model, host.system, host.topology
    if model is None or system is None or topo is None or len(topo.gpus) < 2:
        return False
    return not link_problems(system, topo.links, model)


def _model_check(judge: JudgeState, host: HostEvidence) -> None:
    declared = host.declared.gpu_model
    if not declared:
        return
    seen = host.gpu_names[0] if host.gpu_names else None
    check = Check(
        check_id="hardware.gpu-model",
        host=host.name,
        category="hardware",
        status="pass",
        reason="",
        measured=seen,
        reference=declared,
    )
    if host.declared_model is None:
        check.status = "error"
        check.reason = (
            f"declared gpu_model {declared!r} is no GPU the catalog knows: fix the inventory "
            '(gpuval_gpu_model), e.g. "H100 SXM"'
        )
    elif seen is None and _links_confirm(host):
        check.reason = (
            f"no output names the GPUs, but the links are exactly those of a "
            f"{host.system.name if host.system else ''} with {host.declared_model.model} GPUs, "
            "as declared"
        )
    elif seen is None:
        check.status = "unjudged"
        check.reason = f"declared {declared}, but no output names the GPUs (add nvidia-smi)"
    elif host.detected_model is None or host.detected_model.model != host.declared_model.model:
        found = host.detected_model.model if host.detected_model else "a model the catalog lacks"
        check.status = "fail"
        check.reason = (
            f"declared {host.declared_model.model}, but nvidia-smi says {seen!r} ({found}): "
            f"judged against the declared {host.declared_model.model}"
        )
    else:
        check.reason = f"{seen!r} is the declared {host.declared_model.model}"
    judge.add(check)


def _count_check(judge: JudgeState, host: HostEvidence) -> None:
    declared = host.declared.gpus_per_node
    if declared is None:
        return
    count = host.gpu_count
    status: Status
    if count is None:
        status, reason = "unjudged", f"{declared} GPU(s) declared, none counted (no nvidia-smi)"
    elif count < declared:
        status = "fail"
        reason = f"{count} GPU(s) found where {declared} are declared: GPUs missing or lost"
    elif count > declared:
        status, reason = "warn", f"{count} GPU(s) found where {declared} are declared"
    else:
        status, reason = "pass", f"{count} GPU(s), as declared"
    judge.add(Check(
        check_id="hardware.gpu-count", host=host.name, category="hardware", status=status,
        reason=reason, measured=count, reference=declared,
    ))  # fmt: skip


def _system_check(judge: JudgeState, host: HostEvidence) -> None:
    declared = host.declared.system
    if not declared:
        return
    if host.declared_system is None:
        shown = host.detected_system.name if host.detected_system else "no catalog system"
        judge.add(Check(
            check_id="hardware.system", host=host.name, category="hardware", status="warn",
            measured=shown, reference=declared,
            reason=f"declared system {declared!r} is not in the catalog, so the node is judged "
            f"as what its links show ({shown}); name a catalog system or alias (gpuval_system"
            "), e.g. \"HGX H100 8-GPU\" or \"a3-megagpu-8g\"",
        ))  # fmt: skip
        return
    detected = host.detected_system
    if detected is None or detected.name == host.declared_system.name:
        return  # the link check judges the node against the declared board
    judge.add(Check(
        check_id="hardware.system", host=host.name, category="hardware", status="fail",
        measured=detected.name, reference=host.declared_system.name,
        reason=f"declared {host.declared_system.name}, but its links look like a "
        f"{detected.name}: judged against the declared board",
    ))  # fmt: skip


def _mixed_models(judge: JudgeState) -> None:
    models = {h.name: h.detected_model.model for h in judge.evidence.hosts.values()
              if h.detected_model}  # fmt: skip
    mixed_values_checks(judge, "hardware.mixed-gpu-models", "hardware", "GPU models", models)


def hardware_checks(judge: JudgeState) -> None:
    for host in judge.evidence.hosts.values():
        if not host.reachable:
            continue
        _model_check(judge, host)
        _count_check(judge, host)
        _system_check(judge, host)
    _mixed_models(judge)
