"""One launcher: every mpirun is built from the openmpi role's launch contract."""

from __future__ import annotations

from typing import Any

import pytest

from gpuval.plan.mpirun import LaunchError, mpirun_command

CONTRACT: dict[str, Any] = {
    "mpirun": "/opt/hpcx/ompi/bin/mpirun",
    "args": ["--allow-run-as-root", "--bind-to", "none", "--mca", "btl_tcp_if_include", "ib0"],
    "env": {
        "NCCL_SOCKET_IFNAME": "ib0",
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "LD_LIBRARY_PATH": "/opt/nccl/lib",
    },
    "export": ["PATH"],
    "addresses": {"node1": "10.0.0.11", "node2": "10.0.0.12"},
}


def test_ranks_on_two_nodes_get_the_contract_and_the_step_environment() -> None:
    launch = mpirun_command(CONTRACT, ["node1", "node2"], 8, ["/bin/all_reduce_perf", "-g", 1], {
        "NCCL_DEBUG": "INFO"
    })  # fmt: skip
    assert launch.argv == [
        "/opt/hpcx/ompi/bin/mpirun", "--allow-run-as-root", "--bind-to", "none",
        "--mca", "btl_tcp_if_include", "ib0",
        "--host", "10.0.0.11:8,10.0.0.12:8", "-np", "16",
        "-x", "NCCL_SOCKET_IFNAME", "-x", "NCCL_IB_HCA", "-x", "LD_LIBRARY_PATH",
        "-x", "NCCL_DEBUG", "-x", "PATH",
        "/bin/all_reduce_perf", "-g", "1",
    ]  # fmt: skip
    assert launch.env == {**CONTRACT["env"], "NCCL_DEBUG": "INFO"}


def test_the_step_environment_overrides_the_contract_and_unknown_hosts_keep_their_name() -> None:
    launch = mpirun_command(CONTRACT, ["localhost"], 4, ["x"], {"LD_LIBRARY_PATH": "/mine"})
    assert "localhost:4" in launch.argv and launch.argv.count("LD_LIBRARY_PATH") == 1
    assert launch.env["LD_LIBRARY_PATH"] == "/mine"


def test_two_roles_asking_alike_get_the_same_launcher() -> None:
    """The pair run and the internode run differ only in their hosts and program."""
    internode = mpirun_command(CONTRACT, ["node1", "node2"], 8, ["a"], {"NCCL_DEBUG": "INFO"})
    pair = mpirun_command(CONTRACT, ["node2", "node1"], 8, ["b"], {"NCCL_DEBUG": "INFO"})
    host_flag = internode.argv.index("--host")
    assert internode.argv[:host_flag] == pair.argv[:host_flag]
    assert internode.env == pair.env


@pytest.mark.parametrize(
    ("contract", "hosts", "ranks", "program", "message"),
    [
        ({}, ["a"], 1, ["x"], "lacks mpirun, args, env, export, addresses"),
        ({**CONTRACT, "mpirun": ""}, ["a"], 1, ["x"], "must name a program"),
        ({**CONTRACT, "args": "--bind-to none"}, ["a"], 1, ["x"], "must be lists"),
        ({**CONTRACT, "env": ["A=1"]}, ["a"], 1, ["x"], "must be mappings"),
        (CONTRACT, [], 1, ["x"], "no host"),
        (CONTRACT, ["a"], 0, ["x"], "at least 1"),
        (CONTRACT, ["a"], 1, [], "no program"),
    ],
)
def test_bad_contract_or_request(
    contract: dict[str, Any], hosts: list[str], ranks: int, program: list[str], message: str
) -> None:
    with pytest.raises(LaunchError, match=message):
        mpirun_command(contract, hosts, ranks, program)
