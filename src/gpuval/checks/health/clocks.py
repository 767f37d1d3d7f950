"""Clocks and heat: slowdown reasons and their counters over the run, temperatures against the
slowdown threshold, power limit against the default, persistence and MIG modes."""

from __future__ import annotations

from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check, grouped, health_gpus
from gpuval.checks.model import Status
from gpuval.evidence import HostEvidence, Parsed
from gpuval.evidence.model import BeforeAfter
from gpuval.records.nvidia_smi import NvidiaSmiRun, SmiGpu

# Slowdown reasons (nvidia-smi -q -x names) that mean the hardware protects itself.
HW_SLOWDOWNS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
SW_SLOWDOWNS = ("sw_thermal_slowdown", "sync_boost")


def _temperature_rooms(gpu: SmiGpu) -> list[tuple[float, float, str]]:
    """(value, threshold, label) for each form of the slowdown margin the GPU printed."""
    t = gpu.health.temperature if gpu.health else None
    if t is None:
        return []
    # 535+ print margins below T.Limit; the slowdown threshold is itself a margin.
    pairs = [(t.tlimit_c, t.slowdown_tlimit_c, "T.Limit margin"),
             (None if t.gpu_c is None or t.slowdown_c is None else t.slowdown_c - t.gpu_c, 0.0,
              "below slowdown")]  # fmt: skip
    return [(v, th, label) for v, th, label in pairs if v is not None and th is not None]


def _temperature_problems(name: str, gpu: SmiGpu, margin_c: float) -> list[Problem]:
    action = f"check the cooling of {name} (airflow, fans, inlet temperature)"
    for value, threshold, label in _temperature_rooms(gpu):
        room = value - threshold
        if room <= 0:
            return [
                (
                    "fail",
                    f"{name} at its slowdown temperature ({label} {value:g} °C, "
                    f"slowdown at {threshold:g})",
                    action,
                )
            ]
        if room < margin_c:
            return [("warn", f"{name} {room:g} °C from its slowdown temperature", action)]
    return []


def _missing_fields(gpu: SmiGpu) -> tuple[str, ...]:
    """The fields this check judges that the GPU's output did not print (or printed N/A)."""
    health = gpu.health
    assert health is not None
    t, power = health.temperature, health.power
    reasons = health.clock_event_reasons.values()
    missing = [
        label for label, absent in (
            ("slowdown reasons", all(v is None for v in reasons)),
            ("GPU temperature", t is None or t.gpu_c is None),
            ("slowdown temperature", not _temperature_rooms(gpu)),
            ("power limit and its default",
             (power.limit_w or power.enforced_limit_w) is None or power.default_limit_w is None),
            ("persistence mode", gpu.persistence_mode is None),
        ) if absent
    ]  # fmt: skip
    return tuple(missing)


def _span(values: list[float], unit: str) -> str:
    low, high = min(values), max(values)
    return f"{low:g} {unit}" if low == high else f"{low:g}-{high:g} {unit}"


def _what_was_read(gpus: list[SmiGpu], counted: bool) -> str:
    """The pass reason: what the GPUs printed that the check judged."""
    healths = [gpu.health for gpu in gpus if gpu.health is not None]
    temperatures = [h.temperature.gpu_c for h in healths if h.temperature and h.temperature.gpu_c
                    is not None]  # fmt: skip
    rooms = [value - threshold for gpu in gpus for value, threshold, _ in _temperature_rooms(gpu)]
    limits = [limit for h in healths if (limit := h.power.enforced_limit_w or h.power.limit_w)]
    modes = sorted({gpu.persistence_mode for gpu in gpus if gpu.persistence_mode})
    others = sorted({reason for h in healths for reason, v in h.clock_event_reasons.items()
                     if (v or "").lower() == "active"})  # fmt: skip
    parts = [f"{len(gpus)} GPU(s): slowdown reasons read, no hardware or thermal slowdown active"
             + (f" (active: {', '.join(others)})" if others else "")
             + (", their counters did not grow during the run" if counted else "")]  # fmt: skip
    if temperatures:
        room = f", at least {min(rooms):g} °C from slowdown" if rooms else ""
        parts.append(f"{_span(temperatures, '°C')}{room}")
    if limits:
        parts.append(f"power limits {_span(limits, 'W')}, at their defaults")
    if modes:
        parts.append(f"persistence mode {'/'.join(modes)}")
    return "; ".join(parts)


