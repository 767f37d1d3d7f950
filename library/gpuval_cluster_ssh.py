#!/usr/bin/python
# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible module: the run's passwordless ssh among the cluster's nodes, set up in a user's ~/.ssh
at the start of a run and taken out at its end."""

from __future__ import annotations

import os
import pwd
import re
import stat
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: gpuval_cluster_ssh
short_description: Put the run's cluster key into a user's ~/.ssh, or take every gpuval key out
description:
  - The run's key lets the nodes ssh to each other for mpirun. One module call does what a task
    per file did (every run pays for each task on every node).
  - O(state=present) makes C(~/.ssh) (0700), writes the key pair O(key_name) (0600) and
    C(O(key_name).pub) (0644), authorises the public key with C(from=) O(authorized_from) under
    its comment O(key_comment) (the line with that comment is replaced where it is, else added)
    and removes every other gpuval key (comment O(key_comment_prefix) or
    C(O(key_comment_prefix)-...), left by a run that did not finish), and puts O(known_hosts)
    and O(config) between C(# BEGIN <block_marker>) and C(# END <block_marker>) in
    C(~/.ssh/known_hosts) (0644) and C(~/.ssh/config) (0600), the block replaced where it
    is, else added at the end, and removed by an empty text. Every file belongs to O(user).
  - O(state=absent) removes every gpuval key from C(authorized_keys), the files O(key_name)
    and C(O(key_name).pub), and the block of C(~/.ssh/config).
  - A C(# BEGIN) line without its C(# END) after it (a hand-edited file) is refused. The
    module fails naming the file and the marker and changes nothing, since where the block ends
    can no longer be told from the user's own lines.
  - The prefix is matched as text, never as a pattern. A file that is a symbolic link is
    rewritten where it leads (a link some sites use for authorized_keys stays a link), by a
    temporary file renamed into place.
  - Changed only where a file's text, owner or mode changed; check mode says what would change.
version_added: "0.1.0"
options:
  state:
    description: C(present) at the start of a run, C(absent) at its end.
    type: str
    choices: [present, absent]
    required: true
  user:
    description: The user whose ~/.ssh is changed (its home and group from the password database).
    type: str
    required: true
  home:
    description: The user's home folder, instead of the password database's (tests).
    type: path
  key_comment_prefix:
    description: The comment prefix that marks gpuval's keys.
    type: str
    required: true
  key_name:
    description: The key pair's file name in ~/.ssh (the public key is C(<key_name>.pub)).
    type: str
    required: true
  block_marker:
    description: The marker text of the managed blocks (blockinfile's, without BEGIN/END).
    type: str
    required: true
  key_comment:
    description: This run's key comment (O(state=present)); it starts with O(key_comment_prefix).
    type: str
  private_key:
    description: The private key's text (O(state=present)); never shown in a result.
    type: str
  public_key:
    description: The public key's text, C(<type> <base64> <key_comment>) (O(state=present)).
    type: str
  authorized_from:
    description: The addresses the key is accepted from (O(state=present); at least one).
    type: list
    elements: str
    default: []
  known_hosts:
    description: The block of ~/.ssh/known_hosts (O(state=present)).
    type: str
    default: ""
  config:
    description: The block of ~/.ssh/config (O(state=present)).
    type: str
    default: ""
"""

RETURN = r"""
changes:
  description: What was (or, in check mode, would be) changed, one line each.
  type: list
  elements: str
  returned: always
"""

_COMMENT = re.compile(r"[A-Za-z0-9._-]+")


def gpuval_key(line: str, prefix: str) -> bool:
    """Whether an authorized_keys line ends in the comment `prefix` or `prefix-<anything>`."""
    fields = line.split()
    if len(fields) < 3:  # options? type base64 comment: a key without a comment is nobody's
        return False
    comment = fields[-1]
    return comment == prefix or comment.startswith(f"{prefix}-")


class UnclosedBlock(ValueError):
    """A BEGIN marker without its END marker after it."""


def block_span(lines: list[str], marker: str, path: str) -> tuple[int, int] | None:
    """The managed block of `lines` (of the file `path`), as (BEGIN line, END line + 1); None when
    there is none. UnclosedBlock when the END line is missing."""
    begin, end = f"# BEGIN {marker}", f"# END {marker}"
    stripped = [line.rstrip("\r\n") for line in lines]
    if begin not in stripped:
        return None
    start = stripped.index(begin)
    if end not in stripped[start:]:
        raise UnclosedBlock(
            f"{path}: line {start + 1} opens the block {begin!r} but no {end!r} line follows; "
            "nothing was changed: remove the block by hand (or add its END line), then run again"
        )
    return start, stripped.index(end, start) + 1


