"""`make bench`: time the nccl-tests parser on ~100 MB of generated, realistic logs.

The log repeats multi-node all_reduce runs (16 ranks on two hosts) with NCCL_DEBUG=INFO noise,
a 8 B .. 8 GiB sweep and the footer, as nccl-tests 2.17+ prints them. Target: < 5 s.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from gpuval.parsers import parse_file

TARGET_MB = 100
HOSTS = ("gpu-node-001", "gpu-node-002")
INFO_LINES = (
    "{host}:{pid}:{tid} [{dev}] NCCL INFO Channel {ch:02d}/0 : {rank}[{dev}] -> {peer}[{dev}] "
    "via P2P/CUMEM/read",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO Channel {ch:02d}/0 : {rank}[{dev}] -> {peer}[{dev}] "
    "[send] via NET/IB/{dev}/GDRDMA",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO comm 0x55d0c2a3b0 rank {rank} nranks 16 cudaDev {dev} "
    "nvmlDev {dev} busId {dev}b000 commId 0x8c1f5 - Init COMPLETE",
    "{host}:{pid}:{tid} [{dev}] NCCL INFO P2P Chunksize set to 524288",
)


def run_text(run: int) -> str:
    lines = [
        "# nccl-tests version 2.17.1 nccl-headers=22602 nccl-library=22602",
        "# Collective test starting: all_reduce_perf",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for rank in range(16):
        host, dev = HOSTS[rank // 8], rank % 8
        lines.append(
            f"#  Rank {rank:2d} Group  0 Pid {1000 + rank:6d} on {host:>10} device {dev:2d} "
            f"[0000:{0x18 + dev * 16:02x}:00] NVIDIA H100 80GB HBM3"
        )
    for rank in range(16):
        host, dev = HOSTS[rank // 8], rank % 8
        lines.append(f"{host}:{1000 + rank}:{1000 + rank} [{dev}] NCCL INFO NCCL version "
                     "2.26.2+cuda12.8")  # fmt: skip
        for ch in range(24):
            template = INFO_LINES[(ch + run) % len(INFO_LINES)]
            lines.append(template.format(host=host, pid=1000 + rank, tid=2000 + ch, dev=dev,
                                         ch=ch, rank=rank, peer=(rank + 1) % 16))  # fmt: skip
    lines += [
        "#",
        "#                                                              out-of-place"
        "                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
        "    (us)  (GB/s)  (GB/s)       ",
    ]
    for power in range(3, 34):
        size = 1 << power
        seconds = 20e-6 + size / 180e9
        algbw = size / seconds / 1e9
        busbw = algbw * 2 * 15 / 16
        cells = f"{seconds * 1e6:7.1f}  {algbw:6.2f}  {busbw:6.2f}       0"
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {cells}  {cells}")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 98.414 ", "#",
              "# Collective test concluded: all_reduce_perf", ""]  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "nccl-tests.log"
        written, run = 0, 0
        with path.open("w", encoding="utf-8") as out:
            while written < TARGET_MB * 1_000_000:
                written += out.write(run_text(run))
                run += 1
        megabytes = path.stat().st_size / 1_000_000
        start, cpu_start = time.perf_counter(), time.process_time()
        result = parse_file(path)
        seconds = time.perf_counter() - start
        cpu_seconds = time.process_time() - cpu_start
    if result is None or len(result.runs) != run:
        print(f"parse failed: {run} runs written, {len(result.runs) if result else 0} parsed")
        return 1
    rows = sum(len(r.rows) for r in result.runs)
    # CPU time beside wall time: the machine is shared, so wall time alone can mislead.
    print(f"{megabytes:.1f} MB, {run} runs, {rows} rows: {seconds:.2f} s "
          f"({cpu_seconds:.2f} s CPU), {megabytes / seconds:.1f} MB/s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
