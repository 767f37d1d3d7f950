"""The Slurm node name of each host of an Ansible inventory (its gpuval_slurm_node variable), as
ansible-playbook sees it: read by `ansible-inventory --list`, which loads the inventory as a play
does (a file, a folder, an inventory plugin's configuration) with the group_vars/ and host_vars/
beside it, and gives each host's variables merged over its groups'."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

NODE_VARIABLE = "gpuval_slurm_node"
# An inventory plugin may call out (the slurm plugin runs scontrol): a hung controller must not
# hang the command.
TIMEOUT_S = 300
# ansible-inventory's lines that say why a source gave no host; kept this long at most.
_REASON_CHARS = 600


def slurm_node_names(inventory: Path, ansible_config: Path | None = None) -> dict[str, str]:
    """Inventory host -> its gpuval_slurm_node (a host without one keeps its own name).
    `ansible_config`: the ansible.cfg to load the inventory with (the one `gpuval run` plays
    with: its plugin paths find `plugin: slurm`) unless ANSIBLE_CONFIG names one already.
    ValueError naming the inventory when it cannot be read or lists no host."""
    if not inventory.exists():
        raise ValueError(f"{inventory}: no such inventory file or folder")
    environment = dict(os.environ)
    if ansible_config is not None and "ANSIBLE_CONFIG" not in environment:
        environment["ANSIBLE_CONFIG"] = str(ansible_config)
    # The ansible-inventory of this Python: the inventory plugins import gpuval.
    command = [sys.executable, "-m", "ansible.cli.inventory", "-i", str(inventory), "--list"]
    try:
        done = subprocess.run(
            command, env=environment, capture_output=True, text=True, check=False,
            timeout=TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ValueError(
            f"{inventory}: ansible-inventory gave no answer in {TIMEOUT_S} s"
        ) from None
    except OSError as problem:
        raise ValueError(f"{inventory}: cannot run ansible-inventory: {problem}") from None
    if done.returncode != 0:
        broken = _broken_vars_file(inventory)
        where = f" ({broken})" if broken else ""
        raise ValueError(f"{inventory}: Ansible cannot read it{where}: {_said(done.stderr)}")
    try:
        listed = json.loads(done.stdout, object_hook=_plain)
    except json.JSONDecodeError as problem:
        raise ValueError(f"{inventory}: ansible-inventory printed no JSON: {problem}") from None
    hostvars = _host_variables(listed)
    if not hostvars:  # Ansible only warns about an inventory it cannot read
        why = _said(done.stderr)
        raise ValueError(
            f"{inventory}: Ansible reads no host from it" + (f": {why}" if why else "")
        )
    return {host: str(variables.get(NODE_VARIABLE) or host) for host, variables in hostvars.items()}


def _broken_vars_file(inventory: Path) -> str | None:
    """`FILE line N: problem` of the first group_vars/host_vars YAML file beside `inventory`
    that is no YAML (Ansible's message does not name it), else None."""
    import yaml

    beside = inventory if inventory.is_dir() else inventory.parent
    for folder in ("group_vars", "host_vars"):
        for path in sorted((beside / folder).rglob("*")):
            if path.suffix not in ("", ".yml", ".yaml", ".json") or not path.is_file():
                continue
            try:
                yaml.safe_load(path.read_text(encoding="utf-8", errors="replace"))
            except yaml.YAMLError as problem:
                mark = getattr(problem, "problem_mark", None)
                line = f" line {mark.line + 1}" if mark is not None else ""
                return f"{path}{line}: {getattr(problem, 'problem', None) or 'not YAML'}"
    return None


def _host_variables(listed: Any) -> dict[str, Mapping[str, Any]]:
    """Every host of `ansible-inventory --list`'s answer and its variables (none: {})."""
    if not isinstance(listed, dict):
        return {}
    meta = listed.get("_meta")
    hostvars = meta.get("hostvars") if isinstance(meta, dict) else None
    hostvars = hostvars if isinstance(hostvars, dict) else {}
    hosts = {
        host
        for name, group in listed.items()
        if name != "_meta" and isinstance(group, dict)
        for host in group.get("hosts") or ()
    }
    return {
        str(host): variables if isinstance(variables := hostvars.get(host), dict) else {}
        for host in sorted(hosts | set(hostvars))
    }


def _plain(value: dict[str, Any]) -> Any:
    """ansible-inventory marks text from plugins and files unsafe ({"__ansible_unsafe": text})."""
    if set(value) == {"__ansible_unsafe"}:
        return value["__ansible_unsafe"]
    return value


def _said(stderr: str) -> str:
    """What ansible-inventory said, on one line: its warnings and errors, not its other noise."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    told = [line for line in lines if line.startswith(("[WARNING]", "[ERROR]", "ERROR"))]
    text = " ".join(told or lines)
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."
