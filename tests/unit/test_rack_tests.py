"""The transport rule of the two rack tests (gpuval.checks.rack_tests): the rack test must show
multi-node NVLink, the network-only test the RDMA network, each run named by its step."""

from __future__ import annotations

import pytest

from gpuval.checks.model import CLUSTER
from gpuval.checks.rack_tests import rack_test_owner, rack_transport
from gpuval.plan import steps
from gpuval.plan.steps import RackTest
from gpuval.records.nccl import NcclRun


def run_with(channels: list[str], mnnvl: bool | None) -> NcclRun:
    return NcclRun(channel_transports=channels, mnnvl=mnnvl)


@pytest.mark.parametrize(
    ("step", "test"),
    [
        ("rack-nccl-all_reduce", "rack"),
        ("xrack-nccl-all_reduce", "across-racks"),
        ("internode-nccl-all_reduce", None),
        ("nccl-all_reduce", None),
        ("all_reduce", None),
        ("rack-nccl-bogus", None),
    ],
)
def test_step_names_say_which_rack_test(step: str, test: str | None) -> None:
    assert steps.rack_test(step) == test


def test_step_names_round_trip() -> None:
    assert steps.rack_test(steps.rack_nccl("all_gather")) == "rack"
    assert steps.rack_test(steps.across_racks_nccl("all_gather")) == "across-racks"


@pytest.mark.parametrize(
    ("channels", "mnnvl", "status"),
    [
        (["P2P/MNNVL"], True, "pass"),
        (["P2P/MNNVL"], None, "pass"),
        (["NET/IB/GDRDMA", "P2P/CUMEM"], None, "fail"),  # fell back to the network
        (["P2P/CUMEM"], False, "fail"),  # NCCL_MNNVL_ENABLE=0 or not joined
        (["P2P/CUMEM"], None, "fail"),  # nothing shows MNNVL
        ([], None, "unjudged"),
    ],
)
def test_rack_test_must_show_mnnvl(channels: list[str], mnnvl: bool | None, status: str) -> None:
    got, reason = rack_transport("rack", run_with(channels, mnnvl), "nvl72-a")
    assert got == status, reason
    assert "nvl72-a" in reason or status == "unjudged"


@pytest.mark.parametrize(
    ("channels", "mnnvl", "status"),
    [
        (["NET/IB/GDRDMA", "P2P/CUMEM"], False, "pass"),
        (["NET/IBext/GDRDMA"], None, "pass"),
        (["NET/IB/GDRDMA", "P2P/MNNVL"], True, "fail"),  # NVLink hides the rails
        (["NET/IB/GDRDMA"], True, "fail"),
        (["NET/Socket"], None, "fail"),
        (["P2P/CUMEM"], None, "fail"),
        ([], None, "unjudged"),
    ],
)
def test_network_only_test_must_show_rdma(
    channels: list[str], mnnvl: bool | None, status: str
) -> None:
    got, reason = rack_transport("across-racks", run_with(channels, mnnvl), None)
    assert got == status, reason


@pytest.mark.parametrize(
    ("test", "rack", "owner", "expected"),
    [
        ("rack", "nvl72-a", CLUSTER, "rack nvl72-a"),  # the rack's own subject
        ("across-racks", "nvl72-a", CLUSTER, CLUSTER),  # one test for all racks
        ("rack", None, CLUSTER, CLUSTER),  # no declared rack to name
        (None, "nvl72-a", CLUSTER, CLUSTER),  # any other run across nodes
        ("rack", "nvl72-a", "tray1", "tray1"),  # a run on one tray stays the tray's
    ],
)
def test_the_rack_test_belongs_to_its_rack(
    test: RackTest | None, rack: str | None, owner: str, expected: str
) -> None:
    assert rack_test_owner(test, rack, owner) == expected
