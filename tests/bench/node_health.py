"""Time `gpuval node-health --slurm` (Slurm's HealthCheckProgram) on a simulated 4x H100 node
(tests/node_doubles.py: the GPU test doubles, the stand-in scontrol) against its 60 s budget,
slurmd's limit: printed, never asserted. Each try is the whole command in a child process
(interpreter start and imports included), a second run of the node (growth judged against the
first run's captures, as every run after a node's first is); clean node and failing node (a GPU
off the bus, drained), best and worst of a few tries (a loaded machine only adds):

    python -m tests.bench.node_health
    python -m tests.bench.node_health --tries 5
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.node_doubles import node_data, node_health

BUDGET_S = 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args()
    for fault in (None, "off-bus"):
        with tempfile.TemporaryDirectory() as folder:
            node_data(Path(folder), fault)
            node_health(Path(folder), "gpu1")  # the first capture, kept for the runs timed
            walls, codes = [], set()
            for _ in range(args.tries):
                start = time.perf_counter()
                done = node_health(Path(folder), "gpu1", "--slurm")
                walls.append(time.perf_counter() - start)
                codes.add(done.returncode)
        print(
            f"gpuval node-health --slurm, {fault or 'clean'} node, exit {sorted(codes)}: "
            f"best {min(walls):.2f} s, worst {max(walls):.2f} s of {args.tries} "
            f"({max(walls) / BUDGET_S:.0%} of the {BUDGET_S:.0f} s budget)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
