"""Read a run folder: run.json, raw/<host>/<file> and their `<file>.meta.json` sidecars.

Nothing here raises on bad content: a broken sidecar, a missing raw file or an unrecognised
output becomes a Diagnostic naming the file (and line/column for bad JSON). Only a folder that
cannot be a run folder at all (missing, no raw/) raises RunFolderError, with what to do.

The nodes under test write raw/<host>/, so nothing there is trusted: a file is read for a host
only when `host_file` allows it (a plain name, no symbolic link, inside the host's own folder);
anything else is refused, never read, and the run cannot pass.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from gpuval import parsers
from gpuval.files.atomic import temporary_of

# RAW_DIR, RefusedPath and host_file: the run folder's layout and rule, for its readers too
from gpuval.files.host_folder import RAW_DIR as RAW_DIR
from gpuval.files.host_folder import HostFolder, host_dir
from gpuval.files.host_folder import RefusedPath as RefusedPath
from gpuval.files.host_folder import host_file as host_file
from gpuval.files.parse_cache import HostCache
from gpuval.files.superseded import superseded_copies
from gpuval.files.workers import FORK_FROM_HOSTS, usable_cores, worker_pool
from gpuval.plan.steps import pair_step
from gpuval.records.base import Diagnostic, ParseResult
from gpuval.schemas.validation import schema_problems

StepProblem = Literal["skipped", "timed_out", "unfinished", "exit_status"]


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

    @property
    def step(self) -> str:
        """The step name: the sidecar's, else the file name without its extension."""
        return self.sidecar.name if self.sidecar else self.path.rsplit("/", 1)[-1].split(".")[0]


SIDECAR_SUFFIX = ".meta.json"
RUN_JSON = "run.json"


class RunFolderError(Exception):
    """The folder cannot be read as a run folder; the message says what to do."""


def _check_host(run_dir: Path, host: str) -> Path:
    """raw/<host>, unless its name is not plain or it is a symbolic link (RefusedPath)."""
    return Path(host_dir(run_dir, host))


@dataclass
class RunFolder:
    """Everything read from a run folder, before judging."""

    run_dir: Path
    # run.json less its keys that break run.schema.json (each one a diagnostic); {} when absent
    meta: dict[str, Any]
    hosts: list[str]  # run.json hosts and raw/ folders, sorted
    without_folder: list[str]  # listed in run.json but no raw/<host>/ folder
    files: list[RawFile]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # what `host_file` refused, never read (the source: the sidecar, file or folder concerned;
    # "raw/<host>/" for the host's folder): a folder a node tampered with, never judged
    refused: list[Diagnostic] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)  # copies later ones replaced, never read

    def expected_steps(self, host: str) -> list[str]:
        return [str(step) for step in self.meta.get("expected", {}).get(host, [])]

    def declared(self, host: str) -> dict[str, Any]:
        """What run.json `declared` says `host` is ({} when nothing)."""
        declared: dict[str, Any] = self.meta.get("declared", {}).get(host, {})
        return declared


def _error(message: str, source: str, line: int | None = None) -> Diagnostic:
    return Diagnostic("error", message, source, line)


def _warning(message: str, source: str, line: int | None = None) -> Diagnostic:
    return Diagnostic("warning", message, source, line)


# A lone UTF-16 surrogate: what a JSON escape like "\udcff" decodes to, which no UTF-8 output
# (the report, the history database) can hold.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# The escape that can make one; text read with errors="replace" holds none itself. A document
# without it (nearly every sidecar) is not walked string by string.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _encodable(value: Any) -> Any:
    """`value` (decoded JSON) with every lone surrogate of its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_encodable(item) for item in value]
    if isinstance(value, dict):
        return {_encodable(key): _encodable(item) for key, item in value.items()}
    return value


def load_json(path: Path, source: str) -> tuple[Any, Diagnostic | None]:
    """A JSON document (its strings encodable as UTF-8), or a diagnostic naming the file, line
    and column of the problem."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return None, _error(f"cannot read: {exc.strerror or exc}", source)
    try:
        document = json.loads(text)
        return (_encodable(document) if SURROGATE_ESCAPE.search(text) else document), None
    except json.JSONDecodeError as exc:
        return None, _error(
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", source, exc.lineno
        )


