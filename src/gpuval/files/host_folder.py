"""The one rule for reading raw/<host>/<file>: the nodes under test write raw/, so nothing there
is trusted. A file is read for a host only when both names are plain and neither the host folder
nor the file is a symbolic link (the path cannot leave the host's own folder, and a node can be
judged on no file but its own); anything else is refused (RefusedPath), never read.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

RAW_DIR = "raw"

# Host folders are named after the inventory and files after steps, which name hosts too (pair
# steps): any text, escaped wherever it is shown, but never climbing (`/`, `..`), hidden (`.x`),
# or in an encoding no output can hold (control characters, bytes that are not UTF-8).
PLAIN_NAME_RULE = "a plain name: printable, without `/`, not starting with `.`, 1-255 characters"
MAX_NAME = 255


def plain_name(name: str) -> bool:
    """Whether a host folder or a file of raw/ may have this name (PLAIN_NAME_RULE)."""
    return 0 < len(name) <= MAX_NAME and name.isprintable() and "/" not in name and name[0] != "."


class RefusedPath(Exception):
    """A path in raw/ that gpuval must not read (`host_file`); the message says why."""


def _lstat_mode(path: str) -> int | None:
    """The mode of `path` itself (a link is not followed); None when nothing is there."""
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None


# Plain strings and os calls, not pathlib: this runs for each of a thousand nodes' 67,000 files.
def host_dir(run_dir: Path, host: str) -> str:
    """raw/<host>, unless its name is not plain or it is a symbolic link (RefusedPath)."""
    if not plain_name(host):
        raise RefusedPath(f"host folder name {host!a} is not {PLAIN_NAME_RULE}")
    folder = os.path.join(run_dir, RAW_DIR, host)
    if (mode := _lstat_mode(folder)) is not None and stat.S_ISLNK(mode):
        raise RefusedPath(f"{RAW_DIR}/{host} is a symbolic link; links are never followed")
    return folder


def host_file(run_dir: Path, host: str, name: str) -> Path | None:
    """raw/<host>/<name> when it may be read as `host`'s: both names plain, neither the host
    folder nor the file a symbolic link (so the path cannot leave the host's own folder, and a node
    can be judged on no file but its own); None when there is no regular file by that name.
    Raises RefusedPath otherwise. The one rule for every file read from raw/."""
    folder = host_dir(run_dir, host)
    check_file_name(name)
    path = os.path.join(folder, name)
    try:
        status: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        status = None
    return Path(path) if readable(host, name, status) else None


def check_file_name(name: str) -> None:
    """RefusedPath unless `name` is plain."""
    if not plain_name(name):
        raise RefusedPath(f"file name {name!a} is not {PLAIN_NAME_RULE}")


def readable(host: str, name: str, status: os.stat_result | None) -> bool:
    """`host_file`'s rule on the file's own status (None: nothing there): True for a regular
    file, False when there is none; RefusedPath for a symbolic link."""
    if status is None:
        return False
    if stat.S_ISLNK(status.st_mode):
        raise RefusedPath(f"{RAW_DIR}/{host}/{name} is a symbolic link; links are never followed")
    return stat.S_ISREG(status.st_mode)


@dataclass(frozen=True)
class HostFolder:
    """raw/<host>/ as listed once: each file's own status (a link not followed), so that a
    thousand nodes' 67,000 files are each looked at once, not once per rule."""

    run_dir: Path
    host: str
    path: str
    statuses: dict[str, os.stat_result]

    @classmethod
    def listed(cls, run_dir: Path, host: str) -> HostFolder:
        path = host_dir(run_dir, host)
        statuses = {}
        with os.scandir(path) as entries:
            for entry in entries:
                try:
                    statuses[entry.name] = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # gone since it was listed
                    continue
        return cls(run_dir, host, path, statuses)

    def file(self, name: str) -> tuple[str, os.stat_result] | None:
        """`host_file` of `name`, with its status (RefusedPath, None as there). The path is
        text: a thousand nodes' 67,000 files are mostly taken from the parse cache unread, and
        a Path for each cost more than the rest of looking them up."""
        check_file_name(name)
        status = self.statuses.get(name)
        if not readable(self.host, name, status):
            return None
        assert status is not None  # readable: there
        return os.path.join(self.path, name), status
