"""playbooks/benchmark.yml end to end on two simulated hosts where test doubles print recorded
real outputs of a 4x H100 node in place of nvidia-smi, all_reduce_perf and
p2pBandwidthLatencyTest (tests/fixtures/gpu-doubles): the intranode, internode (mpirun over ssh
between the hosts), collect and report phases run through to a report with the recorded numbers,
and the pair run and the internode run start the same launcher with the same environment.

The hosts are nodes of a real Slurm (22.05, tests/simhosts/slurm.py), which the first run does
not use. A second run on them with `gpuval_launcher: slurm` starts every multi-node step (the MPI
preflight, the internode collective, the pair's nccl-tests) as an srun step of the allocation
gpuval asks for, as slurmctld records them, and is judged as the run over ssh was.

Its own file, beside test_benchmark_playbook.py's runs without GPU: the simulated-host files run
two at a time, a file at a time, and a file this long would hold one of the two the longest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.doubles import DOUBLES_VARS, NCCL_DIR, VENV_BIN, install_doubles
from tests.e2e.runs import (
    SHORT_PAIRS,
    PlaybookRun,
    inventory_dir,
    record,
    run_playbook,
    sidecar,
    summary,
)
from tests.simhosts.slurm import SlurmCluster, slurm_cluster

pytestmark = pytest.mark.simhosts


def transport_statuses(run: PlaybookRun, source: str) -> set[str]:
    """Statuses of the checks on `source` that speak of NET/Socket."""
    results = json.loads((run.run_dir / "results.json").read_text())
    return {
        check["status"]
        for check in results["checks"]
        if Path(str(check.get("source") or "").split(":")[0]).name == source
        and "NET/Socket" in check["reason"]
    }


def failing_sources(run: PlaybookRun) -> set[str]:
    """Raw files named by the failing or erroring checks of results.json."""
    results = json.loads((run.run_dir / "results.json").read_text())
    return {
        Path(check["source"].split(":")[0]).name
        for check in results["checks"]
        if check["status"] in ("fail", "error") and check.get("source")
    }


@dataclass
class DoublesCluster:
    slurm: SlurmCluster
    inventory: Path
    reports: Path


@pytest.fixture(scope="module")
def doubles_cluster(
    tmp_path_factory: pytest.TempPathFactory, toolkits: list[str]
) -> Iterator[DoublesCluster]:
    work = tmp_path_factory.mktemp("e2e-doubles")
    # libopenmpi3 as the Slurm file's nodes have it: the same package layer serves both.
    with slurm_cluster(
        2, "e2e-doubles", gpus_per_node=4, extra_packages=("libopenmpi3",), bind_ro=toolkits
    ) as slurm:
        record(f"Slurm on 2 simulated hosts with GPU doubles: up in {slurm.start_seconds:.1f} s")
        install_doubles(slurm.hosts, work)
        nodes = slurm.write_node_inventory(work / "nodes.ini")
        inventory = inventory_dir(slurm.hosts, work / "inventory", nodes)
        try:
            yield DoublesCluster(slurm, inventory, work / "reports")
        finally:
            # slurmctld's log, for a failing test's reader (the cluster goes with it).
            (work / "slurmctld.log").write_bytes(slurm.controller_log.read_bytes())


DOUBLES = {**DOUBLES_VARS, **SHORT_PAIRS}


@pytest.fixture(scope="module")
def run_with_doubles(doubles_cluster: DoublesCluster) -> PlaybookRun:
    """One run over ssh: that a second run installs and builds nothing is runs_without_gpu's to
    show."""
    cluster = doubles_cluster
    run = run_playbook("benchmark.yml", cluster.inventory, cluster.reports, "doubles-1", DOUBLES)
    record(f"benchmark.yml, 2 hosts with recorded GPU outputs: {run.seconds:.0f} s")
    return run


@pytest.fixture(scope="module")
def slurm_run(doubles_cluster: DoublesCluster, run_with_doubles: PlaybookRun) -> PlaybookRun:
    """The same run again on the same nodes (installed by the first), with Slurm as the
    launcher: the controller's Slurm clients reach the cluster (SLURM_CONF)."""
    cluster = doubles_cluster
    environment = cluster.slurm.environment
    run = run_playbook(
        "benchmark.yml", cluster.inventory, cluster.reports, "doubles-slurm",
        {**DOUBLES, "gpuval_launcher": "slurm"},
        environment={**environment, "PATH": f"{VENV_BIN}:{environment['PATH']}"},
    )  # fmt: skip
    record(f"benchmark.yml through srun, 2 hosts with recorded GPU outputs: {run.seconds:.0f} s")
    return run


