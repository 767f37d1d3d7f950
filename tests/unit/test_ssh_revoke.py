"""The end of a run's ssh clean-up (library/gpuval_ssh_revoke.py), run the way Ansible runs the
module: every gpuval key goes from authorized_keys and nothing else does, the prefix is text and
never a pattern, a linked authorized_keys stays a link, and check mode changes nothing."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from tests.ansible_modules import run_module

MARKER = "gpuval cluster hosts (managed by Ansible role openmpi)"
PERSON = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPerson alice@laptop\n"
# A comment that the old pattern matched: "." is any character in a regular expression.
LOOKALIKE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther gpuvalXcluster-run1\n"
KEYS = [
    PERSON,
    'from="10.0.0.1,10.0.0.2" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRun gpuval.cluster-run7\n',
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOld gpuval.cluster\n",  # an older version's key
    LOOKALIKE,
]
CONFIG = [
    "Host bastion\n", "  User alice\n",
    f"# BEGIN {MARKER}\n", "Host node1 node2\n", "  IdentityFile ~/.ssh/gpuval_cluster\n",
    f"# END {MARKER}\n",
    "Host *\n", "  ServerAliveInterval 30\n",
]  # fmt: skip


def home_with_keys(tmp_path: Path) -> Path:
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "authorized_keys").write_text("".join(KEYS))
    (ssh / "authorized_keys").chmod(0o600)
    (ssh / "config").write_text("".join(CONFIG))
    for name in ("gpuval_cluster", "gpuval_cluster.pub", "id_ed25519"):
        (ssh / name).write_text("key\n")
    return ssh.parent


def revoke(tmp_path: Path, home: Path, check_mode: bool = False) -> dict[str, Any]:
    return run_module(
        "gpuval_ssh_revoke", tmp_path, check_mode, user="root", home=str(home),
        key_comment_prefix="gpuval.cluster", key_names=["gpuval_cluster", "gpuval_cluster.pub"],
        config_marker=MARKER,
    )  # fmt: skip


def test_every_gpuval_key_goes_and_nothing_else(tmp_path: Path) -> None:
    home = home_with_keys(tmp_path)
    result = revoke(tmp_path, home)
    assert result["changed"] is True, result
    ssh = home / ".ssh"
    assert (ssh / "authorized_keys").read_text() == PERSON + LOOKALIKE
    assert stat.S_IMODE((ssh / "authorized_keys").stat().st_mode) == 0o600
    assert (ssh / "config").read_text() == "".join(CONFIG[:2] + CONFIG[6:])
    assert sorted(p.name for p in ssh.iterdir()) == ["authorized_keys", "config", "id_ed25519"]
    again = revoke(tmp_path, home)
    assert again["changed"] is False and again["removed"] == [], again


def test_check_mode_says_what_would_go_and_changes_nothing(tmp_path: Path) -> None:
    home = home_with_keys(tmp_path)
    before = {p.name: p.read_text() for p in (home / ".ssh").iterdir()}
    result = revoke(tmp_path, home, check_mode=True)
    assert result["changed"] is True
    assert len(result["removed"]) == 4, result  # 2 keys, 2 key files, the config block
    assert {p.name: p.read_text() for p in (home / ".ssh").iterdir()} == before


def test_a_linked_authorized_keys_stays_a_link(tmp_path: Path) -> None:
    home = home_with_keys(tmp_path)
    shared = tmp_path / "etc-ssh-authorized_keys-root"
    (home / ".ssh" / "authorized_keys").rename(shared)
    (home / ".ssh" / "authorized_keys").symlink_to(shared)
    assert revoke(tmp_path, home)["changed"] is True
    assert os.readlink(home / ".ssh" / "authorized_keys") == str(shared)
    assert shared.read_text() == PERSON + LOOKALIKE


def test_a_user_without_a_home_fails_naming_the_user(tmp_path: Path) -> None:
    result = run_module(
        "gpuval_ssh_revoke", tmp_path, user="no-such-user-gpuval", key_comment_prefix="gpuval",
        config_marker=MARKER,
    )  # fmt: skip
    assert result.get("failed") is True
    assert "no passwd entry for user 'no-such-user-gpuval'" in result["msg"]


def test_a_block_without_its_end_marker_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    """An edited ~/.ssh/config that lost its END line: taking everything after BEGIN would
    delete the user's own hosts (Host * here), so the module refuses, naming file and marker."""
    home = home_with_keys(tmp_path)
    ssh = home / ".ssh"
    unclosed = [line for line in CONFIG if not line.startswith("# END")]
    (ssh / "config").write_text("".join(unclosed))
    before = {p.name: p.read_text() for p in ssh.iterdir()}
    result = revoke(tmp_path, home)
    assert result.get("failed") is True, result
    assert str(ssh / "config") in result["msg"], result
    assert f"# END {MARKER}" in result["msg"], result
    assert {p.name: p.read_text() for p in ssh.iterdir()} == before
