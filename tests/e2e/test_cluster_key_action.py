"""The run's ssh key pair on the controller (action gpuval_cluster_key, run by ansible-playbook):
made once in a 0700 folder of its own with the run's comment, kept while it is there, made in a
dry run too, and removed whole at the end; a link where the folder was is removed, never what it
leads to."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from tests.e2e.local_playbook import run_locally


def key_task(
    key_dir: Path, changed: bool, check: bool = False, **args: Any
) -> list[dict[str, Any]]:
    return [
        {"name": "Key", "gpuval_cluster_key": {"key_dir": str(key_dir), **args},
         "check_mode": check, "register": "made"},
        {"name": "Changed?", "ansible.builtin.assert": {"that": [f"made.changed == {changed}"]}},
    ]  # fmt: skip


def play(tmp_path: Path, *tasks: list[dict[str, Any]]) -> None:
    completed = run_locally(tmp_path, ["localhost"], {
        "name": "key", "gather_facts": False, "tasks": [t for group in tasks for t in group],
    })  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr


MADE = {"key_name": "id_gpuval_ed25519", "comment": "gpuval-cluster-r1"}


def test_the_key_is_made_once_and_removed_whole(tmp_path: Path) -> None:
    key_dir = tmp_path / "cache" / "gpuval-ssh" / "r1"
    play(tmp_path, key_task(key_dir, True, **MADE))
    assert stat.S_IMODE(key_dir.stat().st_mode) == 0o700
    public = (key_dir / "id_gpuval_ed25519.pub").read_text().split()
    assert public[0] == "ssh-ed25519" and public[-1] == "gpuval-cluster-r1"
    private = (key_dir / "id_gpuval_ed25519").read_text()
    assert stat.S_IMODE((key_dir / "id_gpuval_ed25519").stat().st_mode) == 0o600
    play(tmp_path, key_task(key_dir, False, **MADE))
    assert (key_dir / "id_gpuval_ed25519").read_text() == private
    play(tmp_path, key_task(key_dir, True, check=True, state="absent"))
    assert key_dir.exists()
    play(
        tmp_path, key_task(key_dir, True, state="absent"), key_task(key_dir, False, state="absent")
    )
    assert not key_dir.exists() and key_dir.parent.exists()


def test_a_dry_run_makes_the_key_too(tmp_path: Path) -> None:
    key_dir = tmp_path / "r1"
    play(tmp_path, key_task(key_dir, True, check=True, **MADE))
    assert (key_dir / "id_gpuval_ed25519.pub").is_file()


def test_a_link_where_the_key_folder_was_goes_alone(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("mine\n")
    key_dir = tmp_path / "r1"
    key_dir.symlink_to(elsewhere)
    play(tmp_path, key_task(key_dir, True, state="absent"))
    assert not key_dir.is_symlink() and (elsewhere / "keep").read_text() == "mine\n"
