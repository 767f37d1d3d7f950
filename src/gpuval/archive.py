"""The reports folder: one run folder per run (reports/<run-id>/), the history database that
indexes them (reports/history.sqlite) and the baselines (reports/baselines/<name>.json).

A run folder's archive is its parent folder, so `gpuval report reports/<run-id>` and
`gpuval run` keep the history and the baselines of the same reports folder.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

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
        """Every run folder (run.json or raw/ inside), oldest first: by run.json's start time,
        else the folder's modification time."""

        def started(folder: Path) -> str:
            try:
                value = json.loads((folder / "run.json").read_text(encoding="utf-8"))["started_at"]
                if isinstance(value, str):
                    return value
            except (OSError, ValueError, KeyError, TypeError):
                pass
            modified = datetime.fromtimestamp(folder.stat().st_mtime, UTC)
            return modified.strftime("%Y-%m-%dT%H:%M:%SZ")

        if not self.root.is_dir():
            return []
        folders = [
            entry
            for entry in self.root.iterdir()
            if entry.is_dir() and ((entry / "run.json").is_file() or (entry / "raw").is_dir())
        ]
        return sorted(folders, key=lambda folder: (started(folder), folder.name))

    def trim(self, keep: int) -> list[Path]:
        """Keep the newest `keep` run folders whole; of older ones keep only their judgement
        (KEPT_WHEN_TRIMMED), so the history can still be rebuilt. The trimmed folders."""
        runs = self.runs_by_age()
        trimmed = []
        for folder in runs[: max(0, len(runs) - keep)]:
            extra = [entry for entry in folder.iterdir() if entry.name not in KEPT_WHEN_TRIMMED]
            for entry in extra:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            if extra:
                trimmed.append(folder)
        return trimmed
