"""A collect (the gpuval_collect action, gpuval_capture's collect_to): the node packs what the
controller lacks (plugins/module_utils/gpuval_pack_files.py), the controller unpacks it
(gpuval.files.node_archive). Every file arrives, a second collect carries nothing, only what
changed goes again, a longer controller copy moves to superseded/, and nothing the node sends lands
outside its folder."""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import io
import os
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuval.files import node_archive
from gpuval.files.atomic import OutputError

REPO = Path(__file__).resolve().parents[2]


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PACK = load("gpuval_pack_files", REPO / "plugins" / "module_utils" / "gpuval_pack_files.py")


def collect(node: Path, dest: Path) -> tuple[dict[str, Any], Any]:
    """One collect as the action does it: the node packs against what dest holds, dest unpacks."""
    packed = PACK.pack(str(node), node_archive.held(dest))
    return packed, node_archive.unpack(base64.b64decode(packed["archive"]), dest)


def test_every_file_arrives_once_and_then_only_what_changed(tmp_path: Path) -> None:
    node, dest = tmp_path / "node", tmp_path / "raw" / "node1"
    node.mkdir()
    (node / "nccl-all_reduce.txt").write_text("8 2 float none -1 26.0")
    (node / ".hidden").write_text("kept too")
    (node / "sub").mkdir()
    (node / "sub" / "deep.txt").write_text("deep")
    packed, unpacked = collect(node, dest)
    assert (packed["files"], packed["packed"]) == (3, 3)
    assert sorted(unpacked.written) == [".hidden", "nccl-all_reduce.txt", "sub/deep.txt"]
    assert (dest / "nccl-all_reduce.txt").read_text() == "8 2 float none -1 26.0"
    assert (dest / ".hidden").read_text() == "kept too"
    assert (dest / "sub" / "deep.txt").read_text() == "deep"
    packed, unpacked = collect(node, dest)
    assert (packed["files"], packed["packed"], packed["archive"]) == (3, 0, "")
    assert unpacked.written == []
    (node / "pair-iperf3-r1-a--b-try1.json").write_text("{}")
    (node / "nccl-all_reduce.txt").write_text("8 2 float none -1 26.0 and the rest")
    os.utime(node / ".hidden", (1, 1))  # same size, another time: changed
    packed, unpacked = collect(node, dest)
    assert packed["packed"] == 3
    assert sorted(unpacked.written) == [
        ".hidden", "nccl-all_reduce.txt", "pair-iperf3-r1-a--b-try1.json"
    ]  # fmt: skip
    assert (dest / "nccl-all_reduce.txt").read_text().endswith("and the rest")


