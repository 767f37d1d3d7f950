#!/usr/bin/python
# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible module: take gpuval's cluster keys out of a user's ~/.ssh at the end of a run."""

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
module: gpuval_ssh_revoke
short_description: Remove gpuval's keys from a user's authorized_keys, key files and ssh config
description:
  - The run's key lets the nodes ssh to each other for mpirun; it leaves with the run. Removes
    every line of C(~/.ssh/authorized_keys) whose key comment is O(key_comment_prefix) or starts
    with O(key_comment_prefix) followed by C(-) (this run's key and any an unfinished earlier run
    left), the files O(key_names) of C(~/.ssh), and the block of C(~/.ssh/config) between
    C(# BEGIN <config_marker>) and C(# END <config_marker>).
  - A C(# BEGIN) line without its C(# END) after it (a hand-edited config) is refused. The
    module fails naming the file and the marker and changes nothing, since where the block ends
    can no longer be told from the user's own lines.
  - The prefix is matched as text, never as a pattern. A file that is a symbolic link is
    rewritten where it leads (a link some sites use for authorized_keys stays a link), with its
    owner and mode kept, by a temporary file renamed into place.
  - Changed only where something was there to remove; check mode says what would go.
version_added: "0.1.0"
options:
  user:
    description: The user whose ~/.ssh is cleaned (its home from the password database).
    type: str
    required: true
  home:
    description: The user's home folder, instead of the password database's (tests).
    type: path
  key_comment_prefix:
    description: The comment prefix that marks gpuval's keys.
    type: str
    required: true
  key_names:
    description: Files of ~/.ssh to remove (the key pair).
    type: list
    elements: str
    default: []
  config_marker:
    description: The marker text of the block in ~/.ssh/config (blockinfile's, without BEGIN/END).
    type: str
    required: true
"""

RETURN = r"""
removed:
  description: What was (or, in check mode, would be) removed, one line each.
  type: list
  elements: str
  returned: always
"""


def gpuval_key(line: str, prefix: str) -> bool:
    """Whether an authorized_keys line ends in the comment `prefix` or `prefix-<anything>`."""
    fields = line.split()
    if len(fields) < 3:  # options? type base64 comment: a key without a comment is nobody's
        return False
    comment = fields[-1]
    return comment == prefix or comment.startswith(f"{prefix}-")


class UnclosedBlock(ValueError):
    """A BEGIN marker without its END marker after it."""


def without_block(lines: list[str], marker: str, path: str) -> list[str] | None:
    """`lines` (of the file `path`) less the managed block, its BEGIN and END lines included;
    None when there is no such block. UnclosedBlock when the END line is missing."""
    begin, end = f"# BEGIN {marker}", f"# END {marker}"
    stripped = [line.rstrip("\n") for line in lines]
    if begin not in stripped:
        return None
    start = stripped.index(begin)
    if end not in stripped[start:]:
        raise UnclosedBlock(
            f"{path}: line {start + 1} opens the block {begin!r} but no {end!r} line follows; "
            "nothing was changed: remove the block by hand (or add its END line), then run again"
        )
    stop = stripped.index(end, start)
    return lines[:start] + lines[stop + 1 :]


def rewrite(path: str, lines: list[str]) -> None:
    """Replace the file `path` leads to with `lines`, keeping its owner and mode."""
    target = os.path.realpath(path)
    info = os.stat(target)
    descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".gpuval-")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.writelines(lines)
        os.chown(temporary, info.st_uid, info.st_gid)
        os.chmod(temporary, stat.S_IMODE(info.st_mode))
        os.replace(temporary, target)
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise


def read_lines(path: str) -> list[str] | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            return handle.readlines()
    except FileNotFoundError:
        return None


def revoke(ssh_dir: str, params: dict[str, Any], check: bool) -> list[str]:
    """Remove what the parameters name from `ssh_dir`; what was removed."""
    removed: list[str] = []
    # The config first: a block it cannot remove safely stops the clean-up before any change.
    config_path = os.path.join(ssh_dir, "config")
    config = read_lines(config_path)
    rest = None if config is None else without_block(config, params["config_marker"], config_path)
    keys_path = os.path.join(ssh_dir, "authorized_keys")
    keys = read_lines(keys_path)
    if keys is not None:
        kept = [line for line in keys if not gpuval_key(line, params["key_comment_prefix"])]
        if len(kept) != len(keys):
            removed.append(f"{keys_path}: {len(keys) - len(kept)} gpuval key(s)")
            if not check:
                rewrite(keys_path, kept)
    for name in params["key_names"]:
        path = os.path.join(ssh_dir, name)
        if os.path.lexists(path):
            removed.append(path)
            if not check:
                os.unlink(path)
    if rest is not None:
        removed.append(f"{config_path}: the block {params['config_marker']!r}")
        if not check:
            rewrite(config_path, rest)
    return removed


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "user": {"type": "str", "required": True},
            "home": {"type": "path"},
            "key_comment_prefix": {"type": "str", "required": True, "no_log": False},
            "key_names": {"type": "list", "elements": "str", "default": []},
            "config_marker": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    if not re.fullmatch(r"[A-Za-z0-9._-]+", params["key_comment_prefix"]):
        module.fail_json(
            msg=f"key_comment_prefix {params['key_comment_prefix']!r} must be one word of "
            "letters, digits, '.', '_' or '-' (an ssh-keygen -C comment)",
            removed=[],
        )
    home = params["home"]
    if home is None:
        try:
            home = pwd.getpwnam(params["user"]).pw_dir
        except KeyError:
            module.fail_json(msg=f"no passwd entry for user {params['user']!r}", removed=[])
    try:
        removed = revoke(os.path.join(home, ".ssh"), params, module.check_mode)
    except OSError as problem:
        module.fail_json(msg=f"{problem.filename or home}: {problem.strerror}", removed=[])
    except UnclosedBlock as problem:
        module.fail_json(msg=str(problem), removed=[])
    module.exit_json(changed=bool(removed), removed=removed)


if __name__ == "__main__":
    main()
