"""Memory: ECC mode and counts, retired pages, row remapping, repairs pending (nvidia-smi -q).

A pending row remap or page retirement and a remapping failure are one finding with one action
whichever tool reports it: nvidia-smi's Remapped Rows / Retired Pages here, Xid 63 / 64 in the
kernel log (xid.py asks `kernel_log_remap_problem`). NVIDIA, GPU Memory Error Management:
https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html"""

from __future__ import annotations

from gpuval.catalog.health import compute_of
from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check, grouped, health_gpus, missing_probe
from gpuval.evidence import HostEvidence
from gpuval.records.nvidia_smi import EccCounts, SmiGpu

MEMORY_REFERENCE = "GPU Memory Error Management (NVIDIA)"
# Xid 63: a row remap (Ampere+) or page retirement (Kepler-Volta) recorded, applied at the next
# GPU reset; Xid 64: it could not be recorded (spare rows used up). Same page as above.
XID_PENDING_REMAP = 63
XID_REMAP_FAILURE = 64


def _uncorrectable(counts: EccCounts) -> int | None:
    """Uncorrectable errors of one timescale; None when the output printed no count (N/A)."""
    found = [counts.dram_uncorrectable, counts.sram_uncorrectable,
             counts.sram_uncorrectable_parity, counts.sram_uncorrectable_secded,
             counts.uncorrected_total]  # fmt: skip
    found += [v for k, v in counts.by_location.items() if k.startswith("uncorrected.")]
    known = [v for v in found if v is not None]
    if not known:
        return None
    split = [v for v in found[:4] if v is not None]
    return sum(split) if split else max(known)


def _yes(value: str | None) -> bool:
    return (value or "").strip().lower() == "yes"


def reset_action(name: str, selector: str, applies: str) -> str:
    """What to do with a GPU whose remap or retirement waits: a reset at the next opportunity."""
    return f"reset {name} (nvidia-smi -r -i {selector}) while it is idle to apply the {applies}"


def pending_remap_problem(name: str, selector: str, what: str, applies: str) -> Problem:
    return ("fail", f"{name} {what}", reset_action(name, selector, applies))


def remap_failure_problem(name: str, what: str) -> Problem:
    return ("fail", f"{name} {what}", f"drain the node and RMA {name}")


def kernel_log_remap_problem(code: int | None, recent: bool, name: str, selector: str,
                             ) -> Problem | None:  # fmt: skip
    """The memory rule for an Xid 63 / 64 of the GPU `name` (`selector` for nvidia-smi -i);
    None for other codes. A pending remap older than the Xid window may have been applied by
    a reset since (warn, as the catalog's hardware class: the Xid check says why); spare rows
    used up do not come back (fail at any age)."""
    if code == XID_PENDING_REMAP:
        status, text, action = pending_remap_problem(
            name, selector, "row remap or page retirement pending (Xid 63)", "pending row remap"
        )
        return (status if recent else "warn"), text, action
    if code == XID_REMAP_FAILURE:
        return remap_failure_problem(name, "row remapping failed (Xid 64: spare rows used up)")
    return None


def _ecc_problems(name: str, gpu: SmiGpu, ecc_expected: bool, reset: str) -> list[Problem]:
    health = gpu.health
    assert health is not None
    found: list[Problem] = []
    if ecc_expected and (gpu.ecc_mode or "").lower() == "disabled":
        found.append((
            "fail", f"{name} ECC disabled on a GPU whose memory has ECC",
            f"enable ECC (nvidia-smi -i {name.removeprefix('GPU')} -e 1), then {reset}",
        ))  # fmt: skip
    if health.ecc_mode_pending and gpu.ecc_mode and health.ecc_mode_pending != gpu.ecc_mode:
        found.append(("warn", f"{name} ECC mode changes to {health.ecc_mode_pending} at the "
                              "next reset", reset))  # fmt: skip
    if volatile := _uncorrectable(health.ecc_volatile):
        found.append((
            "fail", f"{name} {volatile} uncorrectable ECC error(s) since the driver loaded",
            f"drain the node, {reset}; RMA {name} if they recur",
        ))  # fmt: skip
    elif aggregate := _uncorrectable(health.ecc_aggregate):
        found.append((
            "warn", f"{name} {aggregate} uncorrectable ECC error(s) in its life",
            f"watch {name}: RMA it if its remapped rows run out",
        ))  # fmt: skip
    return found


