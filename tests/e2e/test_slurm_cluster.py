"""gpuval on a real Slurm (22.05, Debian's) on three simulated hosts, one cluster for every
assertion (tests/simhosts/slurm.py: slurmctld and munge on a controller host, a slurmd on each
node, GPU gres of stand-in device files):

- the slurm inventory plugin lists the partition's nodes with their GPUs;
- a step across every node through gpuval_mpirun with `gpuval_launcher: slurm` runs as an srun
  step of the allocation gpuval asked for (slurm_steps.yml), with the launch contract's
  environment, as Slurm records it (slurmctld's log of the step; no accounting database here),
  and the allocation is released after it; the nodes have no mpirun and no key to each other;
- `gpuval drain` of a judged failing run drains its node with the gpuval reason (scontrol);
- a node drained by hand with another reason is never resumed by `gpuval resume`, and it is not
  tested (the step that needs it is skipped) where gpuval's allocation cannot get it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.doubles import REPO, VENV_BIN
from tests.e2e.runs import record
from tests.simhosts.slurm import SlurmCluster, slurm_cluster

pytestmark = pytest.mark.simhosts

HERE = Path(__file__).parent
NODES = ["node1", "node2", "node3"]
GPUS = 4
HAND_REASON = "disk replacement, ticket 4711"
STEP_OUTPUT = "var/tmp/gpuval-e2e/slurm-ranks"
PAIR_OUTPUT = "var/tmp/gpuval-e2e/slurm-pair.txt"
PREFLIGHT_OUTPUT = "var/tmp/gpuval-e2e/mpi-preflight.txt"
PREFLIGHT_SOURCE = REPO / "src" / "gpuval" / "nodebench" / "mpi_preflight.c"


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SlurmCluster, Path]]:
    work = tmp_path_factory.mktemp("e2e-slurm")
    # The MPI preflight program, built on the controller against the Open MPI the nodes get.
    preflight = work / "mpi_preflight"
    subprocess.run(["mpicc", "-O2", "-o", str(preflight), str(PREFLIGHT_SOURCE)], check=True)
    with slurm_cluster(
        len(NODES), "e2e-slurm", gpus_per_node=GPUS, extra_packages=("libopenmpi3",)
    ) as cluster:
        record(f"Slurm on {len(NODES)} simulated hosts: up in {cluster.start_seconds:.1f} s")
        for name in NODES:
            target = cluster.node(name).root / "opt/gpuval-e2e"
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(preflight, target / "mpi_preflight")
        try:
            yield cluster, work
        finally:
            # Slurm's logs, for a failing test's reader (the cluster's state goes with it).
            shutil.copy(cluster.controller_log, work / "slurmctld.log")
            for name in NODES:
                shutil.copy(cluster.node(name).root / "var/log/slurmd.log", work / f"{name}.log")


def environment(slurm: SlurmCluster) -> dict[str, str]:
    return {
        **os.environ,
        **slurm.environment,
        "PATH": f"{VENV_BIN}:{slurm.environment['PATH']}",
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
    }


def ini_inventory(slurm: SlurmCluster, work: Path) -> Path:
    """The nodes as an INI inventory (all of them, drained or not), reached over ssh."""
    hosts = slurm.hosts
    lines = ["[gpu_nodes]"]
    lines += [f"{name} ansible_host={hosts.host(name).ip}" for name in slurm.nodes]
    lines += [
        "[gpu_nodes:vars]",
        "ansible_user=root",
        f"ansible_ssh_private_key_file={hosts.ssh_key}",
        f"ansible_ssh_common_args='-o StrictHostKeyChecking=accept-new "
        f"-o UserKnownHostsFile={hosts.known_hosts} -o IdentitiesOnly=yes'",
        "ansible_python_interpreter=/usr/bin/python3",
    ]
    path = work / "nodes.ini"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_steps(
    slurm: SlurmCluster, work: Path, name: str, *arguments: str
) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    done = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(ini_inventory(slurm, work)),
         str(HERE / "slurm_steps.yml"), *arguments],
        cwd=REPO, env=environment(slurm), capture_output=True, text=True, check=False,
    )  # fmt: skip
    (work / f"{name}.ansible.log").write_text(done.stdout + done.stderr)
    record(f"slurm_steps.yml ({name}), {len(NODES)} nodes: {time.monotonic() - started:.1f} s")
    return done


def gpuval(slurm: SlurmCluster, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuval", *arguments],
        env=environment(slurm), capture_output=True, text=True, check=False,
    )  # fmt: skip


def node_fields(slurm: SlurmCluster, name: str) -> dict[str, str]:
    """State and Reason of `scontrol show node`, the reason without Slurm's [user@time]."""
    text = slurm.run("scontrol", "--oneliner", "show", "node", name).stdout
    fields = dict(re.findall(r"(?:^|\s)(State|Reason)=(\S+(?: \S+)*?)(?=\s+\w+=|$)", text))
    if "Reason" in fields:
        fields["Reason"] = re.sub(r" \[[^\]]*@[^\]]*\]$", "", fields["Reason"])
    return fields


