"""The run's passwordless ssh (library/gpuval_cluster_ssh.py), run the way Ansible runs the
module. At the end of a run (state absent) every gpuval key goes from authorized_keys and nothing
else does, the prefix is text and never a pattern, a linked authorized_keys stays a link, and
check mode changes nothing. At its start (state present) the run's key is authorised from the
cluster's addresses only, older gpuval keys go, the user's own lines stay, and a second run
changes nothing."""

from __future__ import annotations

import importlib.util
import os
import stat
from pathlib import Path
from types import ModuleType
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.ansible_modules import LIBRARY, run_module

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
        "gpuval_cluster_ssh", tmp_path, check_mode, state="absent", user="root", home=str(home),
        key_comment_prefix="gpuval.cluster", key_name="gpuval_cluster", block_marker=MARKER,
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
    assert again["changed"] is False and again["changes"] == [], again


def test_check_mode_says_what_would_go_and_changes_nothing(tmp_path: Path) -> None:
    home = home_with_keys(tmp_path)
    before = {p.name: p.read_text() for p in (home / ".ssh").iterdir()}
    result = revoke(tmp_path, home, check_mode=True)
    assert result["changed"] is True
    assert len(result["changes"]) == 4, result  # 2 keys, 2 key files, the config block
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
        "gpuval_cluster_ssh", tmp_path, state="absent", user="no-such-user-gpuval",
        key_comment_prefix="gpuval", key_name="gpuval_cluster", block_marker=MARKER,
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


PRIVATE = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAnot-a-real-key\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
PUBLIC = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIRun8 gpuval.cluster-run8"
KNOWN = (
    "node1,10.0.0.1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHost1\n"
    "node2,10.0.0.2 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHost2"
)
SSH_CONFIG = "Host node1 node2 10.0.0.1 10.0.0.2\n    IdentityFile ~/.ssh/gpuval_cluster"
RUN8 = f'from="10.0.0.1,10.0.0.2" {PUBLIC}\n'


def trust(tmp_path: Path, home: Path, check_mode: bool = False, **changed: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "state": "present", "user": "root", "home": str(home),
        "key_comment_prefix": "gpuval.cluster", "key_comment": "gpuval.cluster-run8",
        "key_name": "gpuval_cluster", "block_marker": MARKER,
        "private_key": PRIVATE, "public_key": PUBLIC, "authorized_from": ["10.0.0.1", "10.0.0.2"],
        "known_hosts": KNOWN, "config": SSH_CONFIG,
    }  # fmt: skip
    return run_module("gpuval_cluster_ssh", tmp_path, check_mode, **{**args, **changed})


def block(text: str) -> str:
    return f"# BEGIN {MARKER}\n{text}\n# END {MARKER}\n"


