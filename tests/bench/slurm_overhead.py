"""`make bench-slurm`: what Slurm as the launcher costs, on a simulated Slurm of N nodes.

A real Slurm 22.05 (tests/simhosts/slurm.py, as tests/e2e/test_slurm_cluster.py starts it, the
nodes with Open MPI too), driven by gpuval's own code paths:

1. allocation: `allocate` (salloc --no-shell --exclusive --no-kill, then scontrol show job) until
   Slurm grants the nodes, `release` (scancel), and scancel until every node is idle again;
2. per pair round (the circle schedule's rounds): the pairs of a round as concurrent srun steps
   of one allocation (`srun_command`: --overlap, one rank per node, running `true`), against the
   same pairs as the ssh mode starts them (`mpirun_command` on the pair's first node, over ssh)
   and against `ssh NODE true` to each node of the round from the controller;
3. one step across every node: srun against mpirun over ssh (and ssh to each node at once).

Every command must succeed (a failed one stops the bench: it is no timing). Each figure is the
median of the repeats with its spread (min-max); the machine's load averages (1, 5, 15 min) are
printed beside each table (other work on the machine stretches every figure). Not part of
`make test`. Run from the repository root as root:
  python -m tests.bench.slurm_overhead                        # 3 nodes, 5 repeats
  python -m tests.bench.slurm_overhead --nodes 4 --repeats 10 # two pairs a round
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from gpuval.plan.host_order import circle_rounds
from gpuval.plan.mpirun import Launch, SlurmSteps, mpirun_command, srun_command
from gpuval.slurm.allocation import AllocationRequest, allocate, release
from gpuval.slurm.scontrol import SlurmCommandError, show_nodes
from tests.simhosts.slurm import SlurmCluster, slurm_cluster
from tests.simhosts.system import SimHostsError

PROGRAM = ["true"]
SRUN = "srun step(s)"
MPIRUN_SSH = "mpirun over ssh"
SSH = "ssh, no launcher"
# `true` entered on the launching node as srun and mpirun are (nsenter): their floor here.
FLOOR = "nsenter, no launcher"
STEP_TIMEOUT_S = 120
IDLE_TIMEOUT_S = 120.0
# Debian's mpirun is an alternatives link that the nodes' unpacked packages lack (no postinst).
MPIRUN = "mpirun.openmpi"
NODE_KEY = "/root/.ssh/gpuval_bench_ed25519"
# The openmpi role's contract as the e2e Slurm test sets it (Open MPI without UCX), with the
# ssh the ssh mode's mpirun reaches the other nodes by: the cluster key, no known_hosts prompt.
CONTRACT_ARGS = [
    "--allow-run-as-root", "--bind-to", "none",
    "--mca", "btl", "tcp,self", "--mca", "pml", "ob1", "--mca", "osc", "^ucx",
    "--mca", "btl_tcp_if_include", "eth0", "--mca", "oob_tcp_if_include", "eth0",
    "--mca", "plm_rsh_args",
    f"-i {NODE_KEY} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
]  # fmt: skip


class BenchError(RuntimeError):
    """A command of the bench failed: no timing comes of it."""


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def on_node(slurm: SlurmCluster, host: str, launch: Launch) -> None:
    """A launch run on `host` (inside it, as gpuval_mpirun runs it there), its environment set."""
    variables = [f"{name}={value}" for name, value in launch.env.items()]
    # The node's own slurm.conf (/etc/slurm), not the controller's path this process has.
    command = ["timeout", str(STEP_TIMEOUT_S), "env", "-u", "SLURM_CONF", *variables, *launch.argv]
    done = slurm.node(host).exec(command, check=False)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(launch.argv)} on {host}: exit {done.returncode}: "
                         f"{(done.stdout + done.stderr).strip()[-2000:]}")  # fmt: skip


def over_ssh(slurm: SlurmCluster, host: str) -> None:
    """`true` on `host` from the controller over ssh: the same command with no launcher."""
    command = ["timeout", str(STEP_TIMEOUT_S), *slurm.hosts.ssh_command(host, *PROGRAM)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BenchError(f"ssh {host}: exit {done.returncode}: {done.stderr.strip()}")


def at_once(actions: Sequence[Callable[[], None]]) -> float:
    """Wall seconds of `actions` started together, until the last has ended."""
    with ThreadPoolExecutor(max_workers=len(actions)) as pool:
        started = time.monotonic()
        for future in [pool.submit(action) for action in actions]:
            future.result()
        return time.monotonic() - started


def wait_idle(slurm: SlurmCluster) -> None:
    deadline = time.monotonic() + IDLE_TIMEOUT_S
    while time.monotonic() < deadline:
        states = slurm.run(
            "sinfo", "--noheader", "--Node", "--format=%N %T", check=False
        ).stdout.split()
        if states[1::2] and all(state == "idle" for state in states[1::2]):
            return
        time.sleep(0.05)
    raise BenchError(f"the nodes are not idle {IDLE_TIMEOUT_S:.0f} s after scancel: {states}")


def measure_allocation(
    slurm: SlurmCluster, request: AllocationRequest, repeats: int
) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {"salloc (granted)": [], "scancel": [], "until idle": []}
    for _ in range(repeats):
        known = show_nodes()
        started = time.monotonic()
        allocation = allocate(request, known)
        found["salloc (granted)"].append(time.monotonic() - started)
        if allocation.not_tested:
            raise BenchError(f"Slurm did not grant every node: {allocation.not_tested}")
        started = time.monotonic()
        release(allocation.job_id)
        found["scancel"].append(time.monotonic() - started)
        wait_idle(slurm)
        found["until idle"].append(time.monotonic() - started)
    return found


def measure_launches(
    slurm: SlurmCluster, steps: SlurmSteps, contract: dict[str, object], repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(seconds of each pair round, seconds of a step across every node), by launcher."""
    names = slurm.nodes

    def by_srun(hosts: Sequence[str]) -> list[Callable[[], None]]:
        launch = srun_command(contract, steps, hosts, 1, PROGRAM)
        return [lambda: on_node(slurm, hosts[0], launch)]

    def by_mpirun(hosts: Sequence[str]) -> list[Callable[[], None]]:
        launch = mpirun_command(contract, hosts, 1, PROGRAM)
        return [lambda: on_node(slurm, hosts[0], launch)]

    def by_ssh(hosts: Sequence[str]) -> list[Callable[[], None]]:
        return [partial(over_ssh, slurm, host) for host in hosts]

    def floor(hosts: Sequence[str]) -> list[Callable[[], None]]:
        return [partial(on_node, slurm, hosts[0], Launch(PROGRAM, {}))]

    launchers = {SRUN: by_srun, MPIRUN_SSH: by_mpirun, SSH: by_ssh, FLOOR: floor}
    rounds: dict[str, list[float]] = {label: [] for label in launchers}
    everywhere: dict[str, list[float]] = {label: [] for label in launchers}
    for _ in range(repeats):
        # The launchers take turns within each repeat, so that a change in the machine's load
        # falls on all of them alike.
        for round_pairs in circle_rounds(names):
            for label, actions in launchers.items():
                rounds[label].append(
                    at_once([a for pair in round_pairs for a in actions(list(pair))])
                )
        for label, actions in launchers.items():
            everywhere[label].append(at_once(actions(names)))
    return rounds, everywhere