@pytest.fixture(scope="module")
def steps_run(slurm: tuple[SlurmCluster, Path]) -> tuple[subprocess.CompletedProcess[str], str]:
    cluster, work = slurm
    done = run_steps(cluster, work, "all-idle", "-e", "e2e_pairs=true")
    output = cluster.node("node1").root / STEP_OUTPUT
    sidecar = json.loads(output.with_suffix(".meta.json").read_text())
    record(f"the srun step's command: {sidecar['command']}")
    pair = json.loads(
        (cluster.node("node1").root / PAIR_OUTPUT).with_suffix(".meta.json").read_text()
    )
    record(f"a pair step's command: {pair['command']}")
    return done, output.with_suffix(".txt").read_text()


def plain(value: object) -> object:
    """A value as ansible-inventory --list writes it, without its untrusted-text marker."""
    return value.get("__ansible_unsafe", value) if isinstance(value, dict) else value


def test_the_inventory_plugin_lists_the_partition(slurm: tuple[SlurmCluster, Path]) -> None:
    cluster, work = slurm
    inventory = work / "cluster.slurm.yml"
    inventory.write_text("plugin: slurm\npartition: gpu\n")
    listed = subprocess.run(
        [str(VENV_BIN / "ansible-inventory"), "-i", str(inventory), "--list"],
        cwd=REPO, env=environment(cluster), capture_output=True, text=True, check=True,
    )  # fmt: skip
    document = json.loads(listed.stdout)
    assert document["gpu_nodes"]["hosts"] == NODES
    variables = {
        host: {key: plain(value) for key, value in found.items()}
        for host, found in document["_meta"]["hostvars"].items()
    }
    assert {host: variables[host]["ansible_host"] for host in NODES} == {
        name: cluster.node(name).ip for name in NODES
    }
    assert {variables[host]["gpuval_gpus_per_node"] for host in NODES} == {GPUS}
    assert {variables[host]["slurm_state"] for host in NODES} == {"IDLE"}


def test_a_step_across_the_nodes_runs_as_an_srun_step_of_gpuvals_allocation(
    slurm: tuple[SlurmCluster, Path], steps_run: tuple[subprocess.CompletedProcess[str], str]
) -> None:
    cluster, _ = slurm
    done, output = steps_run
    assert done.returncode == 0, done.stdout[-4000:]
    ranks = sorted(
        (line.split() for line in output.splitlines() if line.startswith("step=")),
        key=lambda words: int(words[2].removeprefix("rank=")),
    )
    job = ranks[0][0].removeprefix("step=").split(".")[0]
    # Two ranks on each node, ranks 0..5 filled node by node, all of step 0 of one job.
    assert [(r[0], r[1], r[2]) for r in ranks] == [
        (f"step={job}.0", f"node={NODES[rank // 2]}", f"rank={rank}") for rank in range(6)
    ]
    # PMIx (srun --mpi=pmix) and the contract's environment, commas and all, in every rank.
    assert [r[3] for r in ranks] == [f"pmix_rank={rank}" for rank in range(6)]
    assert {tuple(r[4:]) for r in ranks} == {("ifname=eth0", "hca=mlx5_0,mlx5_1", "btl=tcp,self")}
    log = cluster.controller_log.read_text()
    assert f"_slurm_rpc_step_complete: StepId={job}.0 rc:No error" in log
    assert "selected nodelist is node[1-3]" in log
    # Released at the end of the run.
    state = cluster.run("scontrol", "--oneliner", "show", "job", job).stdout
    assert "JobState=CANCELLED" in state and "JobName=gpuval-e2e" in state, state


