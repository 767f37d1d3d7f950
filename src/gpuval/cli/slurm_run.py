"""`gpuval run`'s Slurm options: `--drain-failed` (drain the nodes the run fails, after its
report) and `--slurm PARTITION` (submit the run as a low-priority batch job on idle nodes)."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from gpuval.cli.options import node_count, positive_number
from gpuval.cli.slurm import EXIT_ERROR, EXIT_OK, add_reason_prefix, drain_run
from gpuval.slurm import batch

RUN_EXAMPLES = """\
  gpuval run -i inventory/cluster.slurm.yml --drain-failed     # then drain the nodes it fails
  gpuval run --slurm gpu --qos scavenger --drain-failed        # a Slurm job on idle nodes
  gpuval run --slurm gpu -i inventory/cluster.slurm.yml --time 90 --nodes 2-16"""

# The options of `gpuval run` the job's own `gpuval run` gets as given (dest, flag).
_PASSED_ON = (
    ("profile", "--profile"), ("tags", "--tags"), ("skip_tags", "--skip-tags"),
    ("limit", "--limit"), ("playbook", "--playbook"), ("baseline", "--baseline"),
    ("prometheus", "--prometheus"), ("fail_on", "--fail-on"),
)  # fmt: skip


def add_slurm_run_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--drain-failed", action="store_true",
        help="after the report, drain in Slurm the nodes the run fails, as `gpuval drain` "
        "(nothing when the run was stopped or could not be judged)",
    )  # fmt: skip
    add_reason_prefix(run)
    slurm = run.add_argument_group("as a Slurm job (--slurm; docs/slurm.md)")
    slurm.add_argument(
        "--slurm", metavar="PARTITION",
        help="submit the run with sbatch as a low-priority job on this partition's idle nodes "
        "(-i: a slurm inventory whose settings the job keeps, or none)",
    )  # fmt: skip
    slurm.add_argument("--qos", metavar="QOS", help="the job's QOS (a preemptible one: scavenger)")
    slurm.add_argument("--reservation", metavar="NAME", help="run in this Slurm reservation")
    slurm.add_argument(
        "--time", type=positive_number, metavar="MINUTES",
        help="the job's time limit (default: gpuval plan's prediction + 25 %% + "
        f"{batch.STOP_NOTICE_S // 60} min to stop and report)",
    )  # fmt: skip
    slurm.add_argument(
        "--nodes", type=node_count, metavar="N|MIN-MAX",
        help="nodes the job asks for (default: 1 to all the partition's nodes in service; Slurm "
        "starts it on those idle then)",
    )  # fmt: skip
    slurm.add_argument(
        "--nice", type=int, default=batch.DEFAULT_NICE, metavar="N",
        help=f"lowers the job's priority by N (default {batch.DEFAULT_NICE})",
    )  # fmt: skip


def drain_after_run(args: argparse.Namespace, run_dir: Path, code: int) -> int:
    """`--drain-failed`: drain what the judged run fails; the run's exit status, or EXIT_ERROR
    when draining failed. A run that ended in an error (stopped, or its verdict error) drains
    nothing: what it measured is incomplete or untrustworthy."""
    if code == EXIT_ERROR:
        print(
            f"gpuval run: {run_dir}: the run was stopped or ended in error: nothing drained "
            f"(`gpuval drain {run_dir} --dry-run` shows what its judgement would drain)"
        )
        return code
    drained = drain_run(run_dir, args.inventory, args.reason_prefix, dry_run=False,
                        baseline=args.baseline, command="run")  # fmt: skip
    return code if drained == EXIT_OK else EXIT_ERROR


def passed_on(args: argparse.Namespace) -> list[str]:
    """The job's `gpuval run` arguments, less -i, --reports and --run-id (the job sets them)."""
    words = []
    for dest, flag in _PASSED_ON:
        value = getattr(args, dest, None)
        if value is not None:
            words += [flag, str(value)]
    for extra in args.extra_vars:
        words += ["-e", extra]
    if args.ara:
        words.append("--ara")
    if args.drain_failed:
        words += ["--drain-failed", "--reason-prefix", args.reason_prefix]
    return words


