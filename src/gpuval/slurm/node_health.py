"""`gpuval node-health`, the program Slurm runs on each node as its HealthCheckProgram: the
passive health probes (gpuval.plan.health_probes, the table the health role captures) run on
this node into a private run folder, raw file and sidecar each, and are judged there with
gpuval's node health checks, as the report judges them; with Slurm (`slurm_actions`) a failing
node is drained and a node gpuval drained that passes again is resumed (gpuval.slurm.drain).

slurmd kills the program after 60 s (https://slurm.schedmd.com/slurm.conf.html#OPT_HealthCheckProgram),
so it works to a budget: the probes run at the same time, each killed (its whole process group)
after PROBE_SHARE of the budget; the rest is for judging and scontrol.

Counters judged by their growth (RDMA port errors, NVLink errors, slowdown counters) need two
captures: each run's captures are kept in a state folder and are the next run's "before" (the
health role's first capture), so growth is judged over one HealthCheckInterval. The first run
on a node has none: those checks are unjudged, and so is the node, until the next run.

A probe whose program or path is missing is recorded as skipped. Without nvidia-smi the GPUs
cannot be judged: the node is unjudged, never passed (and never drained for it).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuval.checks.health import health_subject
from gpuval.checks.model import Check, Status, at_least_as_bad, worst
from gpuval.files.atomic import write_json
from gpuval.judgement import Judging, judge_run_folder
from gpuval.judgement.model import RunJudgement
from gpuval.plan.health_probes import PROBE_SHARE, HealthProbe, ProbePaths, health_probes
from gpuval.plan.steps import AFTER_SUFFIX, HEALTH_PHASE, after_step
from gpuval.runfolder import read_run_folder
from gpuval.slurm import drain
from gpuval.slurm.nodes import SlurmNode

SIDECAR_SCHEMA_VERSION = 1
# Where system tools (lspci, ofed_info) live when slurmd's PATH lacks them.
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")
GPU_PROGRAM = "nvidia-smi"  # without it no GPU check can be made


@dataclass(frozen=True)
class ProbeRun:
    name: str
    skipped: str | None  # why it did not run
    exit_code: int | None  # None: skipped, or killed at its time limit
    timed_out: bool


@dataclass(frozen=True)
class NodeHealth:
    """This node's health checks and the verdict on them; `judgement`: the run's judgement kept
    to those checks (what gpuval.slurm.drain reads)."""

    host: str
    verdict: Status
    checks: list[Check]
    probes: list[ProbeRun]
    judgement: RunJudgement
    unreadable: list[Check]  # other checks of its probes that did not pass (a parse error)

    @property
    def problems(self) -> list[str]:
        """One line per check that did not pass, and per missing GPU tool."""
        lines = [
            f"{check.check_id}: {check.status}: {check.reason}"
            for check in self.checks + self.unreadable
            if check.status not in ("pass", "warn")
        ]
        lines += [f"{p.name}: unjudged: {p.skipped}" for p in self.probes if _gpu_missing(p)]
        return lines


def _gpu_missing(probe: ProbeRun) -> bool:
    return bool(probe.skipped and probe.skipped.startswith(f"{GPU_PROGRAM} not found"))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _missing(requires: Sequence[str]) -> str | None:
    """The first requirement this node lacks (a program on PATH or in SBIN, or a path glob)."""
    search = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    for wanted in requires:
        found = glob.glob(wanted) if "/" in wanted else shutil.which(wanted, path=search)
        if not found:
            return wanted
    return None


def step_name(probe: HealthProbe) -> str:
    """A probe the health role captures twice is this run's second capture (its -after step)."""
    return after_step(probe.name) if "after" in probe.stages else probe.name


def _argv(probe: HealthProbe) -> list[str]:
    if isinstance(probe.command, tuple):
        return list(probe.command)
    return ["/bin/sh", "-c", probe.command]


def _sidecar(probe: HealthProbe, host: str, timeout_s: float, skipped: str | None
             ) -> dict[str, Any]:  # fmt: skip
    """The run-folder contract's sidecar, as the capture module writes it before a start."""
    command = probe.command if isinstance(probe.command, str) else " ".join(probe.command)
    name = step_name(probe)
    return {
        "schema_version": SIDECAR_SCHEMA_VERSION, "name": name, "host": host,
        "phase": HEALTH_PHASE, "raw": None if skipped else f"{name}.{probe.raw_ext}",
        "command": command, "tool": probe.tool, "cwd": os.getcwd(), "env": {}, "exit_code": None,
        "timed_out": False, "timeout_s": timeout_s, "started_at": None, "ended_at": None,
        "duration_s": None, "skipped": skipped,
    }  # fmt: skip


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the probe's whole process group (read-only queries: nothing to clean up)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def run_probe(probe: HealthProbe, host_dir: Path, host: str, timeout_s: float) -> ProbeRun:
    """Run one probe into HOST_DIR/<name>.<ext> with its sidecar; killed after timeout_s."""
    lacking = _missing(probe.requires)
    skipped = f"{lacking} not found on this host" if lacking else None
    sidecar = _sidecar(probe, host, timeout_s, skipped)
    name = sidecar["name"]
    sidecar_path = host_dir / f"{name}.meta.json"
    write_json(sidecar_path, sidecar)
    if skipped:
        return ProbeRun(name, skipped, None, False)
    started, sidecar["started_at"] = time.monotonic(), _now()
    write_json(sidecar_path, sidecar)
    exit_code: int | None
    timed_out = False
    with open(host_dir / sidecar["raw"], "wb") as raw:
        process = subprocess.Popen(
            _argv(probe), stdin=subprocess.DEVNULL, stdout=raw, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a timeout kills all of it
        )  # fmt: skip
        try:
            code = process.wait(timeout=timeout_s)
            exit_code = 128 - code if code < 0 else code  # killed by signal N: 128 + N
        except subprocess.TimeoutExpired:
            _kill_group(process)
            exit_code, timed_out = None, True
    sidecar |= {
        "exit_code": exit_code, "timed_out": timed_out, "ended_at": _now(),
        "duration_s": round(time.monotonic() - started, 3),
    }  # fmt: skip
    write_json(sidecar_path, sidecar)
    return ProbeRun(name, None, exit_code, timed_out)


