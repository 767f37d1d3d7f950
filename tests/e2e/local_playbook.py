"""A playbook of role tasks run by ansible-playbook with every host on this machine (connection
local): the role's task files tested as Ansible runs them, without simulated hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def run_locally(
    tmp_path: Path, hosts: Sequence[str], play: dict[str, Any], forks: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`play` (its hosts set here) on `hosts`, with the repository's modules and action plugins
    but none of its ansible.cfg (inventory, fact cache); `forks`: Ansible's, else its default."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{**play, "hosts": ",".join(hosts)}]))
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\n" + (f"forks = {forks}\n" if forks else ""))
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "\n".join(hosts) + f"\n[all:vars]\nansible_connection=local\n"
        f"ansible_python_interpreter={sys.executable}\n"
    )
    return subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
         str(playbook)],
        capture_output=True, text=True, timeout=400, check=False,
        env={**os.environ, "ANSIBLE_CONFIG": str(config), "ANSIBLE_LIBRARY": str(REPO / "library"),
             "ANSIBLE_MODULE_UTILS": str(REPO / "plugins/module_utils"),
             "ANSIBLE_ACTION_PLUGINS": str(REPO / "plugins/action"),
             "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
             "ANSIBLE_ASYNC_DIR": str(tmp_path / "async")},
    )  # fmt: skip
