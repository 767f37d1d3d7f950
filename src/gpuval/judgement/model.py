"""RunJudgement: a run judged once, typed; every output (results.json, summary.json, report.html,
junit.xml, measurements.csv, Prometheus, history, the webhook, the Ansible plugins) is a view of
it and judges nothing again. Besides the checks and the verdict it carries what the judge derived
on the way, so no output derives it a second time: the per-host metrics and key figures the
baseline and value rules judged, the outliers, the busbw series, P2P matrices and topology
matrices the charts draw, and the rows of measurements.csv.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from gpuval.checks.baseline import Baseline
from gpuval.checks.model import Check, Expectation, Status
from gpuval.checks.pairs import PairAnalysis
from gpuval.checks.racks import Rack
from gpuval.checks.thresholds import Thresholds
from gpuval.evidence import HostFacts
from gpuval.profile import Profile
from gpuval.records.base import Diagnostic
from gpuval.records.key_figures import KeyFigure
from gpuval.runfolder import Sidecar

__all__ = [
    "BUSBW_PREFIX", "P2P_METRIC", "BusbwSeries", "Cell", "FileEntry", "HostFacts", "HostMetrics",
    "MeasurementRow", "Measurements", "Outlier", "P2PMatrices", "RunJudgement", "TopoRun",
    "busbw_metric", "off_diagonal",
]  # fmt: skip

P2P_METRIC = "p2p_min_unidirectional_gbps"
BUSBW_PREFIX = "busbw_gbps "


def busbw_metric(key: str) -> str:
    """The host metric of a busbw series key: "busbw_gbps internode all_reduce"."""
    return BUSBW_PREFIX + key


@dataclass(frozen=True)
class FileEntry:
    """One raw file of the run as the outputs show it."""

    host: str
    path: str  # relative to the run folder
    tool: str | None  # the parser that read it; None: not read
    step: Sidecar | None  # what ran to write it; None: no sidecar
    errors: list[Diagnostic]  # the parser's, as it gave them
    warnings: list[Diagnostic]
    run_count: int  # how many runs the parser read from it (their records are the evidence's)


@dataclass(frozen=True)
class BusbwSeries:
    """busbw against message size from one run on one host (nccl-tests: out-of-place), with the
    busbw the judge takes from it and the per-direction peak it was judged against."""

    tool: str
    host: str
    multinode: bool
    collective: str
    source: str
    sizes: tuple[int, ...]
    busbw_gbps: tuple[float, ...]
    key: str  # "all_reduce", "all_reduce_bench all_reduce", "internode all_reduce"
    large_message_gbps: float | None  # the floor of the large-message plateau; None: no data
    peak: Expectation | None


def off_diagonal(matrix: list[list[float | None]]) -> list[float]:
    """The cells of a GPU x GPU matrix between two different GPUs."""
    return [
        cell
        for i, row in enumerate(matrix)
        for j, cell in enumerate(row)
        if i != j and cell is not None
    ]


@dataclass(frozen=True)
class P2PMatrices:
    host: str
    source: str
    matrices: dict[str, list[list[float | None]]]
    min_unidirectional: float | None  # the lowest off-diagonal cell, P2P enabled


@dataclass(frozen=True)
class TopoRun:
    """One `nvidia-smi topo -m` link matrix."""

    host: str
    source: str
    devices: list[str]
    links: list[list[str | None]]
    cpu_affinity: dict[str, str | None] = field(default_factory=dict)  # device -> as printed
    numa_affinity: dict[str, str | None] = field(default_factory=dict)
    nic_legend: dict[str, str] = field(default_factory=dict)

    def signature(self) -> tuple[Any, ...]:
        """Equal for hosts wired the same way, so the report shows one matrix per wiring."""
        return (
            tuple(self.devices),
            tuple(tuple(row) for row in self.links),
            tuple(sorted(self.cpu_affinity.items())),
            tuple(sorted(self.numa_affinity.items())),
            tuple(sorted(self.nic_legend.items())),
        )


@dataclass(frozen=True)
class Outlier:
    """A host metric below host_outlier_fraction of the median of the hosts that have it."""

    host: str
    metric: str
    value: float
    median: float


@dataclass(frozen=True)
class HostMetrics:
    """The key metrics per host (several runs of one metric on a host: the lowest)."""

    names: list[str]  # metric names, in the order first measured
    values: dict[str, dict[str, float]]  # host -> metric -> value

    def of(self, host: str) -> dict[str, float | None]:
        """Every metric of the run for `host`; None where the host has no such run."""
        found = self.values.get(host, {})
        return {name: found.get(name) for name in self.names}


Cell = int | float | str | None


# Slots, and not frozen: a thousand nodes' runs have millions of rows, and a frozen dataclass
# sets each of its 24 fields through object.__setattr__ (2.5x the time). Nothing writes to one.
@dataclass(slots=True)
class MeasurementRow:
    """One row of measurements.csv: a number exactly as printed, with where it came from.
    src/dst: GPU indices of matrix cells; host_a/host_b/attempt: pair tests (metric
    "pair_<kind>"; iperf3: sender, receiver)."""

    host: str
    file: str
    tool: str | None
    run: int | None = None
    collective: Cell = None
    nranks: Cell = None
    size_bytes: Cell = None
    count: Cell = None
    dtype: Cell = None
    redop: Cell = None
    placement: str | None = None
    time_us: Cell = None
    algbw_gbps: Cell = None
    busbw_gbps: Cell = None
    wrong: Cell = None
    metric: Cell = None
    src: Cell = None
    dst: Cell = None
    value: Cell = None
    unit: Cell = None
    line: Cell = None
    host_a: str | None = None
    host_b: str | None = None
    attempt: int | None = None


MEASUREMENT_FIELDS = tuple(f.name for f in fields(MeasurementRow))


@dataclass
class Measurements:
    """The rows of measurements.csv column by column (a field of MeasurementRow -> its cell of
    every row): a thousand nodes' runs make hundreds of thousands of rows, and a row object per
    row cost more than everything else the judge makes. Rows go in one by one (`add`) or a
    run's table at a time (`add_columns`)."""

    columns: dict[str, list[Cell]] = field(
        default_factory=lambda: {name: [] for name in MEASUREMENT_FIELDS}
    )

    @classmethod
    def of(cls, rows: Iterable[MeasurementRow]) -> Measurements:
        """The table of `rows`, in order."""
        listed = list(rows)
        return cls({name: [getattr(row, name) for row in listed] for name in MEASUREMENT_FIELDS})

    def add(self, row: MeasurementRow) -> None:
        for name, cells in self.columns.items():
            cells.append(getattr(row, name))

    def add_columns(self, count: int, cells: dict[str, list[Cell]], same: dict[str, Cell]) -> None:
        """`count` rows: `cells`, a field's cell of each row; `same`, a field's cell that every
        row has; a field in neither, an empty cell in every row."""
        for name, column in self.columns.items():
            given = cells.get(name)
            if given is not None:
                assert len(given) == count, name
                column += given
            else:
                column += [same.get(name)] * count

    def rows(self) -> Iterator[MeasurementRow]:
        """The rows as objects, in order."""
        for values in zip(*self.columns.values(), strict=True):
            yield MeasurementRow(*values)


