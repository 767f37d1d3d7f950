"""The normalised run: what `results.json` holds and what the report renders.

Produced by `gpuval.normalise` (raw folder -> records) and `gpuval.analysis.checks` (records ->
checks); consumed by `gpuval.report`. Serialised with `gpuval.records.base.to_jsonable` and
validated against `results.schema.json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gpuval.records.base import Diagnostic, ParseResult

Status = Literal["pass", "warn", "fail", "error"]
StepProblem = Literal["skipped", "timed_out", "unfinished", "exit_status"]

# Worst first: a run's verdict is the worst status among its checks.
STATUS_ORDER: tuple[Status, ...] = ("error", "fail", "warn", "pass")

CLUSTER = "cluster"  # the `host` of checks about the whole cluster rather than one node


def worst(statuses: list[Status]) -> Status:
    """The most severe status; an empty list is an error (no evidence is never a pass)."""
    for status in STATUS_ORDER:
        if status in statuses:
            return status
    return "error"


@dataclass
class Check:
    """One judgement, readable on its own: what was measured, against what, and why it matters."""

    check_id: str  # stable, e.g. "nccl-tests.all_reduce.busbw"
    host: str  # a host name, or CLUSTER
    # correctness | completeness | bandwidth | p2p | topology | transport | consistency
    category: str
    status: Status
    reason: str  # one line a person understands
    measured: float | str | None = None
    reference: float | str | None = None
    unit: str | None = None
    source: str | None = None  # raw file relative to the run folder, ":line" when known


@dataclass
class Sidecar:
    """What was run to produce one raw output (`<name>.meta.json` beside it on the node)."""

    name: str
    host: str
    phase: str
    raw: str | None  # raw file name in the same folder; None when the step was skipped
    command: str | None = None
    tool: str | None = None  # parser hint; None: detect from content
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None  # None: it did not finish (killed, host lost, still running)
    timed_out: bool = False
    timeout_s: float | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    skipped: str | None = None  # why the step did not run, when it did not

    def problem(self) -> tuple[StepProblem, str] | None:
        """What went wrong with the step, most telling first, with its detail: the skip reason,
        the time limit text (" after 60 s"), or the exit status; None when it ran and exited 0."""
        if self.skipped:
            return "skipped", self.skipped
        if self.timed_out:
            return "timed_out", f" after {self.timeout_s:g} s" if self.timeout_s is not None else ""
        if self.exit_code is None:
            return "unfinished", "killed, host lost, or still running"
        if self.exit_code != 0:
            return "exit_status", str(self.exit_code)
        return None


@dataclass
class RawFile:
    """One raw output of the run folder and what the parsers made of it."""

    host: str
    path: str  # relative to the run folder, e.g. "raw/node1/nccl-all_reduce.txt"
    sidecar: Sidecar | None
    parse: ParseResult | None  # None: unrecognised, missing, or a skipped step


@dataclass
class HostFacts:
    """What a host is, gathered from its preflight outputs and benchmark headers."""

    name: str
    reachable: bool = True
    gpu_model: str | None = None
    gpu_count: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    nccl_version: str | None = None
    mpi_version: str | None = None
    nccl_tests_version: str | None = None
    gpu_name: str | None = None  # as printed; gpu_model is the catalog model it maps to
    cuda_toolkit_version: str | None = None  # nvcc's; cuda_version is the driver's (nvidia-smi)


@dataclass
class Expectation:
    """The per-direction (unidirectional) peak a measurement is judged against, and its source."""

    host: str
    subject: str  # e.g. "intranode-collective", "p2p GPU0->GPU1", "internode"
    per_direction_gbps: float
    duplex_gbps: float
    basis: str  # how it was derived, e.g. "NVLink 4 x 18 links (NV18) = 450 GB/s per direction"
    source: str | None = None  # where the peak's numbers come from (hardware.json "source")


@dataclass
class RunResults:
    """A judged run: everything the report, summary.json, junit.xml and measurements.csv need."""

    run_id: str
    generated_at: str
    gpuval_version: str
    verdict: Status
    hosts: list[HostFacts]
    files: list[RawFile]
    checks: list[Check]
    expectations: list[Expectation]
    diagnostics: list[Diagnostic] = field(default_factory=list)  # run-folder problems
    meta: dict[str, Any] = field(default_factory=dict)  # run.json as written by the playbook
    # The pair analysis (gpuval.analysis.pairs.PairAnalysis.to_dict): tables "tries", "pairs",
    # "nodes"; {} when it was not run.
    pairs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
