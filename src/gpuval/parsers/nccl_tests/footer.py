"""The end of a nccl-tests run: its footer (out-of-bounds count, average bus bandwidth), the
failures it reports, and what a finished run tells beyond its lines (versions, hosts, ranks, the
collective its rows imply)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

from gpuval.parsers import nccl_debug, nccl_json
from gpuval.parsers.text import parse_int, parse_number
from gpuval.records.base import ParseResult
from gpuval.records.nccl import NO_MAPPING, NcclFailure, NcclOutOfBounds, NcclRun

_FAILURE = re.compile(
    r"^(?:(?P<host>\S+): )?(?:Test )?(?P<kind>NCCL|CUDA|Cuda) failure "
    r"(?P<file>[^\s:]+):(?P<line>\d+)\s*:?\s*(?P<message>.*)$"
)
_TRACE = re.compile(
    r"^\.\. (?P<host>\S+?)(?: pid (?P<pid>\d+))?: Test failure (?P<file>[^\s:]+):(?P<line>\d+)"
)
_TIMEOUT = re.compile(
    r"^(?P<host>\S+): Test timeout \((?P<secs>\d+)s\) (?P<file>[^\s:]+):(?P<line>\d+)"
)
_OTHER_FAILURES = (
    "error while loading shared libraries",
    "Invalid number of GPUs",
    "The number of requested GPUs",
    "Incompatible NCCL versions",
)
_OTHER_FAILURE = re.compile("|".join(map(re.escape, _OTHER_FAILURES)))
_WORD_BYTES = {
    "int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
    "half": 2, "float16": 2, "bfloat16": 2, "bf16": 2,
    "int32": 4, "uint32": 4, "int": 4, "float": 4, "float32": 4,
    "int64": 8, "uint64": 8, "double": 8, "float64": 8,
}  # fmt: skip


def read_out_of_bounds(body: str) -> NcclOutOfBounds | None:
    """`Out of bounds values : 0 OK`; None when the count cannot be read."""
    words = body.split(":", 1)[1].split() if ":" in body else []
    count = parse_int(words[0]) if words else None
    if count is None:
        return None
    verdict = words[1] if len(words) > 1 else None
    return NcclOutOfBounds(count, verdict == "OK" if verdict else count == 0)


def read_avg_busbw(run: NcclRun, body: str) -> bool:
    """`Avg bus bandwidth    : 98.414 [OK|FAILED]` completes `run`; False when unreadable."""
    words = body.split(":", 1)[1].split() if ":" in body else []
    value = parse_number(words[0]) if words else None
    if value is None:
        return False
    run.avg_busbw_gbps = value
    run.avg_busbw_check = words[1] if len(words) > 1 else None
    run.complete = True
    return True


def reported_error(body: str, number: int) -> NcclFailure:
    """`# error: message` (rccl-tests)."""
    return NcclFailure(None, "nccl", None, None, body.split(":", 1)[1].strip(), log_line=number)


def read_failure(body: str, number: int, touch: Callable[[], NcclRun]) -> bool:
    """Record the failure `body` reports in the run `touch` gives; False when it reports none."""
    if "failure" not in body and "Test timeout" not in body:
        if not _OTHER_FAILURE.search(body):
            return False
        touch().failures.append(NcclFailure(None, "other", None, None, body, log_line=number))
        return True
    trace = _TRACE.match(body)
    if trace:
        _trace(touch(), number, trace)
        return True
    match = _FAILURE.match(body)
    if match:
        kind = "nccl" if match["kind"] == "NCCL" else "cuda"
        message = match["message"].strip()
        if len(message) >= 2 and message[0] == "'" and message[-1] == "'":
            message = message[1:-1].rstrip()
        host, file = _shared(match["host"]), _shared(match["file"])
        touch().failures.append(
            NcclFailure(host, kind, file, int(match["line"]), sys.intern(message), log_line=number)
        )
        return True
    timeout = _TIMEOUT.match(body)
    if timeout:
        message = f"Test timeout ({timeout['secs']}s)"
        touch().failures.append(
            NcclFailure(timeout["host"], "other", timeout["file"], int(timeout["line"]),
                        message, log_line=number)
        )  # fmt: skip
        return True
    return False


def _trace(run: NcclRun, number: int, match: re.Match[str]) -> None:
    """` .. HOST pid N: Test failure common.cu:915`: joined to the failure it propagates."""
    where = sys.intern(f"{match['file']}:{match['line']}")
    pid = int(match["pid"]) if match["pid"] else None
    for failure in reversed(run.failures):
        if failure.host == match["host"] and failure.pid in (None, pid):
            failure.pid = pid
            failure.trace.append(where)
            return
    run.failures.append(
        NcclFailure(match["host"], "other", match["file"], int(match["line"]),
                    "Test failure", pid=pid, trace=[where], log_line=number)
    )  # fmt: skip


def _shared(name: str | None) -> str | None:
    """A host or source file name, interned: every rank of every run of a log repeats them."""
    return sys.intern(name) if name is not None else None


def facts_present(facts: nccl_debug.DebugFacts) -> bool:
    return bool(facts.version or facts.transports or facts.warnings or facts.algorithms
                or facts.mnnvl is not None)  # fmt: skip


def finish_run(
    run: NcclRun, facts: nccl_debug.DebugFacts, last_line: int | None, result: ParseResult
) -> NcclRun:
    """`run` completed with what NCCL_DEBUG said and what its lines imply, warned about when
    it is incomplete."""
    run.end_line = last_line
    run.nccl_version = facts.version or run.runtime_versions.get("RCCL") or _library_version(run)
    run.nccl_versions_by_host = dict(sorted(facts.versions_by_host.items())) or NO_MAPPING
    run.transports = tuple(sorted(facts.transports))
    run.channel_transports = tuple(sorted(facts.channel_transports))
    run.mnnvl = facts.mnnvl
    run.ib_hcas_by_host = dict(sorted(facts.hcas_by_host.items())) or NO_MAPPING
    run.algorithms = tuple(sorted(facts.algorithms))
    run.nccl_warnings = facts.warnings
    hosts = {d.host for d in run.devices if d.host} | facts.hosts
    hosts |= {f.host for f in run.failures if f.host}
    run.hosts = tuple(sorted(hosts))
    run.nranks = _nranks(run, facts)
    for number, message in facts.version_conflicts:
        result.warn(message, number)
    _warn_of_another_library(run, result)
    if run.collective is None and run.rows:
        inferred = infer_collective(run)
        if inferred is not None:  # the judge decides, with the sidecar's command
            run.collective, run.collective_inferred = inferred, True
    if run.rows and not run.complete:
        result.warn("run ended without its footer (# Avg bus bandwidth): incomplete", run.end_line)
    if not run.rows and not run.failures and run.header:
        result.warn("run printed its header but no result rows", run.start_line)
    return run


def _warn_of_another_library(run: NcclRun, result: ParseResult) -> None:
    """nccl-tests prints the NCCL it was built on and the one it loaded; where they differ the
    figures are the loaded one's (on the lent H200: built on 2.28.9, ran on the 2.28.3 of /usr)."""
    built, loaded = _int(run.header.get("nccl_headers")), _int(run.header.get("nccl_library"))
    if built is None or loaded is None or built == loaded:
        return
    result.warn(
        f"nccl-tests was built on NCCL {nccl_json.version_string(built)} (nccl-headers={built}) "
        f"and ran on NCCL {nccl_json.version_string(loaded)} (nccl-library={loaded}): the "
        "figures are the second's; the library path finds another NCCL than the build's",
        run.start_line,
    )


