"""Records for single-node bandwidth tools: ml-engineering's all_reduce_bench, nvbandwidth."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from gpuval.records.nccl import NcclWarning

AllReduceFormat = Literal["sweep-table", "profile-table", "single-payload", "no-result"]


@dataclass
class AllReduceEnvironment:
    """The `Environment:` block (2025-07 and later builds), or the older `Device info:` line."""

    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    device_name: str | None = None
    hardware: str | None = None  # the hardware line as printed, e.g. a _CudaDeviceProperties repr


@dataclass
class AllReduceRow:
    """One measured payload: bandwidths in GB/s (10**9 bytes per second)."""

    size: str  # as printed: "32KiB", "4.0GB"
    size_bytes: int
    busbw_gbps: float | None
    algbw_gbps: float | None
    line: int
    iteration: int | None = None  # profile tables: the trial's 1-based index


@dataclass
class AllReduceBenchRun:
    """One result block of all_reduce_bench.py.

    `bandwidth_scale` is the factor applied to every printed bandwidth to reach GB/s: 1 for
    `GBps` (10**9 B/s), 0.125 for `Gbps`, 1.073741824 for the January 2025 builds that divided
    by 2**30 while printing `GBps`. `repeats` counts identical copies of this block in the file
    (the same table captured twice, e.g. by `--tee` plus stdout); they are kept once.
    `nccl_warnings`: the `NCCL WARN` lines printed before this block (or after the last one).
    A file with warnings but no result block gives one `no-result` run (collective None, no
    rows, incomplete) that carries them: the benchmark died, and they may say why.
    """

    format: AllReduceFormat
    collective: str | None
    nranks: int | None
    trials: int | None
    warmups: int | None
    options: str | None  # extra trial notes, e.g. "up to 10 queued calls per trial"
    environment: AllReduceEnvironment
    bandwidth_scale: float
    rows: list[AllReduceRow]
    complete: bool
    elapsed: str | None
    line: int
    repeats: int = 1
    nccl_warnings: list[NcclWarning] = field(default_factory=list)


NvbandwidthStatus = Literal["passed", "waived", "error", "not_found", "incomplete"]


@dataclass
class NvbandwidthMatrix:
    """One printed matrix; cells are None where nvbandwidth printed N/A."""

    description: str
    unit: str | None  # "GB/s", "ns", or None when the description names none
    row_labels: list[str]
    column_labels: list[str]
    values: list[list[float | None]]
    sum: float | None  # the `SUM <key> <value>` line as printed
    sum_key: str | None
    coefficient_of_variation: float | None  # v0.9+: `COEFFICIENT_OF_VARIATION <key> <value>`
    line: int | None


@dataclass
class NvbandwidthTest:
    """One testcase. Text output of v0.6+ prints a waived test as a bare `Waived:`, so `name`
    is None there; bidirectional device-to-device tests print several matrices."""

    name: str | None
    status: NvbandwidthStatus
    matrices: list[NvbandwidthMatrix] = field(default_factory=list)
    error: str | None = None
    line: int | None = None


@dataclass
class NvbandwidthDevice:
    index: int
    name: str
    pci_bus_id: str | None = None
    host: str | None = None


@dataclass
class NvbandwidthRun:
    format: Literal["text", "json"]
    version: str | None = None
    git_version: str | None = None
    cuda_runtime_version: int | None = None
    cuda_driver_version: int | None = None
    driver_version: str | None = None
    devices: list[NvbandwidthDevice] = field(default_factory=list)
    tests: list[NvbandwidthTest] = field(default_factory=list)
    error: str | None = None
    line: int | None = None
