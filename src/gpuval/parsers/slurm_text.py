"""Slurm's own text in what gpuval reads: its hostlist form, and what srun says in a step's
output about the nodes of the step.

srun prints on its standard error, which the step's output keeps:
- `srun: error: Node failure on NODELIST` when a node of the step fails or is set down while the
  step runs (srun's node-fail handler, `error("Node failure on %s", msg->nodelist)` in src/srun
  of https://github.com/SchedMD/slurm; published in
  https://github.com/GoogleCloudPlatform/cluster-toolkit/issues/1600, and measured with Slurm
  22.05.8 here: `srun: error: Node failure on node3`);
- `srun: error: Nodes NODELIST are still not ready` when nodes never became ready for it (the
  same published output).
NODELIST is Slurm's hostlist form (`gpu[01-02]`).
"""

from __future__ import annotations

import re


class SlurmOutputError(ValueError):
    """Slurm's output is not what gpuval reads; the message names the source and the key."""


_LOST = re.compile(
    r"^[ \t]*srun: error: (?:Node failure on (\S+)|Nodes (\S+) are still not ready)[ \t]*$",
    re.MULTILINE,
)


def lost_nodes(output: str) -> dict[str, str]:
    """The nodes srun says the step lost (failed during it, or never ready), each with srun's
    line; {} when it says none. A node list that is not Slurm's hostlist form is kept whole."""
    lost: dict[str, str] = {}
    for found in _LOST.finditer(output):
        nodelist = found.group(1) or found.group(2)
        try:
            names = expand_hostlist(nodelist)
        except SlurmOutputError:
            names = [nodelist]
        for name in names:
            lost.setdefault(name, found.group(0).strip())
    return lost


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's hostlist form as names: `gpu[01-03,07],cpu1` -> gpu01 gpu02 gpu03 gpu07 cpu1
    (ranges keep their zero padding; https://slurm.schedmd.com/scontrol.html#OPT_hostnames).
    SlurmOutputError for an unbalanced bracket or a range that is not numbers."""
    names: list[str] = []
    for item in _top_level_items(hostlist):
        names.extend(_expand_item(item, hostlist))
    return names


def _top_level_items(hostlist: str) -> list[str]:
    items, depth, start = [], 0, 0
    for index, char in enumerate(hostlist):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0 or depth > 1:
            raise SlurmOutputError(f"node list {hostlist!r}: unbalanced brackets")
        if char == "," and depth == 0:
            items.append(hostlist[start:index])
            start = index + 1
    if depth:
        raise SlurmOutputError(f"node list {hostlist!r}: unbalanced brackets")
    items.append(hostlist[start:])
    return [item.strip() for item in items if item.strip()]


def _expand_item(item: str, hostlist: str) -> list[str]:
    found = re.match(r"([^\[]*)\[([^\]]*)\](.*)", item)
    if not found:
        return [item]
    head, ranges, tail = found.groups()
    expanded = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise SlurmOutputError(f"node list {hostlist!r}: {part!r} is not a number range")
        for number in range(int(low), int(high or low) + 1):
            expanded.extend(_expand_item(f"{head}{number:0{len(low)}d}{tail}", hostlist))
    return expanded
