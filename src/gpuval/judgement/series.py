"""What the charts draw, taken once from the parsed runs: busbw against message size (named and
classified the way the checks name them, with the busbw the check judges and the peak it was
judged against), P2P bandwidth and latency matrices, and `nvidia-smi topo -m` link matrices.
Runs are read as plain dicts (the run schemas' field names)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from gpuval.checks.model import CLUSTER, Expectation
from gpuval.checks.nccl import Sample, judged_sample
from gpuval.checks.references import collective_name, is_multinode, run_hosts
from gpuval.evidence import Parsed, ParsedFile
from gpuval.judgement.model import BusbwSeries, P2PMatrices, TopoRun, off_diagonal
from gpuval.records.base import to_jsonable
from gpuval.records.nccl import NcclRun

NCCL_TOOLS = frozenset({"nccl-tests", "rccl-tests"})
BENCH_TOOL = "all_reduce_bench"  # ml-engineering's torch.distributed benchmark
BUSBW_TOOLS = NCCL_TOOLS | {BENCH_TOOL}
P2P_TOOL = "p2pBandwidthLatencyTest"
TOPO_TOOL = "nvidia-smi-topo"
UNIDIRECTIONAL_P2P = "bandwidth_unidirectional_p2p_enabled"
SERIES_TOOLS = BUSBW_TOOLS | {P2P_TOOL, TOPO_TOOL}  # the runs the charts draw


@dataclass(frozen=True)
class ToolRun(Parsed[object]):
    """One parsed run of one file."""

    index: int  # position in the file's runs

    @cached_property
    def data(self) -> dict[str, Any]:
        """The run's JSON document (field names of the run schemas), made once when a reader
        asks: nccl-tests runs, the bulk of a large run, are read as records instead."""
        document = to_jsonable(self.record)
        return document if isinstance(document, dict) else {}


def tool_runs(files: Iterable[ParsedFile], tools: AbstractSet[str]) -> list[ToolRun]:
    """Every parsed run of the `tools` named (those a reader draws or lists), in file order."""
    return [
        ToolRun(file, run, index)
        for file in files
        if file.tool in tools
        for index, run in enumerate(file.runs)
    ]


def finite_number(value: Any) -> float | None:
    """A finite int or float as a float; anything else (bool, text, NaN, None) None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _what_ran(run: ToolRun) -> tuple[bool, str]:
    """(across nodes?, collective) as the judge reads them from the run's record."""
    if isinstance(run.record, NcclRun):
        return is_multinode(run.file, run_hosts(run.record)), collective_name(run.record, run.file)
    return False, str(run.data.get("collective") or "all_reduce")


class _Peaks:
    """The first expectation of each (host, subject), looked up in one step: a thousand nodes
    have thousands of runs and of expectations."""

    def __init__(self, expectations: list[Expectation]) -> None:
        self.first: dict[tuple[str, str], tuple[int, Expectation]] = {}
        for position, expectation in enumerate(expectations):
            self.first.setdefault((expectation.host, expectation.subject), (position, expectation))

    def peak(self, host: str, subject: str) -> Expectation | None:
        """The host's (or the cluster's) expectation for `subject`, whichever came first."""
        found = [f for f in (self.first.get((host, subject)), self.first.get((CLUSTER, subject)))
                 if f is not None]  # fmt: skip
        return min(found, key=lambda f: f[0])[1] if found else None


def _busbw_cells(run: ToolRun) -> Iterator[tuple[Any, Any]]:
    """(size, busbw) of each row as printed: nccl-tests' out-of-place half."""
    if isinstance(run.record, NcclRun):
        # two columns of the table at once: a row object per row was most of the series' time
        table = run.record.rows
        yield from zip(table.column("size_bytes"), table.column("busbw_gbps", "out_of_place"),
                       strict=True)  # fmt: skip
    else:
        for row in run.data.get("rows") or []:
            yield row.get("size_bytes"), row.get("busbw_gbps")


def busbw_series(
    runs: list[ToolRun], expectations: list[Expectation], min_bytes: int
) -> list[BusbwSeries]:
    found = []
    peaks = _Peaks(expectations)
    for run in (run for run in runs if run.tool in BUSBW_TOOLS):
        points = []
        for size, printed in _busbw_cells(run):
            busbw = finite_number(printed)
            # size 0 has no place on a log axis
            if isinstance(size, int) and size > 0 and busbw is not None:
                points.append((size, busbw))
        points.sort()
        multinode, collective = _what_ran(run)
        key = collective if run.tool in NCCL_TOOLS else f"{run.tool} {collective}"
        judged = judged_sample([Sample(size, bw, None) for size, bw in points], min_bytes)
        scope = "internode" if multinode else "intranode"
        found.append(
            BusbwSeries(
                tool=run.tool,
                host=run.host,
                multinode=multinode,
                collective=collective,
                source=run.file.path,
                sizes=tuple(p[0] for p in points),
                busbw_gbps=tuple(p[1] for p in points),
                key=f"internode {key}" if multinode else key,
                large_message_gbps=judged.sample.busbw_gbps if judged else None,
                peak=peaks.peak(run.host, f"{scope} {collective}"),
            )
        )
    return found


def _matrix(value: Any) -> list[list[float | None]] | None:
    if not isinstance(value, list) or not all(isinstance(row, list) for row in value):
        return None
    return [[finite_number(cell) for cell in row] for row in value]


def p2p_runs(runs: list[ToolRun]) -> list[P2PMatrices]:
    found = []
    for run in (run for run in runs if run.tool == P2P_TOOL):
        raw_matrices = run.data.get("matrices") or {}
        matrices = {name: m for name, value in raw_matrices.items() if (m := _matrix(value))}
        unidirectional = matrices.get(UNIDIRECTIONAL_P2P)
        lowest = min(off_diagonal(unidirectional), default=None) if unidirectional else None
        found.append(P2PMatrices(run.host, run.file.path, matrices, lowest))
    return found


def _strings(value: Any) -> list[str | None]:
    return [None if item is None else str(item) for item in value or []]


def _per_device(value: Any) -> dict[str, str | None]:
    if not isinstance(value, dict):
        return {}
    return {str(k): None if v is None else str(v) for k, v in value.items()}


def topo_runs(runs: list[ToolRun]) -> list[TopoRun]:
    """`nvidia-smi topo -m` link matrices (not the `topo -p2p` capability ones)."""
    found = []
    for run in (run for run in runs if run.tool == TOPO_TOOL):
        data = run.data
        if data.get("matrix", "topology") != "topology":
            continue
        legend = data.get("nic_legend") or {}
        found.append(
            TopoRun(
                host=run.host,
                source=run.file.path,
                devices=[str(d) for d in data.get("devices") or []],
                links=[_strings(row) for row in data.get("links") or []],
                cpu_affinity=_per_device(data.get("cpu_affinity")),
                numa_affinity=_per_device(data.get("numa_affinity")),
                nic_legend={str(k): str(v) for k, v in legend.items()}
                if isinstance(legend, dict)
                else {},
            )
        )
    return found
