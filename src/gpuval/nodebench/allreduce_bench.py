"""All-reduce bandwidth sweep over message sizes with torch.distributed; one JSON document out.

Standalone on purpose: it imports only torch and the standard library, so a role can copy this
one file to the nodes and start it with torchrun, e.g.
  torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \
      allreduce_bench.py --min-bytes 1M --max-bytes 1G
Backend "auto" is NCCL when CUDA is available, else gloo (CPU). Written for this project in
the spirit of ml-engineering's network/benchmarks/all_reduce_bench.py.

Rank 0 prints ONE line of JSON (`"tool": "gpuval-allreduce-bench"`, schema:
run-gpuval-allreduce-bench.schema.json). Bandwidths are GB/s (10**9 bytes per second), with
nccl-tests' definitions (github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md): algbw = bytes /
time, busbw = algbw * 2(n-1)/n for all-reduce. Time per size is the slowest rank's mean per
call. Every size is checked: each rank contributes rank+1, so every element must equal
n(n+1)/2; a wrong element fails the run (exit status 1), fail closed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import torch
import torch.distributed as dist

TOOL = "gpuval-allreduce-bench"
SCHEMA_VERSION = 1
ELEMENT_BYTES = 4  # float32: integers up to 2**24 are exact, so the check compares exactly
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_argument(text: str) -> int:
    """'64K', '1M', '4G' (binary units) or a byte count."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = text[-1] if text and text[-1] in UNITS else ""
    number = text[: len(text) - len(unit)]
    if not number.isdigit() or int(number) <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1024, 64K, 1M, 4G)")
    return int(number) * UNITS[unit]


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    """min, min*factor, ... up to max, rounded down to whole float32 elements."""
    found: list[int] = []
    size = min_bytes
    while size <= max_bytes:
        found.append(max(ELEMENT_BYTES, size - size % ELEMENT_BYTES))
        size *= factor
    return sorted(set(found))


def bus_bandwidth(algbw: float, world_size: int) -> float:
    return algbw * 2 * (world_size - 1) / world_size


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _wrong_elements(buffer: torch.Tensor, world_size: int) -> int:
    """Each rank adds rank+1: every element of the sum must be n(n+1)/2, on every rank."""
    buffer.fill_(float(dist.get_rank() + 1))
    dist.all_reduce(buffer)
    wrong = torch.tensor(
        [int((buffer != world_size * (world_size + 1) / 2).sum().item())],
        dtype=torch.int64,
        device=buffer.device,
    )
    dist.all_reduce(wrong)
    return int(wrong.item())


def measure(size: int, device: torch.device, warmup: int, iterations: int) -> dict[str, Any]:
    world_size = dist.get_world_size()
    buffer = torch.zeros(size // ELEMENT_BYTES, dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(buffer)
    _synchronize(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(buffer)
    _synchronize(device)
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the collective is as slow as its slowest rank
    seconds = float(elapsed.item()) / iterations
    algbw = size / seconds / 1e9
    return {
        "size_bytes": size,
        "count": size // ELEMENT_BYTES,
        "time_us": seconds * 1e6,
        "algbw_gbps": algbw,
        "busbw_gbps": bus_bandwidth(algbw, world_size),
        "wrong": _wrong_elements(buffer, world_size),
    }


def _device(choice: str) -> torch.device:
    if choice == "cuda" or (choice == "auto" and torch.cuda.is_available()):
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return platform.processor() or platform.machine() or "cpu"


def _gathered(value: str) -> list[str]:
    values: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return [str(v) for v in values]


def _nccl_version(backend: str) -> str | None:
    if backend != "nccl":
        return None
    nccl_version: Callable[[], object] = torch.cuda.nccl.version  # untyped in torch
    version = nccl_version()
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--min-bytes", type=size_argument, default=size_argument("1M"))
    parser.add_argument("--max-bytes", type=size_argument, default=size_argument("256M"))
    parser.add_argument("--factor", type=int, default=2, help="size step (multiplier, >= 2)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    arguments = parser.parse_args(argv)
    if arguments.factor < 2 or arguments.iterations < 1 or arguments.warmup < 0:
        parser.error("--factor must be >= 2, --iterations >= 1, --warmup >= 0")
    if arguments.min_bytes > arguments.max_bytes:
        parser.error("--min-bytes must not exceed --max-bytes")
    return arguments


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _arguments(argv)
    device = _device(arguments.device)
    backend = arguments.backend
    if backend == "auto":
        backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    started = datetime.now(UTC)
    dist.init_process_group(backend=backend)
    rank = dist.get_rank()
    try:
        hosts = _gathered(socket.gethostname())
        devices = _gathered(_device_name(device))
        rows = [
            measure(size, device, arguments.warmup, arguments.iterations)
            for size in sizes(arguments.min_bytes, arguments.max_bytes, arguments.factor)
        ]
    finally:
        dist.destroy_process_group()
    wrong_total = sum(row["wrong"] for row in rows)
    if rank == 0:
        document = {
            "schema_version": SCHEMA_VERSION,
            "tool": TOOL,
            "collective": "all_reduce",
            "world_size": len(hosts),
            "backend": backend,
            "device_type": device.type,
            "dtype": "float32",
            "hosts": hosts,
            "devices": devices,
            "torch_version": str(torch.__version__),
            "cuda_version": torch.version.cuda,
            "nccl_version": _nccl_version(backend),
            "warmup": arguments.warmup,
            "iterations": arguments.iterations,
            "started_at": started.isoformat(timespec="seconds"),
            "duration_s": round((datetime.now(UTC) - started).total_seconds(), 3),
            "rows": rows,
            "wrong_total": wrong_total,
            "correct": wrong_total == 0,
        }
        print(json.dumps(document), flush=True)
    return 0 if wrong_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
