"""p2pBandwidthLatencyTest parser, on real published outputs (tests/data/outputs/p2p/)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from gpuval import parsers
from gpuval.parsers import p2p_bandwidth
from gpuval.records.base import ParseResult
from gpuval.records.p2p import MATRIX_KEYS, P2PRun
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs" / "p2p"
FILES = sorted(DATA.glob("*.txt"))


def parse_file(name: str) -> tuple[ParseResult, P2PRun]:
    result = p2p_bandwidth.parse((DATA / name).read_text(), source=name)
    assert len(result.runs) == 1
    return result, result.runs[0]


def warned_lines(result: ParseResult) -> set[int | None]:
    return {w.line for w in result.warnings}


def test_8xh100_sample_numbers_exactly_as_printed() -> None:
    result, run = parse_file("shared-8xH100-unidirectional-enabled-partial.txt")
    matrix = run.matrices["bandwidth_unidirectional_p2p_enabled"]
    assert run.num_gpus == 8
    assert list(run.matrices) == ["bandwidth_unidirectional_p2p_enabled"]
    assert matrix[0][1] == 364.13
    assert matrix[2][1] == 393.28
    assert matrix[7][7] == 2519.78
    assert run.complete is False
    assert result.warnings == [] and result.errors == []


def test_8xa100_sample_after_command_and_elision() -> None:
    result, run = parse_file("shared-8xA100-unidirectional-enabled-partial.txt")
    matrix = run.matrices["bandwidth_unidirectional_p2p_enabled"]
    assert matrix[0] == [1581.48, 274.55, 275.92, 272.02, 275.35, 275.28, 273.62, 273.20]
    assert matrix[3][3] == 1545.50
    assert result.warnings == []


@pytest.mark.parametrize("glue", ["", " "])
def test_touching_values_split_at_two_decimals(glue: str) -> None:
    text = (DATA / "shared-8xA100-unidirectional-enabled-partial.txt").read_text()
    squeezed = text.replace("1581.48 274.55", f"1581.48{glue}274.55").replace(" 1591.14", "1591.14")
    run = p2p_bandwidth.parse(squeezed).runs[0]
    matrix = run.matrices["bandwidth_unidirectional_p2p_enabled"]
    assert matrix[0][:2] == [1581.48, 274.55]
    assert matrix[7][6:] == [272.24, 1591.14]


def test_short_row_leaves_trailing_cells_empty_and_names_the_line() -> None:
    text = (
        "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n"
        "   D\\D     0      1      2\n"
        "     0 911.08  20.10  22.16\n"
        "     1  20.39\n"
        "     2  22.18  22.37 920.74\n"
    )
    result = p2p_bandwidth.parse(text)
    matrix = result.runs[0].matrices["bandwidth_unidirectional_p2p_disabled"]
    assert matrix == [[911.08, 20.10, 22.16], [20.39, None, None], [22.18, 22.37, 920.74]]
    assert warned_lines(result) == {4}


def test_p2p_reads_and_a_truncated_bidirectional_matrix() -> None:
    result, run = parse_file("nccl-814-6gpu-p2p-reads-truncated.txt")
    assert run.matrices["bandwidth_unidirectional_p2p_enabled_reads"][3][2] == 10.45
    assert run.matrices["bandwidth_unidirectional_p2p_enabled"][3][0] == 10.23
    partial = run.matrices["bandwidth_bidirectional_p2p_disabled"]
    # "29.85  3" ends the excerpt: the lone "3" is no value, the sixth cell never came.
    assert partial[0] == [918.31, 21.12, 30.53, 29.85, None, None]
    assert partial[1:] == [[None] * 6] * 5
    assert warned_lines(result) == {28}
    assert any("rows 1, 2, 3, 4, 5 missing" in w.message for w in result.warnings)


def test_tabs_and_trailing_spaces_and_mid_cell_truncation() -> None:
    result, run = parse_file("nccl-1264-8xH100-tabs-trailing-truncated.txt")
    assert run.connectivity == [[1] * 8] * 8
    assert run.matrices["bandwidth_unidirectional_p2p_disabled"][5][6] == 38.05
    enabled = run.matrices["bandwidth_unidirectional_p2p_enabled"]
    assert enabled[0][:7] == [2494.76, 371.02, 376.65, 376.60, 376.82, 375.59, 375.94]
    assert enabled[0][7] is None  # printed "375.6": cut by the excerpt, not a value
    assert any("375.6" in w.message for w in result.warnings)


def test_latency_gpu_and_cpu_blocks_under_line_number_prefixes() -> None:
    result, run = parse_file("cuda-samples-230-4gpu-latency-vim-line-numbers.txt")
    assert set(run.matrices) == {
        "latency_gpu_p2p_disabled",
        "latency_cpu_p2p_disabled",
        "latency_gpu_p2p_enabled",
        "latency_cpu_p2p_enabled",
    }
    assert run.matrices["latency_gpu_p2p_disabled"][0][1] == 14.95
    assert run.matrices["latency_cpu_p2p_disabled"][2][3] == 5.78
    assert run.matrices["latency_gpu_p2p_enabled"][3][2] == 2.23
    assert run.matrices["latency_cpu_p2p_enabled"][3][3] == 2.55
    assert result.warnings == []


def test_rows_before_any_title_are_reported_not_guessed() -> None:
    result, run = parse_file("distserve-3-8gpu-starts-mid-matrix-latency.txt")
    assert {1, 2, 3, 4, 5} <= warned_lines(result)
    assert "latency_gpu_p2p_disabled" in run.matrices
    cpu = run.matrices["latency_cpu_p2p_disabled"]
    assert cpu[4][5] == 9.56
    assert cpu[5:] == [[None] * 8] * 3


def test_device_list_peer_access_and_prompt_lines() -> None:
    _, run = parse_file("tinygrad-44-2x4090-prompt-trailing-spaces.txt")
    assert [(d.index, d.name, d.pci_bus_id) for d in run.devices] == [
        (0, "NVIDIA GeForce RTX 4090", "2"),
        (1, "NVIDIA GeForce RTX 4090", "17"),
    ]
    assert [(p.src, p.dst, p.ok) for p in run.can_access_peer] == [(0, 1, True), (1, 0, True)]
    assert run.connectivity == [[1, 1], [1, 1]]
    assert run.matrices["bandwidth_bidirectional_p2p_enabled"] == [[1016.92, 12.88], [12.88, None]]
    assert set(run.matrices) == {k for k in MATRIX_KEYS if k.startswith("bandwidth")}


def test_cannot_access_peer_on_consumer_cards() -> None:
    _, run = parse_file("aikitoria-5-7gpu-mixed-cannot-access-header.txt")
    assert run.num_gpus == 7
    assert run.devices[4].name == "NVIDIA RTX A6000"
    assert run.devices[5].pci_bus_id == "d"
    access = {(p.src, p.dst): p.ok for p in run.can_access_peer}
    assert access[(0, 1)] is True and access[(0, 2)] is False and access[(2, 3)] is True
    assert run.matrices == {}


def test_nine_gpus_and_a_short_last_row() -> None:
    result, run = parse_file("ik_llama-1022-9gpu-bidirectional-partial.txt")
    matrix = run.matrices["bandwidth_bidirectional_p2p_enabled"]
    assert run.num_gpus == 9
    assert matrix[7][7] == 1639.51
    assert matrix[8] == [111.40, 111.13, 111.15, 111.16, None, None, None, None, None]
    assert 20 in warned_lines(result)


COMPLETE_RUN = """[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]
Device: 0, NVIDIA GeForce RTX 3090, pciBusID: 1, pciDeviceID: 0, pciDomainID:0
Device: 1, NVIDIA GeForce RTX 3090, pciBusID: 2, pciDeviceID: 0, pciDomainID:0
Device=0 CANNOT Access Peer Device=1
Device=1 CANNOT Access Peer Device=0
P2P Connectivity Matrix
     D\\D     0     1
     0	     1     0
     1	     0     1
Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)
   D\\D     0      1
     0 836.73  11.03
     1  11.18 838.66
Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)
   D\\D     0      1
     0 837.41  11.04
     1  11.17 838.93
Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)
   D\\D     0      1
     0 842.35  15.12
     1  15.38 843.02
Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)
   D\\D     0      1
     0 842.79  15.21
     1  15.33 843.63