def test_the_mpi_preflight_passes_across_the_nodes_under_srun(
    slurm: tuple[SlurmCluster, Path], steps_run: tuple[subprocess.CompletedProcess[str], str]
) -> None:
    cluster, _ = slurm
    output = (cluster.node("node1").root / PREFLIGHT_OUTPUT).read_text()
    lines = output.splitlines()
    ranks = sorted(line for line in lines if " rank " in line and "FAILED" not in line)
    assert ranks == [
        f"gpuval-mpi-preflight rank {rank}/3 host node{rank + 1}" for rank in range(3)
    ], output
    assert "gpuval-mpi-preflight alltoall pairs 6 bad 0" in lines, output
    assert not [line for line in lines if "FAILED" in line], output


def test_the_pairs_of_a_round_run_as_concurrent_steps(
    slurm: tuple[SlurmCluster, Path], steps_run: tuple[subprocess.CompletedProcess[str], str]
) -> None:
    cluster, _ = slurm
    _, output = steps_run
    job = output.split(".", 1)[0].removeprefix("step=")
    met = {
        launcher: (cluster.node(launcher).root / PAIR_OUTPUT).read_text().strip()
        for launcher in ("node1", "node3")
    }
    # Two steps of the allocation (after the ranks' and the preflight's), each met the other's
    # rank on node1.
    assert re.fullmatch(rf"step {job}\.[23] met node3's", met["node1"]), met
    assert re.fullmatch(rf"step {job}\.[23] met node1's", met["node3"]), met
    assert met["node1"].split()[1] != met["node3"].split()[1]


def test_the_nodes_start_no_mpirun_and_hold_no_key_to_each_other(
    slurm: tuple[SlurmCluster, Path], steps_run: tuple[subprocess.CompletedProcess[str], str]
) -> None:
    cluster, _ = slurm
    node = cluster.node("node1")
    assert node.exec(["sh", "-c", "command -v mpirun"], check=False).returncode != 0
    assert not (node.root / "root/.ssh/id_gpuval_ed25519").exists()


def test_gpuval_drain_drains_the_node_a_judged_run_fails(slurm: tuple[SlurmCluster, Path]) -> None:
    cluster, work = slurm
    # The suite's sample run fails dgx-8xa100 (two NCCL checks): here it is node1.
    inventory = work / "sample.ini"
    inventory.write_text("dgx-8xa100 gpuval_slurm_node=node1\n")
    sample = REPO / "tests" / "data" / "sample-run"
    done = gpuval(cluster, "drain", str(sample), "-i", str(inventory))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("node1: drained: gpuval: nccl-tests."), done.stdout
    fields = node_fields(cluster, "node1")
    # (A loaded machine may add NOT_RESPONDING for a moment: the flags that matter are asserted.)
    assert "DRAIN" in fields["State"].split("+"), fields
    assert fields["Reason"].startswith("gpuval: nccl-tests.all_reduce.complete")


def test_a_node_drained_by_hand_is_never_resumed_and_not_tested(
    slurm: tuple[SlurmCluster, Path],
) -> None:
    cluster, work = slurm
    cluster.run("scontrol", "update", "NodeName=node2", "State=DRAIN", f"Reason={HAND_REASON}")
    done = gpuval(cluster, "resume", "node[1-3]")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "node1: resumed" in done.stdout
    assert f"node2: stays drained: drained for another reason ('{HAND_REASON}')" in done.stdout
    assert "DRAIN" not in node_fields(cluster, "node1")["State"].split("+")
    fields = node_fields(cluster, "node2")
    assert "DRAIN" in fields["State"].split("+") and fields["Reason"] == HAND_REASON, fields
    # gpuval's allocation cannot have node2: the step across all three is skipped, not run.
    run = run_steps(cluster, work, "node2-drained")
    assert run.returncode == 0, run.stdout[-4000:]
    assert "node2: not tested, Slurm could not give it: IDLE+DRAIN" in run.stdout + run.stderr
    sidecar = json.loads((cluster.node("node1").root / f"{STEP_OUTPUT}.meta.json").read_text())
    assert re.match(r"not tested: node2 not in Slurm allocation \d+", sidecar["skipped"])
    assert node_fields(cluster, "node2")["Reason"] == HAND_REASON
