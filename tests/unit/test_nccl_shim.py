"""The NCCL_HOME shim (library/gpuval_nccl_shim.py), run the way Ansible runs the module: the
layouts NCCL ships in (a distribution package, NVIDIA's nvidia-nccl-cu13 wheel with only
libnccl.so.2 and, from 2.28, nccl_device/), a second run that changes nothing, check mode."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.ansible_modules import run_module


def wheel_layout(root: Path) -> tuple[Path, Path]:
    """nvidia/nccl/{include,lib} as the nvidia-nccl-cu13 wheel unpacks them."""
    include, lib = root / "nccl" / "include", root / "nccl" / "lib"
    (include / "nccl_device").mkdir(parents=True)
    lib.mkdir()
    for name in ("nccl.h", "nccl_device.h", "nccl_net.h"):
        (include / name).write_text("/* header */\n")
    (lib / "libnccl.so.2").write_text("ELF\n")
    (lib / "libnccl.so.10").write_text("ELF\n")  # a later major: 10 sorts before 2 as text
    (lib / "libcudart.so.13").write_text("ELF\n")  # not NCCL's
    return include, lib


def shim(tmp_path: Path, include: Path, lib: Path, check_mode: bool = False) -> dict[str, Any]:
    return run_module(
        "gpuval_nccl_shim", tmp_path, check_mode, shim_dir=str(tmp_path / "shim"),
        include_dir=str(include), lib_dir=str(lib),
    )  # fmt: skip


def links(folder: Path) -> dict[str, str]:
    return {p.name: os.readlink(p) for p in sorted(folder.iterdir())}


def test_a_wheel_gets_nccl_home_with_libnccl_so_and_a_second_run_changes_nothing(
    tmp_path: Path,
) -> None:
    include, lib = wheel_layout(tmp_path)
    first = shim(tmp_path, include, lib)
    assert first["changed"] is True, first
    home = tmp_path / "shim"
    headers = ("nccl.h", "nccl_device", "nccl_device.h", "nccl_net.h")
    assert links(home / "include") == {name: str(include / name) for name in headers}
    assert links(home / "lib") == {
        "libnccl.so": str(lib / "libnccl.so.10"),
        "libnccl.so.10": str(lib / "libnccl.so.10"),
        "libnccl.so.2": str(lib / "libnccl.so.2"),
    }
    assert oct((home / "lib").stat().st_mode & 0o777) == "0o755"
    second = shim(tmp_path, include, lib)
    assert second["changed"] is False and second["changes"] == [], second


def test_a_package_with_libnccl_so_gets_no_extra_link_and_a_moved_nccl_is_relinked(
    tmp_path: Path,
) -> None:
    include, lib = wheel_layout(tmp_path)
    (lib / "libnccl.so").symlink_to("libnccl.so.2")  # libnccl-dev's link
    assert shim(tmp_path, include, lib)["changed"] is True
    assert links(tmp_path / "shim" / "lib")["libnccl.so"] == str(lib / "libnccl.so")
    moved = tmp_path / "elsewhere"
    (tmp_path / "nccl").rename(moved)
    again = shim(tmp_path, moved / "include", moved / "lib")
    assert again["changed"] is True
    assert links(tmp_path / "shim" / "include")["nccl.h"] == str(moved / "include" / "nccl.h")


def test_check_mode_says_what_it_would_link_and_makes_nothing(tmp_path: Path) -> None:
    include, lib = wheel_layout(tmp_path)
    result = shim(tmp_path, include, lib, check_mode=True)
    assert result["changed"] is True
    assert f"{tmp_path}/shim/lib/libnccl.so -> {lib}/libnccl.so.10" in result["changes"]
    assert not (tmp_path / "shim").exists()
