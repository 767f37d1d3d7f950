"""The HCA ports each host's NCCL lists in `NET/IB : Using` (gpuval.parsers.nccl_debug), read
from published NCCL_DEBUG=INFO lines, byte for byte, each with its source:

- NCCL 2.4.7, one HCA, ` ; OOB` with no `[RO]`, next to a NET/Socket list of interfaces:
  https://github.com/Mellanox/nv_peer_memory/issues/56
- NCCL 2.6.2 under an MPI rank tag (`[56] host:pid:tid`), IB and RoCE ports mixed:
  https://github.com/NVIDIA/nccl/issues/302
- NCCL 2.19.3, two hosts, RoCE, `[RO]`: https://github.com/NVIDIA/nccl-tests/issues/185
- NCCL 2.22.3 with the IBext_v8 plugin, eight RoCE ports: https://github.com/NVIDIA/nccl/issues/1538
- the sharp plugin's `/IB/SHARP`: https://github.com/NVIDIA/nccl/issues/1357 and the h100-4 line
  of tests/data/outputs/nccl-tests/nccl-tests-issue294-h100-failure-amid-nccl-info.txt
- RCCL, ports in the order NCCL found them: https://github.com/ROCm/rccl/issues/419
- a host with no port (`Using [RO]; OOB`): tests/data/device recordings (one H100 VM)

CONSTRUCTED, where nothing published shows it: NCCL's current `:rail`, `:plane` and `_dma`
forms, from the format in ncclIbInitDevices of https://github.com/NVIDIA/nccl
src/transport/net_ib/init.cc (commit 0260b134749018b24cc0aeedf0b820f9b78817cc).
"""

from __future__ import annotations

from pathlib import Path

from gpuval.parsers import nccl_debug, nccl_tests
from gpuval.records.nccl import NcclRun

OUTPUTS = Path(__file__).resolve().parents[1] / "data" / "outputs" / "nccl-tests"
CORPUS = Path(__file__).resolve().parents[1] / "data" / "verdicts"

NCCL_2_4 = [
    "master_node:20:289 [0] NCCL INFO NET/Socket : Using [0]ib0:192.168.11.1<0>",
    "master_node:20:289 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:192.168.11.1<0>",
]
NCCL_2_6_RANK_TAG = (
    "[56] crow-ib-new-nccl-262-b-7:7240:7240 [0] NCCL INFO NET/IB : Using [0]mlx5_3:1/IB "
    "[1]mlx5_0:1/IB [2]mlx5_2:1/RoCE [3]mlx5_4:1/IB ; OOB eth0:10.100.72.18<0>"
)
NCCL_2_19_TWO_HOSTS = [
    "dgxh100-4:460770:460842 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE "
    "[RO]; OOB enp220s0np0:11.1.128.136<0>",
    "dgxh100-3:2152176:2152299 [0] NCCL INFO NET/IB : Using [0]mlx5_10:1/RoCE [1]mlx5_11:1/RoCE "
    "[RO]; OOB enp220s0np0:11.1.128.128<0>",
]
NCCL_2_22_IBEXT = (
    "job-3bb823c0-6d27-4312-8094-1c5910bf9b51-worker-0:5664:5734 [1] NCCL INFO NET/IB : Using "
    "[0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [2]mlx5_2:1/RoCE [3]mlx5_3:1/RoCE [4]mlx5_4:1/RoCE "
    "[5]mlx5_5:1/RoCE [6]mlx5_6:1/RoCE [7]mlx5_7:1/RoCE [RO]; OOB eth0:172.24.180.73<0>"
)
SHARP = (
    "qh100-gpu19:49357:49418 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP "
    "[1]mlx5_1:1/IB/SHARP [2]mlx5_4:1/IB/SHARP [3]mlx5_5:1/IB/SHARP [RO]; "
    "OOB ibp25s0:10.20.0.119<0>"
)
RCCL = (
    "e05r3n09:929:929 [2] NCCL INFO NET/IB : Using [0]mlx5_3:1/IB [1]mlx5_2:1/IB [2]mlx5_1:1/IB "
    "[3]mlx5_0:1/IB ; OOB ib0:11.5.5.50<0>"
)
NO_PORT = "vm:2491:2491 [0] NCCL INFO NET/IB : Using [RO]; OOB eth0:192.0.2.2<0>"


