"""`gpuval node-health [--slurm]`: judge this node's passive health probes on the node (Slurm's
HealthCheckProgram), and with --slurm drain it or give back what gpuval drained."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

from gpuval.cli.slurm import add_reason_prefix, apply_actions
from gpuval.plan.health_probes import DEFAULT_BUDGET_S, PROBE_SHARE, ProbePaths
from gpuval.slurm import scontrol
from gpuval.slurm.nodes import SlurmOutputError

EXIT_PASS, EXIT_FAIL, EXIT_UNJUDGED = 0, 1, 3
STATE_DIR = Path("/var/tmp/gpuval/node-health")

NODE_HEALTH_HELP = f"""\
Judge this node's health where it runs: the passive probes of the health role (kernel log Xid
lines, nvidia-smi -q -x, NVLink error counters, PCIe and RDMA sysfs, loaded modules) run at once
into a private run folder, raw file and sidecar each, and are judged with gpuval's node health
checks, as `gpuval report` judges them. One line per check that did not pass.
Each probe is killed after {PROBE_SHARE:.0%} of --budget (default {DEFAULT_BUDGET_S:.0f} s;
slurmd kills a HealthCheckProgram after 60 s); the rest is for judging and scontrol. A probe
whose tool is not installed is skipped; without nvidia-smi the node is unjudged, never passed.
Counters judged by their growth (RDMA and NVLink errors, slowdowns) are judged since the
previous run, whose captures --state-dir keeps: on a node's first run they, and the node, are
unjudged.
--slurm: a failing node is drained, reason `gpuval: <check>: <detail>`; a node drained by gpuval
whose check passes again is resumed; a node drained or down for another reason (a person's) is
left as it is, and so is every node on an unjudged verdict.
The node: --node, else $SLURMD_NODENAME (where slurmd sets it), else the short host name.
Exit status: 0 pass (or warn), 1 fail, 3 unjudged or error (nothing drained for it).

Examples:
  gpuval node-health
  gpuval node-health --slurm --budget 45
  gpuval node-health --keep --work-dir /var/tmp/gpuval   # keep the run folder to read"""


def add_node_health_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    parser = commands.add_parser(
        "node-health", help="judge this node's health (Slurm's HealthCheckProgram)",
        description=NODE_HEALTH_HELP, formatter_class=argparse.RawTextHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--slurm", action="store_true", help="drain or resume this Slurm node")
    parser.add_argument(
        "--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
        help=f"time for the whole program (default {DEFAULT_BUDGET_S:.0f})",
    )  # fmt: skip
    parser.add_argument("--node", metavar="NAME", help="this node's Slurm name")
    add_reason_prefix(parser)
    parser.add_argument("--profile", metavar="NAME|FILE", help="judge with this profile's "
                        "thresholds (default: gpuval's)")  # fmt: skip
    parser.add_argument(
        "--work-dir", type=Path, metavar="DIR",
        help="where the private run folder is made (default: the system's temporary folder)",
    )  # fmt: skip
    parser.add_argument(
        "--keep", action="store_true", help="keep the run folder (its path printed)"
    )
    parser.add_argument(
        "--state-dir", type=Path, default=STATE_DIR, metavar="DIR",
        help=f"this run's captures, the next run's 'before' (default {STATE_DIR})",
    )  # fmt: skip
    defaults = ProbePaths()
    for option, default in (
        ("--sysfs-pci-root", defaults.sysfs_pci_root),
        ("--sysfs-infiniband-root", defaults.sysfs_infiniband_root),
        ("--modules-file", defaults.modules_file),
    ):
        parser.add_argument(option, default=default, metavar="PATH", help=f"default {default}")


def _node_name(given: str | None) -> str:
    return given or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _error(message: str) -> int:
    print(f"gpuval node-health: {message}", file=sys.stderr)
    return EXIT_UNJUDGED


def node_health_command(args: argparse.Namespace) -> int:
    from gpuval.judgement import Judging
    from gpuval.profile import ProfileError, load_profile
    from gpuval.runfolder import RunFolderError
    from gpuval.slurm import node_health

    started = time.monotonic()
    if args.budget <= 0:
        return _error(f"--budget {args.budget:g}: give the seconds the program may take (> 0)")
    try:
        judging = Judging(profile=load_profile(args.profile)) if args.profile else Judging()
    except (ProfileError, OSError) as problem:
        return _error(str(problem))
    node = _node_name(args.node)
    paths = ProbePaths(args.sysfs_pci_root, args.sysfs_infiniband_root, args.modules_file)
    try:
        run_dir = Path(tempfile.mkdtemp(prefix="gpuval-node-health-", dir=args.work_dir))
    except OSError as problem:
        return _error(f"no run folder: {problem} (--work-dir names where to make it)")
    try:
        probes = node_health.run_probes(run_dir, node, paths, args.budget)
        host_dir = run_dir / "raw" / node
        node_health.carry_previous(args.state_dir, host_dir)
        health = node_health.judge_node(run_dir, node, probes, judging)
    except (OSError, RunFolderError) as problem:
        return _error(f"{run_dir}: {problem}")
    else:
        try:
            node_health.keep_for_next(host_dir, args.state_dir)
        except OSError as problem:  # this verdict stands; the next run's growth is unjudged
            print(f"gpuval node-health: captures not kept for the next run: {problem} "
                  "(--state-dir names a folder this user may write)", file=sys.stderr)  # fmt: skip
    finally:
        if args.keep:
            print(f"run folder: {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    for line in health.problems:
        print(f"{node}: {line}")
    print(f"{node}: {health.verdict.upper()} ({len(health.checks)} health checks, "
          f"{time.monotonic() - started:.1f} s)")  # fmt: skip
    status = {"pass": EXIT_PASS, "warn": EXIT_PASS, "fail": EXIT_FAIL}.get(
        health.verdict, EXIT_UNJUDGED
    )
    if not args.slurm:
        return status
    try:
        current = {n.name: n for n in scontrol.show_nodes(node)}.get(node)
    except (scontrol.SlurmCommandError, SlurmOutputError) as problem:
        return _error(f"nothing changed in Slurm: {problem}")
    if current is None:
        return _error(f"Slurm has no node {node!r}: nothing changed (name it with --node)")
    actions = node_health.slurm_actions(health, node, current, args.reason_prefix)
    verb = "drain" if health.verdict == "fail" else "resume"
    if apply_actions(actions, verb, dry_run=False):
        return EXIT_UNJUDGED
    return status
