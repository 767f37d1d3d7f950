"""Time `gpuval plan` for 1,024 nodes (issue 16 asks under a second): printed, never asserted.

Two figures: the whole command in a child process (`python -m gpuval plan --nodes 1024 ...`,
interpreter start and imports included) and the estimate alone in this process, each the best of
a few tries (a loaded machine only adds):

    python -m tests.bench.plan_speed
    python -m tests.bench.plan_speed --nodes 4096 --tries 5
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpuval.plan import duration, inputs, plan_model

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args()
    command = [sys.executable, "-m", "gpuval", "plan", "--nodes", str(args.nodes),
               "--gpus-per-node", "8", "--rails", "8", "-e", "bench_pairs_mode=staged"]  # fmt: skip
    with tempfile.TemporaryDirectory() as reports:
        environment = {**os.environ, "GPUVAL_REPORTS_DIR": reports}
        walls = []
        for _ in range(args.tries):
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, env=environment)
            walls.append(time.perf_counter() - start)
        defaults = inputs.role_defaults(ROOT / "roles")
        shape = plan_model.Shape(tuple(f"n{i}" for i in range(args.nodes)), 8, 8)
        estimates = []
        for mode in ("staged", "all-pairs"):
            start = time.perf_counter()
            estimate = duration.estimate_from_history(
                shape, {**defaults, "bench_pairs_mode": mode}, Path(reports) / "history.sqlite"
            )
            estimates.append((mode, time.perf_counter() - start, estimate.total_s))
    print(f"gpuval plan, {args.nodes} nodes, whole command: best {min(walls):.3f} s of {walls}")
    for mode, seconds, predicted in estimates:
        print(
            f"  estimate alone ({mode}): {seconds * 1000:.1f} ms; predicts {predicted / 3600:.2f} h"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
