"""Records for the suite's own node programs (gpuval.nodebench): the all-reduce benchmark's JSON
(schema: run-gpuval-allreduce-bench.schema.json) and the MPI preflight's lines
(run-mpi-preflight.schema.json). Values are as printed; what the output lacks is None."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuval.records.nccl import NcclWarning


@dataclass
class CollectiveBenchRow:
    """One message size: bandwidths in GB/s (10**9 bytes per second)."""

    size_bytes: int
    count: int | None
    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None  # elements that differed from n(n+1)/2 after the check all-reduce


@dataclass
class CollectiveBenchRun:
    """One JSON document of gpuval-allreduce-bench (printed by rank 0). `nccl_warnings`: the
    `NCCL WARN` lines of the log printed before it (or after the last one); a log with warnings
    and no document gives one run with no rows (complete False) that carries them."""

    schema_version: int | None
    collective: str | None
    world_size: int | None
    backend: str | None  # "nccl" | "gloo"
    device_type: str | None  # "cuda" | "cpu"
    dtype: str | None
    hosts: list[str]  # hostname of each rank, by rank
    devices: list[str]  # device name of each rank, by rank
    torch_version: str | None
    cuda_version: str | None
    nccl_version: str | None
    warmup: int | None
    iterations: int | None
    started_at: str | None
    duration_s: float | None
    rows: list[CollectiveBenchRow]
    wrong_total: int | None
    correct: bool | None  # as printed; None when absent
    complete: bool  # rows present, every row read, and the correctness fields printed
    line: int
    nccl_warnings: list[NcclWarning] = field(default_factory=list)


@dataclass
class MpiRank:
    """`gpuval-mpi-preflight rank R/N host H`: one rank that started and reported."""

    rank: int
    size: int
    host: str
    line: int


@dataclass
class MpiProblem:
    """A failure named by the preflight itself or by the launcher (mpirun, ssh)."""

    message: str
    host: str | None
    rank: int | None
    line: int


@dataclass
class MpiPreflightRun:
    """One MPI preflight: hello from every rank, all-to-all, a tiny allreduce."""

    world_size: int | None  # N of the rank lines (or of the allreduce expectation)
    library: str | None  # MPI_Get_library_version, first line
    ranks: list[MpiRank] = field(default_factory=list)
    missing_ranks: list[int] = field(default_factory=list)  # 0..N-1 without a rank line
    alltoall_pairs: int | None = None
    alltoall_bad: int | None = None
    allreduce_sum: int | None = None
    allreduce_expected: int | None = None
    problems: list[MpiProblem] = field(default_factory=list)
    ok: bool = False  # the OK line was printed and nothing contradicts it
    complete: bool = False  # a final OK or FAILED line was printed
    line: int = 1

    @property
    def passed(self) -> bool:
        """Its final line said OK, and nothing contradicts it."""
        return self.ok and self.complete
