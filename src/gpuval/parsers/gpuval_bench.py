"""Outputs of the suite's own node programs (gpuval.nodebench).

- gpuval-allreduce-bench: rank 0 prints one line of JSON with `"tool":
  "gpuval-allreduce-bench"`; torchrun warnings around it and any prefix before its brace
  (`[default0]:` from torchrun --tee) are skipped. A document cut short or malformed is an
  error naming its line.
- mpi-preflight: lines starting `gpuval-mpi-preflight` (see nodebench/mpi_preflight.c):
  `rank R/N host H` from every rank; from rank 0 `library ...`, `alltoall pairs P bad B`,
  `allreduce sum S expected E`, `FAILED rank R host H: why` per problem, and a final `OK ...`
  or `FAILED: ...`. Launcher failures that name a host (ssh cannot resolve or connect, an
  OpenMPI TCP connection or daemon that failed, a rank killed on a node) are kept as problems,
  so a preflight that never started still names the host to look at.
- gpuval-gemm-burn: one line of JSON with `"tool": "gpuval-gemm-burn"` (nodebench/gemm_burn.py):
  TFLOPS, the correctness check and clock/temperature samples per GPU, or the reason the burn
  could not run.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpuval.parsers import nccl_debug
from gpuval.parsers.text import Line, iter_lines
from gpuval.records.base import ParseResult
from gpuval.records.collective_bench import (
    CollectiveBenchRow,
    CollectiveBenchRun,
    MpiPreflightRun,
    MpiProblem,
    MpiRank,
)
from gpuval.records.health import BurnGpu, BurnSample, GemmBurnRun

BENCH_TOOL = "gpuval-allreduce-bench"
PREFLIGHT_TOOL = "mpi-preflight"
BURN_TOOL = "gpuval-gemm-burn"
TOOLS = (BENCH_TOOL, PREFLIGHT_TOOL, BURN_TOOL)
SCHEMA_VERSION = 1

_BENCH_MARKER = f'"tool": "{BENCH_TOOL}"'
_PREFLIGHT_MARKER = "gpuval-mpi-preflight"
_BURN_MARKER = f'"tool": "{BURN_TOOL}"'


def detect(text: str) -> tuple[str, int] | None:
    if _BENCH_MARKER in text:
        return BENCH_TOOL, 95
    if _BURN_MARKER in text:
        return BURN_TOOL, 95
    if _PREFLIGHT_MARKER in text:
        return PREFLIGHT_TOOL, 95
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    tool = tool or (detect(text) or (BENCH_TOOL, 0))[0]
    if tool == PREFLIGHT_TOOL:
        return parse_preflight(text, source)
    if tool == BURN_TOOL:
        return parse_burn(text, source)
    return parse_bench(text, source)


# ------------------------------------------------------------------ all-reduce benchmark


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _integer(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _bench_row(entry: Any, index: int, line: int, result: ParseResult) -> CollectiveBenchRow | None:
    size = _integer(entry.get("size_bytes")) if isinstance(entry, dict) else None
    if size is None or size < 0 or not isinstance(entry, dict):
        result.error(f"row {index + 1} has no byte size: {str(entry)[:60]!r}", line)
        return None
    row = CollectiveBenchRow(
        size_bytes=size,
        count=_integer(entry.get("count")),
        time_us=_number(entry.get("time_us")),
        algbw_gbps=_number(entry.get("algbw_gbps")),
        busbw_gbps=_number(entry.get("busbw_gbps")),
        wrong=_integer(entry.get("wrong")),
    )
    missing = [
        k for k in ("time_us", "algbw_gbps", "busbw_gbps", "wrong") if getattr(row, k) is None
    ]
    if missing:
        result.warn(f"row {index + 1} ({size} B) lacks {', '.join(missing)}", line)
    return row


def _bench_run(document: dict[str, Any], line: int, result: ParseResult) -> CollectiveBenchRun:
    version = _integer(document.get("schema_version"))
    if version != SCHEMA_VERSION:
        result.warn(
            f"schema_version {version} (expected {SCHEMA_VERSION}); read as version 1", line
        )
    entries = document.get("rows")
    entries = entries if isinstance(entries, list) else []
    rows = [_bench_row(entry, i, line, result) for i, entry in enumerate(entries)]
    correct = document.get("correct")
    run = CollectiveBenchRun(
        schema_version=version,
        collective=_string(document.get("collective")),
        world_size=_integer(document.get("world_size")),
        backend=_string(document.get("backend")),
        device_type=_string(document.get("device_type")),
        dtype=_string(document.get("dtype")),
        hosts=_strings(document.get("hosts")),
        devices=_strings(document.get("devices")),
        torch_version=_string(document.get("torch_version")),
        cuda_version=_string(document.get("cuda_version")),
        nccl_version=_string(document.get("nccl_version")),
        warmup=_integer(document.get("warmup")),
        iterations=_integer(document.get("iterations")),
        started_at=_string(document.get("started_at")),
        duration_s=_number(document.get("duration_s")),
        rows=[row for row in rows if row is not None],
        wrong_total=_integer(document.get("wrong_total")),
        correct=correct if isinstance(correct, bool) else None,
        complete=False,
        line=line,
    )
    if not entries:
        result.error("benchmark document has no rows (nothing measured)", line)
    if run.correct is None or run.wrong_total is None:
        result.error("benchmark document lacks its correctness fields (correct, wrong_total)", line)
    run.complete = bool(entries) and None not in rows and run.correct is not None
    return run


def json_documents(lines: list[Line], tool: str, result: ParseResult) -> list[tuple[Any, int]]:
    """Each line's JSON object naming `tool`, with its line number; a broken one is an error."""
    found = []
    for line in lines:
        # From the first brace: any launcher prefix before it ("[default0]:") is not ours.
        stripped = line.text[line.text.find("{") :].strip()
        if not stripped.startswith("{") or f'"{tool}"' not in stripped:
            continue
        try:
            document = json.loads(stripped)
        except json.JSONDecodeError as problem:
            result.error(f"{tool} JSON cut short or malformed: {problem.msg}", line.number)
            continue
        if not isinstance(document, dict):
            result.error(f"{tool} JSON is not an object", line.number)
            continue
        found.append((document, line.number))
    return found


