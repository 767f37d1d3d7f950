"""Every real output in the repository goes through tool detection and the CLI, and validates.

The per-tool tests check numbers; this one checks the registry as a whole: that no parser's
detector steals another tool's output, and that `gpuval parse` accepts every collected file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuval import cli, parsers
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data"

# Which tools each collection folder may hold; nvidia-smi files are told apart by name prefix.
FOLDER_TOOLS = {
    "nccl-tests": {"nccl-tests", "rccl-tests"},
    "amd-topology": {"rocm-smi-topo", "amd-smi-topo"},
    "p2p": {"p2pBandwidthLatencyTest"},
    "all_reduce_bench": {"all_reduce_bench"},
    "nvbandwidth": {"nvbandwidth"},
    "infiniband": {"ibstat", "ibv_devinfo"},
    "iperf3": {"iperf3"},
    "software-versions": {
        "nvcc-version",
        "mpirun-version",
        "nccl-version",
        "os-release",
        "ofed-info",
    },
    "sysfs-net": {"sysfs-net"},
    "kernel-log": {"kernel-log"},
    "sysfs-infiniband": {"sysfs-infiniband"},
    "lspci": {"lspci"},
    "sysfs-pci": {"sysfs-pci"},
    "kernel-modules": {"kernel-modules"},
    "dcgmi-diag": {"dcgmi-diag"},
    "ib_write_bw": {"ib_write_bw"},
    "nvidia-imex": {"nvidia-imex-ctl"},
}
NVIDIA_SMI_PREFIXES = {
    "topo": "nvidia-smi-topo",
    "shared-topo": "nvidia-smi-topo",
    "csv": "nvidia-smi-csv",
    "q-": "nvidia-smi-q",
    "xml": "nvidia-smi-xml",
    "nvlink": "nvidia-smi-nvlink",
    "nvlink-errors": "nvidia-smi-nvlink-errors",
    "nvidia-smi": "nvidia-smi",
    "shared-lambda": "nvidia-smi",
}
SAMPLE_RUN_TOOLS = {
    "nccl-all_reduce": {"nccl-tests"},
    "nvidia-smi-topo": {"nvidia-smi-topo"},
    "nvidia-smi": {"nvidia-smi"},
    "p2pBandwidthLatencyTest": {"p2pBandwidthLatencyTest"},
    "all_reduce_bench": {"all_reduce_bench"},
}


def expected_tools(path: Path) -> set[str]:
    folder = path.parent.name
    if folder == "nvidia-smi":
        prefix = max((p for p in NVIDIA_SMI_PREFIXES if path.name.startswith(p)), key=len)
        return {NVIDIA_SMI_PREFIXES[prefix]}
    if path.parent.parent.name == "raw":
        return SAMPLE_RUN_TOOLS[path.stem]
    return FOLDER_TOOLS[folder]


OUTPUTS = sorted(
    p for p in (DATA / "outputs").glob("*/*") if p.name != "README.md" and p.is_file()
) + sorted((DATA / "sample-run" / "raw").glob("*/*.txt"))


def test_every_tool_has_collected_outputs() -> None:
    covered = set().union(*(expected_tools(p) for p in OUTPUTS))
    ours = {"gpuval-allreduce-bench", "mpi-preflight", "gpuval-gemm-burn"}  # no published outputs
    assert covered >= set(parsers.known_tools()) - ours


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detected_as_its_tool_and_parsed_by_the_cli(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert parsers.detect(parsers.read_text(path)) in expected_tools(path)
    assert cli.main(["parse", str(path), "--indent", "0"]) == 0
    document = json.loads(capsys.readouterr().out)
    validate(document, "parse-result")
    assert document["tool"] in expected_tools(path)
    assert document["source"] == str(path)
