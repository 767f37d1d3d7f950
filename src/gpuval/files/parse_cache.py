"""What was read from a host's files, kept on the controller so that a run folder of a thousand
nodes is not parsed again by every `gpuval report`.

The collect after every phase reads the files that just arrived (and only those: the others
hit the cache), so the report finds them read. One cache file per host, RUN_DIR/parse-cache/
<host>.pickle: beside raw/, never in it, since the nodes send what lands in raw/ and nothing of
theirs may be trusted. An entry is used only when everything matches:
- the file's identity as the controller sees it (inode, size, modification and change time in
  nanoseconds): a file rewritten, replaced or copied elsewhere is read again (the change time
  cannot be set back by anyone, whatever the node's modification time says);
- what it was read as (the sidecar's tool hint, for a raw output);
- the code that read it: gpuval's version and a digest of its Python and schema files, so an
  edited parser never serves its old results.
A cache file that cannot be read, is of another code, or names any class outside the allowed
modules (a cache copied in from elsewhere: unpickling runs no code of its choosing) is ignored
whole, and everything is read again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import logging
import os
import pickle
import stat
from collections.abc import Iterator
from dataclasses import is_dataclass
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

from gpuval import __version__
from gpuval.files.atomic import OutputError, write_output

CACHE_DIR = "parse-cache"
CACHE_SUFFIX = ".pickle"
# A cache file: this line with the code digest that wrote it, then the pickled entries; a reader
# tells whether a cache is of its own code from the line alone.
CACHE_HEADER = b"gpuval parse cache "
PACKAGE = Path(__file__).resolve().parents[1]  # the gpuval package folder

# file identity: inode, size, modification and change time (ns)
FileIdentity = tuple[int, int, int, int]
# file name -> (its identity, what it was read as, what reading it gave)
Entries = dict[str, tuple[FileIdentity, tuple[str | None, ...], Any]]

_log = logging.getLogger(__name__)


def identity(status: os.stat_result) -> FileIdentity:
    return (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


@cache
def code_digest() -> str:
    """gpuval's version and a digest of every Python and JSON file of the package."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix in (".py", ".json") and path.is_file():
            digest.update(path.relative_to(PACKAGE).as_posix().encode())
            digest.update(path.read_bytes())
    return f"{__version__}:{digest.hexdigest()}"


def _header() -> bytes:
    return CACHE_HEADER + code_digest().encode() + b"\n"


class _AllowedUnpickler(pickle.Unpickler):
    """Builds the dataclasses defined in the allowed modules and plain containers, nothing
    else."""

    def __init__(self, data: bytes, allowed: tuple[str, ...], start: int = 0) -> None:
        stream = io.BytesIO(data)
        stream.seek(start)
        super().__init__(stream)
        self.allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        if module in self.allowed or module.startswith(tuple(f"{m}." for m in self.allowed)):
            found = super().find_class(module, name)
            # a record class of that module, not whatever else its namespace holds
            if isinstance(found, type) and is_dataclass(found) and found.__module__ == module:
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a parse cache")


@contextlib.contextmanager
def _open_regular(path: Path) -> Iterator[BinaryIO | None]:
    """`path` open for reading when it is a regular file; None for anything else, a symbolic
    link included (never followed). OSError (FileNotFoundError: no cache yet) as opening."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as problem:
        if problem.errno != errno.ELOOP:  # ELOOP: the link O_NOFOLLOW refused
            raise
        yield None
        return
    with os.fdopen(descriptor, "rb") as stream:
        yield stream if stat.S_ISREG(os.fstat(descriptor).st_mode) else None


class HostCache:
    """One host's cache: the entries found valid on load; those used or added, saved."""

    def __init__(self, run_dir: Path, host: str, allowed: tuple[str, ...]) -> None:
        self.path = run_dir / CACHE_DIR / f"{host}{CACHE_SUFFIX}"
        self.found: Entries = self._load(allowed)
        self.kept: Entries = {}
        self.changed = False

    @staticmethod
    def of_this_code(run_dir: Path, host: str) -> bool:
        """Whether the host has a cache file written by this code (its first line alone read):
        whether reading the host will take most of its files from it."""
        header = _header()
        try:
            with _open_regular(run_dir / CACHE_DIR / f"{host}{CACHE_SUFFIX}") as stream:
                return stream is not None and stream.read(len(header)) == header
        except OSError:
            return False

    def _load(self, allowed: tuple[str, ...]) -> Entries:
        header = _header()
        try:
            with _open_regular(self.path) as stream:
                if stream is None:
                    return {}
                data = stream.read()
            if not data.startswith(header):  # another code's cache (an upgrade): read again
                return {}
            entries = _AllowedUnpickler(data, allowed, len(header)).load()
        except (FileNotFoundError, NotADirectoryError):  # no cache (yet)
            return {}
        except Exception as problem:  # any broken or foreign file: read everything again
            _log.warning("%s: ignored, everything is read again (%s)", self.path, problem)
            return {}
        return entries if isinstance(entries, dict) else {}

    def get(self, name: str, status: os.stat_result, variant: tuple[str | None, ...]) -> Any:
        """What reading `name` gave, when its identity and variant match; else None."""
        entry = self.found.get(name)
        if entry is None or entry[0] != identity(status) or entry[1] != variant:
            return None
        self.kept[name] = entry
        return entry[2]

    def put(self, name: str, status: os.stat_result, variant: tuple[str | None, ...],
            value: Any) -> None:  # fmt: skip
        """`value` as what reading `name` gave, `status` taken before it was read."""
        self.kept[name] = (identity(status), variant, value)
        self.changed = True

    def save(self, quiet: bool = False) -> OutputError | None:
        """The entries used or added (a file gone is dropped), when any was added or dropped;
        a cache that cannot be written is only a slower next report: the problem is returned
        (and logged as a warning unless `quiet`)."""
        if not self.changed and len(self.kept) == len(self.found):
            return None
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(exist_ok=True)
        try:
            # No fsync (a thousand hosts' caches synced one by one cost the report seconds): a
            # cache file a power loss leaves torn is read as no cache, and parsed again.
            write_output(
                self.path,
                _header() + pickle.dumps(self.kept, protocol=pickle.HIGHEST_PROTOCOL),
                durable=False,
            )
        except OutputError as problem:
            if not quiet:
                _log.warning("parse cache not written: %s", problem)
            return problem
        return None
