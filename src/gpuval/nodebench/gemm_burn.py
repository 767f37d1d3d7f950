"""GPU burn: every GPU multiplies matrices for N seconds; TFLOPS per GPU, a checked result, and
clocks, temperature and throttling sampled during the run. One JSON document out.

    python -m gpuval.nodebench.gemm_burn --seconds 20 --dtype bf16

Standalone on purpose (torch and the standard library; pynvml or nvidia-smi, when present, for
the samples), so a role can copy this one file to the nodes. Written for this project; the
consistency check follows the idea of gpu-burn (github.com/wilicc/gpu-burn): a GPU that computes
the same product twice must get the same bits.

Each GPU gets its own thread. Correctness, two ways:
- reference: the first product's top-left block against the same block computed on the CPU in
  float32 from the same inputs; the largest difference, relative to the block's largest value,
  must stay within two units of rounding of the dtype (bf16 2^-7, fp16 2^-10);
- consistency: about once a second the product is compared bit for bit with the first one
  (cuBLAS is deterministic for the same inputs, shapes and GPU); any difference is a
  computation fault.
TFLOPS = 2 n^3 x products / seconds / 1e12, over the timed products (after a warm-up).

Prints ONE line of JSON (`"tool": "gpuval-gemm-burn"`, schema run-gpuval-gemm-burn). Exit status
0 when every GPU ran and computed correctly, 1 when a GPU computed wrongly, 2 when it could not
run (no GPU, torch without CUDA, a GPU that failed) - fail closed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# Before torch initialises CUDA: indices in nvidia-smi's order, and cuBLAS kept deterministic
# (the consistency check compares bits).
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch

TOOL = "gpuval-gemm-burn"
SCHEMA_VERSION = 1
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# Two units of rounding of the product's dtype (unit roundoff 2^-8 bf16, 2^-11 fp16); fp32 runs
# with TF32 off, so only the summation order differs from the CPU's.
TOLERANCE = {"bf16": 2.0**-7, "fp16": 2.0**-10, "fp32": 1e-4}
REFERENCE_BLOCK = 256
CONSISTENCY_EVERY_S = 1.0
WARMUP_PRODUCTS = 3
# NVML clocks event reasons (nvmlClocksEventReasons, formerly throttle reasons): bit -> name as
# nvidia-smi -q -x names them. GPU idle and application clocks are settings, not slowdowns.
EVENT_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}


@dataclass
class Sample:
    elapsed_s: float
    sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    throttle: list[str] = field(default_factory=list)


@dataclass
class GpuResult:
    index: int
    name: str | None = None
    pci_bus_id: str | None = None
    tflops: float | None = None
    iterations: int | None = None
    seconds: float | None = None
    max_abs_error: float | None = None
    correct: bool | None = None
    mismatches: int = 0
    error: str | None = None
    samples: list[Sample] = field(default_factory=list)


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in EVENT_BITS.items() if mask & bit]


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def smi_sampler(indices: Sequence[int]) -> Callable[[], dict[int, Sample]] | None:
    """Samples from nvidia-smi's csv query; None when nvidia-smi is missing."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    fields = "index,clocks.sm,temperature.gpu,power.draw,clocks_event_reasons.active"

    def sample() -> dict[int, Sample]:
        done = subprocess.run(
            [smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        found: dict[int, Sample] = {}
        for row in done.stdout.splitlines():
            cells = [c.strip() for c in row.split(",")]
            if len(cells) != 5 or not cells[0].isdigit() or int(cells[0]) not in indices:
                continue
            mask = int(cells[4], 16) if cells[4].startswith("0x") else 0
            found[int(cells[0])] = Sample(0.0, _number(cells[1]), _number(cells[2]),
                                          _number(cells[3]), throttle_names(mask))  # fmt: skip
        return found

    return sample


def nvml_sampler(indices: Sequence[int]) -> Callable[[], dict[int, Sample]] | None:
    """Samples through pynvml (nvidia-ml-py); None when it is not installed or fails."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        handles = {i: pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices}
    except Exception:  # no pynvml, no driver: nvidia-smi or nothing
        return None

    def sample() -> dict[int, Sample]:
        found = {}
        for index, handle in handles.items():
            clock = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
            temperature = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
            power = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
            mask = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
            found[index] = Sample(0.0, float(clock), float(temperature), power,
                                  throttle_names(int(mask)))  # fmt: skip
        return found

    return sample


class Sampler(threading.Thread):
    """Calls `sample` every `interval` seconds until stopped; keeps each GPU's samples."""

    def __init__(self, sample: Callable[[], dict[int, Sample]], interval: float) -> None:
        super().__init__(daemon=True)
        self.sample, self.interval = sample, interval
        self.samples: dict[int, list[Sample]] = {}
        self.stopped = threading.Event()
        self.started_at = time.perf_counter()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                taken = self.sample()
            except Exception:  # a sampler that fails leaves the burn alone
                taken = {}
            elapsed = round(time.perf_counter() - self.started_at, 2)
            for index, sample in taken.items():
                sample.elapsed_s = elapsed
                self.samples.setdefault(index, []).append(sample)
            self.stopped.wait(self.interval)


def reference_error(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> float:
    """Largest difference of c's top-left block from the CPU float32 product of the same inputs,
    relative to the block's largest value."""
    k = min(REFERENCE_BLOCK, a.shape[0])
    expected = a[:k, :].float().cpu() @ b[:, :k].float().cpu()
    got = c[:k, :k].float().cpu()
    scale = float(expected.abs().max()) or 1.0
    return float((got - expected).abs().max()) / scale


def burn(device: torch.device, dtype: str, size: int, seconds: float, result: GpuResult) -> None:
    """Multiply on `device` for `seconds`; fill in `result` (errors included, never raised)."""
    try:
        generator = torch.Generator(device="cpu").manual_seed(1234 + result.index)
        a = torch.randn(size, size, generator=generator).to(device=device, dtype=DTYPES[dtype])
        b = torch.randn(size, size, generator=generator).to(device=device, dtype=DTYPES[dtype])
        c = torch.matmul(a, b)
        synchronize(device)
        first = c.clone()
        result.max_abs_error = reference_error(a, b, first)
        for _ in range(WARMUP_PRODUCTS):
            torch.matmul(a, b, out=c)
        synchronize(device)
        batch, products, started = 1, 0, time.perf_counter()
        checked = started
        while True:
            for _ in range(batch):
                torch.matmul(a, b, out=c)
            synchronize(device)
            products += batch
            now = time.perf_counter()
            if now - checked >= CONSISTENCY_EVERY_S:
                result.mismatches += 0 if torch.equal(c, first) else 1
                checked = now
            if now - started >= seconds:
                break
            # About a tenth of a second per batch: few synchronisations, a prompt stop.
            batch = max(1, min(batch * 2, int(0.1 * products / (now - started)) or 1))
        elapsed = time.perf_counter() - started
        result.mismatches += 0 if torch.equal(c, first) else 1
        result.iterations, result.seconds = products, round(elapsed, 3)
        result.tflops = round(2.0 * size**3 * products / elapsed / 1e12, 6)
        result.correct = result.mismatches == 0 and result.max_abs_error <= TOLERANCE[dtype]
    except Exception as problem:  # an out-of-memory or a lost GPU is this GPU's result
        result.error = f"{type(problem).__name__}: {problem}".strip()[:500]
        result.correct = False


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _gpu_identity(index: int, result: GpuResult) -> None:
    properties = torch.cuda.get_device_properties(index)
    result.name = properties.name
    domain = getattr(properties, "pci_domain_id", None)
    bus = getattr(properties, "pci_bus_id", None)
    slot = getattr(properties, "pci_device_id", None)
    if None not in (domain, bus, slot):
        result.pci_bus_id = f"{domain:08x}:{bus:02x}:{slot:02x}.0"


def run(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    document: dict[str, Any] = {
        "tool": TOOL, "schema_version": SCHEMA_VERSION, "dtype": args.dtype,
        "matrix_size": args.size, "seconds_requested": args.seconds, "device_type": None,
        "torch_version": torch.__version__, "cuda_version": torch.version.cuda, "sampler": None,
        "gpus": [], "error": None,
    }  # fmt: skip
    cuda = torch.cuda.is_available()
    if args.device == "cpu":
        devices = [torch.device("cpu")]
    elif not cuda:
        why = (
            "torch was built without CUDA"
            if torch.version.cuda is None
            else ("no CUDA GPU visible (no driver, no device, or CUDA_VISIBLE_DEVICES hides them)")
        )
        document["error"] = f"cannot burn: {why} (torch.cuda.is_available() is False)"
        return document, 2
    else:
        count = torch.cuda.device_count()
        wanted = args.gpus if args.gpus is not None else list(range(count))
        missing = [i for i in wanted if i >= count]
        if missing:
            document["error"] = f"GPU(s) {missing} requested but only {count} visible"
            return document, 2
        devices = [torch.device("cuda", i) for i in wanted]
    document["device_type"] = devices[0].type
    if devices[0].type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    results = [GpuResult(d.index if d.index is not None else 0) for d in devices]
    sampler = None
    if devices[0].type == "cuda":
        for result in results:
            _gpu_identity(result.index, result)
        indices = [r.index for r in results]
        for name, factory in (("nvml", nvml_sampler), ("nvidia-smi", smi_sampler)):
            if (sample := factory(indices)) is not None:
                document["sampler"] = name
                sampler = Sampler(sample, args.sample_interval)
                sampler.start()
                break
    threads = [
        threading.Thread(target=burn, args=(d, args.dtype, args.size, args.seconds, r))
        for d, r in zip(devices, results, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if sampler is not None:
        sampler.stopped.set()
        sampler.join(timeout=15)
        for result in results:
            result.samples = sampler.samples.get(result.index, [])
    document["gpus"] = [asdict(r) for r in results]
    if any(r.error for r in results):
        return document, 2
    return document, 0 if all(r.correct for r in results) else 1


def gpu_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as problem:
        raise argparse.ArgumentTypeError(f"not a list of GPU indices: {text!r}") from problem


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="burn time per GPU")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--size", type=int, default=8192, help="n of the n x n matrices")
    parser.add_argument("--gpus", type=gpu_list, default=None, help="indices, e.g. 0,1 (all)")
    parser.add_argument("--sample-interval", type=float, default=1.0, help="seconds")
    parser.add_argument(
        "--device", choices=["auto", "cuda", "cpu"], default="auto",
        help="cpu: burn the CPU instead (tests); auto and cuda: GPUs only",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.size < 1:
        parser.error("--seconds and --size must be positive")
    document, status = run(args)
    print(json.dumps(document), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
