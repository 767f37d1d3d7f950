"""The JSON outputs of nccl-tests and rccl-tests to the same `NcclRun` records.

- nccl-tests `-J FILE.json` report (late 2025+);
- rccl-tests `--output_file FILE --output_format json` result records (ROCm/rccl-tests PR 93,
  2024-10: one JSON object per line; PR 140, 2025-07: the same objects in one JSON list written
  at the end of the test): {"name": "AllReduce", "size", "type", "redop", "inPlace": 0|1, "time",
  "algBw", "busBw", "#wrong": "0"|"N/A", "gpus" or MPI builds' "nodes", "ranks", "ranksPerNode",
  "gpusPerRank", "numCycle" (2025-03+)}: one record per half, the collective named by "name";
- the `--json` structured output of the nccl-tests fork proposed in NVIDIA/nccl-tests PR 318,
  one line in stdout: {"identifier": "nccl-tests structured output", "version", "benchmark":
  [{"SIZE": {count, type, redop, root, oop_time, oop_algbw, oop_busbw, oop_error, ip_*}}],
  "out_of_bounds_value", "out_of_bounds_value_status", "avg_bus_bw", "avg_bus_bw_status"}
  (read by the text parser, which finds the line among the others; that fork prints
  avg_bus_bw_status "OK" also when NCCL_TESTS_MIN_BW is unset).

-J report shape, from NVIDIA/nccl-tests src/util.cu (JSON_FILE_VERSION 1 to 3): {"version",
"start_time", "args", "env", "nccl_version": 22803 (the library's), "config": {nthreads, ngpus,
minimum_bytes, ..., "devices": [...]},
"results": [{size, count, type, redop, root ("    -1"), out_of_place|in_place: {time|cpu_time,
alg_bw, bus_bw, nwrong}, *_per_iter: {...}, actual_iterations, experiment_name}],
"out_of_bounds": {count, okay}, "average_bus_bandwidth": {bandwidth, okay}, "errors", "end_time"}.
Booleans are written as the strings "true"/"false"; NaN as the string "nan"; infinities as bare
`inf` (not JSON) since doubles go through printf "%lf".
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpuval.records.base import ParseResult
from gpuval.records.nccl import (
    COLLECTIVES,
    NcclDevice,
    NcclFailure,
    NcclHalf,
    NcclOutOfBounds,
    NcclRow,
    NcclRun,
    NcclTable,
)

_BARE_INFINITY = re.compile(r"(?<=[:,\[])\s*(-?)inf\b")
_CONFIG_NAMES = {
    "nthreads": "n_thread",
    "ngpus": "n_gpus",
    "minimum_bytes": "min_bytes",
    "maximum_bytes": "max_bytes",
    "iterations": "iters",
    "aggregated_iterations": "agg_iters",
    "blocking_collectives": "blocking",
}
_PER_ITER_KEYS = ("min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us", "cv_pct")


def looks_like_json_report(head: str) -> bool:
    return '"nccl_version"' in head and ('"config"' in head or '"results"' in head)


def parse_json(text: str, result: ParseResult) -> ParseResult:
    document = _load(text, result)
    if document is None:
        return result
    if not isinstance(document, dict) or not looks_like_json_report(text[:65536]):
        result.error("JSON document is not an nccl-tests -J report", 1)
        return result
    result.runs.append(_run(document, text.count("\n") + 1, result))
    return result


def _load(text: str, result: ParseResult) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_BARE_INFINITY.sub(lambda m: f"{m.group(1)}Infinity", text))
    except json.JSONDecodeError as problem:
        result.error(
            f"unreadable JSON (truncated report of a killed run?): {problem.msg} "
            f"at column {problem.colno}",
            problem.lineno,
        )
        return None


def _run(document: dict[str, Any], lines: int, result: ParseResult) -> NcclRun:
    run = NcclRun(start_line=1, end_line=lines)
    if isinstance(document.get("version"), int):
        run.header["json_format_version"] = document["version"]
    args = document.get("args")
    if isinstance(args, list) and args and all(isinstance(a, str) for a in args):
        run.command = " ".join(args)
        run.program = args[0].rsplit("/", 1)[-1]
        run.collective = collective_of_program(run.program)
    code = document.get("nccl_version")
    run.nccl_version = version_string(code) if isinstance(code, int) else None
    config = document.get("config")
    if isinstance(config, dict):
        run.header.update(_header(config))
        run.devices = [_device(d) for d in config.get("devices", []) if isinstance(d, dict)]
        run.nranks = len(run.devices) or None
    run.hosts = tuple(sorted({d.host for d in run.devices if d.host}))
    results = document.get("results")
    for index, entry in enumerate(results if isinstance(results, list) else []):
        row = _row(entry)
        if row is None:
            result.warn(f"results[{index}] is not a result record; skipped", None)
        elif unread := _unread_cells(entry):
            result.error(f"results[{index}]: {'; '.join(unread)}; row not recorded", None)
        else:
            run.rows.append(row)
    bounds = document.get("out_of_bounds")
    if isinstance(bounds, dict) and isinstance(bounds.get("count"), int):
        run.out_of_bounds = NcclOutOfBounds(bounds["count"], _bool(bounds.get("okay")) is True)
    average = document.get("average_bus_bandwidth")
    if isinstance(average, dict):
        run.avg_busbw_gbps = _number(average.get("bandwidth"))
        okay = average.get("okay")
        run.avg_busbw_check = None if okay == "unchecked" else ("OK" if _bool(okay) else "FAILED")
    run.complete = run.avg_busbw_gbps is not None and "end_time" in document
    for message in document.get("errors", []) or []:
        if isinstance(message, str) and message:
            run.failures.append(NcclFailure(None, "nccl", None, None, message))
    if not run.complete:
        result.warn("JSON report has no footer (average_bus_bandwidth/end_time): incomplete", 1)
    return run


def _header(config: dict[str, Any]) -> dict[str, int | str | bool]:
    header: dict[str, int | str | bool] = {}
    for key, value in config.items():
        if key == "devices":
            continue
        name = _CONFIG_NAMES.get(key, key)
        if name in ("step_factor", "step_bytes") and isinstance(value, int):
            header["step"] = value
            header["step_kind"] = "factor" if name == "step_factor" else "bytes"
        elif isinstance(value, bool | int):
            header[name] = value
        elif isinstance(value, str):
            flag = _bool(value)
            header[name] = flag if flag is not None else value
    return header


def _device(entry: dict[str, Any]) -> NcclDevice:
    return NcclDevice(
        rank=int(entry.get("rank", -1)),
        group=entry.get("group") if isinstance(entry.get("group"), int) else None,
        pid=entry.get("pid") if isinstance(entry.get("pid"), int) else None,
        host=entry.get("hostname") if isinstance(entry.get("hostname"), str) else None,
        device=entry.get("device") if isinstance(entry.get("device"), int) else None,
        pci_bus=entry.get("device_hex") if isinstance(entry.get("device_hex"), str) else None,
        name=entry.get("device_info") if isinstance(entry.get("device_info"), str) else None,
    )


def _row(entry: Any) -> NcclRow | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("size"), int):
        return None
    row = NcclRow(
        size_bytes=entry["size"],
        count=entry.get("count") if isinstance(entry.get("count"), int) else None,
        dtype=entry.get("type") if isinstance(entry.get("type"), str) else None,
        redop=entry.get("redop") if isinstance(entry.get("redop"), str) else None,
        root=_root(entry.get("root")),
    )
    row.out_of_place = _half(entry.get("out_of_place"), entry.get("out_of_place_per_iter"))
    row.in_place = _half(entry.get("in_place"), entry.get("in_place_per_iter"))
    return row


_MEASURED = ("time", "cpu_time", "alg_bw", "bus_bw")


def _unread_cells(entry: dict[str, Any]) -> list[str]:
    """The numbers a result record prints that hold none: nccl-tests writes a NaN as "nan" and
    an infinity as a bare inf (made Infinity by _load). A row with such a cell is not recorded,
    as the text parser does with the same cells: a lost measurement is never passed over, and
    an unknown nwrong is never taken as 0 errors. null is what was not checked (sendrecv's
    in-place nwrong, the text's "N/A"), as a key left out."""
    unread = []
    for half in ("out_of_place", "in_place"):
        values = entry.get(half)
        if not isinstance(values, dict):
            continue
        for key in (*_MEASURED, "nwrong"):
            if values.get(key) is None:
                continue
            if key == "nwrong" and _count(values[key]) is None:
                unread.append(f"{half}.nwrong {values[key]!r} is unknown, never taken as 0 errors")
            elif key != "nwrong" and _number(values[key]) is None:
                unread.append(f"{half}.{key} {values[key]!r} is not a measurement")
    return unread


def _root(value: Any) -> int | None:
    """The root is written as the padded string of the text table ("    -1")."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _half(values: Any, per_iter: Any) -> NcclHalf | None:
    if not isinstance(values, dict):
        return None
    time = values.get("time", values.get("cpu_time"))
    half = NcclHalf(
        time_us=_number(time),
        algbw_gbps=_number(values.get("alg_bw")),
        busbw_gbps=_number(values.get("bus_bw")),
        wrong=_count(values.get("nwrong")),
    )
    if isinstance(per_iter, dict):
        half.extra = {f"i_{key}": _number(per_iter.get(key)) for key in _PER_ITER_KEYS}
    return half


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return float(value)


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return bool(value)
    if value in ("true", "false"):
        return bool(value == "true")
    return None


def version_string(code: int) -> str | None:
    """NCCL_VERSION_CODE -> "2.28.3": major*10000+minor*100+patch since NCCL 2.9,
    major*1000+minor*100+patch before (nccl.h NCCL_VERSION macro)."""
    if code <= 0:
        return None
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def collective_of_program(program: str) -> str | None:
    """`all_reduce_perf`, `/opt/bin/all_reduce_perf_mpi` or a package's `nccl_all_reduce_perf`
    -> `all_reduce`; None when the name is no known collective."""
    name = program.rsplit("/", 1)[-1].split("_perf", 1)[0]
    for prefix in ("", "nccl_", "rccl_"):
        if name.startswith(prefix) and name[len(prefix) :] in COLLECTIVES:
            return name[len(prefix) :]
    return None


# ---- rccl-tests result records ------------------------------------------------------------

_RECORD_KEYS = ('"busBw"', '"algBw"', '"inPlace"')
# "AllReduce", "AlltoAll", "ReduceScatter" ... -> the collective's name in COLLECTIVES
_RECORD_COLLECTIVES = {name.replace("_", ""): name for name in COLLECTIVES}
_RECORD_HEADER = {
    "gpus": "gpus",
    "nodes": "nodes",
    "ranksPerNode": "ranks_per_node",
    "gpusPerRank": "gpus_per_rank",
    "numCycle": "num_cycle",
}


def looks_like_result_records(head: str) -> bool:
    """rccl-tests' JSON result records, one per line or in one list."""
    return all(key in head for key in _RECORD_KEYS)


def parse_result_records(text: str, result: ParseResult) -> ParseResult:
    """One run per collective (and stress cycle), the two records of a size joined in a row."""
    if text.lstrip().startswith("["):
        document = _load(text, result)
        if document is None:
            return result
        if not isinstance(document, list):
            result.error("JSON document is not a list of rccl-tests result records", 1)
            return result
        # The list form is written once, at the end of the test: whole means finished.
        entries: list[tuple[int | None, Any]] = [(None, entry) for entry in document]
        complete = True
    else:
        entries = []
        for line_number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entries.append((line_number, json.loads(line)))
            except json.JSONDecodeError as problem:
                result.error(f"result record is not JSON (cut short?): {problem.msg}", line_number)
        complete = False
        result.warn(
            "one-record-per-line output has no end marker: whether the run finished is "
            "unknown (the text output's footer tells)",
            1,
        )
    runs: dict[tuple[str, Any], tuple[NcclRun, dict[int, NcclRow]]] = {}
    for index, (number, entry) in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int):
            result.warn(f"record {index + 1} is not a result record; skipped", number)
            continue
        printed = entry.get("name")
        name = printed if isinstance(printed, str) else "?"
        key = (name, entry.get("numCycle"))
        if key not in runs:
            runs[key] = (_records_run(name, entry, number, result), {})
        run, rows = runs[key]
        row = rows.get(entry["size"])
        if row is None:
            row = rows[entry["size"]] = NcclRow(
                size_bytes=entry["size"],
                dtype=entry.get("type") if isinstance(entry.get("type"), str) else None,
                redop=entry.get("redop") if isinstance(entry.get("redop"), str) else None,
                root=_root(entry.get("root")),
                line=number,
            )
        half = NcclHalf(
            time_us=_number(entry.get("time")),
            algbw_gbps=_number(entry.get("algBw")),
            busbw_gbps=_number(entry.get("busBw")),
            wrong=_count(entry.get("#wrong")),
        )
        if entry.get("inPlace") == 1:
            row.in_place = half
        else:
            row.out_of_place = half
        run.end_line = number or run.end_line
    for run, rows in runs.values():
        run.rows = NcclTable.of(rows.values())  # whole: a table keeps numbers, not the rows
        run.complete = complete and bool(run.rows)
        result.runs.append(run)
    if not runs:
        result.error("no rccl-tests result record found", 1)
    return result


