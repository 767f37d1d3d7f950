"""Writing the controller's outputs: each file whole or not at all, the files of one render all
or none, never through a symbolic link.

A file is written to a temporary file in its own folder, flushed to disk, then renamed over the
old one (os.replace): a reader sees the old file or the new one, never an empty or half-written
one, and a full disk leaves the old one as it was. An OutputSet renames only once every one of
its files is written, so a report's files never disagree with each other. A path that is a
symbolic link (or anything but a regular file) is refused, never followed: a link planted where
an output goes cannot make gpuval overwrite what it points at.

Every failure is one OutputError whose message names the folder (a full disk) or the file and
the reason; nothing has been replaced when it is raised.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import stat
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
TEMPORARY_SUFFIX = ".tmp"  # temporaries are hidden: .<name>.<random>.tmp beside <name>
_TEMPORARY_NAME = re.compile(r"\.(?P<name>.+)\.[0-9a-f]{8}\.tmp\Z")
NEW_FILE_MODE = 0o666  # less the umask, as open() would make it


class OutputError(Exception):
    """An output that could not be written; the message says which and why."""


def disk_full(folder: Path, what: str) -> OutputError:
    return OutputError(
        f"{folder}: the disk is full (no space left for {what}); nothing was replaced: free "
        "some space there and run it again"
    )


def output_problem(path: Path, problem: OSError) -> OutputError:
    """The OutputError for an OSError met writing `path`."""
    if problem.errno in DISK_FULL:
        return disk_full(path.parent, path.name)
    return OutputError(f"{path}: cannot write it: {problem.strerror or problem}")


def existing_mode(path: Path) -> int | None:
    """The permission bits of the regular file at `path` (None: nothing there yet); raises
    OutputError for a symbolic link, a folder or any other kind of file."""
    try:
        found = path.lstat().st_mode
    except FileNotFoundError:
        return None
    except OSError as problem:
        raise output_problem(path, problem) from problem
    if stat.S_ISLNK(found):
        raise OutputError(
            f"{path}: a symbolic link; gpuval never writes through a link: remove it, or write "
            "somewhere else"
        )
    if stat.S_ISDIR(found):
        raise OutputError(f"{path}: a folder; name a file to write")
    if not stat.S_ISREG(found):
        raise OutputError(f"{path}: not a regular file; name a plain file to write")
    return stat.S_IMODE(found)


def temporary_of(name: str) -> str | None:
    """The file a temporary of this writer stands for (".x.json.0a1b2c3d.tmp" -> "x.json"), or
    None. A process killed between writing a temporary and renaming it (SIGTERM or SIGKILL, no
    clean-up runs) leaves one behind: never a whole file, so it is never read."""
    match = _TEMPORARY_NAME.match(name)
    return match["name"] if match else None


def _write_temporary(path: Path, data: bytes, mode: int | None, durable: bool) -> Path:
    """`data` in a new temporary file beside `path`, on disk (fsync) when `durable`; the
    temporary's path."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMPORARY_SUFFIX}")
    # O_EXCL: a new file, never something (a link) that is already there.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(temporary, flags, NEW_FILE_MODE)
    except OSError as problem:
        raise output_problem(path, problem) from problem
    try:
        with os.fdopen(descriptor, "wb") as out:
            if mode is not None:  # a replaced file keeps its permissions
                os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            if durable:
                os.fsync(out.fileno())
    except BaseException as problem:
        temporary.unlink(missing_ok=True)
        if isinstance(problem, OSError):
            raise output_problem(path, problem) from problem
        raise
    return temporary


def _replace(temporary: Path, path: Path) -> None:
    try:
        os.replace(temporary, path)  # replaces a link planted meanwhile, never follows it
    except OSError as problem:
        raise output_problem(path, problem) from problem


