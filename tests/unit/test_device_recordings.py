"""Outputs recorded on a lent H100 (tests/data/device/*): every file its manifest gives a tool is
detected as that tool, parses without a problem and validates; numbers read off the files are
checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuval import parsers
from gpuval.records.base import ParseResult
from gpuval.schemas.validation import validate

DEVICE = Path(__file__).resolve().parents[1] / "data" / "device"
ENTRIES = [
    (folder, entry)
    for folder in sorted(p.parent for p in DEVICE.glob("*/manifest.json"))
    for entry in json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
]
H100 = DEVICE / "h100-x1-2026-11-22"


def parsed(name: str) -> ParseResult:
    result = parsers.parse_file(H100 / name)
    assert result is not None
    return result


def run_of(name: str) -> Any:
    (run,) = parsed(name).runs
    return run


@pytest.mark.parametrize(
    ("folder", "entry"),
    [item for item in ENTRIES if item[1]["tool"] is not None],
    ids=lambda item: item["file"] if isinstance(item, dict) else item.name,
)
def test_detected_parsed_without_problems_and_valid(folder: Path, entry: dict[str, Any]) -> None:
    path = folder / entry["file"]
    assert parsers.detect(parsers.read_text(path)) == entry["tool"]
    result = parsers.parse_file(path)
    assert result is not None and result.tool == entry["tool"]
    assert result.errors == [] and result.warnings == []
    assert result.runs
    validate(result.to_dict(), "parse-result")


def test_the_manifest_names_every_file_and_tools_gpuval_knows() -> None:
    known = set(parsers.known_tools())
    for folder in {folder for folder, _ in ENTRIES}:
        names = {entry["file"] for f, entry in ENTRIES if f == folder}
        files = {p.name for p in folder.iterdir()} - {"manifest.json", "README.md"}
        assert names == files
    assert {entry["tool"] for _, entry in ENTRIES} - {None} <= known


def test_nvbandwidth_host_device_copies() -> None:
    # Two separate runs: the text one printed 55.27 / 55.20, the -j one 55.07 / 55.15 GB/s.
    expected = {"nvbandwidth-v0.8.txt": (55.27, 55.20),
                "nvbandwidth-v0.8-j.json": (55.065448200000006, 55.148881233000004)}  # fmt: skip
    for name, (to_device, to_host) in expected.items():
        run = run_of(name)
        sums = {t.name: t.matrices[0].sum for t in run.tests if t.status == "passed"}
        assert sums["host_to_device_memcpy_ce"] == to_device
        assert sums["device_to_host_memcpy_ce"] == to_host
        assert run.driver_version == "580.159.04"


def test_nccl_tests_versions_and_ranks() -> None:
    run = run_of("nccl-tests-2.19.6-all_reduce-g1-8G.txt")
    assert run.nccl_tests_version == "2.19.6" and run.nccl_version == "2.28.9"
    assert run.header["nccl_headers"] == 22809 and run.nranks == 1
    assert run.rows[-1].size_bytes == 8589934592 and run.rows[-1].out_of_place.busbw_gbps == 0.0
    assert run.complete and run.avg_busbw_gbps == 0.0
    for collective in ("all_gather", "alltoall", "broadcast", "reduce_scatter", "sendrecv"):
        other = run_of(f"nccl-tests-2.18.3-{collective}-g1-debug.txt")
        assert other.collective == collective and other.nranks == 1
        assert other.nccl_tests_version == "2.18.3" and other.complete


def test_nccl_tests_one_gpu_asked_for_two_fails_without_a_table() -> None:
    run = run_of("nccl-tests-2.18.3-all_reduce-g2-one-gpu-fails.txt")
    assert run.rows == [] and not run.complete
    messages = [failure.message for failure in run.failures]
    assert "Invalid number of GPUs: 2 requested but only 1 were found." in messages
    assert any(failure.trace == ["common.cu:1218"] for failure in run.failures)


def test_inventory_forms_agree() -> None:
    table = run_of("nvidia-smi.txt").gpus[0]
    csv = run_of("nvidia-smi-query-gpu.csv").gpus[0]
    assert table.name == csv.name == "NVIDIA H100 80GB HBM3"
    assert table.pci_bus_id == csv.pci_bus_id == "00000000:00:06.0"
    assert csv.pcie is not None and (csv.pcie.gen_current, csv.pcie.width_current) == (5, 16)
    topology = run_of("nvidia-smi-topo-m.txt")  # its header is underlined with escape codes
    assert (topology.devices, topology.links) == (["GPU0"], [["X"]])
    assert topology.cpu_affinity == {"GPU0": "0-15"}
    assert run_of("nvidia-smi-topo-p2p-r.txt").matrix == "p2p-capability"
    p2p = run_of("p2pBandwidthLatencyTest-cuda-samples-13.0.txt")
    assert p2p.num_gpus == 1 and p2p.complete


def test_software_versions() -> None:
    assert run_of("nvcc-version.txt").version == "13.0.88"
    os_release = run_of("os-release.txt")
    assert os_release.version == "24.04"


def test_files_without_a_tool_are_not_claimed() -> None:
    for _, entry in ENTRIES:
        if entry["tool"] is None and entry["file"] != "nvidia-smi-nvlink-s.txt":
            assert parsers.detect(parsers.read_text(H100 / entry["file"])) is None
