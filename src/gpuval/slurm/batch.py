"""An acceptance run as a Slurm batch job (`gpuval run --slurm`): the sbatch command line, the
job script, and the call to sbatch.

The job asks for whole nodes at the lowest priority the site allows, so that it never takes
nodes from users (https://slurm.schedmd.com/sbatch.html):

- `--nodes=MIN-MAX`: Slurm starts it with as many nodes of the range as it can "without
  delaying the initiation of the job", that is on the nodes idle when it starts;
- `--exclusive`: no other job shares a node while it is measured;
- `--nice`: subtracted from the job's priority, behind users' jobs; `--qos`: a preemptible QOS
  (a scavenger QOS) where the site has one;
- `--no-requeue`: a preempted run is judged as stopped (a requeued one would restart into the
  same run folder);
- `--signal=B:TERM@STOP_NOTICE_S`: the batch shell, which is gpuval (the script `exec`s it), is
  told to stop before the time limit, long enough before it to stop ansible-playbook, collect
  what was measured and judge it (gpuval.run.launch).

The script writes the run's inventory when the job starts: the slurm inventory plugin with
`nodelist:` the allocation's nodes ($SLURM_JOB_NODELIST), then runs `gpuval run` on it into
the run folder named at submission, in the reports folder the submitter uses (a shared file
system: the batch script runs on the allocation's first node), with the job as the run's
allocation (`gpuval_slurm_jobid`: with `gpuval_launcher: slurm` its srun steps run in this job,
which the slurm_allocation role then neither asks for nor cancels).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuval.slurm.scontrol import SlurmCommandError, run_scontrol

SBATCH = "sbatch"
# launch.STOP_GRACE_S (30 s) + COLLECT_TIMEOUT_S (300 s) + 30 s to judge and write the report.
STOP_NOTICE_S = 360
TIME_MARGIN = 1.25  # over the predicted duration (gpuval plan)
# Slurm subtracts it from the job's priority; 10000 is above the default PriorityWeight* (each
# 0 to 1000s: https://slurm.schedmd.com/priority_multifactor.html), so the job queues behind
# users' jobs unless the site weighs priority in larger units (then pass --nice).
DEFAULT_NICE = 10000
JOB_FOLDER = "slurm"  # inside the run folder: the script, the inventory, Slurm's output
# The keys of a slurm inventory that choose the nodes: the allocation's node list replaces them.
NODE_CHOICE_KEYS = ("partition", "nodelist", "reservation")


@dataclass(frozen=True)
class BatchJob:
    """What the job asks Slurm for, and where its files go."""

    run_dir: Path  # absolute: the run folder the job's `gpuval run` writes
    workdir: Path  # the job's working folder (the checkout: its ansible.cfg and playbooks)
    partition: str
    nodes: str  # Slurm's N or MIN-MAX
    time_minutes: int
    qos: str | None = None
    reservation: str | None = None
    nice: int = DEFAULT_NICE

    @property
    def folder(self) -> Path:
        return self.run_dir / JOB_FOLDER

    @property
    def script_path(self) -> Path:
        return self.folder / "job.sh"

    @property
    def inventory_path(self) -> Path:
        return self.folder / "allocation.slurm.yml"  # the plugin reads only *slurm.yml files


def time_limit_minutes(predicted_s: float) -> int:
    """The job's time limit: the predicted run and a quarter more, and the stop notice."""
    return max(1, math.ceil((predicted_s * TIME_MARGIN + STOP_NOTICE_S) / 60))


def node_range(available: int) -> str:
    """`--nodes` for a partition of `available` nodes in service: any number of them, at
    least one."""
    return "1" if available <= 1 else f"1-{available}"


def sbatch_command(job: BatchJob) -> list[str]:
    words = [
        SBATCH, "--parsable", f"--job-name=gpuval-{job.run_dir.name}",
        f"--partition={job.partition}", f"--nodes={job.nodes}", "--exclusive",
        f"--time={job.time_minutes}", f"--nice={job.nice}", "--no-requeue",
        f"--signal=B:TERM@{STOP_NOTICE_S}", f"--chdir={job.workdir}",
        f"--output={job.folder / 'slurm-%j.out'}",
    ]  # fmt: skip
    if job.qos:
        words.append(f"--qos={job.qos}")
    if job.reservation:
        words.append(f"--reservation={job.reservation}")
    return [*words, str(job.script_path)]


def allocation_inventory(base: Mapping[str, Any] | None, plugin: str) -> dict[str, Any]:
    """The slurm inventory of the job, without its node list (the job adds it): `base` (the
    submitter's slurm inventory: its features, compose, user) less the keys that chose nodes."""
    settings = {k: v for k, v in (base or {}).items() if k not in NODE_CHOICE_KEYS}
    settings.setdefault("plugin", plugin)
    return settings


def job_script(
    job: BatchJob, inventory: Mapping[str, Any], gpuval: Sequence[str], run_args: Sequence[str],
    exports: Mapping[str, str] | None = None,
) -> str:  # fmt: skip
    """The batch script: write the allocation's inventory, then `exec gpuval run` on it;
    `exports`: environment variables the job sets first (ANSIBLE_CONFIG)."""
    run = [
        *gpuval, "run", "-i", str(job.inventory_path), "--run-id", job.run_dir.name,
        "--reports", str(job.run_dir.parent), *run_args,
    ]  # fmt: skip
    settings = yaml.safe_dump(dict(inventory), sort_keys=False, default_flow_style=False)
    return "\n".join([
        "#!/bin/bash",
        f"# gpuval acceptance run {job.run_dir.name}, submitted by `gpuval run --slurm`: it",
        "# validates this job's nodes as `gpuval run` does, listed by the slurm inventory plugin",
        "# from $SLURM_JOB_NODELIST. gpuval replaces this shell (exec), so Slurm's stop notice",
        "# (--signal=B:TERM) reaches it: it stops, collects what was measured and reports.",
        "set -eu",
        *[f"export {name}={shlex.quote(value)}" for name, value in (exports or {}).items()],
        f"inventory={shlex.quote(str(job.inventory_path))}",
        f"printf '%s' {shlex.quote(settings)} > \"$inventory\"",
        "printf 'nodelist: \"%s\"\\n' \"$SLURM_JOB_NODELIST\" >> \"$inventory\"",
        # The run's srun steps go into this job: asking salloc for the nodes it holds would fail.
        f'exec {shlex.join(run)} -e "gpuval_slurm_jobid=$SLURM_JOB_ID"',
        "",
    ])  # fmt: skip


def job_id(sbatch_output: str) -> str:
    """The job id `sbatch --parsable` prints (`ID` or `ID;CLUSTER`)."""
    first = sbatch_output.strip().splitlines()[0] if sbatch_output.strip() else ""
    found = first.split(";", 1)[0].strip()
    if not found.isdigit():
        raise SlurmCommandError(f"sbatch printed no job id: {sbatch_output.strip()!r}")
    return found


def submit(job: BatchJob, script: str) -> str:
    """Write the script into the run folder and submit it; the job id, or SlurmCommandError."""
    job.folder.mkdir(parents=True, exist_ok=True)
    job.script_path.write_text(script, encoding="utf-8")
    job.script_path.chmod(0o755)
    return job_id(run_scontrol(sbatch_command(job)))
