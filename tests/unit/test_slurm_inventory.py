"""The slurm inventory plugin (plugins/inventory), through ansible-inventory with the
repository's ansible.cfg, against the stand-in scontrol playing the recorded Slurm 22.05
(text form) and the published Slurm 25.11 JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests import fake_scontrol

REPO = Path(__file__).parents[2]
OUTPUTS = REPO / "tests" / "data" / "slurm"


def ansible_inventory(
    tmp_path: Path, config: str, json_file: str | None = None
) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "cluster.slurm.yml"
    source.write_text(f"plugin: slurm\n{config}")
    environment = fake_scontrol.install(tmp_path, OUTPUTS, json_file)
    environment |= {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(source), "--list"],
        cwd=REPO, env=environment, capture_output=True, text=True, check=False,
    )  # fmt: skip


def listed(tmp_path: Path, config: str, json_file: str | None = None) -> dict[str, object]:
    done = ansible_inventory(tmp_path, config, json_file)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout, object_hook=_trusted)
    assert isinstance(document, dict)
    return document


def _trusted(value: object) -> object:
    """ansible-inventory marks plugin strings unsafe ({"__ansible_unsafe": text}); unwrapped."""
    if isinstance(value, dict) and set(value) == {"__ansible_unsafe"}:
        return value["__ansible_unsafe"]
    return value


def test_the_idle_node_of_the_partition_with_its_address_and_gpus(tmp_path: Path) -> None:
    document = listed(tmp_path, "partition: gpu\n")
    assert document["gpu_nodes"] == {"hosts": ["gpu1"]}
    variables = document["_meta"]["hostvars"]["gpu1"]  # type: ignore[index]
    assert variables["ansible_host"] == "127.0.0.1"
    assert variables["gpuval_slurm_node"] == "gpu1"
    assert variables["gpuval_gpus_per_node"] == 8
    assert variables["slurm_features"] == ["h100", "ib"]


def test_include_unavailable_keeps_drained_and_down_nodes(tmp_path: Path) -> None:
    document = listed(tmp_path, "partition: gpu\ninclude_unavailable: true\n")
    assert document["gpu_nodes"] == {"hosts": ["gpu1", "gpu2", "gpu3", "gpu4"]}
    variables = document["_meta"]["hostvars"]["gpu3"]  # type: ignore[index]
    assert (variables["slurm_state"], variables["slurm_reason"]) == (
        "DOWN+NOT_RESPONDING", "PSU failure"
    )  # fmt: skip


def test_the_kept_nodes_take_compose_and_keyed_groups_and_the_left_out_ones_are_said(
    tmp_path: Path,
) -> None:
    config = (
        "partition: gpu\ncompose:\n  ansible_user: \"'ubuntu'\"\n"
        "keyed_groups:\n  - key: slurm_features\n    prefix: feature\n"
    )
    done = ansible_inventory(tmp_path, config)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout, object_hook=_trusted)
    assert document["_meta"]["hostvars"]["gpu1"]["ansible_user"] == "ubuntu"
    assert document["feature_h100"] == {"hosts": ["gpu1"]}
    said = " ".join(done.stderr.split())
    assert (
        "slurm inventory: gpu3 left out, DOWN+NOT_RESPONDING (PSU failure); "
        "include_unavailable: true keeps it"
    ) in said


def test_a_partition_with_none_of_them_lists_none(tmp_path: Path) -> None:
    document = listed(tmp_path, "partition: debug\ninclude_unavailable: true\n")
    assert "hosts" not in document.get("gpu_nodes", {})


def test_the_reservation_names_its_nodes(tmp_path: Path) -> None:
    listed(tmp_path, "reservation: acceptance\n")
    shown = [c for c in fake_scontrol.calls(tmp_path) if "show" in c]
    assert ["--oneliner", "show", "reservation", "acceptance"] in shown
    assert ["--oneliner", "show", "nodes", "gpu1"] in shown


def test_json_of_newer_slurm(tmp_path: Path) -> None:
    document = listed(tmp_path, "include_unavailable: true\n", "scontrol-show-nodes-25.11.json")
    variables = document["_meta"]["hostvars"]["compute-0"]  # type: ignore[index]
    assert (variables["ansible_host"], variables["slurm_state"]) == (
        "10.216.61.171", "DOWN+DYNAMIC_NORM"
    )  # fmt: skip


def test_bad_output_is_one_message_naming_the_command_and_key(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"nodes": [{"state": ["IDLE"]}]}')
    done = ansible_inventory(tmp_path, "", str(broken))
    said = " ".join(done.stderr.split())
    assert "`scontrol show nodes --json`: no key 'nodes[0].name'" in said
    assert "Traceback" not in done.stderr