def _counter_growth(before: Parsed[NvidiaSmiRun] | None, after: Parsed[NvidiaSmiRun] | None,
                    ) -> dict[tuple[str, str], float]:  # fmt: skip
    """(GPU, reason) -> microseconds spent in that slowdown between the two captures."""
    if before is None or after is None:
        return {}
    first = {name: gpu.health.clock_event_reason_counters_us for name, gpu in health_gpus(before)
             if gpu.health}  # fmt: skip
    grown = {}
    for name, gpu in health_gpus(after):
        for reason, value in (gpu.health.clock_event_reason_counters_us if gpu.health else {}
                              ).items():  # fmt: skip
            start = first.get(name, {}).get(reason)
            if value is not None and start is not None and value > start:
                grown[(name, reason)] = value - start
    return grown


def clock_checks(judge: JudgeState, host: HostEvidence) -> None:
    smi: BeforeAfter[NvidiaSmiRun] = host.health.smi
    parsed = smi.latest
    if parsed is None:
        return  # memory_checks already says the output is missing
    problems: list[Problem] = []
    margin = judge.thresholds.temperature_margin_warn_c
    for name, gpu in health_gpus(parsed):
        health = gpu.health
        assert health is not None
        active = [r for r, v in health.clock_event_reasons.items() if (v or "").lower() == "active"]
        for reason in active:
            if reason in HW_SLOWDOWNS:
                problems.append(
                    (
                        "fail",
                        f"{name} {reason} active",
                        f"check the cooling and power supply of {name}",
                    )
                )
            elif reason in SW_SLOWDOWNS:
                problems.append(("warn", f"{name} {reason} active",
                                 f"check the cooling of {name}" if "thermal" in reason else
                                 "sync boost holds the group to its slowest GPU"))  # fmt: skip
        problems += _temperature_problems(name, gpu, margin)
        power = health.power
        for limit, label in (
            (power.limit_w, "power limit"),
            (power.enforced_limit_w, "enforced power limit"),
        ):
            if limit and power.default_limit_w and limit < power.default_limit_w - 1:
                problems.append(("warn", f"{name} {label} {limit:g} W below its default "
                                         f"{power.default_limit_w:g} W",
                                 f"restore it: nvidia-smi -i {name.removeprefix('GPU')} -pl "
                                 f"{power.default_limit_w:g}"))  # fmt: skip
        if (gpu.persistence_mode or "").lower() == "disabled":
            problems.append(
                (
                    "warn",
                    f"{name} persistence mode off",
                    "run nvidia-persistenced (or nvidia-smi -pm 1)",
                )
            )
        if (gpu.mig_mode or "").lower() == "enabled" or (health.mig_mode_pending or "").lower(
                ) == "enabled":  # fmt: skip
            problems.append(
                (
                    "warn",
                    f"{name} MIG mode enabled: whole-GPU benchmarks see MIG instances",
                    f"disable MIG (nvidia-smi -i "
                    f"{name.removeprefix('GPU')} -mig 0) unless it is meant",
                )
            )
    for (name, reason), micros in sorted(_counter_growth(smi.before, smi.after).items()):
        if reason in HW_SLOWDOWNS or reason == "sw_thermal_slowdown":
            status: Status = "fail" if reason in HW_SLOWDOWNS else "warn"
            problems.append(
                (
                    status,
                    f"{name} spent {micros / 1e6:.1f} s in {reason} during the run",
                    f"check the cooling and power supply of {name}",
                )
            )
    gpus = dict(health_gpus(parsed))
    missing = {name: lacked for name, gpu in gpus.items() if (lacked := _missing_fields(gpu))}
    for who, fields in grouped(missing, named=True):
        problems.append((
            "unjudged", f"{who} printed no {', no '.join(fields)}: not judged on them",
            "capture nvidia-smi -q -x with a driver that prints them",
        ))  # fmt: skip
    if not gpus:
        problems.append(("unjudged", "nvidia-smi -q listed no GPU with health fields", None))
    # The counters were compared only where both captures printed them.
    counted = all(
        any(gpu.health and gpu.health.clock_event_reason_counters_us
            for _, gpu in health_gpus(capture))
        for capture in (smi.before, smi.after) if capture is not None
    ) and smi.before is not None and smi.after is not None  # fmt: skip
    add_check(judge, host, "health.clocks", problems,
              _what_was_read(list(gpus.values()), counted), parsed.source())  # fmt: skip