def run_probes(run_dir: Path, host: str, paths: ProbePaths, budget_s: float) -> list[ProbeRun]:
    """Every probe at once into RUN_DIR/raw/HOST/, each with PROBE_SHARE of the budget."""
    host_dir = run_dir / "raw" / host
    host_dir.mkdir(parents=True, exist_ok=True)
    probes = health_probes(paths)
    timeout_s = round(budget_s * PROBE_SHARE, 1)
    with ThreadPoolExecutor(max_workers=len(probes)) as pool:
        return list(pool.map(lambda p: run_probe(p, host_dir, host, timeout_s), probes))


def carry_previous(state_dir: Path, host_dir: Path) -> bool:
    """The previous run's captures (kept in STATE_DIR) as this run's "before" steps; whether
    there were any. A state that cannot be read is no capture: growth stays unjudged."""
    sidecars = sorted(state_dir.glob(f"*{AFTER_SUFFIX}.meta.json")) if state_dir.is_dir() else []
    carried = False
    for path in sidecars:
        try:
            sidecar = json.loads(path.read_text(encoding="utf-8"))
            name = str(sidecar["name"]).removesuffix(AFTER_SUFFIX)
            if sidecar.get("raw"):
                ext = str(sidecar["raw"]).removeprefix(f"{sidecar['name']}.")
                shutil.copyfile(state_dir / sidecar["raw"], host_dir / f"{name}.{ext}")
                sidecar["raw"] = f"{name}.{ext}"
        except (OSError, ValueError, KeyError, TypeError):
            continue
        write_json(host_dir / f"{name}.meta.json", sidecar | {"name": name})
        carried = True
    return carried


def keep_for_next(host_dir: Path, state_dir: Path) -> None:
    """This run's second captures, for the next run: the folder replaced whole."""
    fresh = state_dir.with_name(state_dir.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True, mode=0o700)
    for path in host_dir.glob(f"*{AFTER_SUFFIX}.*"):
        shutil.copyfile(path, fresh / path.name)
    shutil.rmtree(state_dir, ignore_errors=True)
    fresh.rename(state_dir)


def judge_node(run_dir: Path, host: str, probes: list[ProbeRun], judging: Judging | None = None
               ) -> NodeHealth:  # fmt: skip
    """This node's checks of the node health table, judged as the report judges them."""
    judgement = judge_run_folder(read_run_folder(run_dir), judging or Judging(), _now())
    mine = [c for c in judgement.checks if c.host == host]
    checks = [c for c in mine if health_subject(c.check_id)]
    # Another check of a probe failing (its output unreadable) is no evidence against the node,
    # nor for it: the node is unjudged.
    unreadable = [c for c in mine if c not in checks and at_least_as_bad(c.status, "unjudged")]
    statuses = [c.status for c in checks]
    if unreadable or any(_gpu_missing(p) for p in probes):
        statuses.append("unjudged")
    verdict = worst(statuses) if statuses else "unjudged"  # no check: nothing shows it healthy
    kept = dataclasses.replace(judgement, checks=checks, host_names=[host])
    return NodeHealth(host, verdict, checks, probes, kept, unreadable)


def slurm_actions(health: NodeHealth, node: str, current: SlurmNode | None, prefix: str
                  ) -> list[drain.NodeAction]:  # fmt: skip
    """What the verdict does to the Slurm node: a fail drains it (unless Slurm holds it for a
    reason gpuval did not write); a pass resumes it when gpuval drained it for a check that
    passes now; unjudged or error changes nothing (no evidence either way)."""
    if health.verdict == "fail":
        known = {node: current} if current else {}
        return drain.drain_actions(health.judgement, {health.host: node}, known, prefix)
    if health.verdict in ("pass", "warn") and current is not None:
        keep = drain.not_rechecked(health.judgement, {health.host: current.reason}, prefix)
        keep |= drain.not_passed(health.judgement)
        held = {node: keep[health.host]} if health.host in keep else {}
        return drain.resume_actions([current], held, prefix)
    note = f"{health.verdict}: left as it is (no evidence for or against the node)"
    return [drain.NodeAction(health.host, node, False, note=note)]
