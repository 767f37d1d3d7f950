"""A judged run for the report, summary.json, junit.xml and browser tests: a run folder written
into a temporary folder from real published outputs, then judged by gpuval itself
(`gpuval.pipeline.judge`), so the report is tested on the checks the judge really makes.

Every node is the 4x H100 SXM Lambda instance of the bundled sample run
(tests/data/sample-run/raw/lambda-4xh100: nvidia-smi, nvidia-smi topo -m, and nccl-tests
all_reduce_perf -g 4 with NCCL_DEBUG=INFO), plus:
- p2pBandwidthLatencyTest: the first four GPUs of the published 8x H100 matrix
  (tests/data/outputs/p2p/shared-8xH100-unidirectional-enabled-partial.txt). Lambda's instance is
  four GPUs of the same HGX H100 board (NV18 between every pair through NVSwitch), so those
  pairs are what its GPUs reach. The output is partial (no closing NOTE line), as published.
- iperf3 pair tests in the circle schedule: the real iperf 3.9 document
  (tests/data/outputs/iperf3/openwisp-iperf3.9-tcp-client.json) at other rates.
- run.json declares each node: 4 H100 SXM GPUs and one RDMA NIC (NIC0 = mlx5_0 in its topo -m).
  No node has ibstat (infiniband-diags is not installed), so the preflight skips that step, as
  the preflight role does, and the declared NIC cannot be checked.

The faults injected, each a documented change to a real output:
- SLOW_COLLECTIVES (node3): its nccl-tests table at half speed: every time doubled, every algbw
  and busbw halved (so the 256 MiB plateau reads 169.9 instead of 339.81 GB/s, 38 % of the 450
  GB/s NVLink 4 peak) and the `# Avg bus bandwidth` footer halved.
- SLOW_NIC (node2): every iperf3 pair of it at ~0.94 Gbit/s, as a link throttled to 1 Gbit/s
  shows (a tc tbf throttle), where the other pairs reach ~23 Gbit/s.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from gpuval.checks.thresholds import DEFAULTS
from gpuval.judgement.model import RunJudgement
from gpuval.pipeline import Judging
from gpuval.pipeline import judge as judge_run_dir
from tests.run_folders import iperf3_pair_steps, write_iperf3_try, write_run_json, write_step

DATA = Path(__file__).parent / "data"
LAMBDA = DATA / "sample-run" / "raw" / "lambda-4xh100"
P2P_8XH100 = DATA / "outputs" / "p2p" / "shared-8xH100-unidirectional-enabled-partial.txt"

HOSTS = ["node1", "node2", "node3", "node4"]
SLOW_COLLECTIVES = "node3"
SLOW_NIC = "node2"
RUN_ID = "20261121-0600-acceptance"
GENERATED_AT = "2026-11-21T06:40:00+00:00"
STARTED_AT = "2026-11-21T06:00:00+00:00"

NCCL_COMMAND = "mpirun -np 1 ./build/all_reduce_perf -b 8 -e 1G -f 2 -g 4"
NCCL_STEP = "nccl-all_reduce"
P2P_STEP = "p2pBandwidthLatencyTest"
IBSTAT_SKIPPED = "ibstat not found on this host"  # the preflight role's reason
# The Lambda log's healthy out-of-place busbw: at 256 MiB, where its large-message plateau
# starts (within 10 % of its best, 355.89 GB/s at 1 GiB), and at 1 GiB.
PLATEAU_BUSBW = 339.81
BEST_BUSBW = 355.89
NVLINK4_PER_DIRECTION = 450.0  # 18 links x 25 GB/s (H100 SXM, NVLink 4)
HALF = 0.5
# The lowest cell of the 4x4 P2P block (GPU2 -> GPU0)
P2P_LOWEST = 363.43
HEALTHY_GBPS = 23.0
THROTTLED_GBPS = 0.94

# A nccl-tests data row: size count type redop root, then time algbw busbw #wrong per half.
_ROW = re.compile(r"^(\d+ \d+ \w+ \w+ -?\d+) (\S+ \S+ \S+ \S+) (\S+ \S+ \S+ \S+)$")
_AVERAGE = re.compile(r"^# Avg bus bandwidth : ([\d.]+)$")


def _time_text(microseconds: float) -> str:
    """As nccl-tests prints a time: fewer decimals as it grows."""
    if microseconds >= 10000:
        return f"{microseconds:.0f}"
    return f"{microseconds:.1f}" if microseconds >= 100 else f"{microseconds:.2f}"


def _slowed_half(half: str, factor: float) -> str:
    time, algbw, busbw, wrong = half.split()
    return (f"{_time_text(float(time) / factor)} {float(algbw) * factor:.2f} "
            f"{float(busbw) * factor:.2f} {wrong}")  # fmt: skip


def slowed_nccl(text: str, factor: float) -> str:
    """An nccl-tests log whose table ran `factor` times as fast: times divided by it, algbw,
    busbw and the average footer multiplied by it; every other line as it was."""
    lines = []
    for line in text.splitlines():
        if row := _ROW.match(line):
            line = " ".join((row[1], _slowed_half(row[2], factor), _slowed_half(row[3], factor)))
        elif average := _AVERAGE.match(line):
            line = f"# Avg bus bandwidth : {float(average[1]) * factor:.3f}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def first_gpus(text: str, count: int) -> str:
    """A p2pBandwidthLatencyTest matrix cut to its first `count` GPUs (rows and columns)."""
    lines = []
    for line in text.splitlines():
        words = line.split()
        if words and (words[0] == "D\\D" or words[0].isdigit()):
            if words[0].isdigit() and int(words[0]) >= count:
                continue
            line = "   " + " ".join(f"{w:>6}" for w in words[: count + 1])
        lines.append(line)
    return "\n".join(lines) + "\n"


def iperf3_rate(src: str, dst: str, slow: str | None) -> float:
    """Gbit/s of one direction: ~0.94 on the slow node's link, else ~23, each direction a
    little different as real pairs are."""
    if slow in (src, dst):
        return THROTTLED_GBPS
    return HEALTHY_GBPS + (sum(map(ord, src)) * 3 + sum(map(ord, dst))) % 7 / 10


def _write_node(run: Path, host: str, slow_collectives: bool) -> list[str]:
    """The node's preflight and intranode steps; their names (run.json `expected`)."""
    nccl = (LAMBDA / "nccl-all_reduce.txt").read_text()
    # (step, phase, output, tool, command, environment)
    steps: tuple[tuple[str, str, str, str, str, dict[str, str]], ...] = (
        ("nvidia-smi", "preflight", (LAMBDA / "nvidia-smi.txt").read_text(), "nvidia-smi",
         "nvidia-smi", {}),
        ("nvidia-smi-topo", "preflight", (LAMBDA / "nvidia-smi-topo.txt").read_text(),
         "nvidia-smi-topo", "nvidia-smi topo -m", {}),
        (NCCL_STEP, "intranode", slowed_nccl(nccl, HALF) if slow_collectives else nccl,
         "nccl-tests", NCCL_COMMAND, {"NCCL_DEBUG": "INFO"}),
        (P2P_STEP, "intranode", first_gpus(P2P_8XH100.read_text(), 4), P2P_STEP,
         "./p2pBandwidthLatencyTest", {}),
    )  # fmt: skip
    for name, phase, text, tool, command, env in steps:
        write_step(run, host, name, text, phase=phase, tool=tool, command=command, env=env,
                   duration_s=12.5)  # fmt: skip
    write_step(run, host, "ibstat", None, phase="preflight", tool="ibstat", command="ibstat",
               exit_code=None, skipped=IBSTAT_SKIPPED)  # fmt: skip
    return [name for name, *_ in steps] + ["ibstat"]


