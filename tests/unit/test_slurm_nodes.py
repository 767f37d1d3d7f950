"""gpuval.slurm.nodes on Slurm's own outputs: the four nodes recorded from Slurm 22.05 here read
the same from every form (README of tests/data/slurm/ says what was set before
recording), and the published 23.02 and 25.11 JSON shapes read too."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval.slurm.nodes import (
    SlurmNode,
    SlurmOutputError,
    expand_hostlist,
    gres_gpus,
    parse_nodes,
)

OUTPUTS = Path(__file__).parents[1] / "data" / "slurm"
SINFO_GPU1 = (OUTPUTS / "sinfo-N-json-23.02.json").read_text()
RECORDED_22_05 = [
    "scontrol-show-nodes-oneliner-22.05.txt",
    "scontrol-show-nodes-22.05.txt",
    "sinfo-22.05.json",
]
# As set up before recording: gpu1 the one slurmd, gpu2 drained by a person, gpu3 down,
# gpu4 drained by gpuval; every node Gres=gpu:8 Feature=h100,ib in partition gpu.
EXPECTED_22_05 = [
    SlurmNode("gpu1", "127.0.0.1", "vm", ("IDLE",), 8, ("h100", "ib"), ("gpu",), ""),
    SlurmNode("gpu2", "10.0.0.2", "gpu2", ("UNKNOWN", "DRAIN", "NOT_RESPONDING"), 8,
              ("h100", "ib"), ("gpu",), "disk replacement, ticket 4711"),
    SlurmNode("gpu3", "10.0.0.3", "gpu3", ("DOWN", "NOT_RESPONDING"), 8, ("h100", "ib"),
              ("gpu",), "PSU failure"),
    SlurmNode("gpu4", "10.0.0.4", "gpu4", ("UNKNOWN", "DRAIN", "NOT_RESPONDING"), 8,
              ("h100", "ib"), ("gpu",),
              "gpuval: nccl-tests.all_reduce.busbw: 310 GB/s < 360 GB/s"),
]  # fmt: skip


def read(name: str) -> list[SlurmNode]:
    return parse_nodes((OUTPUTS / name).read_text(encoding="utf-8"), name)


@pytest.mark.parametrize("name", RECORDED_22_05)
def test_every_22_05_form_reads_the_same_nodes(name: str) -> None:
    assert read(name) == EXPECTED_22_05


@pytest.mark.parametrize("node", ["gpu1", "gpu2", "gpu3", "gpu4"])
def test_one_node_text_reads_that_node(node: str) -> None:
    expected = next(n for n in EXPECTED_22_05 if n.name == node)
    assert read(f"scontrol-show-node-{node}-22.05.txt") == [expected]


def test_only_the_idle_node_is_available() -> None:
    assert [n.name for n in EXPECTED_22_05 if n.available] == ["gpu1"]


def test_25_11_state_and_features_as_lists() -> None:
    (node,) = read("scontrol-show-nodes-25.11.json")
    assert node == SlurmNode(
        "compute-0", "10.216.61.171", "juju-cd456c-2", ("DOWN", "DYNAMIC_NORM"), 0,
        ("compute",), ("compute",), "Not responding",
    )  # fmt: skip
    assert not node.available


def test_23_02_sinfo_entries() -> None:
    (node,) = read("sinfo-N-json-23.02.json")
    assert node == SlurmNode(
        "localhost", "localhost", "localhost", ("ALLOCATED",), 0, (), ("debug",), ""
    )
    assert node.available


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [
        ("gpu:8", 8),
        ("gpu:4(S:0-1)", 4),  # sinfo --json, https://github.com/CLIP-HPC/SlurmCommander/issues/5
        ("gpu:(null):4(IDX:0-3)", 4),  # gres_used, the same issue
        ("gpu:a100:4,gpu:t4:2", 6),
        ("gpu:h100:8(S:0,1)", 8),
        ("tmp:844G", 0),  # https://github.com/vpenso/prometheus-slurm-exporter/issues/38
        ("", 0),
        ("(null)", 0),
    ],
)
def test_gres_gpu_count(gres: str, gpus: int) -> None:
    assert gres_gpus(gres) == gpus


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"nodes": [', "scontrol show nodes --json: not JSON"),
        ('{"nodes": [{"state": ["IDLE"]}]}', "no key 'nodes[0].name'"),
        ('{"nodes": [{"name": "a"}]}', "no key 'nodes[0].state'"),
        ('{"nodes": [{"name": "a", "state": 3}]}', "'nodes[0].state' is neither"),
        ('{"meta": {}}', "no key 'nodes' (nor 'sinfo')"),
        ('{"sinfo": [{"nodes": {}}]}', "no key 'sinfo[0].nodes.nodes'"),
        ('{"sinfo": [3]}', "key 'sinfo[0]' is not an object"),
        (SINFO_GPU1.replace('"gres": {', '"gres": "gpu:8", "x": {'), "'sinfo[0].gres' is not an"),
        (SINFO_GPU1.replace('"partition": {', '"partition": 3, "x": {'),
         "'sinfo[0].partition' is not an object"),
        (SINFO_GPU1.replace('"hostnames": [', '"hostnames": [3'),
         "'sinfo[0].nodes.hostnames' is not a list of strings"),
        ('{"errors": [{"error": "Unable to contact slurm controller"}], "nodes": []}',
         "Slurm reports an error"),
        ("NodeName=gpu1 Arch=x86_64\n", "node 1 has no State= field"),
    ],
)  # fmt: skip
def test_bad_output_names_the_command_and_key(text: str, said: str) -> None:
    with pytest.raises(SlurmOutputError) as raised:
        parse_nodes(text, "scontrol show nodes --json")
    assert said in str(raised.value)


@pytest.mark.parametrize(
    "name",
    [
        "scontrol-show-node-gpu1-drained-by-gpuval-oneliner-22.05.txt",
        "sinfo-n-gpu1-drained-by-gpuval-22.05.json",
    ],
)
def test_a_responding_node_gpuval_drained(name: str) -> None:
    gpu1 = next(node for node in read(name) if node.name == "gpu1")
    assert gpu1.states == ("IDLE", "DRAIN", "RESERVED")
    assert gpu1.reason.startswith("gpuval: nccl-tests.all_reduce.complete (+1 more): ")
    assert not gpu1.available


@pytest.mark.parametrize(
    ("hostlist", "names"),
    [
        ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
        ("gpu[1-2],cpu1", ["gpu1", "gpu2", "cpu1"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("gpu4", ["gpu4"]),
    ],
)
def test_hostlist_expansion(hostlist: str, names: list[str]) -> None:
    assert expand_hostlist(hostlist) == names


@pytest.mark.parametrize("hostlist", ["gpu[1-2", "gpu[a-b]", "gpu]1["])
def test_a_bad_hostlist_is_refused(hostlist: str) -> None:
    with pytest.raises(SlurmOutputError):
        expand_hostlist(hostlist)