def table(title: str, found: dict[str, list[float]], baselines: Sequence[str]) -> str:
    """Median, spread and count of each row, and its median less each baseline's."""
    columns = "".join(f" {'- ' + name:>18}" for name in baselines)
    lines = [f"{title} (load {load()})",
             f"  {'':<20} {'median s':>9} {'min s':>8} {'max s':>8} {'n':>4}{columns}"]  # fmt: skip
    for label, seconds in found.items():
        median = statistics.median(seconds)
        spread = f"{min(seconds):8.3f} {max(seconds):8.3f}"
        line = f"  {label:<20} {median:9.3f} {spread} {len(seconds):4d}"
        for name in baselines:
            line += f" {median - statistics.median(found[name]):+18.3f}"
        lines.append(line)
    return "\n".join(lines)


def install_node_key(slurm: SlurmCluster) -> None:
    """The controller's key to the nodes, on every node: the ssh mode's mpirun reaches the
    other nodes with the cluster key the openmpi role installs."""
    key = slurm.hosts.ssh_key.read_bytes()
    for name in slurm.nodes:
        path = slurm.node(name).root / NODE_KEY.lstrip("/")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.write_bytes(key)
        path.chmod(0o600)


def main() -> None:
    try:
        bench()
    except (BenchError, SlurmCommandError, SimHostsError) as problem:
        raise SystemExit(f"slurm_overhead: {problem}") from None


def bench() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="examples:\n  python -m tests.bench.slurm_overhead\n"
        "  python -m tests.bench.slurm_overhead --nodes 4 --repeats 10",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--nodes", type=int, default=3, help="simulated Slurm nodes (default 3)")
    parser.add_argument("--repeats", type=int, default=5, help="repeats of each figure (5)")
    arguments = parser.parse_args()
    if arguments.nodes < 2 or arguments.repeats < 1:
        parser.error("--nodes must be at least 2 and --repeats at least 1")
    with slurm_cluster(
        arguments.nodes, "bench-slurm", extra_packages=("libopenmpi3", "openmpi-bin")
    ) as slurm:
        print(f"Slurm on {arguments.nodes} simulated nodes: up in {slurm.start_seconds:.1f} s "
              f"(load {load()})")  # fmt: skip
        # gpuval's Slurm commands run in this process, against this cluster.
        os.environ.update(slurm.environment)
        install_node_key(slurm)
        request = AllocationRequest(
            tuple(slurm.nodes), job_name="gpuval-bench", time_minutes=30, wait_s=30
        )
        print(table("allocation", measure_allocation(slurm, request, arguments.repeats), ()))
        allocation = allocate(request, show_nodes())
        try:
            steps = SlurmSteps(allocation.job_id, {name: name for name in allocation.nodes})
            addresses = {name: slurm.node(name).ip for name in slurm.nodes}
            contract: dict[str, object] = {
                "mpirun": MPIRUN, "args": CONTRACT_ARGS, "env": {"NCCL_SOCKET_IFNAME": "eth0"},
                "export": ["PATH"], "addresses": addresses,
            }  # fmt: skip
            rounds, everywhere = measure_launches(slurm, steps, contract, arguments.repeats)
        finally:
            started = time.monotonic()
            release(allocation.job_id)
        wait_idle(slurm)
        print(f"scancel after the steps, until every node is idle: "
              f"{time.monotonic() - started:.3f} s (load {load()})")  # fmt: skip
        pairs = len(circle_rounds(slurm.nodes)[0])
        print(table(f"a pair round ({pairs} pair(s) at once, `true`)", rounds, (MPIRUN_SSH, SSH)))
        across = f"one step across {arguments.nodes} nodes (`true`)"
        print(table(across, everywhere, (MPIRUN_SSH, SSH)))


if __name__ == "__main__":
    main()
