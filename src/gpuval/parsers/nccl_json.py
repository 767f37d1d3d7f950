"""The `-J FILE.json` report of nccl-tests (late 2025+) to the same `NcclRun` records.

Shape, from NVIDIA/nccl-tests src/util.cu (JSON_FILE_VERSION 1): {"version", "start_time", "args",
"env", "nccl_version": 22803, "config": {nthreads, ngpus, minimum_bytes, ..., "devices": [...]},
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
    args = document.get("args")
    if isinstance(args, list) and args and all(isinstance(a, str) for a in args):
        run.command = " ".join(args)
        program = args[0].rsplit("/", 1)[-1]
        run.program = program
        name = program.split("_perf", 1)[0]
        run.collective = name if name in COLLECTIVES else None
    code = document.get("nccl_version")
    run.nccl_version = version_string(code) if isinstance(code, int) else None
    config = document.get("config")
    if isinstance(config, dict):
        run.header = _header(config)
        run.devices = [_device(d) for d in config.get("devices", []) if isinstance(d, dict)]
        run.nranks = len(run.devices) or None
    run.hosts = sorted({d.host for d in run.devices if d.host})
    results = document.get("results")
    for index, entry in enumerate(results if isinstance(results, list) else []):
        row = _row(entry)
        if row is None:
            result.warn(f"results[{index}] is not a result record; skipped", None)
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
    wrong = _number(values.get("nwrong"))
    half = NcclHalf(
        time_us=_number(time),
        algbw_gbps=_number(values.get("alg_bw")),
        busbw_gbps=_number(values.get("bus_bw")),
        wrong=int(wrong) if wrong is not None and wrong == int(wrong) else None,
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
