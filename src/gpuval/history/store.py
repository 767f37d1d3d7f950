"""reports/history.sqlite: every judged run of a reports folder, indexed for trends.

Tables: `runs` (one row per run: verdict, time, profile, baseline, counts), `hosts` (each host's
status and what it is), `checks` (every check, as results.json has it) and `measurements` (the
key figures, gpuval.judgement.figures). `gpuval report` writes a run's rows (replacing any older
ones of the same run id); `gpuval history --rebuild` makes the database afresh from the run
folders' results.json and summary.json, so the history survives a deleted database.

SQLite keeps each write whole (its journal): a full disk rolls the write back and leaves the
runs already indexed as they were. A database path that is a symbolic link is refused, never
opened: gpuval writes through no link.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuval.checks.model import STATUS_ORDER
from gpuval.files.archive import Archive
from gpuval.files.atomic import OutputError, existing_mode
from gpuval.records.key_figures import KeyFigure, figures_from_summary

if TYPE_CHECKING:
    from gpuval.judgement.model import RunJudgement

SCHEMA_VERSION = 1
TABLES = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, run_dir TEXT NOT NULL, started_at TEXT NOT NULL,
    generated_at TEXT NOT NULL, verdict TEXT NOT NULL, profile TEXT, baseline TEXT,
    host_count INTEGER NOT NULL, checks INTEGER NOT NULL, failing INTEGER NOT NULL
);
CREATE TABLE hosts (
    run_id TEXT NOT NULL REFERENCES runs ON DELETE CASCADE, host TEXT NOT NULL,
    status TEXT NOT NULL, gpu_model TEXT, gpu_count INTEGER, driver_version TEXT,
    nccl_version TEXT, PRIMARY KEY (run_id, host)
);
CREATE TABLE checks (
    run_id TEXT NOT NULL REFERENCES runs ON DELETE CASCADE, check_id TEXT NOT NULL,
    host TEXT NOT NULL, category TEXT, status TEXT NOT NULL, measured, reference, unit TEXT,
    reason TEXT, source TEXT
);
CREATE TABLE measurements (
    run_id TEXT NOT NULL REFERENCES runs ON DELETE CASCADE, host TEXT NOT NULL,
    figure TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL,
    higher_is_better INTEGER NOT NULL, PRIMARY KEY (run_id, host, figure)
);
CREATE INDEX runs_by_time ON runs (started_at);
CREATE INDEX measurements_by_figure ON measurements (figure, host);
CREATE INDEX checks_by_run ON checks (run_id, status);
"""


class HistoryError(Exception):
    """A database that cannot be opened or written; the message says what to do."""


def host_statuses(checks: list[dict[str, Any]]) -> dict[str, str]:
    """The worst status of each host's checks (a host without checks is an error)."""
    found: dict[str, str] = {}
    for check in checks:
        host, status = check["host"], check["status"]
        if host not in found or STATUS_ORDER.index(status) < STATUS_ORDER.index(found[host]):
            found[host] = status
    return found