def _records_run(
    name: str, entry: dict[str, Any], line: int | None, result: ParseResult
) -> NcclRun:
    run = NcclRun(program=name, start_line=line, end_line=line)
    run.collective = _RECORD_COLLECTIVES.get(name.lower().replace("_", ""))
    if run.collective is None:
        result.warn(f"collective {name!r} is not one gpuval knows; kept as the program", line)
    ranks = entry.get("ranks", entry.get("gpus"))
    run.nranks = ranks if isinstance(ranks, int) and ranks > 0 else None
    run.header = {
        header: entry[key]
        for key, header in _RECORD_HEADER.items()
        if isinstance(entry.get(key), int) and not isinstance(entry.get(key), bool)
    }
    return run


def _count(value: Any) -> int | None:
    """A wrong-element count printed as 0, 0.0, "0" or "N/A" (None)."""
    if isinstance(value, str):
        value = int(value.strip()) if value.strip().isdigit() else None
    number = _number(value)
    return int(number) if number is not None and number == int(number) else None


# ---- nccl-tests PR 318 structured output ---------------------------------------------------

STRUCTURED_OUTPUT = '"identifier": "nccl-tests structured output"'


def read_structured_output(text: str, run: NcclRun, line: int, result: ParseResult) -> None:
    """Fill `run` from the structured-output line; a line cut short is an error naming it."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as problem:
        result.error(
            f"structured output cut short or malformed: {problem.msg} at column {problem.colno}",
            line,
        )
        return
    if not isinstance(document, dict):
        result.error("structured output is not a JSON object", line)
        return
    benchmark = document.get("benchmark")
    for cycle in benchmark if isinstance(benchmark, list) else []:
        for size, entry in cycle.items() if isinstance(cycle, dict) else []:
            if not size.isdigit() or not isinstance(entry, dict):
                result.warn(f"structured output entry {size!r} is not a result; skipped", line)
                continue
            run.rows.append(_structured_row(int(size), entry, line))
    version = document.get("version")
    if isinstance(version, str) and run.nccl_version is None:
        run.nccl_version = version
    bounds = document.get("out_of_bounds_value")
    if isinstance(bounds, int):
        ok = document.get("out_of_bounds_value_status") == "OK"
        run.out_of_bounds = NcclOutOfBounds(bounds, ok)
    run.avg_busbw_gbps = _number(document.get("avg_bus_bw"))
    status = document.get("avg_bus_bw_status")
    run.avg_busbw_check = status if isinstance(status, str) else None
    run.complete = run.avg_busbw_gbps is not None


def _structured_row(size: int, entry: dict[str, Any], line: int) -> NcclRow:
    count = entry.get("count")
    row = NcclRow(
        size_bytes=size,
        count=count if isinstance(count, int) else None,
        dtype=entry.get("type") if isinstance(entry.get("type"), str) else None,
        redop=entry.get("redop") if isinstance(entry.get("redop"), str) else None,
        root=_root(entry.get("root")),
        line=line,
    )
    row.out_of_place, row.in_place = (
        NcclHalf(
            time_us=_number(entry.get(f"{half}_time")),
            algbw_gbps=_number(entry.get(f"{half}_algbw")),
            busbw_gbps=_number(entry.get(f"{half}_busbw")),
            wrong=_count(entry.get(f"{half}_error")),
        )
        for half in ("oop", "ip")
    )
    return row
