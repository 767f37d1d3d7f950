# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible inventory plugin: the nodes of a Slurm partition, node list or reservation as gpuval
nodes (thin: reading and parsing scontrol's output is gpuval.slurm's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

DOCUMENTATION = r"""
---
name: slurm
short_description: The nodes of a Slurm partition, node list or reservation
description:
  - Lists nodes with C(scontrol show nodes --json) (Slurm 23.02 and later), else
    C(scontrol --oneliner show nodes) (Slurm 22.05), on the machine that runs Ansible (a login
    or controller node with the Slurm client and its configuration).
  - Keeps the nodes of O(partition), O(nodelist) or O(reservation) (none named, every node)
    that have all of O(features); drained, down, failing, powered-down or not responding nodes
    are left out (and said so) unless O(include_unavailable).
  - Host names are Slurm's node names. Host variables are C(ansible_host) (NodeAddr),
    C(gpuval_slurm_node) (the node name C(gpuval drain) and C(gpuval resume) use),
    C(gpuval_gpus_per_node) (the GPUs of its GRES), C(slurm_state) (e.g. C(IDLE+DRAIN)),
    C(slurm_features), C(slurm_partitions), C(slurm_reason) and C(slurm_hostname).
  - The configuration file's name must end in C(slurm.yml) or C(slurm.yaml).
  - Needs the gpuval package in the Python that runs Ansible.
extends_documentation_fragment:
  - constructed
options:
  plugin:
    description: C(slurm), or C(gpuval.cluster.slurm) from the collection.
    required: true
    type: str
  partition:
    description: Keep the nodes of this partition.
    type: str
  nodelist:
    description: Keep these nodes, in Slurm's hostlist form (C(gpu[001-016])).
    type: str
  reservation:
    description: Keep the nodes of this reservation.
    type: str
  features:
    description: Keep nodes that have all these features (empty, any node).
    type: list
    elements: str
    default: []
  include_unavailable:
    description: Keep drained, down and not responding nodes too.
    type: bool
    default: false
  group:
    description: Group of the kept nodes.
    type: str
    default: gpu_nodes
"""

EXAMPLES = r"""
# inventory/cluster.slurm.yml, then:
#   ansible-inventory -i inventory/cluster.slurm.yml --graph
#   gpuval run -i inventory/cluster.slurm.yml
plugin: slurm
partition: gpu
features: [h100]
compose:
  ansible_user: "'ubuntu'"
"""


class InventoryModule(BaseInventoryPlugin, Constructable):  # type: ignore[misc]
    NAME = "slurm"

    def verify_file(self, path: str) -> bool:
        return bool(super().verify_file(path)) and path.endswith(("slurm.yml", "slurm.yaml"))

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        try:
            from gpuval.plugin_api import add_inventory_hosts
            from gpuval.slurm.nodes import SlurmOutputError, host_variables
            from gpuval.slurm.scontrol import NodeQuery, SlurmCommandError, query_nodes
        except ImportError as problem:
            raise AnsibleParserError(
                f"{path}: cannot import gpuval ({problem}): run Ansible from the Python that has "
                "gpuval installed (the repository's .venv)"
            ) from None
        query = NodeQuery(
            self.get_option("partition"),
            self.get_option("nodelist"),
            self.get_option("reservation"),
        )
        try:
            nodes = query_nodes(query)
        except (SlurmCommandError, SlurmOutputError) as problem:
            raise AnsibleParserError(f"{path}: {problem}") from None
        wanted = set(self.get_option("features"))
        include_unavailable = self.get_option("include_unavailable")

        def kept() -> Iterator[tuple[str, dict[str, Any]]]:
            for node in nodes:
                if not wanted.issubset(node.features):
                    continue
                if not node.available and not include_unavailable:
                    self.display.warning(
                        f"slurm inventory: {node.name} left out, {'+'.join(node.states)}"
                        + (f" ({node.reason})" if node.reason else "")
                        + "; include_unavailable: true keeps it"
                    )
                    continue
                yield node.name, host_variables(node)

        add_inventory_hosts(self, kept())