def read_run_json(run_dir: Path) -> tuple[dict[str, Any], list[Diagnostic]]:
    """run.json: {} when absent; a diagnostic when unreadable or not an object."""
    path = run_dir / RUN_JSON
    if not path.exists():  # judged at best unjudged (checks.folder): nothing says what was expected
        return {}, []
    document, problem = load_json(path, RUN_JSON)
    if problem is not None:
        return {}, [problem]
    if not isinstance(document, dict):
        return {}, [_error("run.json must hold a JSON object", RUN_JSON)]
    return _schema_checked_run_json(document)


def _schema_checked_run_json(document: dict[str, Any]) -> tuple[dict[str, Any], list[Diagnostic]]:
    """run.json without the top-level keys whose value breaks run.schema.json, each named in an
    error; a warning when `expected` is absent (a step that never ran cannot be noticed)."""
    problems = sorted(
        schema_problems(document, "run"), key=lambda e: [str(p) for p in e.absolute_path]
    )
    diagnostics = [
        _error(
            f"key {'.'.join(map(str, p.absolute_path)) or '<root>'}: {p.message} "
            "(run.schema.json); that key is ignored",
            RUN_JSON,
        )
        for p in problems
    ]
    broken = {str(p.absolute_path[0]) for p in problems if p.absolute_path}
    kept = {key: value for key, value in document.items() if key not in broken}
    if "expected" not in document:
        diagnostics.append(
            _warning(
                "run.json has no `expected`: a step that never ran on a host cannot be noticed",
                RUN_JSON,
            )
        )
    return kept, diagnostics


def _sidecar_problems(document: Any, source: str) -> list[Diagnostic]:
    problems = sorted(schema_problems(document, "sidecar"), key=lambda e: list(e.path))
    return [
        _error(
            f"sidecar does not match sidecar.schema.json at "
            f"{'/'.join(map(str, p.absolute_path)) or '<root>'}: {p.message}",
            source,
        )
        for p in problems
    ]


def sidecar_from_document(document: dict[str, Any], host: str, name: str) -> Sidecar:
    """A Sidecar from a sidecar document; fields of the wrong type fall back to their defaults
    (schema problems are reported separately)."""

    def text(key: str) -> str | None:
        value = document.get(key)
        return value if isinstance(value, str) else None

    def number(key: str) -> float | None:
        value = document.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return None

    exit_code = document.get("exit_code")
    env = document.get("env")
    return Sidecar(
        name=text("name") or name,
        host=text("host") or host,
        phase=text("phase") or "unknown",
        raw=text("raw"),
        command=text("command"),
        tool=text("tool"),
        cwd=text("cwd"),
        env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
        exit_code=exit_code
        if isinstance(exit_code, int) and not isinstance(exit_code, bool)
        else None,
        timed_out=document.get("timed_out") is True,
        timeout_s=number("timeout_s"),
        started_at=text("started_at"),
        ended_at=text("ended_at"),
        duration_s=number("duration_s"),
        skipped=text("skipped"),
    )


def read_sidecar(path: Path, run_dir: Path, host: str) -> tuple[Sidecar | None, list[Diagnostic]]:
    """One sidecar (a path `host_file` allowed); None (with a diagnostic) when it is not a
    readable JSON object."""
    source = path.relative_to(run_dir).as_posix()
    document, problem = load_json(path, source)
    if problem is not None:
        return None, [problem]
    if not isinstance(document, dict):
        return None, [_error("sidecar must hold a JSON object", source)]
    name = path.name[: -len(SIDECAR_SUFFIX)]
    return sidecar_from_document(document, host, name), _sidecar_problems(document, source)


# The tool hint of outputs kept as context for a person reading the run, never judged.
CONTEXT_TOOL = "context"


