"""gpuval's own Slurm allocation, in which srun starts every multi-node step of a run whose
launcher is Slurm (`gpuval_launcher: slurm`, gpuval.plan.mpirun.srun_command).

`salloc --no-shell` asks for the run's nodes by name and returns as soon as Slurm grants them
(https://slurm.schedmd.com/salloc.html): whole nodes (`--exclusive`), for the run's time limit
(`--time`: gpuval plan's prediction with the batch job's margin, when given), in the partition
and QOS the user names, and at most `--immediate` seconds of waiting, so that a busy cluster
fails the request instead of holding the run. A node Slurm cannot give now (drained, down, held
by a job) is left out of the request and reported not tested, as is a node the granted job
lacks; never passed. `--no-kill`: a node that fails or is set down during the run leaves the
allocation alone, which keeps the others for the rest of the run; without it Slurm ends the
whole job, and every later step of the healthy nodes fails ("Slurm job N has expired",
measured on Slurm 22.05). `scancel` releases the allocation at the end of the run.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from gpuval.slurm.batch import time_limit_minutes
from gpuval.slurm.nodes import SlurmNode, expand_hostlist
from gpuval.slurm.scontrol import SCONTROL, TIMEOUT_S, SlurmCommandError, printable

SALLOC = "salloc"
SCANCEL = "scancel"
DEFAULT_WAIT_S = 60
# Base states of a node a job holds: an exclusive request cannot have it now.
BUSY_STATES = frozenset({"ALLOCATED", "MIXED", "COMPLETING", "RESERVED"})
_GRANTED = re.compile(r"Granted job allocation (\d+)")
_NODELIST = re.compile(r"(?:^|\s)NodeList=(\S+)")


@dataclass(frozen=True)
class AllocationRequest:
    nodes: tuple[str, ...]  # Slurm node names
    job_name: str
    partition: str | None = None
    qos: str | None = None
    time_minutes: int | None = None
    gpus_per_node: int | None = None
    wait_s: int = DEFAULT_WAIT_S


@dataclass(frozen=True)
class Allocation:
    job_id: str
    nodes: tuple[str, ...]  # what Slurm granted
    not_tested: dict[str, str] = field(default_factory=dict)  # node -> why it is not in it


def unusable_nodes(wanted: Sequence[str], known: Sequence[SlurmNode]) -> dict[str, str]:
    """The wanted nodes an exclusive allocation cannot get now, each with why."""
    by_name = {node.name: node for node in known}
    reasons = {}
    for name in wanted:
        node = by_name.get(name)
        if node is None:
            reasons[name] = "not a node of this Slurm cluster"
        elif not node.available or BUSY_STATES.intersection(node.states[:1]):
            detail = f" ({node.reason})" if node.reason else ""
            reasons[name] = f"{'+'.join(node.states)}{detail}"
    return reasons


def time_limit(time_minutes: int | None, predicted_s: float | None) -> int | None:
    """The request's `--time`: the minutes given, else gpuval plan's prediction with the batch
    job's margin (time_limit_minutes), else none (the partition's limit)."""
    if time_minutes:
        return time_minutes
    return time_limit_minutes(predicted_s) if predicted_s else None


def salloc_command(request: AllocationRequest) -> list[str]:
    command = [
        SALLOC,
        "--no-shell",
        f"--job-name={request.job_name}",
        f"--nodelist={','.join(request.nodes)}",
        f"--nodes={len(request.nodes)}",
        "--exclusive",
        "--no-kill",
        f"--immediate={request.wait_s}",
    ]
    if request.partition:
        command.append(f"--partition={request.partition}")
    if request.qos:
        command.append(f"--qos={request.qos}")
    if request.time_minutes:
        command.append(f"--time={request.time_minutes}")
    if request.gpus_per_node:
        command.append(f"--gpus-per-node={request.gpus_per_node}")
    return command


def release_command(job_id: str) -> list[str]:
    return [SCANCEL, job_id]


def granted_job(said: str) -> str:
    """The job id of salloc's "Granted job allocation N" (on its standard error)."""
    found = _GRANTED.search(said)
    if not found:
        raise SlurmCommandError(f"salloc granted no allocation: {said.strip() or 'no output'}")
    return found.group(1)


def _run(command: Sequence[str], timeout: float) -> str:
    """Standard output and error of one Slurm command, or SlurmCommandError."""
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as problem:
        raise SlurmCommandError(f"`{printable(command)}`: {problem}") from None
    said = f"{done.stdout}{done.stderr}"
    if done.returncode != 0:
        raise SlurmCommandError(f"`{printable(command)}` failed: {said.strip()}", said)
    return said


def job_nodes(job_id: str) -> list[str]:
    """The nodes the job holds now (`scontrol show job`'s NodeList), which a node that left it
    during the run is no longer among."""
    command = [SCONTROL, "--oneliner", "show", "job", job_id]
    found = _NODELIST.search(_run(command, TIMEOUT_S))
    if not found or found.group(1) in ("", "(null)"):
        raise SlurmCommandError(f"`{printable(command)}`: the job holds no nodes")
    return expand_hostlist(found.group(1))


def allocate(request: AllocationRequest, known: Sequence[SlurmNode]) -> Allocation:
    """Ask Slurm for the usable nodes of the request; the others are not tested."""
    not_tested = unusable_nodes(request.nodes, known)
    usable = tuple(name for name in request.nodes if name not in not_tested)
    if not usable:
        raise SlurmCommandError(f"no node Slurm can give now: {not_tested}")
    asked = replace(request, nodes=usable)
    job_id = granted_job(_run(salloc_command(asked), asked.wait_s + TIMEOUT_S))
    granted = job_nodes(job_id)
    for name in usable:
        if name not in granted:
            not_tested[name] = f"not in the allocation Slurm granted (job {job_id})"
    return Allocation(job_id, tuple(n for n in usable if n in granted), not_tested)


def release(job_id: str) -> None:
    _run(release_command(job_id), TIMEOUT_S)