def with_block(lines: list[str], marker: str, text: str, path: str) -> list[str]:
    """`lines` with the managed block holding `text` (replaced where it is, else added at the
    end); without the block when `text` is empty."""
    span = block_span(lines, marker, path)
    start, stop = span if span is not None else (len(lines), len(lines))
    body = [f"{line}\n" for line in text.splitlines()]
    block = [f"# BEGIN {marker}\n", *body, f"# END {marker}\n"] if body else []
    before = lines[:start]
    if before and block and not before[-1].endswith(("\n", "\r")):
        before = [*before[:-1], before[-1] + "\n"]
    return before + block + lines[stop:]


def with_run_key(lines: list[str], params: dict[str, Any]) -> list[str]:
    """authorized_keys `lines` with this run's key line in place of its earlier one (else at the
    end) and no other gpuval key."""
    line = f'from="{",".join(params["authorized_from"])}" {params["public_key"].strip()}\n'
    kept: list[str] = []
    placed = False
    for old in lines:
        fields = old.split()
        if len(fields) >= 3 and fields[-1] == params["key_comment"]:
            if not placed:
                kept.append(line)
                placed = True
        elif not gpuval_key(old, params["key_comment_prefix"]):
            kept.append(old)
    if not placed:
        if kept and not kept[-1].endswith(("\n", "\r")):
            kept[-1] += "\n"
        kept.append(line)
    return kept


def read_lines(path: str) -> list[str] | None:
    """The file's lines with their own line endings (newline=""): a rewrite keeps every line
    it does not change byte for byte, CRLF included."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as handle:
            return handle.readlines()
    except FileNotFoundError:
        return None


class SshFolder:
    """A user's ~/.ssh, changed file by file; `changes` says what changed (or would)."""

    def __init__(self, home: str, owner: tuple[int, int], check: bool) -> None:
        self.path = os.path.join(home, ".ssh")
        self.owner = owner
        self.check = check
        self.changes: list[str] = []

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def ensure_folder(self) -> None:
        if not os.path.isdir(self.path):
            self.changes.append(f"{self.path}: created")
            if not self.check:
                os.mkdir(self.path, 0o700)
        self._own(self.path, 0o700)

    def write(self, name: str, lines: list[str], mode: int | None) -> None:
        """The file `name` (where it leads, if a link) holding `lines`, owned by the user with
        `mode`; where `mode` is None, an existing file keeps its owner and mode."""
        path = self.file(name)
        target = os.path.realpath(path)
        old = read_lines(target)
        if old is None or "".join(old) != "".join(lines):
            self.changes.append(f"{path}: {'written' if old is None else 'changed'}")
            if not self.check:
                owner, new_mode = self.owner, 0o600 if mode is None else mode
                if mode is None and old is not None:
                    info = os.stat(target)
                    owner, new_mode = (info.st_uid, info.st_gid), stat.S_IMODE(info.st_mode)
                self._replace(target, lines, owner, new_mode)
                return
        if old is not None and mode is not None:
            self._own(target, mode)

    def remove(self, name: str) -> None:
        path = self.file(name)
        if os.path.lexists(path):
            self.changes.append(f"{path}: removed")
            if not self.check:
                os.unlink(path)

    def _own(self, path: str, mode: int) -> None:
        """`path` owned by the user with `mode` (a folder check mode would create: nothing)."""
        if not os.path.exists(path):
            return
        info = os.stat(path)
        if (info.st_uid, info.st_gid) != self.owner or stat.S_IMODE(info.st_mode) != mode:
            self.changes.append(f"{path}: owner or mode set")
            if not self.check:
                os.chown(path, *self.owner)
                os.chmod(path, mode)

    @staticmethod
    def _replace(target: str, lines: list[str], owner: tuple[int, int], mode: int) -> None:
        descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".gpuval-")
        try:
            with os.fdopen(
                descriptor, "w", encoding="utf-8", errors="surrogateescape", newline=""
            ) as out:
                out.writelines(lines)
            os.chown(temporary, *owner)
            os.chmod(temporary, mode)
            os.replace(temporary, target)
        except BaseException:
            if os.path.lexists(temporary):
                os.unlink(temporary)
            raise


