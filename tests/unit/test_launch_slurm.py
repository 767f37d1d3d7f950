"""The Slurm launcher: the same launch (program, NCCL environment) as a step of gpuval's
allocation, srun instead of mpirun."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.test_launch import CONTRACT as MPIRUN_CONTRACT

from gpuval.plan.mpirun import (
    LaunchError,
    SlurmSteps,
    launch_command,
    mca_environment,
    mpirun_command,
    not_allocated,
    srun_command,
    still_allocated,
)

# The mpirun tests' contract, with Open MPI's transport among mpirun's options.
CONTRACT: dict[str, Any] = {
    **MPIRUN_CONTRACT, "args": [*MPIRUN_CONTRACT["args"], "--mca", "btl", "tcp,self"]
}  # fmt: skip
ALLOCATION = SlurmSteps(job_id="4242", nodes={"node1": "gpu001", "node2": "gpu002"})


def test_a_pair_step_is_srun_in_the_allocation_on_the_slurm_node_names() -> None:
    launch = srun_command(
        CONTRACT, ALLOCATION, ["node2", "node1"], 8, ["/bin/all_reduce_perf", "-g", 1],
        {"NCCL_DEBUG": "INFO"},
    )  # fmt: skip
    assert launch.argv == [
        "srun", "--jobid=4242", "--nodelist=gpu002,gpu001", "--nodes=2", "--ntasks=16",
        "--ntasks-per-node=8", "--mpi=pmix", "--overlap", "--export=ALL", "--kill-on-bad-exit=1",
        "/bin/all_reduce_perf", "-g", "1",
    ]  # fmt: skip


def test_the_ranks_get_the_contract_environment_and_open_mpis_options_as_variables() -> None:
    launch = srun_command(
        CONTRACT, ALLOCATION, ["node1", "node2"], 1, ["x"], {"NCCL_DEBUG": "INFO"}
    )
    assert launch.env == {
        "NCCL_SOCKET_IFNAME": "ib0",
        # Whole, comma and all: srun passes its environment (--export=ALL), not NAME=value.
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "LD_LIBRARY_PATH": "/opt/nccl/lib",
        "OMPI_MCA_btl_tcp_if_include": "ib0",
        "OMPI_MCA_btl": "tcp,self",
        "NCCL_DEBUG": "INFO",
    }
    # The same NCCL environment as mpirun gives its ranks.
    mpirun = mpirun_command(CONTRACT, ["node1", "node2"], 1, ["x"], {"NCCL_DEBUG": "INFO"})
    assert {k: v for k, v in launch.env.items() if not k.startswith("OMPI_MCA_")} == mpirun.env


def test_without_an_allocation_or_on_one_node_the_launch_is_mpirun() -> None:
    across = launch_command(CONTRACT, ["node1", "node2"], 8, ["x"])
    assert across.argv[0] == "/opt/hpcx/ompi/bin/mpirun"
    local = launch_command(CONTRACT, ["localhost"], 8, ["x"], allocation=ALLOCATION)
    assert local.argv[0] == "/opt/hpcx/ompi/bin/mpirun"
    assert (
        launch_command(CONTRACT, ["node1", "node2"], 8, ["x"], None, ALLOCATION).argv[0] == "srun"
    )


def test_a_host_the_allocation_did_not_get_is_not_tested() -> None:
    assert not_allocated(["node1", "node3", "localhost"], ALLOCATION) == ["node3"]
    with pytest.raises(LaunchError, match="node3: not a node of Slurm allocation 4242"):
        srun_command(CONTRACT, ALLOCATION, ["node1", "node3"], 1, ["x"])


def test_a_host_whose_node_left_the_allocation_since_is_not_tested() -> None:
    # The job holds gpu001 only now (scontrol show job: NodeList=gpu001): gpu002 left it.
    held = still_allocated(ALLOCATION, ["gpu001"])
    assert held == SlurmSteps(job_id="4242", nodes={"node1": "gpu001"})
    assert not_allocated(["node1", "node2"], held) == ["node2"]
    assert not_allocated(["node1"], held) == []


@pytest.mark.parametrize(
    ("allocation", "hosts", "ranks", "program", "message"),
    [
        (SlurmSteps("", {"node1": "a"}), ["node1"], 1, ["x"], "no Slurm allocation"),
        (ALLOCATION, [], 1, ["x"], "no host"),
        (ALLOCATION, ["node1"], 0, ["x"], "at least 1"),
        (ALLOCATION, ["node1"], 1, [], "no program"),
    ],
)
def test_bad_requests(
    allocation: SlurmSteps, hosts: list[str], ranks: int, program: list[str], message: str
) -> None:
    with pytest.raises(LaunchError, match=message):
        srun_command(CONTRACT, allocation, hosts, ranks, program)


def test_an_incomplete_mca_option_is_an_error() -> None:
    assert mca_environment(["--bind-to", "none"]) == {}
    with pytest.raises(LaunchError, match="incomplete --mca"):
        mca_environment(["--mca", "btl"])