def parse_bench(text: str, source: str | None = None) -> ParseResult:
    result = ParseResult(tool=BENCH_TOOL, source=source)
    lines = list(iter_lines(text))
    for document, number in json_documents(lines, BENCH_TOOL, result):
        result.runs.append(_bench_run(document, number, result))
    if not result.runs and not result.errors:
        result.error(
            f"no {BENCH_TOOL} JSON document found: the benchmark did not finish "
            "(rank 0 prints it at the end)"
        )
    warnings = nccl_debug.warnings_in(lines)
    if warnings and not result.runs:
        result.runs.append(_bench_run({}, warnings[0].log_line, ParseResult(BENCH_TOOL)))
    nccl_debug.assign_warnings(warnings, result.runs)
    return result


# ------------------------------------------------------------------ MPI preflight

_RANK = re.compile(r"^gpuval-mpi-preflight rank (?P<rank>\d+)/(?P<size>\d+) host (?P<host>\S+)")
_LIBRARY = re.compile(r"^gpuval-mpi-preflight library (?P<library>.*)$")
_ALLTOALL = re.compile(r"^gpuval-mpi-preflight alltoall pairs (?P<pairs>\d+) bad (?P<bad>\d+)")
_ALLREDUCE = re.compile(
    r"^gpuval-mpi-preflight allreduce sum (?P<sum>-?\d+) expected (?P<expected>-?\d+)"
)
_FAILED_RANK = re.compile(
    r"^gpuval-mpi-preflight FAILED rank (?P<rank>\d+) host (?P<host>\S+): (?P<why>.*)$"
)
_VERDICT = re.compile(r"^gpuval-mpi-preflight (?P<verdict>OK|FAILED)\b:?\s*(?P<rest>.*)$")
# Launcher lines that point at a host (OpenMPI 4 and OpenSSH wording), and how to say them;
# None keeps the line as printed.
_LAUNCHER: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(r"ssh: Could not resolve hostname (?P<host>[^\s:]+)"), None),
    (re.compile(r"ssh: connect to host (?P<host>\S+) port \d+: .*"), None),
    (re.compile(r"^\s*Remote host:\s+(?P<host>\S+)"), "a TCP connection to {host} failed"),
    (re.compile(r"process rank (?P<rank>\d+) with PID \d+ on node (?P<host>\S+) exited"), None),
    (re.compile(r"on node (?P<host>\S+) exited on signal"), None),
    # srun's line for a task a signal ended ("srun: error: NODE: task N: STATE", Slurm's own
    # form); not "Exited with exit code" (every rank exits 1 when rank 0 found a problem) nor
    # "Killed" (srun kills the other tasks of a failed step: they are not the cause).
    (
        re.compile(
            r"^srun: error: (?P<host>[^\s:]+): tasks? (?:(?P<rank>\d+)|[\d,-]+): (?:Segmentation "
            r"fault|Bus error|Aborted|Illegal instruction|Floating point exception)"
        ),
        None,
    ),
    (re.compile(r"ORTE was unable to reliably start one or more daemons"), None),
    (re.compile(r"An ORTE daemon has unexpectedly failed after launch"), None),
    (re.compile(r"Host key verification failed"), None),
    (re.compile(r"Permission denied \(publickey"), None),
    (re.compile(r"There are not enough slots available"), None),
)


