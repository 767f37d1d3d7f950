"""AMD topology (rocm-smi --showtopo, amd-smi topology text and JSON) on real published outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval.parsers import amd_topology, parse_file
from gpuval.records.base import ParseResult
from gpuval.records.topology import AmdTopologyRun
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs" / "amd-topology"
MI300X_BDFS = [
    "0000:0c:00.0", "0000:22:00.0", "0000:38:00.0", "0000:5c:00.0",
    "0000:9f:00.0", "0000:af:00.0", "0000:bf:00.0", "0000:df:00.0",
]  # fmt: skip


def parsed(name: str) -> tuple[ParseResult, AmdTopologyRun]:
    result = parse_file(DATA / name)
    assert result is not None
    validate(result.to_dict(), "parse-result")
    (run,) = result.runs
    return result, run


def off_diagonal(matrix: list[list[object]]) -> set[object]:
    return {cell for i, row in enumerate(matrix) for j, cell in enumerate(row) if i != j}


def test_rocm_smi_four_gpus_over_pcie() -> None:
    result, run = parsed("rocm-smi-rocm_smi_lib-108-4gpu-pcie.txt")
    assert result.tool == "rocm-smi-topo" and result.warnings == []
    assert (run.format, run.devices) == ("rocm-smi", ["GPU0", "GPU1", "GPU2", "GPU3"])
    assert run.link_types[0] == ["0", "PCIE", "PCIE", "PCIE"]
    assert off_diagonal(run.link_types) == {"PCIE"}
    assert off_diagonal(run.hops) == {3} and off_diagonal(run.weights) == {52}
    assert run.weights[2][2] == 0
    assert run.numa_node == {"GPU0": 0, "GPU1": 1, "GPU2": 3, "GPU3": 2}
    assert run.numa_affinity == run.numa_node
    assert run.access == [] and run.tables == {}


def test_rocm_smi_link_type_only_with_collapsed_whitespace() -> None:
    _, run = parsed("rocm-smi-rocm-1503-2xMI100-link-type-collapsed.txt")
    assert run.devices == ["GPU0", "GPU1"]
    assert run.link_types == [["0", "PCIE"], ["PCIE", "0"]]
    assert run.hops == [] and run.weights == []


def test_amd_smi_eight_mi300x_over_xgmi() -> None:
    result, run = parsed("amd-smi-changelog-8xMI300X-bdf-tables.txt")
    assert result.tool == "amd-smi-topo" and result.warnings == []
    assert (run.format, run.devices) == ("amd-smi", MI300X_BDFS)
    assert [run.link_types[i][i] for i in range(8)] == ["SELF"] * 8
    assert off_diagonal(run.link_types) == {"XGMI"}
    assert off_diagonal(run.hops) == {1} and off_diagonal(run.weights) == {15}
    assert {cell for row in run.access for cell in row} == {"ENABLED"}
    assert run.bandwidth[0][0] is None and off_diagonal(run.bandwidth) == {"50000-50000"}


def test_amd_smi_capability_tables_and_legend() -> None:
    result, run = parsed("amd-smi-changelog-8xMI300X-cndz-legend.txt")
    assert result.warnings == [] and run.devices == MI300X_BDFS
    assert list(run.tables) == ["CACHE COHERANCY", "ATOMICS", "DMA", "BI-DIRECTIONAL"]
    assert run.tables["CACHE COHERANCY"][0][:3] == ["SELF", "C", "NC"]
    assert run.tables["ATOMICS"][0][6] is None  # N/A
    assert run.tables["ATOMICS"][0][1] == "64,32"
    assert run.tables["DMA"][7][:2] == ["T", "T"]
    assert run.link_types == []


def test_amd_smi_json_first_format() -> None:
    result, run = parsed("amd-smi-changelog-json-previous-format.json")
    assert result.tool == "amd-smi-topo" and run.format == "amd-smi-json"
    assert run.devices == ["gpu_0", "gpu_1"]
    assert run.access == [["ENABLED", "DISABLED"], ["DISABLED", "ENABLED"]]
    assert run.weights == [[0, 40], [40, 0]] and run.hops == [[0, 2], [2, 0]]
    assert run.link_types == [["SELF", "PCIE"], ["PCIE", "SELF"]]
    assert run.bandwidth == [[None, None], [None, None]]


def test_amd_smi_json_links_format() -> None:
    _, run = parsed("amd-smi-changelog-json-access-link-type.json")
    assert run.devices == ["0000:08:00.0", "0000:44:00.0"]
    assert run.access == [["ENABLED", "DISABLED"], ["DISABLED", "ENABLED"]]
    assert run.link_types == [["SELF", "PCIE"], ["PCIE", "SELF"]]
    assert run.hops == [] and run.weights == []


def test_cut_table_keeps_what_it_printed_and_names_the_short_row() -> None:
    result, run = parsed("amd-smi-rocm-systems-5763-MI250X-hops-excerpt.txt")
    assert run.hops[0] == [0, 1, 1, 1, 1, 1, 1, 1]
    assert run.hops[1] == [None] * 8
    assert [(w.line, w.message) for w in result.warnings] == [
        (4, "HOPS: row 0000:c6:00.0 has 0 cells for 8 columns; missing cells unknown")
    ]


def test_rocm_smi_error_lines_and_na_cells() -> None:
    # The shape rocm_smi.py prints when a weight cannot be read: an error line, then N/A.
    text = (
        "=========================== Weight between two GPUs ============================\n"
        "GPU[1]\t\t: Cannot read Link Weight: Not supported on this machine\n"
        "       GPU0         GPU1\n"
        "GPU0   0            N/A\n"
        "GPU1   N/A          0\n"
    )
    result = amd_topology.parse(text, source="t.txt")
    (run,) = result.runs
    assert run.weights == [[0, None], [None, 0]]
    assert [(w.line, w.message) for w in result.warnings] == [
        (2, "Cannot read Link Weight: Not supported on this machine")
    ]


@pytest.mark.parametrize("text", ["", "no table here\n", "[1, 2]", '[{"link_type": '])
def test_unreadable_input_is_an_error_not_an_exception(text: str) -> None:
    result = amd_topology.parse(text, source="t.txt", tool="amd-smi-topo")
    assert result.runs == [] and result.errors