def parse_raw(
    path: Path, source: str, tool: str | None
) -> tuple[ParseResult | None, list[Diagnostic]]:
    """Parse one raw file as `tool` (or detect it); unreadable or unrecognised -> diagnostics.
    A sidecar naming CONTEXT_TOOL keeps its output for people (lspci, ip addr): not parsed."""
    diagnostics: list[Diagnostic] = []
    if tool == CONTEXT_TOOL:
        return None, []
    if tool is not None and tool not in parsers.known_tools():
        diagnostics.append(
            _warning(
                f"sidecar names unknown tool {tool!r}; detecting the tool from the content instead",
                source,
            )
        )
        tool = None
    try:
        # read by the parser, a block at a time where it can: a large log's text is never whole
        # beside what it says
        result = parsers.parse_file(path, tool, source=source)
    except OSError as exc:
        return None, [*diagnostics, _error(f"cannot read: {exc.strerror or exc}", source)]
    except Exception as exc:  # a parser bug must not hide the rest of the run: fail closed
        return None, [*diagnostics, _error(f"parser crashed: {type(exc).__name__}: {exc}", source)]
    if result is None:
        diagnostics.append(
            _warning(
                "not recognised as the output of any known tool "
                f"({', '.join(parsers.known_tools())}); kept, not judged",
                source,
            )
        )
    return result, diagnostics


# Where the classes of what reading a file gives are defined (all that a parse cache may hold).
CACHED_MODULES = ("gpuval.records", __name__)
_Read = TypeVar("_Read")


@dataclass
class _Reading:
    """What reading raw/ found so far; with `caches`, each file read through its host's parse
    cache (gpuval.files.parse_cache)."""

    files: list[RawFile] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    refused: list[Diagnostic] = field(default_factory=list)
    caches: dict[str, HostCache] | None = None

    def refuse(self, message: str, source: str) -> None:
        self.refused.append(_error(message, source))

    def cached(self, folder: HostFolder, name: str, status: os.stat_result,
               variant: tuple[str | None, ...], read: Callable[[], _Read]) -> _Read:  # fmt: skip
        """`read()` of the host's file `name` (`status`: its own, a regular file `host_file`'s
        rule allowed), or what it gave last time the same file was read the same way."""
        if self.caches is None:
            return read()
        host_cache = self.caches.get(folder.host)
        if host_cache is None:
            host_cache = HostCache(folder.run_dir, folder.host, CACHED_MODULES)
            self.caches[folder.host] = host_cache
        found: _Read | None = host_cache.get(name, status, variant)
        if found is None:
            found = read()
            host_cache.put(name, status, variant, found)
        return found


def _foreign_pair(step: str, host: str) -> str | None:
    """Why `host`'s folder may not hold `step`: a pair step of two other nodes (a node is never
    judged on another node's file); None when it may."""
    pair = pair_step(step)
    if pair is None or host in (pair.src, pair.dst):
        return None
    return f"pair step {step!r} is {pair.src} and {pair.dst}'s, not {host}'s"


def _read_sidecar_step(folder: HostFolder, name: str, found: _Reading) -> str | None:
    """One sidecar and the raw output it names; the raw file name it claims, if any."""
    run_dir, host = folder.run_dir, folder.host
    source = f"{RAW_DIR}/{host}/{name}"
    try:
        at = folder.file(name)
    except RefusedPath as refused:
        found.refuse(str(refused), f"{RAW_DIR}/{host}/")
        return None
    if at is None:
        found.diagnostics.append(_warning("not a regular file; ignored", source))
        return None
    path, status = at
    sidecar, problems = found.cached(
        folder, name, status, (), lambda: read_sidecar(Path(path), run_dir, host)
    )
    found.diagnostics += problems
    if sidecar is None:
        return None
    if why := _foreign_pair(sidecar.name, host):
        found.refuse(f"{why}: this sidecar and its output", source)
        return sidecar.raw
    if sidecar.raw is None:
        found.files.append(RawFile(host, source, sidecar, None))
        return None
    try:
        raw_at = folder.file(sidecar.raw)
    except RefusedPath as refused:
        found.refuse(
            f"{name} names raw {sidecar.raw!a}, refused: {refused} (a raw output is a "
            f"file of its own host's folder, {RAW_DIR}/{host}/)",
            source,
        )
        return sidecar.raw
    raw_source = f"{RAW_DIR}/{host}/{sidecar.raw}"
    if raw_at is None:
        if not sidecar.skipped:
            found.diagnostics.append(
                _error(f"raw output {sidecar.raw!r} named by {name} is missing", raw_source)
            )
        found.files.append(RawFile(host, raw_source, sidecar, None))
        return sidecar.raw
    raw_path, raw_status = raw_at
    tool = sidecar.tool
    result, problems = found.cached(
        folder, sidecar.raw, raw_status, (tool,),
        lambda: parse_raw(Path(raw_path), raw_source, tool),
    )  # fmt: skip
    found.diagnostics += problems
    found.files.append(RawFile(host, raw_source, sidecar, result))
    return sidecar.raw