def write_run(
    run: Path,
    hosts: list[str] | None = None,
    slow_collectives: Collection[str] = (SLOW_COLLECTIVES,),
    slow_nic: str | None = SLOW_NIC,
    pairs: bool = True,
) -> Path:
    """The run folder of `hosts` (HOSTS by default) with its faults; `pairs`: with the iperf3
    pair tests (a hundred hosts would have 9,900 of them)."""
    hosts = hosts or HOSTS
    expected = {host: _write_node(run, host, host in slow_collectives) for host in hosts}
    if pairs:
        for client, src, dst, name in iperf3_pair_steps(hosts):
            server = dst if src == client else src
            write_iperf3_try(run, client, name, server, iperf3_rate(src, dst, slow_nic),
                             reverse=src != client)  # fmt: skip
            expected[client].append(name)
    declared = {"gpu_model": "H100 SXM", "gpus_per_node": 4, "nic_count": 1}
    write_run_json(run, RUN_ID, hosts, started_at=STARTED_AT, expected=expected,
                   declared=dict.fromkeys(hosts, declared))  # fmt: skip
    return run


def judge(run: Path) -> RunJudgement:
    """What `gpuval report` judges, with a fixed report time."""
    return judge_run_dir(run, Judging(thresholds=DEFAULTS), GENERATED_AT)
