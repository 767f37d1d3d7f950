"""What a run folder keeps of the copies later ones replaced: superseded/<host>/<name>.<mtime>,
outside raw/ (no file a node sends can reach it). A collect moves there a controller copy longer
than the node's new one; a run started again under the same run id moves there the failure
records of the phases it plays again (they are recorded anew if the phase fails again)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from gpuval.files.host_folder import RAW_DIR, RefusedPath, host_file, plain_name

SUPERSEDED_DIR = "superseded"


def superseded_copies(run_dir: Path) -> list[str]:
    """The copies superseded/ keeps, as superseded/<host>/<name> relative to the run folder,
    host by host and name by name: the regular files of its plainly named host folders (a link,
    or anything else, is no copy the controller made)."""
    root = run_dir / SUPERSEDED_DIR
    if not root.is_dir() or root.is_symlink():
        return []
    found = []
    hosts = (e for e in os.scandir(root) if plain_name(e.name) and e.is_dir(follow_symlinks=False))
    for host in sorted(entry.name for entry in hosts):
        names = sorted(e.name for e in os.scandir(root / host) if e.is_file(follow_symlinks=False))
        found += [f"{SUPERSEDED_DIR}/{host}/{name}" for name in names]
    return found


def superseded_dir(host_raw: Path) -> Path:
    """Where raw/<host>/'s superseded copies go: <run>/superseded/<host>/."""
    return host_raw.parent.parent / SUPERSEDED_DIR / host_raw.name


def supersede(path: Path, host_raw: Path, name: str) -> str:
    """Move raw/<host>/<name> (`path`) to superseded/<host>/<name>.<mtime> (.<mtime>.2, .3, ...
    where copies of the same second are there already: none replaces another); the new path,
    relative to the run folder."""
    first = superseded_dir(host_raw) / f"{name}.{int(path.lstat().st_mtime)}"
    first.parent.mkdir(parents=True, exist_ok=True)
    moved, number = first, 1
    while moved.exists() or moved.is_symlink():
        number += 1
        moved = first.with_name(f"{first.name}.{number}")
    os.replace(path, moved)
    return str(moved.relative_to(host_raw.parent.parent))


def supersede_records(run_dir: Path, names: Iterable[str]) -> list[str]:
    """Move each host's raw/<host>/<name> of `names` (regular files; a link or an unsafe name
    is left alone) to superseded/; where each went, relative to the run folder."""
    raw = run_dir / RAW_DIR
    if not raw.is_dir() or raw.is_symlink():
        return []
    moved = []
    wanted = list(names)
    for host in sorted(entry.name for entry in os.scandir(raw) if plain_name(entry.name)):
        for name in wanted:
            try:
                path = host_file(run_dir, host, name)
            except RefusedPath:
                continue
            if path is not None:
                moved.append(supersede(path, raw / host, name))
    return moved
