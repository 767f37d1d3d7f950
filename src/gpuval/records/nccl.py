"""Records for nccl-tests / rccl-tests runs (schema: run-nccl-tests.schema.json).

Every number is kept as printed; a value the output does not show is None, never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# The collectives nccl-tests and rccl-tests name in `# Collective test starting: X_perf`.
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
    "hypercube",
    "gather",
    "scatter",
)

# The `extra` of every half that has no extra columns: one shared empty mapping, where a dict
# per half was the largest part of a parsed log (two halves per row). Read-only by its type
# (Mapping); a plain dict so that the parse cache can pickle it (a MappingProxyType cannot be).
NO_EXTRA: Mapping[str, float | None] = {}


def _no_extra() -> Mapping[str, float | None]:
    return NO_EXTRA  # a factory: dataclasses refuse an unhashable default


@dataclass(slots=True)
class NcclHalf:
    """The out-of-place or the in-place half of one table row."""

    time_us: float | None = None
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    # Count of wrong elements (current builds); None where N/A or where only `error` is printed.
    wrong: int | None = None
    # Old builds print a maximum error magnitude (`0e+00`, `1e-06`) instead of a count.
    error: float | None = None
    # Columns beyond the classic four (`-I 1` per-iteration statistics: i_min, i_max, ...).
    extra: Mapping[str, float | None] = field(default_factory=_no_extra)


@dataclass(slots=True)
class NcclRow:
    size_bytes: int
    count: int | None = None
    dtype: str | None = None
    redop: str | None = None
    root: int | None = None
    out_of_place: NcclHalf | None = None
    in_place: NcclHalf | None = None
    # `-S 1` appends the wall-clock time the row was printed.
    timestamp: str | None = None
    line: int | None = None


@dataclass(slots=True)
class NcclDevice:
    rank: int
    group: int | None = None
    pid: int | None = None
    host: str | None = None
    device: int | None = None
    pci_bus: str | None = None
    name: str | None = None


@dataclass(slots=True)
class NcclFailure:
    """`HOST: Test NCCL failure common.cu:1204 'msg'` and kin; `line`: the source line named."""

    host: str | None
    kind: str  # "nccl" | "cuda" | "other"
    file: str | None
    line: int | None
    message: str
    pid: int | None = None
    # ` .. HOST pid N: Test failure common.cu:915` lines that propagated this failure.
    trace: list[str] = field(default_factory=list)
    log_line: int | None = None


@dataclass(slots=True)
class NcclWarning:
    """One `NCCL WARN` line of NCCL_DEBUG output."""

    host: str | None
    message: str
    log_line: int


@dataclass(slots=True)
class NcclFailedLine:
    """A line of the text output that says FAILED, as printed (launcher prefix removed):
    `# Out of bounds values : 3 FAILED`, `# Avg bus bandwidth : 0 FAILED` (the
    NCCL_TESTS_MIN_BW check), `# Bitwise mismatches : 2 FAILED` (builds with `-B`)."""

    text: str
    line: int


@dataclass(slots=True)
class NcclOutOfBounds:
    count: int
    ok: bool


@dataclass(slots=True)
class NcclRun:
    """One run of one nccl-tests / rccl-tests binary, as far as the output shows it."""

    collective: str | None = None
    collective_inferred: bool = False
    program: str | None = None
    command: str | None = None
    nranks: int | None = None
    complete: bool = False
    rows: list[NcclRow] = field(default_factory=list)
    avg_busbw_gbps: float | None = None
    avg_busbw_check: str | None = None
    out_of_bounds: NcclOutOfBounds | None = None
    devices: list[NcclDevice] = field(default_factory=list)
    nccl_version: str | None = None
    nccl_tests_version: str | None = None
    runtime_versions: dict[str, str] = field(default_factory=dict)
    header: dict[str, int | str | bool] = field(default_factory=dict)
    # Tuples: the runs of a log that print the same column header share them.
    columns: tuple[str, ...] = ()
    extra_columns: tuple[str, ...] = ()
    time_column: str = "time"
    hosts: list[str] = field(default_factory=list)
    nccl_versions_by_host: dict[str, str] = field(default_factory=dict)
    transports: list[str] = field(default_factory=list)
    # What `Channel ... via X` lines named (the data's paths), and whether NCCL said the run
    # used multi-node NVLink (None: not said); both from NCCL_DEBUG=INFO.
    channel_transports: list[str] = field(default_factory=list)
    mnnvl: bool | None = None
    algorithms: list[str] = field(default_factory=list)
    nccl_warnings: list[NcclWarning] = field(default_factory=list)
    failures: list[NcclFailure] = field(default_factory=list)
    # Every line that says FAILED (text output; a -J report's verdicts are out_of_bounds.ok
    # and avg_busbw_check).
    failed_lines: list[NcclFailedLine] = field(default_factory=list)
    json_output: str | None = None
    start_line: int | None = None
    end_line: int | None = None