def _read_unclaimed(folder: HostFolder, name: str, found: _Reading) -> None:
    """A file no sidecar names: parsed by detecting its tool, with a warning."""
    host = folder.host
    source = f"{RAW_DIR}/{host}/{name}"
    at = folder.file(name)
    if at is None:
        found.diagnostics.append(_warning("not a regular file; ignored", source))
        return
    path, status = at
    step = name.split(".")[0]
    if why := _foreign_pair(step, host):
        found.refuse(why, source)
        return
    found.diagnostics.append(
        _warning(
            "raw output without a sidecar: the command and exit status "
            "are unknown; parsed by detecting the tool",
            source,
        )
    )
    result, problems = found.cached(
        folder, name, status, (None,), lambda: parse_raw(Path(path), source, None)
    )
    found.diagnostics += problems
    found.files.append(RawFile(host, source, None, result))


def _read_host(run_dir: Path, host: str, found: _Reading) -> None:
    """Every sidecar of raw/<host>/ and what it names, then the files no sidecar names; each
    file by `host_file`'s rule."""
    folder = HostFolder.listed(run_dir, host)
    names = sorted(folder.statuses)
    claimed: set[str] = set()
    for name in names:
        if (
            name.endswith(SIDECAR_SUFFIX)
            and (raw := _read_sidecar_step(folder, name, found)) is not None
        ):
            claimed.add(raw)
    for name in names:
        if name.endswith(SIDECAR_SUFFIX) or name in claimed:
            continue
        if (stands_for := temporary_of(name)) is not None:
            found.diagnostics.append(_warning(
                f"temporary copy of {stands_for!a} left by an interrupted write (the controller "
                "writes each file to a temporary first); never read", f"{RAW_DIR}/{host}/{name}",
            ))  # fmt: skip
            continue
        try:
            _read_unclaimed(folder, name, found)
        except RefusedPath as refused:
            found.refuse(str(refused), f"{RAW_DIR}/{host}/")


@dataclass(frozen=True)
class _HostJob:
    run_dir: Path
    host: str
    cached: bool
    write_back: bool


def _read_one_host(job: _HostJob) -> _Reading:
    """What one host's folder holds; with `job.write_back`, what was parsed kept in its cache."""
    found = _Reading(caches={} if job.cached else None)
    try:
        _read_host(job.run_dir, job.host, found)
    except OSError as exc:
        found.diagnostics.append(
            _error(f"cannot read host folder: {exc.strerror or exc}", f"{RAW_DIR}/{job.host}")
        )
    host_cache = found.caches.pop(job.host, None) if found.caches is not None else None
    if host_cache and job.write_back:
        # a read-only run folder: only a slower next read
        host_cache.save(quiet=True)
    return found


