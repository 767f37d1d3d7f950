#!/usr/bin/python
# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible module: which of the named Debian packages are not installed, read from dpkg (its action
plugin then asks apt for those alone)."""

from __future__ import annotations

import shutil

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: gpuval_packages
short_description: Install the Debian packages that are missing, asking apt only for those
description:
  - Ansible's apt module needs the python3-apt bindings in the interpreter it runs under, even
    to find that everything is already installed. Where they are missing (a virtual
    environment's Python, an offline node) it tries to install them first and fails.
  - This module reads dpkg's database instead (C(dpkg-query -W)), which every Debian and Ubuntu
    node has; its action plugin then runs M(ansible.builtin.apt) for the missing packages alone,
    and not at all when none is missing.
  - On a node without dpkg-query every package is taken as missing, so apt (and its error on a
    node that has no apt) decides, as it would without this module.
  - In check mode apt is not run; the result says what would be installed.
version_added: "0.1.0"
options:
  names:
    description: Package names, as apt takes them.
    type: list
    elements: str
    required: true
  cache_valid_time:
    description: Passed to apt when it runs (its package lists are refreshed when older).
    type: int
    default: 3600
  install_recommends:
    description: Passed to apt when it runs.
    type: bool
    default: false
"""

RETURN = r"""
missing:
  description: The names in O(names) that dpkg does not list as installed, in the order given.
  type: list
  elements: str
  returned: always
installed:
  description: What apt installed (O(names) that were missing), empty when apt did not run.
  type: list
  elements: str
  returned: always
"""

# One line a package dpkg knows; a package it never heard of gets none (and a non-zero exit).
_FORMAT = "${Package}\t${db:Status-Status}\n"


def installed(module: AnsibleModule, names: list[str]) -> set[str]:
    """The names among `names` whose dpkg status is "installed"."""
    dpkg_query = shutil.which("dpkg-query")
    if dpkg_query is None or not names:
        return set()
    # A name dpkg does not know makes it exit 1 after printing the others: not an error here.
    _, out, _ = module.run_command([dpkg_query, "-W", f"-f={_FORMAT}", "--", *names])
    return {
        package.split(":", 1)[0]  # a multi-arch package is listed as name:arch
        for package, _, status in (line.partition("\t") for line in out.splitlines())
        if status.strip() == "installed"
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "names": {"type": "list", "elements": "str", "required": True},
            # Read by the action plugin, which runs apt; accepted here so one task holds both.
            "cache_valid_time": {"type": "int", "default": 3600},
            "install_recommends": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    names: list[str] = module.params["names"]
    present = installed(module, names)
    module.exit_json(
        changed=False, installed=[], missing=[name for name in names if name not in present]
    )


if __name__ == "__main__":
    main()