def trust(folder: SshFolder, params: dict[str, Any]) -> None:
    """Set up the run's key in `folder`. The blocks are read first: one that cannot be replaced
    safely stops the set-up before any change."""
    known_hosts = read_lines(folder.file("known_hosts")) or []
    config = read_lines(folder.file("config")) or []
    marker = params["block_marker"]
    known_hosts = with_block(known_hosts, marker, params["known_hosts"], folder.file("known_hosts"))
    config = with_block(config, marker, params["config"], folder.file("config"))
    folder.ensure_folder()
    name = params["key_name"]
    folder.write(name, [params["private_key"].strip() + "\n"], 0o600)
    folder.write(f"{name}.pub", [params["public_key"].strip() + "\n"], 0o644)
    authorized = read_lines(os.path.realpath(folder.file("authorized_keys"))) or []
    folder.write("authorized_keys", with_run_key(authorized, params), 0o600)
    folder.write("known_hosts", known_hosts, 0o644)
    folder.write("config", config, 0o600)


def revoke(folder: SshFolder, params: dict[str, Any]) -> None:
    """Remove every gpuval key, the key pair and the config block from `folder`. The config
    first: a block it cannot remove safely stops the clean-up before any change."""
    config = read_lines(folder.file("config"))
    span = (
        None
        if config is None
        else block_span(config, params["block_marker"], folder.file("config"))
    )
    keys = read_lines(os.path.realpath(folder.file("authorized_keys")))
    if keys is not None:
        kept = [line for line in keys if not gpuval_key(line, params["key_comment_prefix"])]
        folder.write("authorized_keys", kept, None)
    for name in (params["key_name"], f"{params['key_name']}.pub"):
        folder.remove(name)
    if config is not None and span is not None:
        folder.write("config", config[: span[0]] + config[span[1] :], None)


def problem_with(params: dict[str, Any]) -> str | None:
    """What makes the parameters unusable, or None."""
    prefix = params["key_comment_prefix"]
    if not _COMMENT.fullmatch(prefix):
        return (
            f"key_comment_prefix {prefix!r} must be one word of letters, digits, '.', '_' or '-' "
            "(an ssh-keygen -C comment)"
        )
    if params["state"] == "absent":
        return None
    missing = [key for key in ("key_comment", "private_key", "public_key") if not params[key]]
    if missing or not params["authorized_from"]:
        return f"state=present needs {', '.join(missing or ['authorized_from'])}"
    comment = params["key_comment"]
    if not (_COMMENT.fullmatch(comment) and gpuval_key(f"type key {comment}", prefix)):
        return f"key_comment {comment!r} must be {prefix!r} or start with '{prefix}-'"
    if params["public_key"].split()[-1] != comment:
        return f"public_key must end in its comment {comment!r}"
    return None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "required": True, "choices": ["present", "absent"]},
            "user": {"type": "str", "required": True},
            "home": {"type": "path"},
            "key_comment_prefix": {"type": "str", "required": True, "no_log": False},
            "key_name": {"type": "str", "required": True, "no_log": False},
            "block_marker": {"type": "str", "required": True},
            "key_comment": {"type": "str", "no_log": False},
            "private_key": {"type": "str", "no_log": True},
            "public_key": {"type": "str", "no_log": False},
            "authorized_from": {"type": "list", "elements": "str", "default": []},
            "known_hosts": {"type": "str", "default": ""},
            "config": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    params = module.params
    problem = problem_with(params)
    if problem:
        module.fail_json(msg=problem, changes=[])
    try:
        entry = pwd.getpwnam(params["user"])
    except KeyError:
        module.fail_json(msg=f"no passwd entry for user {params['user']!r}", changes=[])
    folder = SshFolder(
        params["home"] or entry.pw_dir, (entry.pw_uid, entry.pw_gid), module.check_mode
    )
    try:
        (trust if params["state"] == "present" else revoke)(folder, params)
    except OSError as problem_met:
        module.fail_json(
            msg=f"{problem_met.filename or folder.path}: {problem_met.strerror}", changes=[]
        )
    except UnclosedBlock as unclosed:
        module.fail_json(msg=str(unclosed), changes=[])
    module.exit_json(changed=bool(folder.changes), changes=folder.changes)


if __name__ == "__main__":
    main()
