"""Memory: ECC mode and counts, retired pages, row remapping, repairs pending (nvidia-smi -q)."""

from __future__ import annotations

from gpuval.catalog.health import compute_of
from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check, health_gpus, missing_probe
from gpuval.evidence import HostEvidence
from gpuval.records.nvidia_smi import EccCounts, SmiGpu


def _uncorrectable(counts: EccCounts) -> int:
    found = [counts.dram_uncorrectable, counts.sram_uncorrectable,
             counts.sram_uncorrectable_parity, counts.sram_uncorrectable_secded]  # fmt: skip
    total = sum(v for v in found if v)
    return total or (counts.uncorrected_total or 0)


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() == "yes"


def _memory_problems(name: str, gpu: SmiGpu, ecc_expected: bool) -> list[Problem]:
    health = gpu.health
    assert health is not None
    found: list[Problem] = []
    reset = f"reset {name} (nvidia-smi -r -i {name.removeprefix('GPU')}) while it is idle"
    if ecc_expected and (gpu.ecc_mode or "").lower() == "disabled":
        found.append(
            (
                "fail",
                f"{name} ECC disabled on a GPU whose memory has ECC",
                f"enable ECC (nvidia-smi -i {name.removeprefix('GPU')} -e 1), then {reset}",
            )
        )
    if health.ecc_mode_pending and gpu.ecc_mode and health.ecc_mode_pending != gpu.ecc_mode:
        found.append(("warn", f"{name} ECC mode changes to {health.ecc_mode_pending} at the "
                              "next reset", reset))  # fmt: skip
    if volatile := _uncorrectable(health.ecc_volatile):
        found.append(
            (
                "fail",
                f"{name} {volatile} uncorrectable ECC error(s) since the driver loaded",
                f"drain the node, {reset}; RMA {name} if they recur",
            )
        )
    elif aggregate := _uncorrectable(health.ecc_aggregate):
        found.append(
            (
                "warn",
                f"{name} {aggregate} uncorrectable ECC error(s) in its life",
                f"watch {name}: RMA it if its remapped rows run out",
            )
        )
    if _yes(health.retired_pages.pending):
        found.append(("fail", f"{name} has retired pages pending", reset))
    rows = health.remapped_rows
    if _yes(rows.failure):
        found.append(
            (
                "fail",
                f"{name} row remapping failed (spare rows used up)",
                f"drain the node and RMA {name}",
            )
        )
    if _yes(rows.pending):
        found.append(
            (
                "fail",
                f"{name} row remap pending (uncorrectable: {rows.uncorrectable}, "
                f"correctable: {rows.correctable})",
                f"{reset} to apply the pending row remap",
            )
        )
    if exhausted := rows.histogram.get("none"):
        found.append(
            (
                "warn",
                f"{name} {exhausted} memory bank(s) without a spare row left",
                f"plan to RMA {name}: the next error in those banks cannot be remapped",
            )
        )
    for label, flag in (
        ("SRAM errors over the field-diagnostic threshold", health.sram_threshold_exceeded),
        ("unrepairable memory", health.unrepairable_memory),
    ):
        if _yes(flag):
            found.append(("fail", f"{name} {label}", f"drain the node and RMA {name}"))
    for label, flag in (
        ("channel repair pending", health.channel_repair_pending),
        ("TPC repair pending", health.tpc_repair_pending),
        ("reset required", health.reset_required),
        ("drain and reset recommended", health.drain_and_reset_recommended),
    ):
        if _yes(flag):
            found.append(("fail", f"{name} {label}", f"drain the node, {reset}"))
    if health.recovery_action and health.recovery_action.lower() not in ("none", "n/a"):
        found.append(
            (
                "fail",
                f"{name} recovery action {health.recovery_action}",
                f"{health.recovery_action.lower()} {name} as NVML asks",
            )
        )
    return found


def memory_checks(judge: JudgeState, host: HostEvidence) -> None:
    parsed = host.health.smi.latest
    if parsed is None:
        missing_probe(judge, host, "health.memory", "nvidia-smi -q -x output", "nvidia-smi-query")
        return
    compute = compute_of(host.model.model if host.model else None)
    problems = [p for name, gpu in health_gpus(parsed)
                for p in _memory_problems(name, gpu, bool(compute and compute.ecc))]  # fmt: skip
    gpus = sum(1 for _ in health_gpus(parsed))
    passed = (
        f"{gpus} GPU(s): no uncorrectable ECC error, no retired page or row remap pending, "
        "no remap failure"
    )
    add_check(judge, host, "health.memory", problems, passed, parsed.source(),
              reference="GPU Memory Error Management (NVIDIA)")  # fmt: skip
