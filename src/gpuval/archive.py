"""The reports folder: one run folder per run (reports/<run-id>/), the history database that
indexes them (reports/history.sqlite) and the baselines (reports/baselines/<name>.json).

A run folder's archive is its parent folder, so `gpuval report reports/<run-id>` and
`gpuval run` keep the history and the baselines of the same reports folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPORTS_ENV = "GPUVAL_REPORTS_DIR"
HISTORY_FILE = "history.sqlite"
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
