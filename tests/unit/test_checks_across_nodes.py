"""Checks across nodes: the internode collectives against the nodes' aggregate (NVLink inside,
the NICs between), the RDMA ports' state and rate, and the transport NCCL chose."""

from __future__ import annotations

import pytest
from tests.unit.test_checks import GIB, H100, NV18_8, find, h100_node, ibstat, judge, nccl, raw

from gpuval.records.nccl import NcclDevice
from gpuval.runfolder import RawFile


def internode(busbw: float, transports: list[str] | None = None, ranks: int = 16) -> RawFile:
    hosts = ["gpu-a", "gpu-b"]
    devices = [NcclDevice(rank=r, host=hosts[r // 8], name=H100) for r in range(ranks)]
    run = nccl({GIB: busbw, 8 * GIB: busbw}, nranks=ranks, devices=devices,
               transports=transports or ["NET/IB"], hosts=hosts)  # fmt: skip
    return raw("a", "internode-nccl-all_reduce", "nccl-tests", [run], phase="internode")


def two_nodes(ports: list[tuple[str, str, float]]) -> list[RawFile]:
    return [f for h in "ab" for f in (*h100_node(h, NV18_8), ibstat(h, ports))]


NDR8 = [(f"mlx5_{i}", "Active", 400.0) for i in range(8)]


@pytest.mark.parametrize(
    ("busbw", "status", "reference"),
    [
        (370.0, "pass", 450.0),  # healthy 2x8 H100 with 8x NDR: NVLink binds before 750 GB/s
        (36.0, "fail", 450.0),  # NCCL on one rail
    ],
)
def test_across_nodes_judged_against_the_nodes_aggregate(busbw: float, status: str,
                                                        reference: float) -> None:  # fmt: skip
    check = find(judge([internode(busbw), *two_nodes(NDR8)]), "all_reduce.internode.busbw")
    assert check.status == status and check.reference == reference
    assert "750 GB/s" in check.reason or busbw < 100


def test_a_published_2x8_h100_run_over_8x200g_passes() -> None:
    # 338.8 GB/s over 8x 200G: the network bound 200 x 30/16 = 375 GB/s binds: 90 %
    ports = [(f"mlx5_{i}", "Active", 200.0) for i in range(8)]
    check = find(judge([internode(338.8), *two_nodes(ports)]), "internode.busbw")
    assert check.status == "pass" and check.reference == 375.0


def test_a_port_down_is_named_even_when_busbw_looks_healthy() -> None:
    ports = [*NDR8[:3], ("mlx5_3", "Down", 400.0), *NDR8[4:]]
    checks = judge([internode(330.0), *two_nodes(ports)])
    assert find(checks, "internode.busbw").status == "pass"
    port = find(checks, "network.rdma-ports", "a")
    assert port.status == "fail" and "mlx5_3 port 1 is Down" in port.reason


def test_a_port_slower_than_its_siblings_fails() -> None:
    ports = [*NDR8[:7], ("mlx5_7", "Active", 200.0)]
    port = find(judge(two_nodes(ports)), "network.rdma-ports", "a")
    assert port.status == "fail" and "mlx5_7 port 1 at 200 Gb/s where its siblings'" in port.reason


def test_socket_transport_across_nodes_with_rdma_ports_fails() -> None:
    checks = judge([internode(40.0, ["NET/Socket"]), *two_nodes(NDR8)])
    assert find(checks, "transport").status == "fail"


def test_socket_transport_where_rdma_hcas_are_declared_fails_without_ibstat() -> None:
    """No ibstat output, but the inventory says each node has mlx5_0: TCP is not what was
    bought, so the declared contract decides, not the missing evidence."""
    meta = {"declared": {host: {"ib_hcas": ["mlx5_0"]} for host in ("a", "b")}}
    check = find(judge([internode(40.0, ["NET/Socket"])], meta), "transport")
    assert check.status == "fail" and "the inventory declares RDMA HCAs" in check.reason
    assert find(judge([internode(40.0, ["NET/Socket"])]), "transport").status == "warn"


def test_shm_between_nvlinked_gpus_warns() -> None:
    run = nccl({GIB: 100.0}, transports=["SHM/direct", "NET/Socket"])
    check = find(judge([raw("n1", "ar", "nccl-tests", [run]), *h100_node()]), "transport")
    assert check.status == "warn" and "peer-to-peer is disabled" in check.reason
