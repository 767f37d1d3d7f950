"""Normalise a judged run: results.json (the whole RunResults, schema-validated) and the long
tables (measurements.csv) that the report and notebooks read. Also the typed views of parsed
runs that the checks and tables share, and the HostFacts gathered from them.

Tables are pure functions returning DataFrames; nothing here judges.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gpuval.analysis.model import HostFacts, RawFile, RunResults
from gpuval.analysis.pairs import read_tries
from gpuval.catalog import identify_gpu
from gpuval.records.base import to_jsonable
from gpuval.runfolder import RunFolder
from gpuval.schema import validate

NCCL_TOOLS = frozenset({"nccl-tests", "rccl-tests"})
P2P_TOOLS = frozenset({"p2pBandwidthLatencyTest"})
TOPO_TOOLS = frozenset({"nvidia-smi-topo"})
SMI_TOOLS = frozenset({"nvidia-smi", "nvidia-smi-xml", "nvidia-smi-csv", "nvidia-smi-nvlink"})
BENCH_TOOLS = frozenset({"all_reduce_bench"})
COLLECTIVE_BENCH_TOOLS = frozenset({"gpuval-allreduce-bench"})  # the suite's own node program
IB_TOOLS = frozenset({"ibstat", "ibv_devinfo"})
VERSION_TOOLS = frozenset({"nvcc-version", "mpirun-version", "nccl-version", "os-release"})
NVBANDWIDTH_TOOLS = frozenset({"nvbandwidth"})
# Tools whose runs are measurements; the others describe the hardware (inventory).
MEASURING_TOOLS = (
    NCCL_TOOLS | P2P_TOOLS | BENCH_TOOLS | COLLECTIVE_BENCH_TOOLS | NVBANDWIDTH_TOOLS | {"iperf3"}
)

# src/dst: GPU indices of matrix cells; host_a/host_b/try: pair tests (metric "pair_<kind>";
# iperf3: sender, receiver).
MEASUREMENT_COLUMNS = [
    "host", "file", "tool", "run", "collective", "nranks", "size_bytes", "count", "dtype",
    "redop", "placement", "time_us", "algbw_gbps", "busbw_gbps", "wrong", "metric", "src", "dst",
    "value", "unit", "line", "host_a", "host_b", "try",
]  # fmt: skip


@dataclass(frozen=True)
class ToolRun:
    """One parsed run of one raw file, as its JSON document (field names of the run schemas)."""

    file: RawFile
    index: int  # position in the file's runs
    data: dict[str, Any]

    @property
    def host(self) -> str:
        return self.file.host

    @property
    def tool(self) -> str:
        return self.file.parse.tool if self.file.parse else ""

    def source(self, line: int | None = None) -> str:
        return f"{self.file.path}:{line}" if line else self.file.path


def tool_runs(files: Iterable[RawFile], tools: frozenset[str] | None = None) -> Iterator[ToolRun]:
    """Every parsed run of the given tools (all tools when None), in file order."""
    for raw in files:
        if raw.parse is None or (tools is not None and raw.parse.tool not in tools):
            continue
        for index, run in enumerate(raw.parse.runs):
            data = to_jsonable(run)
            if isinstance(data, dict):
                yield ToolRun(raw, index, data)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# ---------------------------------------------------------------- host facts


def _first_text(values: Iterable[Any]) -> str | None:
    for value in values:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _gpu_names(runs: list[ToolRun]) -> list[str]:
    """GPU names from nvidia-smi, p2p and benchmark device lists, preflight outputs first."""
    names: list[str] = []
    for run in runs:
        for key in ("gpus", "devices"):
            for device in as_list(run.data.get(key)):
                name = as_dict(device).get("name") or as_dict(device).get("product_name")
                if isinstance(name, str) and name.strip():
                    names.append(name.strip())
        env = as_dict(run.data.get("environment"))
        if isinstance(env.get("device_name"), str):
            names.append(env["device_name"])
        elif isinstance(env.get("hardware"), str):
            match = re.search(r"name='([^']+)'", env["hardware"])
            if match:
                names.append(match.group(1))
    return names


def _declared_model(meta: dict[str, Any], host: str) -> str | None:
    """run.json config.hardware.<host>.gpu_model: the inventory's word when no output names it."""
    hardware = as_dict(as_dict(meta.get("config")).get("hardware"))
    declared = as_dict(hardware.get(host)).get("gpu_model")
    return declared if isinstance(declared, str) else None