def _memory_problems(name: str, gpu: SmiGpu, ecc_expected: bool) -> list[Problem]:
    health = gpu.health
    assert health is not None
    index = name.removeprefix("GPU")
    reset = f"reset {name} (nvidia-smi -r -i {index}) while it is idle"
    found = _ecc_problems(name, gpu, ecc_expected, reset)
    if _yes(health.retired_pages.pending):
        found.append(pending_remap_problem(name, index, "has retired pages pending",
                                           "pending page retirement"))  # fmt: skip
    rows = health.remapped_rows
    if _yes(rows.failure):
        found.append(remap_failure_problem(name, "row remapping failed (spare rows used up)"))
    if _yes(rows.pending):
        found.append(pending_remap_problem(
            name, index, f"row remap pending (uncorrectable: {rows.uncorrectable}, "
            f"correctable: {rows.correctable})", "pending row remap"))  # fmt: skip
    if exhausted := rows.histogram.get("none"):
        found.append((
            "warn", f"{name} {exhausted} memory bank(s) without a spare row left",
            f"plan to RMA {name}: the next error in those banks cannot be remapped",
        ))  # fmt: skip
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
        found.append((
            "fail", f"{name} recovery action {health.recovery_action}",
            f"{health.recovery_action.lower()} {name} as NVML asks",
        ))  # fmt: skip
    return found


def _read_and_missing(gpu: SmiGpu) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What the GPU's output let the check judge (as sentences), and the fields it lacked."""
    health = gpu.health
    assert health is not None
    read: list[str] = []
    missing: list[str] = []
    volatile, aggregate = _uncorrectable(health.ecc_volatile), _uncorrectable(health.ecc_aggregate)
    mode = (gpu.ecc_mode or "").lower()
    if mode == "disabled":
        read.append("ECC disabled (no error counts kept)")
    elif volatile is not None or aggregate is not None:
        counts = " and ".join(
            f"{n} {label}"
            for n, label in ((volatile, "since the driver loaded"), (aggregate, "in its life"))
            if n is not None
        )
        read.append(f"ECC {mode or 'mode not printed'}, uncorrectable errors {counts}")
    else:
        missing.append("ECC mode and uncorrectable counts" if not mode
                       else "uncorrectable ECC counts (N/A)")  # fmt: skip
    rows, pages = health.remapped_rows, health.retired_pages
    if rows.pending is not None or rows.failure is not None:
        read.append(f"remapped rows pending {rows.pending or 'not printed'}, failure "
                    f"{rows.failure or 'not printed'}")  # fmt: skip
    if pages.pending is not None:
        read.append(f"retired pages pending {pages.pending}")
    if rows.pending is None and rows.failure is None and pages.pending is None:
        missing.append("retired pages or remapped rows state")
    return tuple(read), tuple(missing)


def memory_checks(judge: JudgeState, host: HostEvidence) -> None:
    parsed = host.health.smi.latest
    if parsed is None:
        missing_probe(judge, host, "health.memory", "nvidia-smi -q -x output", "nvidia-smi-query")
        return
    compute = compute_of(host.model.model if host.model else None)
    problems: list[Problem] = []
    read: dict[str, tuple[str, ...]] = {}
    missing: dict[str, tuple[str, ...]] = {}
    for name, gpu in health_gpus(parsed):
        problems += _memory_problems(name, gpu, bool(compute and compute.ecc))
        read[name], lacked = _read_and_missing(gpu)
        if lacked:
            missing[name] = lacked
    for who, fields in grouped(missing, named=True):
        problems.append(("unjudged", f"{who} printed no {' and no '.join(fields)}: "
                         "nothing to judge them by", "capture nvidia-smi -q -x as root with the "
                         "GPU out of MIG mode; a GPU that does not report them cannot be "
                         "judged on them"))  # fmt: skip
    if not read:
        problems.append(("unjudged", "nvidia-smi -q listed no GPU with health fields", None))
    passed = "; ".join(f"{who}: {', '.join(sentences)}" for who, sentences in grouped(read))
    add_check(judge, host, "health.memory", problems, passed, parsed.source(),
              reference=MEMORY_REFERENCE)  # fmt: skip