def _launcher_problem(line: Line) -> MpiProblem | None:
    for pattern, template in _LAUNCHER:
        match = pattern.search(line.text)
        if match:
            groups = match.groupdict()
            message = template.format(**groups) if template else line.text.strip()
            rank = groups.get("rank")
            return MpiProblem(message, groups.get("host"), int(rank) if rank else None, line.number)
    return None


def _preflight_line(line: Line, run: MpiPreflightRun, result: ParseResult) -> None:
    text = line.text.strip()
    if match := _RANK.match(text):
        rank, size = int(match["rank"]), int(match["size"])
        run.ranks.append(MpiRank(rank, size, match["host"], line.number))
    elif match := _LIBRARY.match(text):
        run.library = match["library"].strip()
    elif match := _ALLTOALL.match(text):
        run.alltoall_pairs, run.alltoall_bad = int(match["pairs"]), int(match["bad"])
    elif match := _ALLREDUCE.match(text):
        run.allreduce_sum, run.allreduce_expected = int(match["sum"]), int(match["expected"])
    elif match := _FAILED_RANK.match(text):
        run.problems.append(
            MpiProblem(match["why"], match["host"], int(match["rank"]), line.number)
        )
    elif match := _VERDICT.match(text):
        run.complete = True
        run.ok = match["verdict"] == "OK"
    elif text.startswith(_PREFLIGHT_MARKER):
        result.warn(f"unknown preflight line: {text[:80]!r}", line.number)
    elif problem := _launcher_problem(line):
        run.problems.append(problem)


def _world_size(run: MpiPreflightRun, result: ParseResult) -> int | None:
    sizes = sorted({r.size for r in run.ranks})
    if len(sizes) > 1:
        result.warn(f"rank lines disagree on the world size: {sizes}", run.ranks[0].line)
    return sizes[-1] if sizes else None