P2P=Disabled Latency Matrix (us)
   GPU     0      1
     0   1.53  13.24
     1  12.87   1.49

   CPU     0      1
     0   2.41   6.83
     1   6.71   2.39
P2P=Enabled Latency (P2P Writes) Matrix (us)
   GPU     0      1
     0   1.52  13.31
     1  12.90   1.50

   CPU     0      1
     0   2.44   6.80
     1   6.75   2.40

NOTE: The CUDA Samples are not meant for performance measurements. Results may vary when GPU \
Boost is enabled.
"""


def test_complete_run_has_every_matrix_key() -> None:
    result = p2p_bandwidth.parse(COMPLETE_RUN)
    run = result.runs[0]
    assert set(run.matrices) == set(MATRIX_KEYS)
    assert run.complete is True
    assert run.connectivity == [[1, 0], [0, 1]]
    assert run.matrices["latency_cpu_p2p_enabled"] == [[2.44, 6.80], [6.75, 2.40]]
    assert result.warnings == [] and result.errors == []


def test_two_runs_in_one_file_and_a_cuda_failure() -> None:
    failing = (
        "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n"
        "Device: 0, NVIDIA GeForce RTX 5090, pciBusID: 1, pciDeviceID: 0, pciDomainID:0\n"
        "CUDA error at p2pBandwidthLatencyTest.cu:318 code=205(cudaErrorMapBufferObjectFailed)\n"
    )
    result = p2p_bandwidth.parse(COMPLETE_RUN + failing)
    assert len(result.runs) == 2
    assert result.runs[0].complete and not result.runs[1].complete
    assert result.runs[1].failures == [failing.splitlines()[2]]
    assert [e.line for e in result.errors] == [COMPLETE_RUN.count("\n") + 3]


@pytest.mark.parametrize("text", ["", "\x00\xff garbage", "D\\D 0 1\n 0 1.00\n", "P2P=Enabled\n"])
def test_never_raises_and_says_what_it_could_not_read(text: str) -> None:
    result = p2p_bandwidth.parse(text)
    assert result.runs or result.errors
    validate(result.to_dict(), "parse-result")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_real_output_is_detected_and_validates(path: Path) -> None:
    text = path.read_text()
    assert p2p_bandwidth.detect(text) is not None
    validate(p2p_bandwidth.parse(text, source=str(path)).to_dict(), "parse-result")


def test_module_is_registered() -> None:
    assert "p2p_bandwidth" in parsers.PARSER_MODULES
    assert importlib.import_module("gpuval.parsers.p2p_bandwidth").TOOLS == (
        "p2pBandwidthLatencyTest",
    )


def test_peer_access_lines_alone_are_recognised() -> None:
    text = "Device=0 CANNOT Access Peer Device=1\nDevice=1 CANNOT Access Peer Device=0\n"
    assert p2p_bandwidth.detect(text) == ("p2pBandwidthLatencyTest", 80)
    run = p2p_bandwidth.parse(text).runs[0]
    assert [(p.src, p.dst, p.ok) for p in run.can_access_peer] == [(0, 1, False), (1, 0, False)]