def test_a_shorter_node_copy_is_judged_and_the_longer_one_moves_to_superseded(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    node, dest = tmp_path / "node", run / "raw" / "node1"
    node.mkdir()
    (node / "os-release.txt").write_text("ID=debian\n")
    (node / "nccl-all_reduce.txt").write_text("# Avg bus bandwidth : 98.414\n")
    collect(node, dest)
    os.utime(dest / "os-release.txt", (1_700_000_000, 1_700_000_000))
    (node / "os-release.txt").write_text("")  # emptied: judged as empty, never as the old text
    (node / "nccl-all_reduce.txt").write_text("# Avg")
    _, unpacked = collect(node, dest)
    assert sorted(unpacked.written) == ["nccl-all_reduce.txt", "os-release.txt"]
    assert (dest / "os-release.txt").read_text() == ""
    assert (dest / "nccl-all_reduce.txt").read_text() == "# Avg"
    assert "superseded/node1/os-release.txt.1700000000" in unpacked.superseded
    assert (run / "superseded" / "node1" / "os-release.txt.1700000000").read_text() == "ID=debian\n"
    assert len(unpacked.superseded) == 2


def test_a_step_run_again_is_judged_on_its_new_output_and_sidecar_together(
    tmp_path: Path,
) -> None:
    # Seen on a lent H200: a second try under the same run id wrote a shorter sidecar; keeping
    # the controller's longer one judged the new output with the earlier try's exit status.
    node, dest = tmp_path / "node", tmp_path / "run" / "raw" / "node1"
    node.mkdir()
    (node / "nccl-sendrecv.txt").write_text("# Avg bus bandwidth : 0\n")
    (node / "nccl-sendrecv.meta.json").write_text('{"exit_code": 0, "duration_s": 2.270821}')
    collect(node, dest)
    (node / "nccl-sendrecv.txt").write_text("Segmentation fault\n")
    (node / "nccl-sendrecv.meta.json").write_text('{"exit_code": 139}')
    collect(node, dest)
    assert (dest / "nccl-sendrecv.txt").read_text() == "Segmentation fault\n"
    assert (dest / "nccl-sendrecv.meta.json").read_text() == '{"exit_code": 139}'


def test_links_on_the_node_are_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "node-secret"
    secret.write_text("not a step's output")
    node, dest = tmp_path / "node", tmp_path / "raw" / "node1"
    node.mkdir()
    (node / "os-release.txt").write_text("ID=debian\n")
    (node / "link.txt").symlink_to(secret)
    (node / "folder-link").symlink_to(tmp_path, target_is_directory=True)
    packed, _ = collect(node, dest)
    assert (packed["files"], packed["packed"]) == (1, 1)
    assert sorted(p.name for p in dest.iterdir()) == ["os-release.txt"]


def test_a_node_without_its_folder_packs_nothing(tmp_path: Path) -> None:
    unpacked = node_archive.unpack(b"", tmp_path / "raw" / "node1")
    assert (unpacked.written, unpacked.superseded) == ([], [])
    assert not (tmp_path / "raw").exists()


def archive_of(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for member, content in members:
            member.size = len(content)
            tar.addfile(member, io.BytesIO(content) if member.isfile() else None)
    return buffer.getvalue()


def regular(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def link(name: str, target: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = tarfile.SYMTYPE, target
    return member


# What a hostile node can put in its archive: names that climb out, absolute names, links.
HOSTILE_NAMES = st.sampled_from([
    "../outside.txt", "../../outside.txt", "/tmp/outside.txt", "sub/../../outside.txt",
    "./../outside.txt", "ok.txt", "sub/ok.txt",
])  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(names=st.lists(HOSTILE_NAMES, min_size=1, max_size=4), with_link=st.booleans())
def test_nothing_a_node_sends_lands_outside_its_folder(
    tmp_path_factory: pytest.TempPathFactory, names: list[str], with_link: bool
) -> None:
    root = tmp_path_factory.mktemp("hostile")
    dest = root / "reports" / "run" / "raw" / "node1"
    members = [(link("ok.txt", "../../../../outside.txt"), b"")] if with_link else []
    members += [(regular(name), b"planted") for name in names]
    dest.parent.mkdir(parents=True)
    before = sorted(root.rglob("*"))
    # A refusal (TarError) fails the collect task, naming the folder.
    with contextlib.suppress(tarfile.TarError):
        node_archive.unpack(archive_of(members), dest)
    after = [path for path in sorted(root.rglob("*")) if path not in before]
    assert all(path == dest or dest in path.parents for path in after), after
    assert not (root / "reports" / "run" / "raw" / "outside.txt").exists()
    assert not any(path.is_symlink() for path in after)


def test_a_link_on_the_controller_is_refused_never_written_through(tmp_path: Path) -> None:
    dest = tmp_path / "raw" / "node1"
    dest.mkdir(parents=True)
    (dest / "real.txt").write_text("the controller's own file")
    (dest / "os-release.txt").symlink_to(dest / "real.txt")
    with pytest.raises(OutputError, match=r"os-release\.txt: a symbolic link"):
        node_archive.unpack(
            archive_of([(regular("os-release.txt"), b"ID=debian and more\n")]), dest
        )
    assert (dest / "real.txt").read_text() == "the controller's own file"
    assert (dest / "os-release.txt").is_symlink()


def test_two_copies_superseded_in_the_same_second_are_both_kept(tmp_path: Path) -> None:
    run = tmp_path / "run"
    node, dest = tmp_path / "node", run / "raw" / "node1"
    node.mkdir()
    for text in ("the first and longest", "the second, long", "third"):
        (node / "nccl-all_reduce.txt").write_text(text)
        os.utime(node / "nccl-all_reduce.txt", (1_700_000_000, 1_700_000_000))  # one second
        collect(node, dest)
    kept = sorted(p.read_text() for p in (run / "superseded" / "node1").iterdir())
    assert kept == ["the first and longest", "the second, long"]
    assert (dest / "nccl-all_reduce.txt").read_text() == "third"