def _sync_folder(folder: Path) -> None:
    """Make the renames in `folder` durable. The files are in place already: a folder that
    cannot be synced (some filesystems refuse) only risks the renames on a power loss."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as problem:
        raise OutputError(f"{folder}: not a folder; name a folder to write into") from problem
    except OSError as problem:
        if problem.errno in DISK_FULL:
            raise disk_full(folder.parent, folder.name) from problem
        raise OutputError(
            f"{folder}: cannot make the folder: {problem.strerror or problem}"
        ) from problem


class OutputSet:
    """Files written together: every one to a temporary first, all renamed into place only
    when all were written; on any failure the temporaries are removed and nothing is replaced.
    (Renaming within a folder allocates nothing, so a full disk cannot stop it half-way.)
    Not `durable`: no fsync, still renamed whole into place (a file a power loss may leave
    torn is then one its reader can do without).

    `write_behind`: each file is written to its temporary as soon as it is added, by a thread
    of its own, while the caller renders the next (its text is not kept until the commit; a
    link where it goes is refused at once). The caller commits, or discards on failure."""

    def __init__(self, durable: bool = True, write_behind: bool = False) -> None:
        self._contents: dict[Path, bytes] = {}
        self._durable = durable
        self._writer = ThreadPoolExecutor(1) if write_behind else None
        self._written: dict[Path, Future[Path]] = {}

    def add(self, path: Path, content: str | bytes) -> None:
        """Write `content` (text: UTF-8) to `path` when the set is committed (write_behind:
        to its temporary now; raises OutputError for a path it must refuse)."""
        data = content.encode("utf-8") if isinstance(content, str) else content
        if self._writer is None:
            self._contents[path] = data
            return
        if (replaced := self._written.pop(path, None)) is not None:  # added twice: the last
            with contextlib.suppress(OutputError):
                replaced.result().unlink(missing_ok=True)
        _make_folder(path.parent)
        mode = existing_mode(path)
        self._written[path] = self._writer.submit(_write_temporary, path, data, mode, self._durable)

    def _temporaries_written(self) -> dict[Path, Path]:
        """The temporaries written behind, once all are; when one could not be, the first
        problem met (OutputError, or a bug) is raised, every temporary removed."""
        temporaries: dict[Path, Path] = {}
        problem: Exception | None = None
        for path, written in self._written.items():
            try:
                temporaries[path] = written.result()
            except Exception as failed:  # OutputError, or a bug: raised once all have ended
                problem = problem or failed
        self._written = {}
        if self._writer is not None:
            self._writer.shutdown()
        if problem is not None:
            for temporary in temporaries.values():
                temporary.unlink(missing_ok=True)
            raise problem
        return temporaries

    def discard(self) -> None:
        """Replace nothing: what was written behind is removed, what was added dropped (a
        problem writing it is not raised: the caller is handling its own)."""
        with contextlib.suppress(Exception):
            for temporary in self._temporaries_written().values():
                temporary.unlink(missing_ok=True)
        self._contents = {}

    def commit(self) -> None:
        """Write every file (making missing folders); raises OutputError, nothing replaced."""
        temporaries = self._temporaries_written()
        folders = {path.parent for path in [*self._contents, *temporaries]}
        try:
            for folder in {path.parent for path in self._contents}:
                _make_folder(folder)
            modes = {path: existing_mode(path) for path in self._contents}
            for path, data in self._contents.items():
                temporaries[path] = _write_temporary(path, data, modes[path], self._durable)
            for path, temporary in list(temporaries.items()):
                _replace(temporary, path)
                del temporaries[path]
        finally:
            for temporary in temporaries.values():
                temporary.unlink(missing_ok=True)
        if self._durable:
            for folder in folders:
                _sync_folder(folder)


def write_output(path: Path, content: str | bytes, durable: bool = True) -> None:
    """One file, whole or not at all (see OutputSet)."""
    outputs = OutputSet(durable)
    outputs.add(path, content)
    outputs.commit()


def json_text(document: object) -> str:
    """A JSON record as gpuval writes them: indented, one newline at the end."""
    return json.dumps(document, indent=2) + "\n"


def write_json(path: Path, document: object) -> None:
    write_output(path, json_text(document))