@dataclass
class RunJudgement:
    """A judged run: made once by gpuval.judgement.judge_run_folder, read by every output."""

    run_id: str
    generated_at: str
    gpuval_version: str
    verdict: Status
    meta: dict[str, Any]  # run.json as written by the playbook
    hosts: list[HostFacts]
    host_names: list[str]  # inventory order, then any other host with checks or files
    files: list[FileEntry]
    checks: list[Check]
    expectations: list[Expectation]
    diagnostics: list[Diagnostic]  # run-folder problems
    pairs: PairAnalysis
    pair_tables: dict[str, list[dict[str, Any]]]  # pairs.to_dict(): "tries", "pairs", "nodes"
    thresholds: Thresholds
    profile: Profile | None  # the acceptance profile; None: gpuval's default thresholds
    baseline: Baseline | None  # the baseline judged against; None: none
    host_metrics: HostMetrics
    figures: list[KeyFigure]  # host by host in host order
    outliers: list[Outlier]
    busbw_series: list[BusbwSeries]
    p2p_runs: list[P2PMatrices]
    topo_runs: list[TopoRun]
    measurements: Measurements
    racks: list[Rack] = field(default_factory=list)  # NVLink domains: declared, else as reported
    # The copies a later one replaced (superseded/<host>/<name>), kept, never judged.
    superseded: list[str] = field(default_factory=list)

    @property
    def profile_name(self) -> str | None:
        return self.profile.name if self.profile else None

    @property
    def baseline_name(self) -> str | None:
        return self.baseline.name if self.baseline else None

    @property
    def parse_problems(self) -> list[Diagnostic]:
        """Every parser error and warning, file by file."""
        return [d for f in self.files for d in (*f.errors, *f.warnings)]