def _gpu_count(runs: list[ToolRun]) -> int | None:
    """GPUs of the host: nvidia-smi's list, else topo's GPU columns, else p2p's num_gpus, else
    the devices of a single-host benchmark (a multi-host run lists other hosts' GPUs too)."""
    counts: dict[str, int] = {}
    for run in runs:
        if run.tool in SMI_TOOLS:
            found = len(as_list(run.data.get("gpus")))
        elif run.tool in TOPO_TOOLS:
            found = sum(str(d).startswith("GPU") for d in as_list(run.data.get("devices")))
        elif run.tool in P2P_TOOLS:
            found = int(number(run.data.get("num_gpus")) or 0)
        elif run.tool in NCCL_TOOLS and len(as_list(run.data.get("hosts"))) <= 1:
            found = len(as_list(run.data.get("devices")))
        else:
            continue
        kind = "smi" if run.tool in SMI_TOOLS else run.tool
        counts[kind] = max(counts.get(kind, 0), found)
    for kind in ("smi", "nvidia-smi-topo", "p2pBandwidthLatencyTest", "nccl-tests", "rccl-tests"):
        if counts.get(kind):
            return counts[kind]
    return None


def _versions(runs: list[ToolRun], keys: tuple[str, ...]) -> str | None:
    values = []
    for run in runs:
        for key in keys:
            values.append(run.data.get(key))
            values.append(as_dict(run.data.get("environment")).get(key.split("_")[0]))
    return _first_text(values)


_NCCL_VERSION = re.compile(r"(\d+)\s*[.,]\s*(\d+)\s*[.,]\s*(\d+)")


def nccl_version_number(text: str | None) -> str | None:
    """'2.26.2+cuda12.8' (NCCL_DEBUG) and '(2, 26, 2)' (torch) both -> '2.26.2', so hosts
    read by different tools compare equal."""
    match = _NCCL_VERSION.search(text or "")
    return ".".join(match.groups()) if match else text


def _software_version(runs: list[ToolRun], component: str, named: bool = False) -> str | None:
    """The version a preflight probe found ("Open MPI 4.1.4" when `named`)."""
    for run in runs:
        if run.tool in VERSION_TOOLS and run.data.get("component") == component:
            version, name = run.data.get("version"), run.data.get("implementation")
            if isinstance(version, str):
                return f"{name} {version}" if named and isinstance(name, str) else version
    return None


def host_facts(folder: RunFolder) -> list[HostFacts]:
    """What each host is, from its nvidia-smi, topo and benchmark outputs (and run.json)."""
    facts = []
    for host in folder.hosts:
        runs = list(tool_runs(f for f in folder.files if f.host == host))
        ordered = sorted(runs, key=lambda r: r.tool not in SMI_TOOLS)  # preflight first
        names = _gpu_names(ordered)
        name = names[0] if names else None
        declared = _declared_model(folder.meta, host)
        model = identify_gpu(name) or identify_gpu(declared)
        facts.append(
            HostFacts(
                name=host,
                reachable=host not in folder.unreachable,
                gpu_model=model.model if model else declared,
                gpu_count=_gpu_count(ordered),
                driver_version=_versions(ordered, ("driver_version",)),
                cuda_version=_versions(ordered, ("cuda_version",)),
                nccl_version=nccl_version_number(
                    _versions(
                        [r for r in ordered if r.tool in NCCL_TOOLS]
                        + [r for r in ordered if r.tool in BENCH_TOOLS],
                        ("nccl_version",),
                    )
                    or _software_version(ordered, "nccl")
                ),
                mpi_version=_software_version(ordered, "mpi", named=True),
                cuda_toolkit_version=_software_version(ordered, "cuda-toolkit"),
                nccl_tests_version=_versions(
                    [r for r in ordered if r.tool in NCCL_TOOLS], ("nccl_tests_version",)
                ),
                gpu_name=name,
            )
        )
    return facts


# ---------------------------------------------------------------- tables


def _nccl_rows(run: ToolRun) -> Iterator[dict[str, Any]]:
    for row in as_list(run.data.get("rows")):
        row = as_dict(row)
        for placement in ("out_of_place", "in_place"):
            half = as_dict(row.get(placement))
            if not half:
                continue
            yield {
                "collective": run.data.get("collective"),
                "nranks": run.data.get("nranks"),
                "size_bytes": row.get("size_bytes"),
                "count": row.get("count"),
                "dtype": row.get("dtype"),
                "redop": row.get("redop"),
                "placement": placement,
                "time_us": half.get("time_us"),
                "algbw_gbps": half.get("algbw_gbps"),
                "busbw_gbps": half.get("busbw_gbps"),
                "wrong": half.get("wrong"),
                "line": row.get("line"),
            }