def test_a_fresh_home_gets_the_key_pair_the_key_from_the_cluster_only_and_both_blocks(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = trust(tmp_path, home)
    assert result["changed"] is True, result
    ssh = home / ".ssh"
    expected = {
        "gpuval_cluster": (PRIVATE + "\n", 0o600),
        "gpuval_cluster.pub": (PUBLIC + "\n", 0o644),
        "authorized_keys": (RUN8, 0o600),
        "known_hosts": (block(KNOWN), 0o644),
        "config": (block(SSH_CONFIG), 0o600),
    }
    assert {
        p.name: (p.read_text(), stat.S_IMODE(p.stat().st_mode)) for p in ssh.iterdir()
    } == expected
    assert stat.S_IMODE(ssh.stat().st_mode) == 0o700
    again = trust(tmp_path, home)
    assert again["changed"] is False and again["changes"] == [], again


def test_older_gpuval_keys_go_the_users_lines_stay_and_the_block_is_replaced_in_place(
    tmp_path: Path,
) -> None:
    home = home_with_keys(tmp_path)
    assert trust(tmp_path, home)["changed"] is True
    ssh = home / ".ssh"
    assert (ssh / "authorized_keys").read_text() == PERSON + LOOKALIKE + RUN8
    assert (ssh / "config").read_text() == "".join(CONFIG[:2]) + block(SSH_CONFIG) + "".join(
        CONFIG[6:]
    )
    assert (ssh / "id_ed25519").read_text() == "key\n"


def test_the_same_run_again_with_other_addresses_replaces_its_line_where_it_is(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").write_text(RUN8 + PERSON)
    trust(tmp_path, home, authorized_from=["10.0.0.3"])
    assert (home / ".ssh" / "authorized_keys").read_text() == f'from="10.0.0.3" {PUBLIC}\n' + PERSON


def test_check_mode_on_a_fresh_home_lists_every_file_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = trust(tmp_path, home, check_mode=True)
    assert result["changed"] is True
    assert len(result["changes"]) == 6, result  # the folder and its 5 files
    assert list(home.iterdir()) == []


def test_an_unclosed_block_refuses_the_set_up_before_any_change(tmp_path: Path) -> None:
    home = home_with_keys(tmp_path)
    ssh = home / ".ssh"
    (ssh / "config").write_text("".join(line for line in CONFIG if not line.startswith("# END")))
    before = {p.name: p.read_text() for p in ssh.iterdir()}
    result = trust(tmp_path, home)
    assert result.get("failed") is True, result
    assert str(ssh / "config") in result["msg"], result
    assert {p.name: p.read_text() for p in ssh.iterdir()} == before


def test_the_private_key_never_appears_in_the_result(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = trust(tmp_path, home)
    assert "not-a-real-key" not in repr(result)
    assert (
        result["invocation"]["module_args"]["private_key"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    )


def test_a_public_key_of_another_comment_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = trust(tmp_path, home, public_key=PUBLIC.replace("run8", "run9"))
    assert result.get("failed") is True
    assert result["msg"] == "public_key must end in its comment 'gpuval.cluster-run8'"
    assert list(home.iterdir()) == []


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gpuval_cluster_ssh", LIBRARY / "gpuval_cluster_ssh.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SSH = _module()
PARAMS = {
    "key_comment_prefix": "gpuval.cluster", "key_comment": "gpuval.cluster-run8",
    "public_key": PUBLIC, "authorized_from": ["10.0.0.1", "10.0.0.2"],
}  # fmt: skip
# A user's own lines: any text, each with its own line ending (the last one maybe none), never
# a gpuval key nor one of the blocks' marker lines.
ENDINGS = st.sampled_from(["\n", "\r\n"])
TEXT = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]))
USER_LINES = (
    st.lists(st.tuples(TEXT, ENDINGS), max_size=8)
    .map(lambda lines: [text + ending for text, ending in lines])
    .filter(
        lambda lines: (
            not any(
                SSH.gpuval_key(line, "gpuval.cluster") or line.startswith(("# BEGIN", "# END"))
                for line in lines
            )
        )
    )
)
GPUVAL_LINES = st.lists(
    st.sampled_from([KEYS[1], KEYS[2], RUN8, 'from="10.9.9.9" ' + PUBLIC + "\r\n"]), max_size=3
)


@given(user=USER_LINES, gpuval=GPUVAL_LINES, at=st.integers(0, 8), cut=st.booleans())
def test_the_run_key_leaves_every_user_line_as_it_was(
    user: list[str], gpuval: list[str], at: int, cut: bool
) -> None:
    """Whatever the user's authorized_keys holds, wherever older gpuval keys lie in it (and
    whether its last line ends in a newline): after the set-up the user's lines are there byte
    for byte and in order, the run's key once, no other gpuval key; a second set-up changes
    nothing, and the end of the run leaves the user's lines alone."""
    lines = user[:at] + gpuval + user[at:]
    if cut and lines and lines[-1] in user[at:] and user:  # a last line without its newline
        user = [*user[:-1], user[-1].rstrip("\r\n")]
        lines = [*lines[:-1], user[-1]]
    trusted = SSH.with_run_key(lines, PARAMS)
    assert [line for line in trusted if SSH.gpuval_key(line, "gpuval.cluster")] == [RUN8]
    appended = not any(line.split()[-1] == PARAMS["key_comment"] for line in gpuval)
    ended = "\n" if appended and user and not user[-1].endswith(("\n", "\r")) else ""
    assert "".join(line for line in trusted if line != RUN8) == "".join(user) + ended
    assert SSH.with_run_key(trusted, PARAMS) == trusted
    revoked = [line for line in trusted if not SSH.gpuval_key(line, "gpuval.cluster")]
    assert "".join(revoked) == "".join(user) + ended


@given(
    user=USER_LINES,
    text=st.lists(TEXT.filter(lambda t: not t.startswith("# ")), min_size=1, max_size=4),
)
def test_a_block_is_added_once_and_taken_out_whole(user: list[str], text: list[str]) -> None:
    """known_hosts and the ssh config: the block added after the user's lines, the same block
    again changes nothing, and an empty one leaves the user's lines as they were."""
    block_text = "\n".join(text)
    added = SSH.with_block(user, MARKER, block_text, "config")
    assert added[: len(user)] == user
    assert SSH.with_block(added, MARKER, block_text, "config") == added
    assert SSH.with_block(added, MARKER, "", "config") == user
