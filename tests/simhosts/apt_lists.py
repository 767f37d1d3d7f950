"""apt's package lists shared by the simulated hosts of every cluster on this machine.

A fresh host starts with the lists of the image's Debian sources as the last host that updated
them left them, their folder's time included. Its first `apt-get update` then finds them current
(a few hundred kB of release files instead of ~7 MB of lists to fetch and unpack, per host and
cluster); that first update still runs where Ansible's apt module must install python3-apt
first (the image has none, as some real nodes have none), and an apt task with
`cache_valid_time` on a host that has it (molecule's prepared hosts) skips it altogether, as on
a node updated a moment ago. Once that time has passed they update, and the newer lists are
shared when their cluster goes down. Only the image's own sources are shared
(a list of a repository a test served, such as the fake NVIDIA one, stays with its host), and
always as one host's complete set, under a lock: a host never starts with half of them.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .image import apt_source_uris
from .system import remove_tree

# Inside a host root: apt's lists.
APT_LISTS = Path("var/lib/apt/lists")


def shared_lists(image: Path) -> Path:
    """The shared lists of the hosts of `image` (they belong to its mirror and suite)."""
    return image.with_name(f"{image.name}-apt-lists")


def list_prefixes(image: Path) -> tuple[str, ...]:
    """Name prefixes of the lists of the image's sources: apt names a list after its source's
    URI without the scheme, '/' written '_'."""
    uris = sorted({uri.rstrip("/") for uri, _ in apt_source_uris(image / "etc/apt")})
    return tuple(re.sub(r"^[a-z][a-z0-9+.-]*://", "", uri).replace("/", "_") + "_" for uri in uris)


def _lists_of_sources(lists: Path, prefixes: tuple[str, ...]) -> list[Path]:
    if not lists.is_dir():
        return []
    return [path for path in lists.iterdir() if path.is_file() and path.name.startswith(prefixes)]


def _link(source: Path, target: Path) -> None:
    """A hard link (apt replaces a list by renaming a new file over it, never writes into it),
    or a copy across file systems."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _same_files(files: list[Path], shared: Path) -> bool:
    """The host still has the shared lists it started with (its folder's time may have moved
    for another reason, such as apt's lock file)."""
    names = {path.name for path in files}
    if names != {path.name for path in shared.iterdir()}:
        return False
    return all(path.stat().st_ino == (shared / path.name).stat().st_ino for path in files)


@contextmanager
def _locked(image: Path, operation: int) -> Iterator[None]:
    with open(image.with_name(f".{image.name}-apt-lists.lock"), "w") as lock:
        fcntl.flock(lock, operation)
        yield


def seed_lists(image: Path, host_root: Path) -> int:
    """Put the shared lists into a host's root (its overlay upper folder) before it starts,
    with their folder's time. Returns how many files it got."""
    shared = shared_lists(image)
    with _locked(image, fcntl.LOCK_SH):
        if not shared.is_dir():
            return 0
        target = host_root / APT_LISTS
        target.mkdir(parents=True, exist_ok=True)
        files = list(shared.iterdir())
        for path in files:
            _link(path, target / path.name)
        stamp = shared.stat()
        os.utime(target, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    return len(files)


def keep_lists(image: Path, host_root: Path) -> bool:
    """Share a host's lists of the image's sources when it updated them later than the shared
    ones were (apt touches the folder when it updates) and finished. Returns whether they were
    shared."""
    lists = host_root / APT_LISTS
    files = _lists_of_sources(lists, list_prefixes(image))
    if not any(path.name.endswith("_InRelease") for path in files):
        return False
    if any((lists / "partial").glob("*")):  # an update cut short: a set of old and new lists
        return False
    shared = shared_lists(image)
    with _locked(image, fcntl.LOCK_EX):
        updated = lists.stat()
        if shared.is_dir() and (
            shared.stat().st_mtime_ns >= updated.st_mtime_ns or _same_files(files, shared)
        ):
            return False
        building = shared.with_name(f".{shared.name}.{os.getpid()}")
        remove_tree(building)
        building.mkdir()
        for path in files:
            _link(path, building / path.name)
        os.utime(building, ns=(updated.st_atime_ns, updated.st_mtime_ns))
        stale = shared.with_name(f".old-{shared.name}.{os.getpid()}")
        if shared.is_dir():
            shared.rename(stale)
        building.rename(shared)
        remove_tree(stale)
    return True
