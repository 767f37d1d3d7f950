# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible inventory plugin: running Lambda Cloud instances as gpuval nodes (thin: the API client
and the host variables are gpuval.cloud's)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

DOCUMENTATION = r"""
---
name: lambda_cloud
short_description: Running Lambda Cloud instances as the nodes of a gpuval run
description:
  - Lists the active instances of a Lambda Cloud account through Lambda's public Cloud API
    (U(https://docs-api.lambda.ai/api/cloud)), keeps those matching O(name_prefix), O(regions)
    and O(instance_types), and puts them in group O(group) (C(gpu_nodes)).
  - Host names are the instance names (the id when an instance has none). Host variables are
    C(ansible_host) (public address), C(openmpi_node_address) (private address, for MPI),
    C(gpuval_gpus_per_node) and C(gpuval_gpu_model) (from the instance type), and
    C(lambda_instance_id), C(lambda_region), C(lambda_instance_type),
    C(lambda_price_cents_per_hour).
  - The configuration file's name must end in C(lambda_cloud.yml) or C(lambda_cloud.yaml).
  - Needs the gpuval package in the Python that runs Ansible.
extends_documentation_fragment:
  - constructed
options:
  plugin:
    description: C(lambda_cloud), or C(gpuval.cluster.lambda_cloud) from the collection.
    required: true
    type: str
  api_key:
    description:
      - Lambda Cloud API key. Leave it out to use C(LAMBDA_API_KEY) (or the key C(gpuval run)
        hands over), or give a vaulted string (C(ansible-vault encrypt_string)); never a plain
        one in a file. Surrounding whitespace is dropped; a key with any other character that
        is not printable ASCII is refused.
    type: str
    env:
      - name: LAMBDA_API_KEY
  api_url:
    description: API base URL.
    type: str
    default: https://cloud.lambda.ai/api/v1
    env:
      - name: GPUVAL_LAMBDA_API_URL
  name_prefix:
    description:
      - Keep instances whose name starts with this, e.g. C(gpuval-), or C(gpuval-<run-id>-)
        for the instances of one run.
    type: str
    default: ""
  regions:
    description: Keep instances in these regions (empty, all).
    type: list
    elements: str
    default: []
  instance_types:
    description: Keep instances of these types (empty, all).
    type: list
    elements: str
    default: []
  group:
    description: Group of the kept instances.
    type: str
    default: gpu_nodes
"""

EXAMPLES = r"""
# inventory/lambda.lambda_cloud.yml, then:
#   LAMBDA_API_KEY=... ansible-playbook -i inventory/lambda.lambda_cloud.yml playbooks/benchmark.yml
plugin: lambda_cloud
name_prefix: gpuval-
regions: [us-east-1]
instance_types: [gpu_8x_h100_sxm5]
compose:
  ansible_user: "'ubuntu'"
"""


class InventoryModule(BaseInventoryPlugin, Constructable):  # type: ignore[misc]
    NAME = "lambda_cloud"

    def verify_file(self, path: str) -> bool:
        return bool(super().verify_file(path)) and path.endswith(
            ("lambda_cloud.yml", "lambda_cloud.yaml")
        )

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        try:
            from gpuval.cloud.lambda_api import (
                Instance,
                LambdaApiError,
                LambdaCloud,
                api_key_from_environment,
            )
            from gpuval.cloud.provision import host_variables
            from gpuval.plugin_api import add_inventory_hosts
        except ImportError as problem:
            raise AnsibleParserError(
                f"{path}: cannot import gpuval ({problem}): run Ansible from the Python that has "
                "gpuval installed (the repository's .venv)"
            ) from None
        try:
            key = str(self.get_option("api_key") or "").strip() or api_key_from_environment()
            instances = LambdaCloud(key, self.get_option("api_url")).instances()
        except LambdaApiError as problem:
            raise AnsibleParserError(f"{path}: {problem}") from None
        prefix = self.get_option("name_prefix")
        regions = set(self.get_option("regions"))
        types = set(self.get_option("instance_types"))

        def wanted(instance: Instance) -> bool:
            kind = instance.instance_type.name if instance.instance_type else None
            return (
                instance.status == "active"
                and instance.name.startswith(prefix)
                and (not regions or instance.region in regions)
                and (not types or kind in types)
            )

        add_inventory_hosts(
            self, ((i.name or i.id, host_variables(i)) for i in instances if wanted(i))
        )