def hcas(*lines: str) -> dict[str, list[str]]:
    facts = nccl_debug.DebugFacts()
    for number, line in enumerate(lines, start=1):
        nccl_debug.feed(facts, line, number)
    nccl_debug.digest(facts)
    return facts.hcas_by_host


def test_nccl_2_4_list_without_ro_and_socket_list_not_read() -> None:
    assert hcas(*NCCL_2_4) == {"master_node": ["mlx5_0:1"]}


def test_rank_tag_before_the_host_and_mixed_link_layers() -> None:
    assert hcas(NCCL_2_6_RANK_TAG) == {
        "crow-ib-new-nccl-262-b-7": ["mlx5_3:1", "mlx5_0:1", "mlx5_2:1", "mlx5_4:1"]
    }


def test_each_host_its_own_list() -> None:
    assert hcas(*NCCL_2_19_TWO_HOSTS) == {
        "dgxh100-4": ["mlx5_10:1", "mlx5_11:1"],
        "dgxh100-3": ["mlx5_10:1", "mlx5_11:1"],
    }


def test_ibext_plugin_lists_eight_roce_ports() -> None:
    (listed,) = hcas(NCCL_2_22_IBEXT).values()
    assert listed == [f"mlx5_{i}:1" for i in range(8)]


def test_sharp_suffix_is_not_part_of_the_port() -> None:
    assert hcas(SHARP) == {"qh100-gpu19": ["mlx5_0:1", "mlx5_1:1", "mlx5_4:1", "mlx5_5:1"]}


def test_order_as_nccl_found_them() -> None:
    assert hcas(RCCL) == {"e05r3n09": ["mlx5_3:1", "mlx5_2:1", "mlx5_1:1", "mlx5_0:1"]}


def test_a_host_that_listed_no_port_is_absent() -> None:
    assert hcas(NO_PORT) == {}


def test_rail_plane_and_data_direct_forms() -> None:
    constructed = (
        "tray1:100:100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1:0/IB [1]mlx5_1:1::2/IB "
        "[2]mlx5_2_dma:1/IB [RO]; OOB ib0:10.0.0.1<0>"
    )
    assert hcas(constructed) == {"tray1": ["mlx5_0:1", "mlx5_1:1", "mlx5_2_dma:1"]}


def test_a_port_one_process_of_a_host_lacks_is_left_out() -> None:
    """Every rank prints the list; a port one process did not find is not all there."""
    full, _ = NCCL_2_19_TWO_HOSTS
    lacking = full.replace(" [1]mlx5_11:1/RoCE", "").replace(":460770:", ":460771:")
    assert hcas(full, lacking) == {"dgxh100-4": ["mlx5_10:1"]}


def test_published_sharp_line_in_a_whole_nccl_tests_log() -> None:
    text = (OUTPUTS / "nccl-tests-issue294-h100-failure-amid-nccl-info.txt").read_text()
    (run, *_) = nccl_tests.parse(text, source="test").runs
    assert isinstance(run, NcclRun)
    assert run.ib_hcas_by_host["h100-4"] == [f"mlx5_{i}:1" for i in range(1, 9)]


def test_corpus_rail_case_lists_per_host() -> None:
    raw = CORPUS / "xrack-gb200-network-test-bad-rail" / "raw" / "gb200-tray01"
    (run,) = nccl_tests.parse((raw / "xrack-nccl-all_reduce.txt").read_text(), source="t").runs
    assert isinstance(run, NcclRun)
    assert run.ib_hcas_by_host == {
        "slurm-gb200-207-136": ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"],
        "slurm-gb200-207-154": ["mlx5_0:1", "mlx5_1:1", "mlx5_3:1"],
    }
