"""The reports folder: one run folder per run (reports/<run-id>/), the history database that
indexes them (reports/history.sqlite) and the baselines (reports/baselines/<name>.json).

A run folder's archive is its parent folder, so `gpuval report reports/<run-id>` and
`gpuval run` keep the history and the baselines of the same reports folder.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPORTS_ENV = "GPUVAL_REPORTS_DIR"
HISTORY_FILE = "history.sqlite"
# What a trimmed run folder keeps: its judgement, enough for `gpuval history --rebuild`.
KEPT_WHEN_TRIMMED = ("run.json", "results.json", "summary.json", "profile.json")
BASELINES_FOLDER = "baselines"


class ArchiveError(Exception):
    """A run or baseline that cannot be found; the message says what to pass instead."""


@dataclass(frozen=True)
class Archive:
    root: Path

    @classmethod
    def default(cls) -> Archive:
        """$GPUVAL_REPORTS_DIR, else ./reports."""
        return cls(Path(os.environ.get(REPORTS_ENV) or "reports"))

    @classmethod
    def of_run(cls, run_dir: Path) -> Archive:
        return cls(run_dir.resolve().parent)

    @property
    def history_path(self) -> Path:
        return self.root / HISTORY_FILE

    @property
    def baselines_dir(self) -> Path:
        return self.root / BASELINES_FOLDER

    def baseline_path(self, name: str) -> Path:
        return self.baselines_dir / f"{name}.json"

    def run_folders(self) -> list[Path]:
        """Every folder that holds a judged run (results.json and summary.json), by name."""
        if not self.root.is_dir():
            return []
        return sorted(
            entry
            for entry in self.root.iterdir()
            if (entry / "results.json").is_file() and (entry / "summary.json").is_file()
        )

    def resolve_run(self, reference: str) -> Path:
        """A run folder given as a path, or as a run id of this reports folder."""
        for candidate in (Path(reference), self.root / reference):
            if (candidate / "summary.json").is_file():
                return candidate
        raise ArchiveError(
            f"{reference}: not a judged run folder (no summary.json there or in {self.root}); "
            "pass a run folder or a run id, and run `gpuval report` on it first"
        )

    def runs_by_age(self) -> list[Path]:
        """Every run folder of the reports folder, oldest first: by run.json's start time, else
        the folder's modification time. A run folder is a folder (never a link to one) whose
        run.json (never a link) names a run id: nothing else of the reports folder is a run."""

        def started(folder: Path, run: dict[str, Any]) -> str:
            value = run.get("started_at")
            if isinstance(value, str):
                return value
            modified = datetime.fromtimestamp(folder.lstat().st_mtime, UTC)
            return modified.strftime("%Y-%m-%dT%H:%M:%SZ")

        if not self.root.is_dir():
            return []
        runs = {
            entry: run
            for entry in self.root.iterdir()
            if _is_folder(entry) and (run := _run_record(entry)) is not None
        }
        return sorted(runs, key=lambda folder: (started(folder, runs[folder]), folder.name))

    def trim_plan(self, keep: int, include_unjudged: bool = False) -> TrimPlan:
        """What `trim` removes to keep the newest `keep` run folders whole and only the
        judgement (KEPT_WHEN_TRIMMED) of older ones, so the history can still be rebuilt. An
        older run never judged (no results.json and summary.json) keeps its raw outputs, the
        only record of it, unless `include_unjudged`."""
        runs = self.runs_by_age()
        removals: dict[Path, list[Path]] = {}
        unjudged = []
        for folder in runs[: max(0, len(runs) - keep)]:
            judged = all(_is_file(folder / name) for name in ("results.json", "summary.json"))
            if not judged and not include_unjudged:
                unjudged.append(folder)
                continue
            extra = sorted(e for e in folder.iterdir() if e.name not in KEPT_WHEN_TRIMMED)
            if extra:
                removals[folder] = extra
        return TrimPlan(removals, unjudged)

    def trim(self, plan: TrimPlan) -> list[Path]:
        """Remove what `plan` lists; a link is removed itself, never what it points to. The
        trimmed folders."""
        for entries in plan.removals.values():
            for entry in entries:
                if _is_folder(entry):
                    shutil.rmtree(entry)  # refuses a link; inside, it never follows one
                else:
                    entry.unlink(missing_ok=True)
        return list(plan.removals)


@dataclass(frozen=True)
class TrimPlan:
    """What `gpuval prune` removes: per old run folder, its entries beyond the judgement; and
    the old run folders kept whole because they were never judged."""

    removals: dict[Path, list[Path]]
    unjudged: list[Path]


def _is_folder(path: Path) -> bool:
    """A folder itself, not a link to one (Path.is_dir follows links)."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    """A regular file itself, not a link to one."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _run_record(folder: Path) -> dict[str, Any] | None:
    """run.json of a gpuval run folder (a JSON object naming its run id), else None."""
    path = folder / "run.json"
    if not _is_file(path):
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or not isinstance(document.get("run_id"), str):
        return None
    return document if document["run_id"] else None