def _bench_rows(run: ToolRun) -> Iterator[dict[str, Any]]:
    """all_reduce_bench and gpuval-allreduce-bench (world_size, per-row time and #wrong)."""
    nranks = run.data.get("nranks", run.data.get("world_size"))
    for row in as_list(run.data.get("rows")):
        row = as_dict(row)
        yield {
            "collective": run.data.get("collective"),
            "nranks": nranks,
            "size_bytes": row.get("size_bytes"),
            "count": row.get("count"),
            "time_us": row.get("time_us"),
            "algbw_gbps": row.get("algbw_gbps"),
            "busbw_gbps": row.get("busbw_gbps"),
            "wrong": row.get("wrong"),
            "line": row.get("line"),
        }


def _matrix_rows(run: ToolRun) -> Iterator[dict[str, Any]]:
    for metric, matrix in sorted(as_dict(run.data.get("matrices")).items()):
        unit = "us" if metric.startswith("latency") else "GB/s"
        for src, cells in enumerate(as_list(matrix)):
            for dst, value in enumerate(as_list(cells)):
                yield {"metric": metric, "src": src, "dst": dst, "value": value, "unit": unit}


def _nvbandwidth_rows(run: ToolRun) -> Iterator[dict[str, Any]]:
    for test in as_list(run.data.get("tests")):
        test = as_dict(test)
        for matrix in as_list(test.get("matrices")):
            matrix = as_dict(matrix)
            rows, columns = as_list(matrix.get("row_labels")), as_list(matrix.get("column_labels"))
            for r, cells in enumerate(as_list(matrix.get("values"))):
                for c, value in enumerate(as_list(cells)):
                    yield {
                        "metric": test.get("name"),
                        "src": _label_number(rows[r] if r < len(rows) else None),
                        "dst": _label_number(columns[c] if c < len(columns) else None),
                        "value": value,
                        "unit": matrix.get("unit"),
                        "line": matrix.get("line"),
                    }


def _label_number(label: Any) -> int | None:
    text = str(label).strip() if label is not None else ""
    return int(text) if text.isdigit() else None


def _pair_rows(files: list[RawFile]) -> Iterator[dict[str, Any]]:
    """The number each pair try gave (the value the pair analysis judged), one row per try."""
    tools = {raw.path: raw.parse.tool for raw in files if raw.parse}
    for t in read_tries(files, None):
        if t.value is None:
            continue  # no number: the try's reason is in results.json `pairs.tries`
        yield {
            "host": t.host, "file": t.path, "tool": tools.get(t.path), "metric": f"pair_{t.kind}",
            "host_a": t.src or t.a, "host_b": t.dst or t.b, "try": t.attempt, "value": t.value,
            "unit": t.unit,
        }  # fmt: skip


def measurements(files: Iterable[RawFile]) -> pd.DataFrame:
    """Every measured number in long format, one row per (size, placement), matrix cell or
    pair try, exactly as printed (no averaging, no dropping)."""
    files = list(files)
    records: list[dict[str, Any]] = []
    for run in tool_runs(files, MEASURING_TOOLS):
        if run.tool in NCCL_TOOLS:
            rows: Iterable[dict[str, Any]] = _nccl_rows(run)
        elif run.tool in BENCH_TOOLS | COLLECTIVE_BENCH_TOOLS:
            rows = _bench_rows(run)
        elif run.tool in P2P_TOOLS:
            rows = _matrix_rows(run)
        elif run.tool in NVBANDWIDTH_TOOLS:
            rows = _nvbandwidth_rows(run)
        else:
            continue
        base = {"host": run.host, "file": run.file.path, "tool": run.tool, "run": run.index}
        records += [{**base, **row} for row in rows]
    records += _pair_rows(files)
    frame = pd.DataFrame.from_records(records, columns=MEASUREMENT_COLUMNS)
    for column in ("nranks", "size_bytes", "count", "wrong", "src", "dst", "line", "run", "try"):
        frame[column] = frame[column].astype("Int64")
    return frame


# ---------------------------------------------------------------- results.json


def results_document(results: RunResults) -> dict[str, Any]:
    """The results.json document (schema: results.schema.json)."""
    document = to_jsonable(results)
    document["schema_version"] = 1
    document["files"] = [
        {**to_jsonable(raw), "parse": raw.parse.to_dict() if raw.parse else None}
        for raw in results.files
    ]
    return dict(document)


def write_results(results: RunResults, out_dir: Path) -> Path:
    """Validate and write results.json; deterministic (sorted keys, fixed indent)."""
    document = results_document(results)
    validate(document, "results")
    path = out_dir / "results.json"
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def write_measurements(files: Iterable[RawFile], out_dir: Path) -> Path:
    path = out_dir / "measurements.csv"
    measurements(files).to_csv(path, index=False)
    return path