def test_recorded_gpu_outputs_run_through_to_a_report_with_their_numbers(
    run_with_doubles: PlaybookRun,
) -> None:
    run = run_with_doubles
    # The verdict is FAIL (below): the report play fails, ansible-playbook exits 2.
    assert run.returncode == 2, run.output[-6000:]
    assert "gpuval verdict FAIL" in run.output
    for host in ["node1", "node2"]:
        intranode = sidecar(run, host, "nccl-all_reduce")
        assert intranode["exit_code"] == 0
        assert intranode["command"] and "-g 4" in str(intranode["command"])
        raw = (run.run_dir / "raw" / host / "nccl-all_reduce.txt").read_text()
        assert "# Avg bus bandwidth : 98.414" in raw
        assert sidecar(run, host, "p2pBandwidthLatencyTest")["exit_code"] == 0
    internode = sidecar(run, "node1", "internode-nccl-all_reduce")
    internode_raw = run.run_dir / "raw" / "node1" / "internode-nccl-all_reduce.txt"
    assert internode["exit_code"] == 0, internode_raw.read_text()[-3000:]
    assert "-np 8" in str(internode["command"])
    measurements = (run.run_dir / "measurements.csv").read_text()
    assert "355.89" in measurements  # busbw of the 1 GiB row, as printed
    assert (run.run_dir / "report.html").is_file()
    # The verdict is FAIL for reasons of the recording, not of the suite: the doubles have no
    # recorded `nvidia-smi -q -x` / `nvlink -s` / `nvlink -e` (they exit 2, as a broken tool
    # would; the health phase does not ask again after the benchmarks what failed in preflight,
    # and asks nvlink -e before and after).
    assert summary(run)["verdict"] == "fail"
    assert failing_sources(run) == {
        "nvidia-smi-query.xml", "nvidia-smi-nvlink.txt", "health-nvlink-errors.txt",
        "health-nvlink-errors-after.txt",
    }  # fmt: skip
    # The recording replayed across nodes (the internode run, the node1--node2 nccl pair)
    # went over NET/Socket; no RDMA was there to use (no ibstat port, no declared
    # gpuval_ib_hcas), so that is a warning, not a failure (the pair's run is judged with its
    # pairs, against the network, and fails nothing either: failing_sources above).
    assert transport_statuses(run, "internode-nccl-all_reduce.txt") == {"warn"}


def test_the_pair_run_and_the_internode_run_start_the_same_launcher(
    run_with_doubles: PlaybookRun,
) -> None:
    run = run_with_doubles
    internode = sidecar(run, "node1", "internode-nccl-all_reduce")
    pair = sidecar(run, "node1", "pair-nccl-r1-node1--node2-try1")
    internode_argv, pair_argv = str(internode["command"]).split(), str(pair["command"]).split()
    launcher = internode_argv[: internode_argv.index("--host")]
    assert launcher == pair_argv[: pair_argv.index("--host")]
    assert launcher[0].startswith("/") and launcher[0].endswith("/mpirun")
    assert "btl_tcp_if_include" in launcher and "eth0" in launcher
    assert internode["env"] == pair["env"]
    env = internode["env"]
    assert isinstance(env, dict)
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert str(env["LD_LIBRARY_PATH"]).startswith(f"{NCCL_DIR}/lib")
    for name in ["NCCL_SOCKET_IFNAME", "LD_LIBRARY_PATH", "NCCL_DEBUG", "PATH"]:
        assert f"-x {name}" in str(pair["command"])


def checks_judged(run: PlaybookRun) -> dict[tuple[str, str], str]:
    """Each check's status by check id and host, from results.json."""
    results = json.loads((run.run_dir / "results.json").read_text())
    return {(c["check_id"], c["host"]): c["status"] for c in results["checks"]}


SRUN_STEPS = ("mpi-preflight", "internode-nccl-all_reduce", "pair-nccl-r1-node1--node2-try1")


def test_under_slurm_every_step_across_nodes_is_an_srun_step_of_gpuvals_allocation(
    doubles_cluster: DoublesCluster, slurm_run: PlaybookRun
) -> None:
    run, slurm = slurm_run, doubles_cluster.slurm
    # The same FAIL as over ssh (the recording's missing health outputs): exit status 2.
    assert run.returncode == 2, run.output[-6000:]
    commands = {step: str(sidecar(run, "node1", step)["command"]) for step in SRUN_STEPS}
    launched = [re.match(r"\S*srun --jobid=(\d+) ", command) for command in commands.values()]
    jobs = {found.group(1) for found in launched if found}
    assert None not in launched and len(jobs) == 1, commands
    (job,) = jobs
    assert not [command for command in commands.values() if "mpirun" in command], commands
    for step in SRUN_STEPS:
        assert sidecar(run, "node1", step)["exit_code"] == 0, step
    # What Slurm recorded (slurmctld's log, DebugFlags=Steps): one step per launch, each ended
    # without error, in the job gpuval asked for under the run's name, released at the end.
    log = slurm.controller_log.read_text()
    # (slurmctld logs a step's end once per node it ran on.)
    ended = re.findall(
        rf"_slurm_rpc_step_complete: StepId={job}\.(\d+) rc:(.*?)(?: usec=\d+)?$", log, re.M
    )
    assert sorted({int(step) for step, _ in ended}) == list(range(len(SRUN_STEPS))), ended
    assert {status for _, status in ended} == {"No error"}, ended
    state = slurm.run("scontrol", "--oneliner", "show", "job", job).stdout
    assert "JobName=gpuval-doubles-slurm" in state and "JobState=CANCELLED" in state, state
    raw = (run.run_dir / "raw" / "node1" / "internode-nccl-all_reduce.txt").read_text()
    assert "# Avg bus bandwidth : 98.414" in raw


def test_the_run_through_srun_is_judged_as_the_run_over_ssh(
    run_with_doubles: PlaybookRun, slurm_run: PlaybookRun
) -> None:
    over_ssh, through_srun = checks_judged(run_with_doubles), checks_judged(slurm_run)
    # One difference, of the run's order and not of the launcher: the first run's preflight
    # asked `mpirun --version` before its install phase put Open MPI on the nodes (skipped: a
    # warning per node); the second found it on both, the same version.
    assert {key: over_ssh.pop(key) for key in [("step.mpirun-version", "node1"),
                                               ("step.mpirun-version", "node2")]} == {
        ("step.mpirun-version", "node1"): "warn", ("step.mpirun-version", "node2"): "warn"
    }  # fmt: skip
    assert through_srun.pop(("consistency.mpi_version", "cluster")) == "pass"
    assert through_srun == over_ssh
    assert summary(slurm_run)["verdict"] == summary(run_with_doubles)["verdict"] == "fail"
