"""The `scontrol` calls gpuval makes: read the nodes (JSON where this Slurm has it, else the text
form), drain a node with a gpuval reason, resume a node that gpuval drained.

A drain reason is `gpuval: <check>: <detail>`. Slurm sets no length limit on it: scontrol(1)
documents none (https://slurm.schedmd.com/scontrol.html#OPT_Reason) and Slurm 22.05 took a
100,000-character reason here (tests/data/slurm/README.md). It is kept to
REASON_LENGTH characters so that `sinfo -R` (whose REASON column is 20 wide by default,
https://slurm.schedmd.com/sinfo.html#OPT_list-reasons) starts with the check and an operator
reads the rest with `sinfo -R -o '%100E %N'`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from gpuval.slurm.nodes import SlurmNode, SlurmOutputError, expand_hostlist, parse_nodes

SCONTROL = "scontrol"
REASON_PREFIX = "gpuval"
REASON_LENGTH = 100
TIMEOUT_S = 60
# Characters a shell or Slurm's own parser would take apart inside Reason="...".
_UNSAFE = re.compile(r"[\"'`$\\\x00-\x1f\x7f]")


class SlurmCommandError(RuntimeError):
    """scontrol could not be run, or failed; the message holds the command and its error,
    `said` what scontrol itself printed (empty when it could not be run)."""

    def __init__(self, message: str, said: str = "") -> None:
        super().__init__(message)
        self.said = said


def drain_reason(prefix: str, check: str, detail: str, length: int = REASON_LENGTH) -> str:
    """`<prefix>: <check>: <detail>` on one line, without quotes, cut to `length` characters."""
    text = _UNSAFE.sub(" ", f"{prefix}: {check}: {detail}")
    text = " ".join(text.split())
    return text if len(text) <= length else text[: length - 3].rstrip() + "..."


def is_ours(reason: str, prefix: str = REASON_PREFIX) -> bool:
    """Whether a node's reason is one gpuval wrote (a person's reason never starts so)."""
    return reason.startswith(f"{prefix}: ")


def drain_command(node: str, reason: str) -> list[str]:
    return [SCONTROL, "update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"]


def resume_command(node: str) -> list[str]:
    return [SCONTROL, "update", f"NodeName={node}", "State=RESUME"]


def printable(command: Sequence[str]) -> str:
    """The command as a person types it: `Reason="..."` quoted (drain_reason left no quote)."""
    words = [
        f'Reason="{word.removeprefix("Reason=")}"'
        if word.startswith("Reason=")
        else shlex.quote(word)
        for word in command
    ]
    return " ".join(words)


def run_scontrol(command: Sequence[str]) -> str:
    """Run one Slurm client command (scontrol, sbatch); its standard output, or
    SlurmCommandError."""
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as problem:
        raise SlurmCommandError(f"`{printable(command)}`: {problem}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        shown = said or f"exit status {done.returncode}"
        raise SlurmCommandError(f"`{printable(command)}` failed: {shown}", said)
    return done.stdout


@dataclass(frozen=True)
class NodeQuery:
    """Which nodes: those of a partition, a node list (Slurm's hostlist form) or a reservation;
    none of them named: every node."""

    partition: str | None = None
    nodelist: str | None = None
    reservation: str | None = None


def _reservation_nodes(name: str) -> str:
    command = [SCONTROL, "--oneliner", "show", "reservation", name]
    text = run_scontrol(command)
    found = re.search(r"(?:^|\s)Nodes=(\S+)", text)
    if not found or found.group(1) in ("", "(null)"):
        raise SlurmOutputError(f"`{printable(command)}`: no Nodes= field in its output")
    return found.group(1)


def show_nodes(nodelist: str | None = None) -> list[SlurmNode]:
    """`scontrol show nodes [LIST] --json` (Slurm 23.02+), else the one-line text form (22.05's
    scontrol refuses --json: tests/data/slurm/). Only the nodes LIST names, whatever
    Slurm printed (a JSON form may list every node, as 22.05's `sinfo --json -n` does)."""
    names = [nodelist] if nodelist else []
    command = [SCONTROL, "show", "nodes", *names, "--json"]
    try:
        nodes = parse_nodes(run_scontrol(command), f"`{printable(command)}`")
    except SlurmCommandError as refused:
        # Only scontrol's refusal of the option is a version matter (22.05: "unrecognized option
        # '--json'"); a controller it cannot reach fails the text form just the same.
        if "--json" not in refused.said:
            raise
        command = [SCONTROL, "--oneliner", "show", "nodes", *names]
        nodes = parse_nodes(run_scontrol(command), f"`{printable(command)}`")
    if nodelist:
        wanted = set(expand_hostlist(nodelist))
        nodes = [node for node in nodes if node.name in wanted]
    return nodes


def query_nodes(query: NodeQuery) -> list[SlurmNode]:
    """The nodes the query names, in Slurm's order."""
    nodelist = query.nodelist
    if query.reservation:
        nodelist = _reservation_nodes(query.reservation)
    nodes = show_nodes(nodelist)
    if query.partition:
        nodes = [node for node in nodes if query.partition in node.partitions]
    return nodes