def _base_inventory(inventory: Path | None) -> dict[str, Any] | None:
    """The submitter's slurm inventory settings, or None; ValueError when -i is another kind."""
    if inventory is None:
        return None
    import yaml

    if not inventory.name.endswith(("slurm.yml", "slurm.yaml")) or not inventory.is_file():
        raise ValueError(f"{inventory}: with --slurm, -i names a slurm inventory file "
                         "(…slurm.yml, docs/slurm.md) or nothing")  # fmt: skip
    try:
        settings = yaml.safe_load(inventory.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as problem:
        raise ValueError(f"{inventory}: {problem}") from None
    if not isinstance(settings, dict) or not str(settings.get("plugin", "")).endswith("slurm"):
        raise ValueError(f"{inventory}: not a slurm inventory (plugin: slurm)")
    return settings


def _predicted_s(args: argparse.Namespace, nodes: int, gpus: int, history: Path) -> float:
    from gpuval.cli.plan import shape_and_variables
    from gpuval.plan import duration

    wanted = argparse.Namespace(
        inventory=None, nodes=nodes, gpus_per_node=gpus or None, rails=None, forks=None,
        controller_cores=None,
        profile=args.profile, extra_vars=args.extra_vars,
        # The job runs the phases of the run's tags alone: its time limit counts only those.
        tags=[args.tags] if args.tags else [], skip_tags=[args.skip_tags] if args.skip_tags else [],
    )  # fmt: skip
    shape, variables = shape_and_variables(wanted)
    return duration.estimate_from_history(shape, variables, history).total_s


def _job(args: argparse.Namespace, run_dir: Path, history: Path) -> batch.BatchJob:
    """The job to submit; ValueError, SlurmCommandError or SlurmOutputError saying why not."""
    from gpuval.slurm.scontrol import NodeQuery, query_nodes

    nodes, time_minutes = args.nodes, args.time
    if nodes is None or time_minutes is None:
        query = NodeQuery(partition=args.slurm, reservation=args.reservation)
        in_service = [node for node in query_nodes(query) if node.available]
        if not in_service:
            raise ValueError(f"partition {args.slurm}: no node in service (sinfo -p {args.slurm})")
        nodes = nodes or batch.node_range(len(in_service))
        if time_minutes is None:
            gpus = max(node.gpus for node in in_service)
            predicted = _predicted_s(args, len(in_service), gpus, history)
            time_minutes = batch.time_limit_minutes(predicted)
    return batch.BatchJob(
        run_dir=run_dir, workdir=Path.cwd(), partition=args.slurm, nodes=nodes,
        time_minutes=math.ceil(time_minutes), qos=args.qos, reservation=args.reservation,
        nice=args.nice,
    )  # fmt: skip


def submit_run(args: argparse.Namespace, run_dir: Path, history: Path, project_dir: Path) -> int:
    """`--slurm`: submit the run as a batch job; print its id and how to follow it.
    `project_dir`: the playbook's project folder (a checkout: the job uses its ansible.cfg)."""
    from gpuval.run.launch import CHECKOUT
    from gpuval.slurm.scontrol import SlurmCommandError, printable

    if shutil.which(batch.SBATCH) is None:
        return _error(
            "--slurm submits with Slurm's sbatch, which is not on PATH: run it on a login node "
            "with the Slurm client and the cluster's configuration"
        )
    if run_dir.exists():
        return _error(f"{run_dir}: the run folder exists already; name another --run-id")
    from_checkout = project_dir == CHECKOUT
    exports = {}
    if from_checkout and "ANSIBLE_CONFIG" not in os.environ:  # its plugins: `plugin: slurm`
        exports["ANSIBLE_CONFIG"] = str(CHECKOUT / "ansible.cfg")
    plugin = "slurm" if from_checkout else "gpuval.cluster.slurm"
    try:
        inventory = batch.allocation_inventory(_base_inventory(args.inventory), plugin)
        job = _job(args, run_dir.resolve(), history)
        gpuval = [sys.executable, "-m", "gpuval"]
        script = batch.job_script(job, inventory, gpuval, passed_on(args), exports)
        job_id = batch.submit(job, script)
    except (ValueError, SlurmCommandError, OSError) as problem:  # SlurmOutputError: ValueError
        shutil.rmtree(run_dir, ignore_errors=True)  # no run folder for a job that never was
        return _error(str(problem))
    print(f"gpuval run {run_dir.name}: Slurm job {job_id} submitted (partition {job.partition}, "
          f"nodes {job.nodes}, time limit {job.time_minutes} min)")  # fmt: skip
    print(f"  {printable(batch.sbatch_command(job))}")
    print(f"  follow it: squeue -j {job_id}; sacct -j {job_id}; "
          f"tail -f {job.folder / f'slurm-{job_id}.out'}")  # fmt: skip
    print(f"  its run folder: {job.run_dir} (`gpuval report {job.run_dir}` once it is done)")
    return EXIT_OK


def _error(message: str) -> int:
    print(f"gpuval run: {message}", file=sys.stderr)
    return EXIT_ERROR
