"""library/gpuval_packages.py, run the way Ansible runs it: the packages dpkg does not list
as installed are the ones apt is asked for, so a node that has everything never needs apt (nor
the python3-apt bindings that Ansible's apt module installs first, which an offline node or a
virtual environment's Python cannot get: the lent H200 failed its MPI preflight on exactly that)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.action_plugins import run_action
from tests.ansible_modules import run_module


def fake_dpkg_query(folder: Path, lines: str) -> Path:
    """A dpkg-query that prints `lines` whatever it is asked, and exits 1 as dpkg-query does
    when one of the names is unknown."""
    folder.mkdir()
    program = folder / "dpkg-query"
    program.write_text(f"#!/bin/sh\nprintf '%b' '{lines}'\nexit 1\n")
    program.chmod(0o755)
    return folder


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg (Debian or Ubuntu)")
def test_the_real_dpkg_names_an_unknown_package_missing_and_dpkg_itself_installed(
    tmp_path: Path,
) -> None:
    names = ["dpkg", "gpuval-no-such-package", "coreutils"]
    assert run_module("gpuval_packages", tmp_path, names=names)["missing"] == [
        "gpuval-no-such-package"
    ]


def test_only_the_installed_status_counts_and_an_arch_suffix_is_the_same_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # dpkg keeps a removed package's configuration ("config-files") and lists packages of a
    # foreign architecture as name:arch.
    lines = r"gcc\tconfig-files\nlibc6-dev:amd64\tinstalled\nmake\thalf-installed\n"
    monkeypatch.setenv("PATH", str(fake_dpkg_query(tmp_path / "bin", lines)))
    result = run_module("gpuval_packages", tmp_path, names=["gcc", "libc6-dev", "make"])
    assert result["missing"] == ["gcc", "make"]
    assert result["changed"] is False


def test_without_dpkg_every_package_is_missing_so_apt_decides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = run_module("gpuval_packages", tmp_path, names=["gcc", "libc6-dev"])
    assert result["missing"] == ["gcc", "libc6-dev"]


def node_lacking(*missing: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A node where dpkg lacks `missing` and apt installs whatever it is asked."""

    def answer(call: dict[str, Any]) -> dict[str, Any]:
        if call.get("module_name") == "ansible.builtin.apt":
            return {"changed": True}
        return {"changed": False, "installed": [], "missing": list(missing)}

    return answer


def test_the_action_runs_apt_for_the_missing_packages_alone() -> None:
    run = run_action(
        "gpuval_packages", {"names": ["gcc", "libc6-dev"], "cache_valid_time": 86400}, {},
        node=node_lacking("libc6-dev"),
    )  # fmt: skip
    apt = run.node_calls[1]
    assert apt["module_name"] == "ansible.builtin.apt"
    assert apt["module_args"]["name"] == ["libc6-dev"]
    assert apt["module_args"]["cache_valid_time"] == 86400
    assert run.result["installed"] == ["libc6-dev"]
    assert run.result["changed"] is True


def test_the_action_never_runs_apt_when_nothing_is_missing() -> None:
    run = run_action("gpuval_packages", {"names": ["gcc"]}, {}, node=node_lacking())
    assert len(run.node_calls) == 1
    assert run.result["changed"] is False
    assert run.result["missing"] == []


def test_check_mode_says_what_would_be_installed_and_runs_no_apt() -> None:
    run = run_action(
        "gpuval_packages", {"names": ["gcc", "make"]}, {}, node=node_lacking("make"),
        check_mode=True,
    )  # fmt: skip
    assert len(run.node_calls) == 1
    assert run.result["changed"] is True
    assert run.result["msg"] == "would install make"


def test_a_failed_apt_names_the_packages_it_was_asked_for() -> None:
    # On the offline H200 apt said only "Package 'python3-apt' has no installation candidate".
    def answer(call: dict[str, Any]) -> dict[str, Any]:
        if call.get("module_name") == "ansible.builtin.apt":
            return {"failed": True, "msg": "E: Package 'python3-apt' has no installation candidate"}
        return {"changed": False, "installed": [], "missing": ["iperf3"]}

    result = run_action("gpuval_packages", {"names": ["iperf3"]}, {}, node=answer).result
    assert result["failed"] is True
    assert result["installed"] == []
    assert result["msg"] == (
        "iperf3 not installed (dpkg) and apt could not install them: "
        "E: Package 'python3-apt' has no installation candidate"
    )
