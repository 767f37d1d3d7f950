"""`nvidia-smi topo -m` / `topo -p2p` parser, on real published outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval.parsers import nvidia_smi_topo
from gpuval.records.base import ParseResult
from gpuval.records.topology import TopologyRun
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs" / "nvidia-smi"
FILES = sorted(DATA.glob("*topo*.txt"))


def parse_file(name: str) -> tuple[ParseResult, TopologyRun]:
    result = nvidia_smi_topo.parse((DATA / name).read_text(), source=name)
    assert len(result.runs) == 1
    return result, result.runs[0]


def test_lambda_collapsed_whitespace_with_nic_and_legends() -> None:
    result, run = parse_file("shared-topo-lambda-4xH100-topo-m.txt")
    assert run.devices == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0"]
    assert run.links[0][1] == "NV18"
    assert run.links[4][0] == "PHB"
    assert run.links[4] == ["PHB", "PHB", "PHB", "PHB", "X"]
    assert run.nic_legend == {"NIC0": "mlx5_0"}
    assert run.cpu_affinity["GPU0"] == "0-103"
    assert run.numa_affinity["GPU3"] == "0"
    assert run.gpu_numa_id == {"GPU0": None, "GPU1": None, "GPU2": None, "GPU3": None}
    assert "NIC0" not in run.cpu_affinity  # NIC rows print no affinity
    assert run.legend["NV#"] == "Connection traversing a bonded set of # NVLinks"
    assert run.matrix == "topology"
    assert result.warnings == []


def test_dgx_a100_spaces_and_numa_split() -> None:
    result, run = parse_file("shared-topo-dgx-8xA100-topo-m.txt")
    assert run.columns == ["CPU Affinity", "NUMA Affinity"]
    assert all(run.links[i][j] == ("X" if i == j else "NV12") for i in range(8) for j in range(8))
    assert run.cpu_affinity["GPU4"] == "24-47"
    assert run.numa_affinity["GPU4"] == "1"
    assert run.gpu_numa_id == {}
    assert result.warnings == []


@pytest.mark.parametrize(
    ("name", "link"),
    [
        ("shared-topo-dual-gpu-nvlink-NV2-topo-m.txt", "NV2"),
        ("shared-topo-dual-gpu-pcie-PHB-topo-m.txt", "PHB"),
    ],
)
def test_dual_gpu_numa_not_available(name: str, link: str) -> None:
    _, run = parse_file(name)
    assert run.links == [["X", link], [link, "X"]]
    assert run.numa_affinity == {"GPU0": None, "GPU1": None}


def test_raw_tabs_double_tab_before_gpu_numa_id_and_short_nic_rows() -> None:
    result, run = parse_file("topo-nccl-1453-8xH100-tabs-short-nic-rows.txt")
    assert len(run.devices) == 17 and run.devices[8] == "NIC0"
    assert run.links[0][16] == "PIX"
    assert run.links[7][9] == "PIX"
    assert run.links[9][7] == "PIX"  # NIC1 row, no affinity columns after it
    assert run.cpu_affinity["GPU4"] == "80-159"
    assert run.numa_affinity["GPU4"] == "1"
    assert run.gpu_numa_id["GPU7"] is None
    # NIC6..NIC8 rows are not in the published excerpt: empty, with a warning.
    assert run.links[14:] == [[None] * 17] * 3
    assert any("NIC6, NIC7, NIC8 missing" in w.message for w in result.warnings)


def test_truncated_row_keeps_cells_in_their_columns() -> None:
    result, run = parse_file("topo-nccl-933-8gpu-9nic-spaces-truncated.txt")
    assert run.cpu_affinity["GPU4"] == "48-95,144-191"
    assert run.links[0][10] == "PIX"
    assert run.links[7] == ["NV8"] * 4 + [None] * 13
    assert "GPU7" not in run.cpu_affinity
    assert 9 in {w.line for w in result.warnings}


def test_old_driver_mlx_names_and_only_cpu_affinity() -> None:
    _, run = parse_file("topo-kubernetes-53497-mlx4-old-trailing-spaces.txt")
    assert run.devices[-1] == "mlx4_0"
    assert run.columns == ["CPU Affinity"]
    assert run.links[1][:2] == ["PIX", "X"]
    assert run.links[4][8] == "SYS"
    assert run.cpu_affinity["GPU0"] == "0-9,20-29"
    assert run.cpu_affinity["GPU4"] == "10-19,30-39"


def test_sixteen_gpus_with_ten_mlx5_columns() -> None:
    _, run = parse_file("topo-nccl-tests-78-16gpu-mlx5-rows-truncated.txt")
    assert run.devices[15:17] == ["GPU15", "mlx5_0"]
    assert run.links[2][16:18] == ["PXB", "PIX"]
    assert run.cpu_affinity["GPU3"] == "0-23,48-71"


def test_old_soc_cell_and_nic_rows_named_like_mlx() -> None:
    text = (
        "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
        "GPU0\t X \tSOC\tPHB\t0-11\n"
        "GPU1\tSOC\t X \tSOC\t12-23\n"
        "mlx5_0\tPHB\tSOC\t X \n"
    )
    result = nvidia_smi_topo.parse(text)
    run = result.runs[0]
    assert run.links == [["X", "SOC", "PHB"], ["SOC", "X", "SOC"], ["PHB", "SOC", "X"]]
    assert run.cpu_affinity == {"GPU0": "0-11", "GPU1": "12-23"}
    assert result.warnings == []


def test_p2p_capability_matrix() -> None:
    _, run = parse_file("topo-p2p-club-3090-1229-2x5090-GNS.txt")
    assert run.matrix == "p2p-capability"
    assert run.links == [["X", "GNS"], ["GNS", "X"]]
    assert run.legend["GNS"] == "GPU not supported"


def test_nic_rows_short_of_link_cells_get_empty_cells() -> None:
    _, run = parse_file("topo-go-gpuallocator-17-8x4090-tabs.txt")
    assert run.links[8] == ["SYS"] * 6 + ["PHB", "SYS", "X", "PIX"]
    assert run.cpu_affinity["GPU6"] == "56-111,168-223"


@pytest.mark.parametrize("text", ["", "GPU0\n", "\tGPU0\tGPU1\n", "Legend:\n  X = Self\n"])
def test_never_raises(text: str) -> None:
    result = nvidia_smi_topo.parse(text)
    validate(result.to_dict(), "parse-result")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_real_output_is_detected_and_validates(path: Path) -> None:
    text = path.read_text()
    assert nvidia_smi_topo.detect(text) == ("nvidia-smi-topo", 85)
    validate(nvidia_smi_topo.parse(text, source=str(path)).to_dict(), "parse-result")