@dataclass(frozen=True)
class RunEntry:
    """One run as the history keeps it."""

    run_id: str
    run_dir: str
    started_at: str
    generated_at: str
    verdict: str
    profile: str | None
    baseline: str | None
    hosts: list[dict[str, Any]]  # results.json `hosts` items (HostFacts) plus "status"
    checks: list[dict[str, Any]]  # results.json `checks` items
    figures: list[KeyFigure]

    @classmethod
    def from_documents(
        cls, results: dict[str, Any], figures: list[KeyFigure], run_dir: Path
    ) -> RunEntry:
        """From results.json's fields (its document, or the same built in memory)."""
        started = results.get("meta", {}).get("started_at")
        checks = list(results["checks"])
        status = host_statuses(checks)
        return cls(
            run_id=str(results["run_id"]),
            run_dir=str(run_dir.resolve()),
            started_at=started if isinstance(started, str) else str(results["generated_at"]),
            generated_at=str(results["generated_at"]),
            verdict=str(results["verdict"]),
            profile=results.get("profile"),
            baseline=results.get("baseline"),
            hosts=[{**h, "status": status.get(h["name"], "error")} for h in results["hosts"]],
            checks=checks,
            figures=figures,
        )

    @classmethod
    def from_judgement(cls, judgement: RunJudgement, run_dir: Path) -> RunEntry:
        document = {
            "run_id": judgement.run_id,
            "generated_at": judgement.generated_at,
            "verdict": judgement.verdict,
            "meta": judgement.meta,
            "profile": judgement.profile_name,
            "baseline": judgement.baseline_name,
            "hosts": [dataclasses.asdict(h) for h in judgement.hosts],
            "checks": [dataclasses.asdict(c) for c in judgement.checks],
        }
        return cls.from_documents(document, judgement.figures, run_dir)

    @classmethod
    def from_folder(cls, run_dir: Path) -> RunEntry:
        results, summary = (
            json.loads((run_dir / name).read_text(encoding="utf-8"))
            for name in ("results.json", "summary.json")
        )
        if not isinstance(results, dict) or not isinstance(summary, dict):
            raise ValueError("results.json and summary.json must each hold a JSON object")
        return cls.from_documents(results, figures_from_summary(summary), run_dir)


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """The database (created with its tables when new), committed when the block ends."""
    try:
        existing_mode(path)  # refuses a link (or a folder) where the database goes
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=30)
    except OutputError as problem:
        raise HistoryError(str(problem)) from problem
    except (OSError, sqlite3.Error) as problem:
        raise HistoryError(f"{path}: cannot open the history database: {problem}") from problem
    with closing(connection):
        try:
            connection.execute("PRAGMA foreign_keys = ON")
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                connection.executescript(TABLES)
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise HistoryError(
                    f"{path}: a history database of another gpuval version (schema {version}); "
                    "delete it and run `gpuval history --rebuild`"
                )
            with connection:
                yield connection
        except sqlite3.Error as problem:
            if getattr(problem, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                raise HistoryError(
                    f"{path.parent}: the disk is full; nothing was written to {path.name} "
                    "(SQLite rolled the write back): free some space there and run it again"
                ) from problem
            raise HistoryError(
                f"{path}: {problem}; `gpuval history --rebuild` remakes it"
            ) from problem


def _write(connection: sqlite3.Connection, entry: RunEntry) -> None:
    connection.execute("DELETE FROM runs WHERE run_id = ?", (entry.run_id,))
    failing = sum(c["status"] in ("fail", "error") for c in entry.checks)
    connection.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            entry.run_id, entry.run_dir, entry.started_at, entry.generated_at, entry.verdict,
            entry.profile, entry.baseline, len(entry.hosts), len(entry.checks), failing,
        ),
    )  # fmt: skip
    connection.executemany(
        "INSERT INTO hosts VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (
                entry.run_id, h["name"], h["status"], h.get("gpu_model"), h.get("gpu_count"),
                h.get("driver_version"), h.get("nccl_version"),
            )
            for h in entry.hosts
        ],
    )  # fmt: skip
    connection.executemany(
        "INSERT INTO checks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                entry.run_id, c["check_id"], c["host"], c.get("category"), c["status"],
                c.get("measured"), c.get("reference"), c.get("unit"), c.get("reason"),
                c.get("source"),
            )
            for c in entry.checks
        ],
    )  # fmt: skip
    connection.executemany(
        "INSERT INTO measurements VALUES (?, ?, ?, ?, ?, ?)",
        [
            (entry.run_id, f.host, f.name, f.value, f.unit, int(f.higher_is_better))
            for f in entry.figures
        ],
    )


def index_run(archive: Archive, entry: RunEntry) -> None:
    with connect(archive.history_path) as connection:
        _write(connection, entry)


@dataclass(frozen=True)
class RebuildResult:
    indexed: int
    skipped: list[str]  # "<folder>: <why>" for folders that could not be read


def rebuild(archive: Archive) -> RebuildResult:
    """A new database from every judged run folder of the archive (the old one is replaced)."""
    entries, skipped = [], []
    for run_dir in archive.run_folders():
        try:
            entries.append(RunEntry.from_folder(run_dir))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as problem:
            skipped.append(f"{run_dir.name}: {type(problem).__name__}: {problem}")
    path = archive.history_path
    fresh = path.with_suffix(".rebuilding")
    try:
        existing_mode(path)  # a link where the database goes is refused, not replaced
        fresh.unlink(missing_ok=True)
        with connect(fresh) as connection:
            for entry in entries:
                _write(connection, entry)
        fresh.replace(path)
    except OutputError as problem:
        raise HistoryError(str(problem)) from problem
    except OSError as problem:
        raise HistoryError(f"{path}: cannot replace it: {problem.strerror or problem}") from problem
    finally:
        fresh.unlink(missing_ok=True)  # a rebuild that failed half-way leaves nothing behind
    return RebuildResult(len(entries), skipped)
