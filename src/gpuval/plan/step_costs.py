"""What one step of a run costs when no earlier run has measured it: the documented defaults.

Every number has its reason beside it. Benchmark durations follow from the role variables (a tool
that runs for a fixed time costs that time plus its start-up; a sweep costs its start-up plus the
bytes it moves); Ansible's own share was measured on simulated hosts (`make bench-ansible`, issue
16). Where the history database holds sidecars of earlier runs of the same step (same tool,
sizes and node shape), their median replaces these (gpuval.plan.step_history).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Default:
    seconds: float
    reason: str


DEFAULTS: dict[str, Default] = {
    "phase-overhead": Default(
        4.0,
        "Ansible's fixed time per play, once per batch of `forks` hosts; its work for each host "
        "is phase-cpu-per-host",
    ),
    "phase-cpu-per-host": Default(
        0.9,
        "controller CPU seconds per host per play, spread over the controller's cores: a "
        "healthy staged pair phase on 32 simulated hosts spent 92.3 CPU s for its 2 plays and "
        "1 round (make bench-staged), 0.94 s per host and play beside round-cpu-per-host; a "
        "second benchmark.yml on 3 hosts 0.6-0.8 s (make bench-ansible); on 2 cores that the "
        "simulated nodes shared",
    ),
    "round-overhead": Default(
        0.2,
        "Ansible's fixed part of a pair round (the round's include, the tasks' first host "
        "started), once per wave of `forks` hosts; the part that grows with the hosts is "
        "round-cpu-per-host",
    ),
    "round-cpu-per-host": Default(
        1.0,
        "controller CPU seconds per host a pair round tests (its pair's tasks and the first "
        "node's collect), spread over the controller's cores. Fitted, with phase-cpu-per-host, "
        "round-overhead and collect-round, to six runs on 2 cores once a pair's servers started "
        "in one task and its second node stopped collecting (issue 16): make bench-staged with "
        "one bad node on 8 hosts (staged 48.5 s, all pairs 101.7 s) and on 32 (healthy 69.3 s, "
        "one bad 107.6 s), make bench-ansible's 8-host pair phase (75.7 s, one pair at a time "
        "216.4 s); the plan is within -17 to +18 % of each, and of 4 hosts (44.8 and 41.5 s). "
        "The simulated nodes' own modules ran on those 2 cores too, so a controller whose "
        "nodes are real machines spends less",
    ),
    "round-cpu-per-idle-host": Default(
        0.05,
        "controller CPU seconds per host of the play that a pair round does not test, spread "
        "over the controller's cores: it skips two tasks (the round's include and its part), "
        "a forked worker each; 40 skipped includes on 8 hosts took 0.024 CPU s each "
        "(ansible-core 2.19, 2 cores)",
    ),
    "collect-round": Default(
        0.2,
        "bench_pairs_collect_each_round: the fetch of the round's new outputs (its share per "
        "host is in round-cpu-per-host)",
    ),
    "probe": Default(
        0.5,
        "one preflight or passive health probe: 0.004-0.17 s each in the suite's 1x H100 run "
        "(tests/data/device/h100-x1-suite-2026-11-23), nvidia-smi -q reading 8 GPUs takes longer",
    ),
    "install": Default(
        30.0,
        "packages already there (apt and the CUDA/NCCL checks find nothing to do); a first "
        "install downloads CUDA and takes minutes: the history of such runs replaces this",
    ),
    "openmpi": Default(10.0, "Open MPI present; the run's ssh key and hostfile written"),
    "build": Default(
        20.0,
        "nccl-tests and cuda-samples already built (make finds nothing to do); a first "
        "build takes minutes",
    ),
    "p2p-base": Default(
        5.0, "p2pBandwidthLatencyTest start-up; plus p2p-per-gpu-pair for its N x N matrices"
    ),
    "p2p-per-gpu-pair": Default(
        0.4,
        "each GPU pair's bandwidth and latency, unidirectional and bidirectional, P2P on and "
        "off (4 matrices of N x N cells, ~0.1 s each)",
    ),
    "nccl-start": Default(
        5.0,
        "one nccl-tests or torch process tree: process start, CUDA context and NCCL communicator "
        "init on every GPU (the suite's 1x H100 run took 2.3-3.0 s for a whole 8 B-1 GiB sweep; "
        "8 GPUs initialise longer)",
    ),
    "nccl-rate": Default(
        50e9,
        "bytes per second a sweep moves (algorithm bandwidth): below a healthy 8x H100 board "
        "(about 210 GB/s all_reduce algbw at 370 GB/s busbw) and about one NDR link per GPU "
        "(50 GB/s), so PCIe and network sweeps are not under-estimated by much",
    ),
    "launch-per-node": Default(
        0.1,
        "mpirun/torchrun start-up grows with the nodes (ssh launch, rendezvous): a guess "
        "until a run at that scale records it",
    ),
    "iperf3-start": Default(
        0.1,
        "iperf3 connect and JSON report, per direction: 82 clients of `-t 2` between simulated "
        "hosts ran 2.02-2.08 s (make bench-staged HOSTS=8); a real network adds its round trips. "
        "Ansible's part of the task is in round-cpu-per-host",
    ),
    "allreduce-pair": Default(
        15.0,
        "the torch all-reduce pair: torch import, NCCL init over the network, a 1M-64M "
        "sweep of 25 iterations (well under a second on any network gpuval judges)",
    ),
    "rdma-start": Default(
        2.0, "ib_write_bw: the TCP handshake that exchanges the queue pairs, then -D seconds"
    ),
    "report": Default(15.0, "collect the nodes' outputs, then judge and render the run folder"),
    "dcgm-1": Default(60.0, "dcgmi diag -r 1 (DCGM's run levels: level 1 under a minute)"),
    "dcgm-2": Default(120.0, "dcgmi diag -r 2 (level 2: about two minutes)"),
    "dcgm-3": Default(1800.0, "dcgmi diag -r 3 (level 3: up to 30 minutes)"),
    "burn-start": Default(15.0, "GEMM burn: torch import and the matrices made, then its seconds"),
}
# DCGM run levels and durations: https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html

SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size_bytes(text: Any) -> int:
    """nccl-tests' size words (8, 1M, 1G: powers of 1024) as bytes."""
    match = SIZE.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a size (a number with K, M, G or T, e.g. 1G)")
    return int(float(match[1]) * UNITS[match[2].upper()])


