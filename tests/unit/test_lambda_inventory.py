"""The lambda_cloud inventory plugin (plugins/inventory), through ansible-inventory with the
repository's ansible.cfg, against the local stand-in for Lambda's Cloud API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fake_lambda_api import FakeLambdaCloud, FakeType, Machine

from gpuval.cloud.lambda_api import LambdaCloud

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
KEY = "inventory-test-key-31b7"
H100 = "gpu_8x_h100_sxm5"
A10 = "gpu_1x_a10"


@pytest.fixture(scope="module")
def cloud() -> Iterator[FakeLambdaCloud]:
    """Four running instances and one still booting, in two regions and of two types."""
    types = [
        FakeType(H100, "H100 (80 GB SXM5)", 8, 3592, capacity={"us-east-1": 3, "us-west-1": 1}),
        FakeType(A10, "A10 (24 GB PCIe)", 1, 75, capacity={"us-east-1": 2}),
    ]
    machines = [Machine(f"198.51.100.{n}", f"10.0.0.{n}") for n in range(1, 7)]
    with FakeLambdaCloud(KEY, types, ["laptop"], machines, boot_s=0.0) as fake:
        client = LambdaCloud(KEY, fake.url)
        for name, kind, region in [
            ("gpuval-run1-1", H100, "us-east-1"),
            ("gpuval-run1-2", H100, "us-east-1"),
            ("gpuval-run2-1", H100, "us-west-1"),
            ("notebook", A10, "us-east-1"),
        ]:
            client.launch(region=region, instance_type=kind, ssh_key_name="laptop", name=name)
        fake.boot_s = 3600.0
        client.launch(region="us-east-1", instance_type=A10, ssh_key_name="laptop", name="gpuval-x")
        yield fake


def inventory(
    cloud: FakeLambdaCloud, tmp_path: Path, config: str, *extra: str, key: str | None = KEY
) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "test.lambda_cloud.yml"
    source.write_text(f"plugin: lambda_cloud\napi_url: {cloud.url}\n{config}")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LAMBDA_")}
    environment |= {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PATH": f"{VENV_BIN}:/bin"}
    if key is not None:
        environment["LAMBDA_API_KEY"] = key
    return subprocess.run(
        [str(VENV_BIN / "ansible-inventory"), "-i", str(source), "--list", *extra],
        cwd=REPO, env=environment, capture_output=True, text=True, check=False,
    )  # fmt: skip


def _trusted(value: object) -> object:
    """ansible-inventory marks the strings an inventory plugin brings as not to be templated
    ({"__ansible_unsafe": text}): right for names and addresses from an API; unwrapped here."""
    if isinstance(value, dict) and set(value) == {"__ansible_unsafe"}:
        return value["__ansible_unsafe"]
    return value


def listed(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout, object_hook=_trusted)
    assert isinstance(document, dict)
    return document


def test_running_instances_with_their_addresses_and_gpus(
    cloud: FakeLambdaCloud, tmp_path: Path
) -> None:
    document = listed(inventory(cloud, tmp_path, "name_prefix: gpuval-\n"))
    assert document["gpu_nodes"] == {"hosts": ["gpuval-run1-1", "gpuval-run1-2", "gpuval-run2-1"]}
    variables = document["_meta"]["hostvars"]["gpuval-run2-1"]  # type: ignore[index]
    assert variables["ansible_host"] == "198.51.100.3"
    assert variables["openmpi_node_address"] == "10.0.0.3"
    assert variables["gpuval_gpus_per_node"] == 8
    assert variables["gpuval_gpu_model"] == "H100 (80 GB SXM5)"
    assert variables["lambda_region"] == "us-west-1"
    assert variables["lambda_instance_type"] == H100


def test_filters_by_region_type_and_prefix(cloud: FakeLambdaCloud, tmp_path: Path) -> None:
    east = listed(inventory(cloud, tmp_path, "regions: [us-east-1]\n"))
    assert east["gpu_nodes"] == {"hosts": ["gpuval-run1-1", "gpuval-run1-2", "notebook"]}
    a10 = listed(inventory(cloud, tmp_path, f"instance_types: [{A10}]\n"))
    assert a10["gpu_nodes"] == {"hosts": ["notebook"]}
    one_run = listed(inventory(cloud, tmp_path, "name_prefix: gpuval-run1-\n"))
    assert one_run["gpu_nodes"] == {"hosts": ["gpuval-run1-1", "gpuval-run1-2"]}


def test_compose_and_keyed_groups(cloud: FakeLambdaCloud, tmp_path: Path) -> None:
    config = (
        "name_prefix: gpuval-\ncompose:\n  ansible_user: \"'ubuntu'\"\n"
        "keyed_groups:\n  - key: lambda_region\n    prefix: region\n"
    )
    document = listed(inventory(cloud, tmp_path, config))
    assert document["region_us_west_1"] == {"hosts": ["gpuval-run2-1"]}
    hostvars = document["_meta"]["hostvars"]  # type: ignore[index]
    assert hostvars["gpuval-run1-1"]["ansible_user"] == "ubuntu"


@pytest.mark.parametrize(
    "echoed",
    [False, True],  # echoed: `echo KEY | ansible-vault encrypt_string` vaults it with a newline
    ids=["as an argument", "echoed with its newline"],
)
def test_a_vaulted_key_in_the_config(cloud: FakeLambdaCloud, tmp_path: Path, echoed: bool) -> None:
    password = tmp_path / "vault-password"
    password.write_text("inventory-test-password\n")
    given = ["--stdin-name", "api_key"] if echoed else [KEY, "--name", "api_key"]
    vaulted = subprocess.run(
        [str(VENV_BIN / "ansible-vault"), "encrypt_string", "--vault-password-file",
         str(password), *given],
        input=KEY + "\n" if echoed else None, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    done = inventory(
        cloud, tmp_path, vaulted + "name_prefix: gpuval-run2-\n",
        "--vault-password-file", str(password), key=None,
    )  # fmt: skip
    assert listed(done)["gpu_nodes"] == {"hosts": ["gpuval-run2-1"]}
    assert KEY not in done.stdout + done.stderr


def test_a_wrong_key_fails_with_the_api_error(cloud: FakeLambdaCloud, tmp_path: Path) -> None:
    done = inventory(cloud, tmp_path, "", key="wrong-key-0000")
    assert "API key was invalid, expired, or deleted. (HTTP 401, global/invalid-api-key)" in (
        done.stderr
    )
    assert "wrong-key-0000" not in done.stdout + done.stderr


@pytest.mark.parametrize("spelled", [KEY + "\n", f" {KEY}\r\n"])
def test_a_key_with_surrounding_whitespace_works_and_is_never_shown(
    cloud: FakeLambdaCloud, tmp_path: Path, spelled: str
) -> None:
    done = inventory(cloud, tmp_path, "name_prefix: gpuval-run2-\n", key=spelled)
    assert listed(done)["gpu_nodes"] == {"hosts": ["gpuval-run2-1"]}
    assert KEY not in done.stdout + done.stderr


def test_a_key_with_a_control_character_is_refused_without_showing_it(
    cloud: FakeLambdaCloud, tmp_path: Path
) -> None:
    head, tail = KEY[:12], KEY[12:]
    done = inventory(cloud, tmp_path, "", key=f"{head}\x1b{tail}")
    assert "the API key has a control character (U+001B) at position 13" in done.stderr
    assert head not in done.stdout + done.stderr and tail not in done.stdout + done.stderr