def _read_hosts(run_dir: Path, hosts: list[str], cached: bool, write_back: bool
                ) -> Iterator[_Reading]:  # fmt: skip
    """What each host's folder holds, in the order of `hosts`. Hosts to parse (no cache of this
    code) are read side by side on the controller's cores, a thousand nodes' files being tens
    of seconds of CPU: this process parses one in every `cores` of them itself, a forked worker
    for each other core the rest (a host parsed here is never pickled and unpickled, a third of
    its cost in a worker: 1.5 of 18 CPU seconds at 1,024 nodes). Cached hosts are read here,
    meanwhile: unpickling their cache in a worker only to pickle it again for this process
    would cost more than it spares."""
    jobs = [_HostJob(run_dir, host, cached, write_back) for host in hosts]
    to_parse = [j for j in jobs if not (cached and HostCache.of_this_code(run_dir, j.host))]
    cores = usable_cores() if len(hosts) >= FORK_FROM_HOSTS else 1
    forked = [job for at, job in enumerate(to_parse) if at % cores]
    with worker_pool(len(forked), cores_left=1) as pool:
        parsed = {job.host: pool.submit(_read_one_host, job) for job in forked}
        for job in jobs:
            yield parsed[job.host].result() if job.host in parsed else _read_one_host(job)


def read_run_folder(run_dir: Path, cached: bool = False, write_back: bool = False) -> RunFolder:
    """Read and parse a whole run folder; `cached`: each file whose parse cache entry matches
    is taken from it (`update_parse_cache` fills it); `write_back` (with `cached`): what was
    parsed is kept there too, host by host, so that the next read finds it (after a gpuval
    upgrade, the first report parses everything, the next ones do not). Raises RunFolderError
    only when it is not one."""
    if not run_dir.exists():
        raise RunFolderError(
            f"{run_dir}: no such folder; pass the run folder that holds raw/ "
            "(e.g. reports/<run-id>)"
        )
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir}: not a folder; pass the run folder that holds raw/")
    raw_dir = run_dir / RAW_DIR
    if not raw_dir.is_dir():
        raise RunFolderError(
            f"{run_dir}: no raw/ folder; a run folder holds raw/<host>/<output> "
            "files written by the playbook (run it first, or pass its folder)"
        )
    meta, diagnostics = read_run_json(run_dir)
    try:
        names = sorted(entry.name for entry in raw_dir.iterdir())
    except OSError as exc:
        raise RunFolderError(
            f"{raw_dir}: cannot list: {exc.strerror or exc}; check its permissions"
        ) from exc
    found = _Reading(diagnostics=diagnostics)
    present: list[str] = []
    for name in names:
        try:
            host_dir = _check_host(run_dir, name)
        except RefusedPath as refused:
            found.refuse(str(refused), f"{RAW_DIR}/")
            continue
        if not host_dir.is_dir():
            found.diagnostics.append(
                _warning(
                    f"file directly under {RAW_DIR}/ (expected {RAW_DIR}/<host>/<file>); ignored",
                    f"{RAW_DIR}/{name}",
                )
            )
            continue
        present.append(name)
    for host_found in _read_hosts(run_dir, present, cached, write_back):
        found.files += host_found.files
        found.diagnostics += host_found.diagnostics
        found.refused += host_found.refused
    listed_hosts = [str(h) for h in meta.get("hosts", [])]
    return RunFolder(
        run_dir=run_dir,
        meta=meta,
        hosts=sorted(set(present) | set(listed_hosts)),
        without_folder=sorted(set(listed_hosts) - set(present)),
        files=found.files,
        diagnostics=found.diagnostics,
        refused=found.refused,
        superseded=superseded_copies(run_dir),
    )


def update_parse_cache(run_dir: Path, host: str) -> None:
    """Read raw/<host>/ (what is new or changed in it: the rest hits the cache) and keep what it
    gave in its parse cache, for the next `read_run_folder(cached=True)`. A folder that is not
    there, or refused, leaves the cache as it was."""
    try:
        _check_host(run_dir, host)
    except RefusedPath:
        return
    if not (run_dir / RAW_DIR / host).is_dir():
        return
    found = _Reading(caches={})
    _read_host(run_dir, host, found)
    for host_cache in found.caches.values() if found.caches else ():
        host_cache.save()