def sweep_bytes(min_bytes: int, max_bytes: int, factor: int) -> int:
    """The bytes of one pass over the sizes nccl-tests' -b/-e/-f sweep visits."""
    total, size = 0, max(min_bytes, 1)
    while size <= max_bytes:
        total += size
        size *= max(factor, 2)
    return total


def sweep_seconds(
    min_bytes: int, max_bytes: int, factor: int, iterations: int, warmup: int
) -> float:
    """nccl-tests: the warm-up and timed iterations at every size, out of place then in place."""
    moved = sweep_bytes(min_bytes, max_bytes, factor) * (iterations + warmup) * 2
    return DEFAULTS["nccl-start"].seconds + moved / DEFAULTS["nccl-rate"].seconds


def p2p_seconds(gpus: int) -> float:
    return DEFAULTS["p2p-base"].seconds + DEFAULTS["p2p-per-gpu-pair"].seconds * gpus * gpus


def batches(hosts: int, forks: int) -> int:
    """Ansible runs a task on `forks` hosts at a time: node-local work goes in this many waves."""
    return max(1, math.ceil(hosts / max(forks, 1)))


class Variables:
    """The role variables a plan reads (defaults, inventory, profile, -e over each other), with
    errors that name the variable."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)

    def text(self, name: str, default: str = "") -> str:
        value = self.values.get(name, default)
        return default if value is None else str(value)

    def number(self, name: str, default: float) -> float:
        value = self.values.get(name, default)
        try:
            number = float(str(value).strip())
        except ValueError:
            number = -1.0
        if isinstance(value, bool) or not math.isfinite(number) or number < 0:
            raise ValueError(f"{name} must be a number of 0 or more, not {value!r}")
        return number

    def whole(self, name: str, default: int) -> int:
        return int(self.number(name, default))

    def flag(self, name: str, default: str) -> str:
        """A switch that is true, false or auto (Ansible's words for true and false)."""
        value = self.values.get(name, default)
        word = str(value).strip().lower()
        if word in ("auto", "required"):
            return word
        if word in ("false", "no", "off", "0", "n", "f", ""):
            return "false"
        return "true"

    def size(self, name: str, default: str) -> int:
        try:
            return size_bytes(self.values.get(name, default))
        except ValueError as problem:
            raise ValueError(f"{name}: {problem}") from problem