def _library_version(run: NcclRun) -> str | None:
    """`# nccl-tests version 2.18.0 nccl-headers=22602 nccl-library=22602` -> `2.26.2`."""
    code = _int(run.header.get("nccl_library")) or _int(run.header.get("rccl_library"))
    return nccl_json.version_string(code) if code is not None else None


def _nranks(run: NcclRun, facts: nccl_debug.DebugFacts) -> int | None:
    """Device lines, else nThread x nGpus x processes (rccl's nRanks, or 1 when the command
    line shows no MPI launcher), else what NCCL_DEBUG said."""
    if run.devices:
        return len({(d.rank, d.host) for d in run.devices})
    threads, gpus = _int(run.header.get("n_thread")), _int(run.header.get("n_gpus"))
    procs = _int(run.header.get("n_ranks"))
    if procs is None and run.command is not None and not _launched_by_mpi(run.command):
        procs = 1
    if threads is not None and gpus is not None and procs is not None:
        return threads * gpus * procs
    return facts.nranks


def _int(value: int | str | bool | None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _launched_by_mpi(command: str) -> bool:
    return any(word in command for word in ("mpirun", "mpiexec", "srun", "orterun", "prterun"))


def infer_collective(run: NcclRun) -> str | None:
    """The collective a table must come from, when no line names it (None if ambiguous).

    nccl-tests prints count = paramCount, size = max(send, recv) bytes: size/(count*word) is 1
    for all_reduce, broadcast, reduce, sendrecv and nranks for all_gather, reduce_scatter,
    alltoall (src/*.cu getCollByteCount)."""
    row = next((r for r in run.rows if r.count and r.dtype in _WORD_BYTES), None)
    if row is None or row.count is None or row.dtype is None:
        return None
    ratio = row.size_bytes / (row.count * _WORD_BYTES[row.dtype])
    reduces = row.redop not in (None, "none")
    if row.root is not None and row.root >= 0:
        if reduces:
            return "reduce"
        return "broadcast" if ratio == 1 else None
    if reduces:
        return "all_reduce" if ratio == 1 else "reduce_scatter"
    if ratio == 1:
        return "sendrecv"
    in_place, out_of_place = row.in_place, row.out_of_place
    if (
        in_place
        and out_of_place
        and in_place.wrong is None
        and in_place.error is None
        and out_of_place.wrong is not None
    ):
        return "alltoall"  # in-place alltoall prints #wrong N/A
    return "all_gather"