def parse_preflight(text: str, source: str | None = None) -> ParseResult:
    result = ParseResult(tool=PREFLIGHT_TOOL, source=source)
    run = MpiPreflightRun(world_size=None, library=None)
    for line in iter_lines(text):
        _preflight_line(line, run, result)
    run.line = run.ranks[0].line if run.ranks else 1
    run.world_size = _world_size(run, result)
    seen = {r.rank for r in run.ranks}
    run.missing_ranks = [r for r in range(run.world_size or 0) if r not in seen]
    wrong_sum = run.allreduce_sum is not None and run.allreduce_sum != run.allreduce_expected
    if run.ok and (run.problems or run.missing_ranks or wrong_sum or run.alltoall_bad):
        result.warn("OK line printed, but the output shows problems: read as failed")
        run.ok = False
    if not run.ranks and not run.problems:
        result.error("no gpuval-mpi-preflight line: the preflight never started")
    elif not run.complete:
        result.error("the preflight did not finish: no final OK or FAILED line")
    result.runs.append(run)
    return result


# ------------------------------------------------------------------ GEMM burn


def _burn_sample(entry: Any) -> BurnSample | None:
    if not isinstance(entry, dict) or _number(entry.get("elapsed_s")) is None:
        return None
    return BurnSample(
        elapsed_s=_number(entry.get("elapsed_s")) or 0.0,
        sm_clock_mhz=_number(entry.get("sm_clock_mhz")),
        temperature_c=_number(entry.get("temperature_c")),
        power_w=_number(entry.get("power_w")),
        throttle=_strings(entry.get("throttle")),
    )


def _burn_gpu(entry: Any, line: int, result: ParseResult) -> BurnGpu | None:
    index = _integer(entry.get("index")) if isinstance(entry, dict) else None
    if index is None or not isinstance(entry, dict):
        result.error(f"a GPU entry without its index: {str(entry)[:60]!r}", line)
        return None
    correct = entry.get("correct")
    samples = entry.get("samples")
    gpu = BurnGpu(
        index=index,
        name=_string(entry.get("name")),
        pci_bus_id=_string(entry.get("pci_bus_id")),
        tflops=_number(entry.get("tflops")),
        iterations=_integer(entry.get("iterations")),
        seconds=_number(entry.get("seconds")),
        max_abs_error=_number(entry.get("max_abs_error")),
        correct=correct if isinstance(correct, bool) else None,
        mismatches=_integer(entry.get("mismatches")),
        error=_string(entry.get("error")),
        samples=[s for s in map(_burn_sample, samples if isinstance(samples, list) else []) if s],
    )
    if gpu.error is None and (gpu.tflops is None or gpu.correct is None):
        result.error(f"GPU {index}: no TFLOPS or no correctness verdict", line)
    return gpu


def parse_burn(text: str, source: str | None = None) -> ParseResult:
    result = ParseResult(tool=BURN_TOOL, source=source)
    for document, number in json_documents(list(iter_lines(text)), BURN_TOOL, result):
        version = _integer(document.get("schema_version"))
        if version != SCHEMA_VERSION:
            result.warn(f"schema_version {version} (expected {SCHEMA_VERSION})", number)
        entries = document.get("gpus")
        entries = entries if isinstance(entries, list) else []
        gpus = [_burn_gpu(entry, number, result) for entry in entries]
        run = GemmBurnRun(
            schema_version=version,
            dtype=_string(document.get("dtype")),
            matrix_size=_integer(document.get("matrix_size")),
            seconds_requested=_number(document.get("seconds_requested")),
            device_type=_string(document.get("device_type")),
            torch_version=_string(document.get("torch_version")),
            cuda_version=_string(document.get("cuda_version")),
            sampler=_string(document.get("sampler")),
            gpus=[g for g in gpus if g is not None],
            error=_string(document.get("error")),
        )
        if run.error:
            result.error(f"the burn did not run: {run.error}", number)
        elif not run.gpus:
            result.error("the burn lists no GPU (nothing measured)", number)
        result.runs.append(run)
    if not result.runs and not result.errors:
        result.error(f"no {BURN_TOOL} JSON document found: the burn did not finish")
    return result
