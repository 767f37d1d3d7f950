# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""What a node sends the controller of its run folder: the regular files the controller does not
hold yet, packed in one .tar.gz (the gpuval_pack module's, and gpuval_capture's after its steps
with O(pack_held))."""

from __future__ import annotations

import base64
import io
import os
import stat
import tarfile
from collections.abc import Iterator
from typing import Any


def regular_files(root: str) -> Iterator[tuple[str, os.stat_result]]:
    """(path relative to root, its lstat) of every regular file below root, links not followed."""
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                found = os.lstat(path)
            except OSError:
                continue  # gone since the listing
            if stat.S_ISREG(found.st_mode):
                yield os.path.relpath(path, root), found


def read_file(path: str) -> bytes:
    """The file as it is now (a step may still be writing it: what it holds so far, whole in
    the archive), never through a link put in its place since it was listed."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read()


def pack(root: str, held: dict[str, Any]) -> dict[str, Any]:
    """The files under `root` whose size or modification time (whole seconds) differs from
    what `held` lists (path relative to root -> [size, mtime]), base64 .tar.gz; what could
    not be read is named in `unreadable` and left for a later collect."""
    buffer = io.BytesIO()
    files, packed, unreadable = 0, 0, []
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, found in regular_files(root):
            files += 1
            if held.get(name) == [found.st_size, int(found.st_mtime)]:
                continue
            try:
                content = read_file(os.path.join(root, name))
            except OSError as problem:
                unreadable.append(f"{name}: {problem.strerror or problem}")
                continue
            member = tarfile.TarInfo(name)
            member.size, member.mtime, member.mode = len(content), int(found.st_mtime), 0o644
            tar.addfile(member, io.BytesIO(content))
            packed += 1
    archive = base64.b64encode(buffer.getvalue()).decode("ascii") if packed else ""
    return {
        "found": True, "files": files, "packed": packed, "archive": archive,
        "unreadable": unreadable,
    }  # fmt: skip
