"""Copies of the bundled sample run (tests/data/sample-run: real published outputs) as runs of a
reports folder, each with its own run id and start time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

SAMPLE_RUN = Path(__file__).resolve().parent / "data" / "sample-run"


def sample_copy(
    reports: Path, run_id: str, started_at: str, hosts: list[str] | None = None
) -> Path:
    """reports/<run_id>/, the sample run under that id; `hosts`: only those hosts' outputs."""
    run_dir = reports / run_id
    shutil.copytree(SAMPLE_RUN, run_dir)
    meta = json.loads((run_dir / "run.json").read_text())
    meta |= {"run_id": run_id, "started_at": started_at}
    if hosts is not None:
        for folder in (run_dir / "raw").iterdir():
            if folder.name not in hosts:
                shutil.rmtree(folder)
        meta["hosts"] = hosts
        meta["expected"] = {h: s for h, s in meta["expected"].items() if h in hosts}
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2))
    return run_dir
