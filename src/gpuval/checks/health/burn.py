"""GPU burn: the GEMM burn per GPU, against the catalog's dense peak and the node's siblings."""

from __future__ import annotations

import statistics

from gpuval.catalog.health import compute_of
from gpuval.checks.context import JudgeState
from gpuval.checks.health.clocks import HW_SLOWDOWNS
from gpuval.checks.health.common import Problem, add_check
from gpuval.checks.model import Check, Status
from gpuval.checks.wording import percent
from gpuval.evidence import HostEvidence
from gpuval.records.health import (
    GemmBurnRun,
)


def _burn_problems(judge: JudgeState, host: HostEvidence, run: GemmBurnRun,
                   ) -> dict[int, list[Problem]]:  # fmt: skip
    t = judge.thresholds
    found: dict[int, list[Problem]] = {gpu.index: [] for gpu in run.gpus}
    measured = [g.tflops for g in run.gpus if g.tflops and not g.error]
    median = statistics.median(measured) if len(measured) >= 2 else None
    compute = compute_of(host.model.model if host.model else None)
    peak = compute.dense_tflops.get(run.dtype or "") if compute else None
    for gpu in run.gpus:
        name, problems = f"GPU{gpu.index}", found[gpu.index]
        drain = f"drain the node; run DCGM diagnostics (level 3) on {name}, RMA it if they fail"
        if gpu.error:
            problems.append(("fail", f"{name} could not be burnt: {gpu.error}", drain))
            continue
        if gpu.correct is False:
            why = (
                f"{gpu.mismatches} product(s) differed from the first"
                if gpu.mismatches
                else f"reference block off by {gpu.max_abs_error:.2g} (relative)"
            )
            problems.append(("fail", f"{name} computed wrong results: {why}", drain))
        if gpu.tflops is not None and peak:
            fraction = gpu.tflops / peak
            status: Status = (
                "pass"
                if fraction >= t.burn_pass_fraction
                else "warn"
                if fraction >= t.burn_fail_fraction
                else "fail"
            )
            if status != "pass":
                problems.append(
                    (
                        status,
                        f"{name} {gpu.tflops:.0f} TFLOPS = {percent(fraction)}"
                        f" of the {peak:g} dense {run.dtype} peak",
                        f"check the clocks, power limit and cooling of {name}",
                    )
                )
        if gpu.tflops is not None and median:
            fraction = gpu.tflops / median
            if fraction < t.burn_sibling_warn_fraction:
                problems.append(("fail" if fraction < t.burn_sibling_fail_fraction else "warn",
                                 f"{name} {gpu.tflops:.0f} TFLOPS = {percent(fraction)} of its "
                                 f"siblings' median {median:.0f}",
                                 f"compare the clocks and temperature of {name} with its "
                                 "siblings"))  # fmt: skip
        for sample in gpu.samples:
            hard = [r for r in sample.throttle if r in HW_SLOWDOWNS]
            soft = [r for r in sample.throttle if r == "sw_thermal_slowdown"]
            if hard or soft:
                problems.append(
                    (
                        "fail" if hard else "warn",
                        f"{name} {', '.join(hard or soft)} at {sample.elapsed_s:g} s "
                        f"of the burn ({sample.temperature_c or '?'} °C, "
                        f"{sample.sm_clock_mhz or '?'} MHz)",
                        f"check the cooling and power supply of {name}",
                    )
                )
                break
    return found


def burn_checks(judge: JudgeState, host: HostEvidence) -> None:
    for parsed in host.health.burn:
        run = parsed.record
        if run.error or not run.gpus:
            judge.add(Check(
                check_id="health.burn", host=host.name, category="health", status="fail",
                source=parsed.source(), reason=f"the GEMM burn did not run: "
                f"{run.error or 'no GPU listed'}",
                action="check the node's driver and torch's CUDA build (python -c 'import "
                "torch; print(torch.cuda.is_available())')",
            ))  # fmt: skip
            continue
        compute = compute_of(host.model.model if host.model else None)
        peak = compute.dense_tflops.get(run.dtype or "") if compute else None
        problems = _burn_problems(judge, host, run)
        for gpu in run.gpus:
            found = problems[gpu.index]
            if run.device_type != "cuda":
                found.append(("unjudged", f"the burn ran on {run.device_type}, not a GPU", None))
            elif not peak and not found:
                found.append(("unjudged", f"GPU{gpu.index} {gpu.tflops} TFLOPS: no dense "
                                          f"{run.dtype} peak in the catalog for "
                                          f"{host.model.model if host.model else 'this GPU'}",
                              None))  # fmt: skip
            hottest = max((s.temperature_c for s in gpu.samples if s.temperature_c), default=None)
            add_check(
                judge,
                host,
                f"health.burn.GPU{gpu.index}",
                found,
                f"GPU{gpu.index} {gpu.tflops or 0:.0f} TFLOPS {run.dtype}, results checked, no "
                f"slowdown{f', up to {hottest:g} °C' if hottest else ''}",
                parsed.source(),
                measured=gpu.tflops,
                reference=peak,
                unit="TFLOPS",
            )
