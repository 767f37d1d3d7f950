"""The collect action's unpacking: every file arrives, and a second collect changes nothing."""

from __future__ import annotations

import importlib.util
import io
import os
import tarfile
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def collect_plugin() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gpuval_collect_action", REPO / "plugins" / "action" / "gpuval_collect.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def packed(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder, arcname=".")
    return buffer.getvalue()


def test_unpack_counts_new_and_changed_files(tmp_path: Path) -> None:
    unpack = collect_plugin()._unpack
    node = tmp_path / "node"
    node.mkdir()
    (node / "nccl-all_reduce.txt").write_text("8 2 float none -1 26.0")
    (node / ".hidden").write_text("kept too")
    dest = tmp_path / "raw" / "node1"
    assert unpack(packed(node), dest) == (2, 2)
    assert (dest / "nccl-all_reduce.txt").read_text() == "8 2 float none -1 26.0"
    assert (dest / ".hidden").read_text() == "kept too"
    assert unpack(packed(node), dest) == (2, 0)  # nothing new: not changed
    (node / "pair-iperf3-r1-a--b-try1.json").write_text("{}")
    os.utime(node / ".hidden", (1, 1))
    assert unpack(packed(node), dest) == (3, 2)
