"""Read a run folder: run.json, raw/<host>/<file> and their `<file>.meta.json` sidecars.

Nothing here raises on bad content: a broken sidecar, a missing raw file or an unrecognised
output becomes a Diagnostic naming the file (and line/column for bad JSON). Only a folder that
cannot be a run folder at all (missing, no raw/) raises RunFolderError, with what to do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuval import parsers
from gpuval.records.base import Diagnostic, ParseResult
from gpuval.schema import validator

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


def load_json(path: Path, source: str) -> tuple[Any, Diagnostic | None]:
    """A JSON document, or a diagnostic naming the file, line and column of the problem."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return None, _error(f"cannot read: {exc.strerror or exc}", source)
    try:
        return json.loads(text), None
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
        validator("run").iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path]
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
    problems = sorted(validator("sidecar").iter_errors(document), key=lambda e: list(e.path))
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
    """One sidecar; None (with a diagnostic) when it is not a readable JSON object."""
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
        text = parsers.read_text(path)
    except OSError as exc:
        return None, [*diagnostics, _error(f"cannot read: {exc.strerror or exc}", source)]
    try:
        result = parsers.parse_text(text, source=source, tool=tool)
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


def _read_host(run_dir: Path, host_dir: Path) -> tuple[list[RawFile], list[Diagnostic]]:
    host = host_dir.name
    files: list[RawFile] = []
    diagnostics: list[Diagnostic] = []
    entries = sorted(host_dir.iterdir(), key=lambda p: p.name)
    claimed: set[str] = set()
    for path in entries:
        if not path.name.endswith(SIDECAR_SUFFIX):
            continue
        sidecar, problems = read_sidecar(path, run_dir, host)
        diagnostics += problems
        if sidecar is None:
            continue
        if sidecar.raw is None:
            files.append(RawFile(host, path.relative_to(run_dir).as_posix(), sidecar, None))
            continue
        claimed.add(sidecar.raw)
        raw_path = host_dir / sidecar.raw
        source = raw_path.relative_to(run_dir).as_posix()
        if not raw_path.is_file():
            if not sidecar.skipped:
                diagnostics.append(
                    _error(f"raw output {sidecar.raw!r} named by {path.name} is missing", source)
                )
            files.append(RawFile(host, source, sidecar, None))
            continue
        result, problems = parse_raw(raw_path, source, sidecar.tool)
        diagnostics += problems
        files.append(RawFile(host, source, sidecar, result))
    for path in entries:
        source = path.relative_to(run_dir).as_posix()
        if path.name.endswith(SIDECAR_SUFFIX) or path.name in claimed:
            continue
        if not path.is_file():
            diagnostics.append(_warning("not a regular file; ignored", source))
            continue
        diagnostics.append(
            _warning(
                "raw output without a sidecar: the command and exit status "
                "are unknown; parsed by detecting the tool",
                source,
            )
        )
        result, problems = parse_raw(path, source, None)
        diagnostics += problems
        files.append(RawFile(host, source, None, result))
    return files, diagnostics


def read_run_folder(run_dir: Path) -> RunFolder:
    """Read and parse a whole run folder. Raises RunFolderError only when it is not one."""
    if not run_dir.exists():
        raise RunFolderError(
            f"{run_dir}: no such folder; pass the run folder that holds raw/ "
            "(e.g. reports/<run-id>)"
        )
    if not run_dir.is_dir():
        raise RunFolderError(f"{run_dir}: not a folder; pass the run folder that holds raw/")
    raw_dir = run_dir / "raw"
    if not raw_dir.is_dir():
        raise RunFolderError(
            f"{run_dir}: no raw/ folder; a run folder holds raw/<host>/<output> "
            "files written by the playbook (run it first, or pass its folder)"
        )
    meta, diagnostics = read_run_json(run_dir)
    files: list[RawFile] = []
    try:
        entries = sorted(raw_dir.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        raise RunFolderError(
            f"{raw_dir}: cannot list: {exc.strerror or exc}; check its permissions"
        ) from exc
    host_dirs: list[Path] = []
    for entry in entries:
        if entry.is_dir():
            host_dirs.append(entry)
        else:
            diagnostics.append(
                _warning(
                    "file directly under raw/ (expected raw/<host>/<file>); ignored",
                    entry.relative_to(run_dir).as_posix(),
                )
            )
    for host_dir in host_dirs:
        try:
            host_files, problems = _read_host(run_dir, host_dir)
        except OSError as exc:
            problems = [
                _error(
                    f"cannot read host folder: {exc.strerror or exc}",
                    host_dir.relative_to(run_dir).as_posix(),
                )
            ]
            host_files = []
        files += host_files
        diagnostics += problems
    listed_hosts = [str(h) for h in meta.get("hosts", [])]
    present = {d.name for d in host_dirs}
    return RunFolder(
        run_dir=run_dir,
        meta=meta,
        hosts=sorted(present | set(listed_hosts)),
        without_folder=sorted(set(listed_hosts) - present),
        files=files,
        diagnostics=diagnostics,
    )
