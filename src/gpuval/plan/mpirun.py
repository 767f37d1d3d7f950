"""The one way gpuval starts MPI ranks: an mpirun command from the launch contract.

The openmpi role publishes the contract once per node as the fact `openmpi_launch`:

    mpirun:    the mpirun to start (MPI_HOME/bin/mpirun, or the one on PATH)
    args:      mpirun options: run as root, --bind-to none, Open MPI's own TCP traffic and the
               interface it uses (btl_tcp_if_include / oob_tcp_if_include)
    env:       what every rank needs: NCCL_SOCKET_IFNAME, NCCL_IB_HCA, LD_LIBRARY_PATH with the
               NCCL in use first
    export:    variables forwarded to the remote ranks with -x (PATH among them)
    addresses: inventory name -> the address the nodes reach each other on

Every role that starts ranks (bench_intranode with one rank per GPU, mpi_preflight,
bench_internode, the nccl-tests pairs of bench_pairs) goes through `mpirun_command`, via the
`gpuval_mpirun` action plugin, so they cannot drift apart.

On a Slurm cluster (the inventory variable `gpuval_launcher: slurm`) the ranks of a multi-node
run start as a job step of gpuval's allocation instead (`srun_command`): the same program and
environment, no ssh between the nodes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

CONTRACT_KEYS = ("mpirun", "args", "env", "export", "addresses")
LAUNCHERS = ("mpirun", "slurm")
SRUN = "srun"
# Open MPI takes each MCA parameter that mpirun's `--mca NAME VALUE` sets from the rank's
# environment as OMPI_MCA_NAME (https://docs.open-mpi.org/en/v5.0.x/mca.html): a rank srun
# starts gets the contract's interface and transport that way.
MCA_ENV_PREFIX = "OMPI_MCA_"


class LaunchError(ValueError):
    """The contract or the request cannot make a command (named key, what is wrong)."""


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]


def _contract(contract: Mapping[str, Any]) -> tuple[str, list[str], dict[str, str], list[str]]:
    missing = [key for key in CONTRACT_KEYS if key not in contract]
    if missing:
        raise LaunchError(f"openmpi_launch lacks {', '.join(missing)} (run the openmpi role)")
    mpirun, args, env, export = (contract[k] for k in ("mpirun", "args", "env", "export"))
    if not isinstance(mpirun, str) or not mpirun:
        raise LaunchError(f"openmpi_launch.mpirun must name a program, not {mpirun!r}")
    if not isinstance(args, list) or not isinstance(export, list):
        raise LaunchError("openmpi_launch.args and openmpi_launch.export must be lists")
    if not isinstance(env, Mapping) or not isinstance(contract["addresses"], Mapping):
        raise LaunchError("openmpi_launch.env and openmpi_launch.addresses must be mappings")
    return mpirun, [str(a) for a in args], {str(k): str(v) for k, v in env.items()}, export


def _check_request(hosts: Sequence[str], ranks_per_host: int, program: Sequence[str]) -> None:
    if not hosts:
        raise LaunchError("no host to start ranks on")
    if ranks_per_host < 1:
        raise LaunchError(f"ranks_per_host must be at least 1, not {ranks_per_host}")
    if not program:
        raise LaunchError("no program to start")


def mpirun_command(
    contract: Mapping[str, Any],
    hosts: Sequence[str],
    ranks_per_host: int,
    program: Sequence[str],
    env: Mapping[str, Any] | None = None,
) -> Launch:
    """mpirun starting `ranks_per_host` ranks of `program` on each of `hosts` (inventory names,
    or "localhost" for the node itself), ranks filled host by host in the order given.

    The environment is the contract's with `env` over it; every variable of it, and those the
    contract exports, reach the remote ranks (-x)."""
    mpirun, args, base_env, export = _contract(contract)
    _check_request(hosts, ranks_per_host, program)
    addresses = contract["addresses"]
    host_list = ",".join(f"{addresses.get(h, h)}:{ranks_per_host}" for h in hosts)
    full_env = {**base_env, **{str(k): str(v) for k, v in (env or {}).items()}}
    forwarded = list(dict.fromkeys([*full_env, *(str(name) for name in export)]))
    argv = [mpirun, *args, "--host", host_list, "-np", str(ranks_per_host * len(hosts))]
    for name in forwarded:
        argv += ["-x", name]
    return Launch(argv + [str(word) for word in program], full_env)


@dataclass(frozen=True)
class SlurmSteps:
    """Where srun starts a job step: gpuval's allocation (its job id) and the Slurm node name
    of each inventory host (`gpuval_slurm_node`, else the inventory name)."""

    job_id: str
    nodes: Mapping[str, str]
    mpi: str = "pmix"


def mca_environment(args: Sequence[str]) -> dict[str, str]:
    """The `--mca NAME VALUE` options of mpirun's arguments as Open MPI's environment."""
    found: dict[str, str] = {}
    for position, word in enumerate(args):
        if word != "--mca":
            continue
        if position + 2 >= len(args):
            raise LaunchError(f"openmpi_launch.args ends in an incomplete --mca: {list(args)}")
        found[MCA_ENV_PREFIX + args[position + 1]] = args[position + 2]
    return found


def srun_command(
    contract: Mapping[str, Any],
    allocation: SlurmSteps,
    hosts: Sequence[str],
    ranks_per_host: int,
    program: Sequence[str],
    env: Mapping[str, Any] | None = None,
) -> Launch:
    """srun starting `ranks_per_host` ranks of `program` on each of `hosts` as one step of the
    allocation, ranks filled node by node in Slurm's order of the node list.

    The environment is the contract's, its mpirun options as OMPI_MCA_ variables, and `env`
    over them; srun passes its whole environment to the ranks (`--export=ALL`), so a value
    with a comma (NCCL_IB_HCA=mlx5_0,mlx5_1) reaches them whole, which `--export=NAME=value`
    would cut. `--overlap`: the pairs of a round run as concurrent steps, and a step never
    waits for the resources another one holds (Slurm 22.05 measured here: two steps on the
    same nodes ran at once)."""
    _, args, base_env, _ = _contract(contract)
    _check_request(hosts, ranks_per_host, program)
    if not allocation.job_id:
        raise LaunchError("no Slurm allocation to start a step in (gpuval_slurm_jobid)")
    unknown = [host for host in hosts if host not in allocation.nodes]
    if unknown:
        raise LaunchError(
            f"{', '.join(unknown)}: not a node of Slurm allocation {allocation.job_id}"
            " (srun starts ranks on the allocation's nodes, never on localhost)"
        )
    nodes = [allocation.nodes[host] for host in hosts]
    full_env = {
        **base_env,
        **mca_environment(args),
        **{str(k): str(v) for k, v in (env or {}).items()},
    }
    argv = [
        SRUN,
        f"--jobid={allocation.job_id}",
        f"--nodelist={','.join(nodes)}",
        f"--nodes={len(nodes)}",
        f"--ntasks={ranks_per_host * len(nodes)}",
        f"--ntasks-per-node={ranks_per_host}",
        f"--mpi={allocation.mpi}",
        "--overlap",
        "--export=ALL",
        # A rank that dies ends the step at once, as mpirun ends the job.
        "--kill-on-bad-exit=1",
    ]
    return Launch(argv + [str(word) for word in program], full_env)


def launch_command(
    contract: Mapping[str, Any],
    hosts: Sequence[str],
    ranks_per_host: int,
    program: Sequence[str],
    env: Mapping[str, Any] | None = None,
    allocation: SlurmSteps | None = None,
) -> Launch:
    """The launch for `gpuval_launcher`: srun in `allocation` when there is one and the ranks
    span nodes, else mpirun (one node's ranks, `localhost`, start without ssh either way)."""
    if allocation is None or list(hosts) == ["localhost"]:
        return mpirun_command(contract, hosts, ranks_per_host, program, env)
    return srun_command(contract, allocation, hosts, ranks_per_host, program, env)


def still_allocated(allocation: SlurmSteps, held: Collection[str]) -> SlurmSteps:
    """The allocation less the hosts whose Slurm node it no longer holds (`held`, the job's
    nodes now): a node that failed or was set down during the run leaves the job (salloc
    --no-kill), and srun refuses a step that names it ("Requested node configuration is not
    available", Slurm 22.05 measured)."""
    nodes = {host: node for host, node in allocation.nodes.items() if node in held}
    return replace(allocation, nodes=nodes)


def not_allocated(hosts: Sequence[str], allocation: SlurmSteps) -> list[str]:
    """The hosts of a step that the allocation did not get: their step is not run, and so they
    are reported not tested (a skipped step), never passed."""
    return [host for host in hosts if host != "localhost" and host not in allocation.nodes]
