"""`gpuval drain RUN_DIR` and `gpuval resume NODES|RUN_DIR`: take the nodes a run failed out of
Slurm's service with a reason naming the check, and give back only what gpuval took."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpuval.slurm import scontrol
from gpuval.slurm.nodes import SlurmNode, SlurmOutputError

if TYPE_CHECKING:  # the judging stack loads only when a command runs
    from gpuval.judgement.model import RunJudgement
    from gpuval.slurm.drain import NodeAction

EXIT_OK, EXIT_KEPT, EXIT_ERROR = 0, 1, 2

DRAIN_HELP = """\
Drain in Slurm exactly the nodes RUN_DIR's judgement fails: each node with a failing check of its
own, with the reason `gpuval: <check>: <detail>` (cut to 100 characters; `sinfo -R` lists it).
Errors and unjudged checks drain nothing (no evidence against a node), nor do checks of a link
or of the whole cluster. A node Slurm already holds drained or down for another reason (a
person's) keeps that reason. Slurm node names: the variable gpuval_slurm_node of each host when
-i names the inventory (a file, a folder or a slurm plugin configuration, with the group_vars/
and host_vars/ beside it, read as ansible-playbook reads them), else the host name.
--dry-run prints the scontrol commands instead of running them.
Exit status: 0 done (or nothing to drain), 2 error (the run could not be judged, scontrol
failed).

Examples:
  gpuval drain reports/20261126T020000Z --dry-run
  gpuval drain reports/20261126T020000Z -i inventory/cluster.slurm.yml"""

RESUME_HELP = """\
Resume nodes that gpuval drained: those whose current Slurm reason starts with `gpuval: ` (the
--reason-prefix). A node drained by a person, or for any other reason, stays drained, and the
command says so. NODES is a Slurm node list (gpu[01-04],gpu07); RUN_DIR resumes the run's nodes
that the run passed (a node it failed, or could not judge, stays drained).
Exit status: 0 every named drained node resumed (or nothing to do), 1 some stay drained, 2 error.

Examples:
  gpuval resume gpu07 --dry-run
  gpuval resume 'gpu[01-16]'
  gpuval resume reports/20261127T020000Z -i inventory/cluster.slurm.yml"""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-i", "--inventory", type=Path, metavar="INVENTORY",
        help="the run's inventory: its gpuval_slurm_node variables name the Slurm nodes",
    )  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="print the scontrol commands only")
    add_reason_prefix(parser)


def add_reason_prefix(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reason-prefix", default=scontrol.REASON_PREFIX, metavar="PREFIX",
        help="the first word of gpuval's reasons (default: gpuval)",
    )  # fmt: skip


def add_slurm_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    drain_parser = commands.add_parser(
        "drain", help="drain in Slurm the nodes a run fails", description=DRAIN_HELP,
        formatter_class=argparse.RawTextHelpFormatter,
    )  # fmt: skip
    drain_parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run folder")
    _common(drain_parser)
    resume_parser = commands.add_parser(
        "resume", help="resume the Slurm nodes gpuval drained", description=RESUME_HELP,
        formatter_class=argparse.RawTextHelpFormatter,
    )  # fmt: skip
    resume_parser.add_argument("target", metavar="NODES|RUN_DIR")
    _common(resume_parser)


def _error(command: str, message: str) -> int:
    print(f"gpuval {command}: {message}", file=sys.stderr)
    return EXIT_ERROR


def _slurm_names(inventory: Path | None) -> dict[str, str]:
    """Inventory host -> its gpuval_slurm_node, as ansible-playbook resolves it (hosts without
    one keep their own name); ValueError naming the inventory when Ansible cannot read it."""
    if inventory is None:
        return {}
    from gpuval.run.launch import CHECKOUT
    from gpuval.slurm.inventory import slurm_node_names

    config = CHECKOUT / "ansible.cfg"  # what `gpuval run` plays with from a checkout
    return slurm_node_names(inventory, config if config.is_file() else None)


def _judgement(run_dir: Path, baseline: str | None = None) -> RunJudgement:
    """The run judged as `gpuval report` judges it (with `baseline` as its --baseline);
    ValueError saying why it cannot be."""
    from gpuval.checks.baseline import BaselineError
    from gpuval.pipeline import judge, resolve_judging
    from gpuval.runfolder import RunFolderError

    if not (run_dir / "run.json").is_file() and not (run_dir / "raw").is_dir():
        raise ValueError(f"{run_dir}: not a run folder (no run.json, no raw/)")
    try:  # a ProfileError or ThresholdsError is a ValueError already
        return judge(run_dir, resolve_judging(run_dir, None, None, baseline))
    except (RunFolderError, BaselineError) as problem:
        raise ValueError(str(problem)) from None


def _current(names: Sequence[str]) -> dict[str, SlurmNode]:
    if not names:
        return {}
    nodes = scontrol.show_nodes(",".join(names))
    return {node.name: node for node in nodes}


def apply_actions(actions: list[NodeAction], command: str, dry_run: bool) -> int:
    """Run (or print) each action's scontrol command; how many failed (each said on stderr)."""
    failed = 0
    for action in actions:
        if not action.act:
            print(f"{action.node}: {action.note}")
            continue
        words = (
            scontrol.drain_command(action.node, action.reason)
            if command == "drain"
            else scontrol.resume_command(action.node)
        )
        if dry_run:
            print(scontrol.printable(words))
            continue
        try:
            scontrol.run_scontrol(words)
        except scontrol.SlurmCommandError as problem:
            failed += 1
            print(f"gpuval {command}: {action.node}: {problem}", file=sys.stderr)
            continue
        print(f"{action.node}: {'drained: ' + action.reason if command == 'drain' else 'resumed'}")
    return failed


def drain_command(args: argparse.Namespace) -> int:
    return drain_run(args.run_dir, args.inventory, args.reason_prefix, args.dry_run)


def drain_run(
    run_dir: Path, inventory: Path | None, reason_prefix: str, dry_run: bool,
    baseline: str | None = None, command: str = "drain",
) -> int:  # fmt: skip
    """Drain the nodes the run's judgement fails (`gpuval drain`, `gpuval run --drain-failed`);
    the exit status: EXIT_OK, or EXIT_ERROR (not judged, verdict error, scontrol failed)."""
    from gpuval.slurm import drain

    try:
        names = _slurm_names(inventory)
        judgement = _judgement(run_dir, baseline)
    except ValueError as problem:
        return _error(command, str(problem))
    if judgement.verdict == "error":
        return _error(command, f"{run_dir}: the run could not be judged (verdict error): "
                      "nothing drained; see `gpuval report` for why")  # fmt: skip
    failing = drain.failing_checks(judgement)
    if not failing:
        print(f"{run_dir}: no node fails ({judgement.verdict}); nothing to drain")
        return EXIT_OK
    try:
        current = _current([names.get(host, host) for host in failing])
    except (scontrol.SlurmCommandError, SlurmOutputError) as problem:
        if not dry_run:
            return _error(command, str(problem))
        print(f"# cannot read the nodes' current state ({problem}); every drain printed",
              file=sys.stderr)  # fmt: skip
        current = {}
    actions = drain.drain_actions(judgement, names, current, reason_prefix)
    return EXIT_ERROR if apply_actions(actions, "drain", dry_run) else EXIT_OK


def resume_command(args: argparse.Namespace) -> int:
    from gpuval.slurm import drain

    target = Path(args.target)
    try:
        if target.is_dir():
            names = _slurm_names(args.inventory)
            judgement = _judgement(target)
            if judgement.verdict == "error":
                return _error("resume", f"{target}: the run could not be judged (verdict "
                              "error): nothing resumed; see `gpuval report` for why")  # fmt: skip
            wanted = [names.get(host, host) for host in judgement.host_names]
            known = {node.name: node for node in scontrol.show_nodes()}
            reasons = {h: known[names.get(h, h)].reason for h in judgement.host_names
                       if names.get(h, h) in known}  # fmt: skip
            unproven = drain.not_rechecked(judgement, reasons, args.reason_prefix)
            unproven |= drain.not_passed(judgement)
            keep = {names.get(h, h): why for h, why in unproven.items()}
            for name in wanted:
                if name not in known:
                    print(f"{name}: not a Slurm node (name it with gpuval_slurm_node, -i)")
            nodes = [known[name] for name in wanted if name in known]
        else:
            keep, nodes = {}, scontrol.show_nodes(args.target)
    except (ValueError, scontrol.SlurmCommandError) as problem:
        return _error("resume", str(problem))  # a SlurmOutputError is a ValueError too
    actions = drain.resume_actions(nodes, keep, args.reason_prefix)
    if apply_actions(actions, "resume", args.dry_run):
        return EXIT_ERROR
    held = [a for a in actions if not a.act and a.note != "not drained"]
    return EXIT_KEPT if held else EXIT_OK
