"""The node work root (library/gpuval_private_dir.py), run the way Ansible runs the module: a
folder root builds and runs programs from is created private to the runner, and one another user
owns or may write (or a link) fails the run naming the path, its owner and mode."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.ansible_modules import LIBRARY
from tests.ansible_modules import run_module as run_ansible_module

NOBODY = 65534

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def run_module(tmp_path: Path, **args: Any) -> dict[str, Any]:
    return run_ansible_module("gpuval_private_dir", tmp_path, **args)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_fresh_work_root_is_created_owned_by_the_runner_and_not_writable_by_others(
    tmp_path: Path,
) -> None:
    root = tmp_path / "var" / "tmp" / "gpuval"
    os.umask(0o000)  # a permissive umask must not leak into the folders
    try:
        result = run_module(tmp_path, path=str(root))
    finally:
        os.umask(0o022)
    assert result.get("failed") is not True, result
    assert result["created"] == [str(tmp_path / "var"), str(tmp_path / "var" / "tmp"), str(root)]
    for level in result["created"]:
        info = Path(level).lstat()
        assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o755
    again = run_module(tmp_path, path=str(root))
    assert again["changed"] is False and again["mode"] == "0755"


def test_the_watchdog_folder_is_created_root_only(tmp_path: Path) -> None:
    folder = tmp_path / "gpuval" / "ttl-watchdog"
    result = run_module(tmp_path, path=str(folder), mode="0700")
    assert result.get("failed") is not True, result
    assert mode_of(folder) == 0o700 and mode_of(folder.parent) == 0o700


def test_a_work_root_anyone_may_write_fails_naming_path_and_mode(tmp_path: Path) -> None:
    root = tmp_path / "gpuval"
    root.mkdir()
    root.chmod(0o777)
    result = run_module(tmp_path, path=str(root))
    assert result["failed"] is True
    assert str(root) in result["msg"] and "0777" in result["msg"]
    assert "not writable by group or others" in result["msg"] and "rm -rf" in result["msg"]
    assert mode_of(root) == 0o777  # refused, never quietly "fixed"


@needs_root
def test_a_work_root_another_user_created_first_fails_naming_its_owner(tmp_path: Path) -> None:
    root = tmp_path / "gpuval"
    root.mkdir(mode=0o755)
    os.chown(root, NOBODY, NOBODY)
    result = run_module(tmp_path, path=str(root))
    assert result["failed"] is True
    assert f"{root} (owner nobody, mode 0755) must be owned by root" in result["msg"]


@needs_root
def test_a_parent_another_user_may_replace_the_work_root_in_fails(tmp_path: Path) -> None:
    parent = tmp_path / "scratch"
    parent.mkdir()
    parent.chmod(0o777)  # no sticky bit: anyone may rename gpuval/ away and put their own
    result = run_module(tmp_path, path=str(parent / "gpuval"))
    assert result["failed"] is True and result["created"] == []
    assert f"{parent} (owner root, mode 0777) lets another user replace" in result["msg"]
    assert not (parent / "gpuval").exists()
    parent.chmod(0o1777)  # /var/tmp's and /tmp's mode: safe
    assert run_module(tmp_path, path=str(parent / "gpuval"))["created"] == [str(parent / "gpuval")]


def test_a_symbolic_link_as_the_work_root_fails(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o755)
    (tmp_path / "gpuval").symlink_to(target)
    result = run_module(tmp_path, path=str(tmp_path / "gpuval"))
    assert result["failed"] is True
    assert f"{tmp_path / 'gpuval'} is a symbolic link (to {target})" in result["msg"]


def test_a_mode_that_lets_others_write_is_refused(tmp_path: Path) -> None:
    result = run_module(tmp_path, path=str(tmp_path / "gpuval"), mode="0775")
    assert result["failed"] is True and "group and others may not write" in result["msg"]
    assert not (tmp_path / "gpuval").exists()


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A sticky folder anyone may create in, as /var/tmp is (pytest's tmp_path is root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="gpuval-private-dir-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder)


@needs_root
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing")
def test_without_become_the_work_root_is_the_login_users_and_roots_is_refused(
    shared_tmp: Path,
) -> None:
    def as_nobody(path: Path) -> dict[str, Any]:
        args = shared_tmp / "args.json"
        args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"path": str(path)}}))
        args.chmod(0o644)
        completed = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             sys.executable, str(LIBRARY / "gpuval_private_dir.py"), str(args)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        result: dict[str, Any] = json.loads(completed.stdout)
        return result

    own = as_nobody(shared_tmp / "gpuval")
    assert own.get("failed") is not True, own
    assert (own["owner"], own["mode"]) == ("nobody", "0755")
    roots = shared_tmp / "roots"
    roots.mkdir(mode=0o755)
    refused = as_nobody(roots)
    assert refused["failed"] is True
    assert f"{roots} (owner root, mode 0755) must be owned by nobody" in refused["msg"]
