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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONTRACT_KEYS = ("mpirun", "args", "env", "export", "addresses")


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
    if not hosts:
        raise LaunchError("no host to start ranks on")
    if ranks_per_host < 1:
        raise LaunchError(f"ranks_per_host must be at least 1, not {ranks_per_host}")
    if not program:
        raise LaunchError("no program to start")
    addresses = contract["addresses"]
    host_list = ",".join(f"{addresses.get(h, h)}:{ranks_per_host}" for h in hosts)
    full_env = {**base_env, **{str(k): str(v) for k, v in (env or {}).items()}}
    forwarded = list(dict.fromkeys([*full_env, *(str(name) for name in export)]))
    argv = [mpirun, *args, "--host", host_list, "-np", str(ranks_per_host * len(hosts))]
    for name in forwarded:
        argv += ["-x", name]
    return Launch(argv + [str(word) for word in program], full_env)
