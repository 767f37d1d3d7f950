"""Step names: what the roles call each raw output, and how the judge reads a name back.

Pair steps are `pair-<kind>-r<round>-<a>--<b>-try<k>`:
- kind: `iperf3` (tool iperf3, `-J`; Gbit/s), `allreduce` (tool gpuval-allreduce-bench, busbw
  GB/s), `nccl` (tool nccl-tests across the two nodes, busbw GB/s);
- round: the schedule round (1-based); k: the try, 1 for the first run, 2.. for repeats;
- a--b: inventory names; for iperf3 the direction the data flowed, sender--receiver. Host names
  must not contain "--".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PAIR_KINDS = ("iperf3", "allreduce", "nccl")
PAIR_STEP = re.compile(
    r"^pair-(?P<kind>iperf3|allreduce|nccl)-r(?P<round>\d+)-(?P<a>.+?)--(?P<b>.+)-try(?P<try>\d+)$"
)
INTERNODE_PREFIX = "internode-"
ALLNODES_ALLREDUCE = "allnodes-allreduce"


@dataclass(frozen=True)
class PairStep:
    kind: str
    round: int
    src: str  # as named: the iperf3 sender, or the first host
    dst: str
    attempt: int


def pair_step(name: str) -> PairStep | None:
    """The parts of a pair step name; None for any other step."""
    match = PAIR_STEP.match(name)
    if not match:
        return None
    return PairStep(match["kind"], int(match["round"]), match["a"], match["b"], int(match["try"]))


def pair_step_name(kind: str, round_: int, src: str, dst: str, attempt: int) -> str:
    return f"pair-{kind}-r{round_}-{src}--{dst}-try{attempt}"


# --- Node health: the health phase's passive probes are captured before the benchmarks and
# again after them; the second capture is the step of the same name with AFTER_SUFFIX.
HEALTH_PHASE = "health"
AFTER_SUFFIX = "-after"


def after_step(step: str) -> str:
    return step + AFTER_SUFFIX
