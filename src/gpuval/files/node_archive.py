"""The controller's side of a collect: what it holds of a node (so that the node packs only what
is new), and the node's .tar.gz unpacked into raw/<host>/, each file whole, inside that folder
(gpuval_collect, and gpuval_capture's collect_to).

The node's copy of a file is always the one judged, so that a step's output and its sidecar come
from the same try (a step run again under the same run id rewrites both). Where it is shorter
than the copy the controller holds (emptied, truncated, or a shorter output of a later try), that
copy is never lost: it moves first to superseded/<host>/ (gpuval.files.superseded)."""

from __future__ import annotations

import base64
import binascii
import os
import stat
import tarfile
from collections.abc import Callable, Mapping
from io import BytesIO
from pathlib import Path
from typing import Any, NamedTuple

from gpuval.files.atomic import OutputError, write_output
from gpuval.files.superseded import supersede


def held(dest: Path) -> dict[str, list[int]]:
    """What the controller holds of the node: path relative to dest -> [size, mtime (whole
    seconds)], regular files only (what the node's packer compares with)."""
    found: dict[str, list[int]] = {}
    for folder, _, names in os.walk(dest):
        for name in names:
            path = Path(folder, name)
            status = path.lstat()
            if stat.S_ISREG(status.st_mode):
                found[str(path.relative_to(dest))] = [status.st_size, int(status.st_mtime)]
    return found


class Unpacked(NamedTuple):
    written: list[str]
    superseded: list[str]  # where each controller copy longer than the node's was moved


def unpack(archive: bytes, dest: Path) -> Unpacked:
    """The regular files of a .tar.gz into dest, each whole, inside dest (tarfile's data
    filter); a longer copy that dest holds is moved to superseded/<host>/ first."""
    outcome = Unpacked([], [])
    if not archive:
        return outcome
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=BytesIO(archive), mode="r:gz") as tar:
        for member in tar:
            if not member.isfile():
                continue
            safe = tarfile.data_filter(member, str(dest))
            target = dest / safe.name
            if _longer(target, safe.size):
                outcome.superseded.append(supersede(target, dest, safe.name))
            source = tar.extractfile(member)
            assert source is not None  # a regular file
            _write_whole(target, source.read(), safe.mtime)
            outcome.written.append(safe.name)
    return outcome


def _longer(path: Path, size: int) -> bool:
    """Whether path is a regular file longer than size (a link is no copy to keep)."""
    try:
        found = path.lstat()
    except FileNotFoundError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size > size


def _write_whole(path: Path, content: bytes, mtime: float) -> None:
    """Whole or not at all, never through a link (gpuval.files.atomic), with the node's
    modification time: the next collect compares it with the node's."""
    write_output(path, content)
    os.utime(path, (mtime, mtime))


def collected(packed: Mapping[str, Any], node_dir: str, dest: Path,
              read_ahead: Callable[[Path], list[str]]) -> dict[str, Any]:  # fmt: skip
    """A collect's return values from what the node packed (gpuval_pack's result, or
    gpuval_capture's `pack`) once unpacked into raw/<host>/ (`dest`), with `failed` and why
    where it cannot be; `read_ahead(dest)` once anything arrived (its warnings kept)."""
    if not packed["found"]:
        return {"changed": False, "files": 0, "new_files": 0,
                "msg": f"nothing to collect: no folder {node_dir}"}  # fmt: skip
    try:
        unpacked = unpack(base64.b64decode(packed["archive"], validate=True), dest)
    except (binascii.Error, tarfile.TarError, OSError, OutputError) as problem:
        return {"failed": True, "msg": f"what {node_dir} sent cannot be unpacked into {dest}: "
                f"{problem}"}  # fmt: skip
    warnings = [
        f"{dest.parent.parent / moved}: the copy collected earlier, longer than the node's "
        "(the node's is judged now)"
        for moved in unpacked.superseded
    ] + [f"{node_dir}/{problem} (left for a later collect)" for problem in packed["unreadable"]]
    if unpacked.written:
        warnings += read_ahead(dest)
    return {
        "changed": bool(unpacked.written),
        "files": packed["files"],
        "new_files": len(unpacked.written),
        "superseded": unpacked.superseded,
        "msg": f"{packed['files']} file(s), {len(unpacked.written)} new or changed -> {dest}",
        **({"warnings": warnings} if warnings else {}),
    }
