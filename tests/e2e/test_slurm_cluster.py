"""gpuval on a real Slurm (22.05, Debian's) on three simulated hosts, one cluster for every
assertion (tests/simhosts/slurm.py: slurmctld and munge on a controller host, a slurmd on each
node, GPU gres of stand-in device files):

- the slurm inventory plugin lists the partition's nodes with their GPUs;
- a step across every node through gpuval_mpirun with `gpuval_launcher: slurm` runs as an srun
  step of the allocation gpuval asked for (slurm_steps.yml), with the launch contract's
  environment, as Slurm records it (slurmctld's log of the step; no accounting database here),
  and the allocation is released after it; the nodes have no mpirun and no key to each other;
- `gpuval drain` of a judged failing run drains its node with the gpuval reason (scontrol);
- a node set DOWN during a step across every node ends that step, not passed (judged: that
  node not tested in it, the step unconfirmed for the node that ran it), and leaves gpuval's
  allocation (salloc --no-kill), where the next step runs on the nodes that stayed and a later
  step that needs the node is skipped as not tested;
- a node drained by hand with another reason is never resumed by `gpuval resume`, and it is not
  tested (the step that needs it is skipped) where gpuval's allocation cannot get it;
- `gpuval run --slurm` submits through the real sbatch a job that Slurm starts on the idle nodes
  only, and the script it submits, run in an allocation as the batch host runs it, runs gpuval
  on the job's nodes into the run folder without asking for or releasing an allocation;
- the slurm_health role makes `gpuval node-health` the nodes' HealthCheckProgram, which the
  real slurmd runs: a node whose GPU reports a hardware thermal slowdown (the GPU doubles'
  `nvidia-smi -q -x`) is drained with the gpuval reason while the others stay idle, and the
  program itself resumes it once the slowdown is gone; the node drained by hand stays drained
  though the program passes it. Its duration as slurmd ran it is recorded (a 60 s budget).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuval.checks import judge_run
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.parsers import gpuval_bench
from gpuval.parsers.slurm_text import lost_nodes
from gpuval.records.collective_bench import MpiPreflightRun
from gpuval.runfolder import read_run_folder
from tests.e2e.doubles import DOUBLES, DOUBLES_ON_HOST, REPO, VENV_BIN, doubles_data
from tests.e2e.runs import record
from tests.simhosts.slurm import SlurmCluster, slurm_cluster

pytestmark = pytest.mark.simhosts

HERE = Path(__file__).parent
NODES = ["node1", "node2", "node3"]
GPUS = 4
HAND_REASON = "disk replacement, ticket 4711"
LEAVER = "node3"
LEFT = "e2e: left during a step"
STEP_OUTPUT = "var/tmp/gpuval-e2e/slurm-ranks"
PAIR_OUTPUT = "var/tmp/gpuval-e2e/slurm-pair.txt"
PREFLIGHT_OUTPUT = "var/tmp/gpuval-e2e/mpi-preflight.txt"
# Its second try, run only where the first failed (slurm_steps.yml, as roles/mpi_preflight does).
PREFLIGHT_RETRY_OUTPUT = "var/tmp/gpuval-e2e/mpi-preflight-retry.txt"
CRASH_OUTPUT = "var/tmp/gpuval-e2e/slurm-crash.txt"
PREFLIGHT_SOURCE = REPO / "src" / "gpuval" / "nodebench" / "mpi_preflight.c"
# gpuval on the nodes: this checkout's package and the controller's site-packages, both bound
# read-only into the hosts (Debian 12's python3 is 3.11, as the controller's).
SITE_PACKAGES = str(
    Path(next(p for p in site.getsitepackages() if p.endswith("site-packages"))).resolve()
)
SOURCE = str(REPO / "src")
HEALTH_GPUVAL = "/opt/gpuval-e2e/gpuval"
HEALTH_LOG = "var/log/gpuval-node-health.log"
# slurmd runs the program every HEALTH_INTERVAL_S: short, so that a drain and a resume each take
# one or two runs of the test, not the five minutes of the role's default.
HEALTH_INTERVAL_S = 8
HEALTH_BUDGET_S = 60  # slurmd kills a HealthCheckProgram after 60 s (man slurm.conf)
HEALTH_WAIT_S = 120
THROTTLED = "node3"
# GPU0 of the throttled node: the nvidia-smi -q -x element of a hardware thermal slowdown, as
# the recorded H100 prints it, set Active (health-data.py's recording, this one edit).
SLOWDOWN_OFF = "<clocks_event_reason_hw_thermal_slowdown>Not Active<"
SLOWDOWN_ON = "<clocks_event_reason_hw_thermal_slowdown>Active<"
THROTTLE_REASON = "gpuval: health.clocks: GPU0 hw_thermal_slowdown active"
# gpuval from the bound checkout, the GPU doubles first on slurmd's PATH; its wall time as
# slurmd runs it, appended to the program's log by the role's wrapper.
HEALTH_SHIM = f"""#!/bin/sh
started=$(date +%s%N)
PATH="{DOUBLES_ON_HOST}/bin:$PATH" PYTHONPATH="{SOURCE}:{SITE_PACKAGES}" \\
  /usr/bin/python3 -m gpuval "$@"
status=$?
echo "gpuval-e2e: node-health took $(( ($(date +%s%N) - started) / 1000000 )) ms"
exit $status
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SlurmCluster, Path]]:
    work = tmp_path_factory.mktemp("e2e-slurm")
    # The MPI preflight program, built on the controller against the Open MPI the nodes get.
    preflight = work / "mpi_preflight"
    subprocess.run(["mpicc", "-O2", "-o", str(preflight), str(PREFLIGHT_SOURCE)], check=True)
    with slurm_cluster(
        len(NODES), "e2e-slurm", gpus_per_node=GPUS, extra_packages=("libopenmpi3",),
        bind_ro=[SOURCE, SITE_PACKAGES],
    ) as cluster:  # fmt: skip
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
                root = cluster.node(name).root
                shutil.copy(root / "var/log/slurmd.log", work / f"{name}.log")
                if (root / HEALTH_LOG).exists():
                    shutil.copy(root / HEALTH_LOG, work / f"{name}.node-health.log")


def environment(slurm: SlurmCluster) -> dict[str, str]:
    return {
        **os.environ,
        **slurm.environment,
        "PATH": f"{VENV_BIN}:{slurm.environment['PATH']}",
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
    }


def ini_inventory(slurm: SlurmCluster, work: Path) -> Path:
    return slurm.write_node_inventory(work / "nodes.ini")


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


def job_fields(slurm: SlurmCluster, job: str) -> dict[str, str]:
    return dict(re.findall(r"(?:^|\s)(\w+)=(\S*)", slurm.run(
        "scontrol", "--oneliner", "show", "job", job).stdout))  # fmt: skip


def wait_until_idle(slurm: SlurmCluster, nodes: str = "", timeout_s: float = 30) -> bool:
    """Whether every node (of `nodes`, Slurm's node list; empty: all) is idle within
    `timeout_s`: a cancelled job's nodes complete first, a node just resumed responds first."""
    deadline = time.monotonic() + timeout_s
    chosen = [f"--nodes={nodes}"] if nodes else []
    while slurm.run("sinfo", "--noheader", "--format=%t", *chosen).stdout.split() != ["idle"]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def submitted_job(done: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """(job id, time limit in minutes) as `gpuval run --slurm gpu` printed them."""
    assert done.returncode == 0, done.stdout + done.stderr
    submitted = re.search(
        r"Slurm job (\d+) submitted \(partition gpu, nodes 1-3, time limit (\d+) min\)",
        done.stdout,
    )
    assert submitted, done.stdout
    job, minutes = submitted.groups()
    return job, minutes


def test_gpuval_run_slurm_submits_a_low_priority_job_that_takes_only_idle_nodes(
    slurm: tuple[SlurmCluster, Path],
) -> None:
    """`gpuval run --slurm gpu` submits through the real sbatch while a user's job holds node3:
    Slurm starts gpuval's job at once on the two idle nodes, and the user's job keeps node3
    (--nodes=1-3: "as many nodes as possible ... without delaying the initiation of the job",
    man sbatch). Slurm records the job as gpuval.slurm.batch asks: whole nodes, niced behind
    users' jobs, never requeued, its script and output in the run folder. The script then fails
    on node1, which has neither the run folder nor this controller's Python: the next test runs
    it where both are."""
    cluster, work = slurm
    run_dir = work / "reports" / "slurm-job"
    user_script = work / "user-job.sh"
    user_script.write_text("#!/bin/sh\nsleep 60\n")
    user = cluster.run(
        "sbatch", "--parsable", "--partition=gpu", "--nodelist=node3", "--exclusive",
        "--output=/dev/null", str(user_script),
    ).stdout.strip()  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while job_fields(cluster, user)["JobState"] != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.5)
        job, minutes = submitted_job(gpuval(
            cluster, "run", "--slurm", "gpu", "--run-id", "slurm-job",
            "--reports", str(run_dir.parent),
        ))  # fmt: skip
        while job_fields(cluster, job)["JobState"] == "PENDING" and time.monotonic() < deadline:
            time.sleep(0.5)
        fields, holder = job_fields(cluster, job), job_fields(cluster, user)
    finally:  # (scancel's filters and job ids select what all of them match: two calls)
        cluster.run("scancel", "--name=gpuval-slurm-job")
        cluster.run("scancel", user)
        assert wait_until_idle(cluster), cluster.run("sinfo").stdout
    assert (fields["NodeList"], fields["NumNodes"], fields["BatchHost"]) == (
        "node[1-2]", "2", "node1"), fields  # fmt: skip
    assert (holder["JobState"], holder["NodeList"]) == ("RUNNING", "node3"), holder
    assert fields["JobName"] == "gpuval-slurm-job" and fields["Partition"] == "gpu", fields
    # --exclusive, --nice=10000 (DEFAULT_NICE), --no-requeue, the plan's time limit
    assert fields["OverSubscribe"] == "NO" and fields["Nice"] == "10000", fields
    assert fields["Requeue"] == "0", fields
    hours, rest = divmod(int(minutes), 60)
    assert fields["TimeLimit"] == f"{hours:02d}:{rest:02d}:00", fields
    assert fields["Command"] == str(run_dir / "slurm" / "job.sh"), fields
    assert fields["StdOut"] == str(run_dir / "slurm" / f"slurm-{job}.out"), fields
    script = (run_dir / "slurm" / "job.sh").read_text()
    assert script.splitlines()[-1].endswith(' -e "gpuval_slurm_jobid=$SLURM_JOB_ID"'), script


def test_the_job_script_runs_gpuval_in_the_job_on_the_jobs_nodes(
    slurm: tuple[SlurmCluster, Path],
) -> None:
    """What `gpuval run --slurm` submits, run as Slurm runs it on the batch host, here on the
    controller (it has gpuval and the reports folder, which a cluster shares; these nodes have
    neither): in an allocation of the three nodes, with SLURM_JOB_ID and SLURM_JOB_NODELIST as
    Slurm sets them, the script lists the job's nodes with the slurm inventory (the submitter's
    settings kept: here how to reach the nodes), runs gpuval on them (`--tags preflight`,
    passed on) into the run folder named at submission, and leaves the job to Slurm: gpuval
    neither asks for another allocation nor releases this one."""
    cluster, work = slurm
    hosts = cluster.hosts
    base = work / "submitter.slurm.yml"
    ssh_options = (f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={hosts.known_hosts}"
                   " -o IdentitiesOnly=yes")  # fmt: skip
    base.write_text(json.dumps({
        "plugin": "slurm", "partition": "gpu",
        "compose": {"ansible_user": "'root'", "ansible_python_interpreter": "'/usr/bin/python3'",
                    "ansible_ssh_private_key_file": f"'{hosts.ssh_key}'",
                    "ansible_ssh_common_args": f"'{ssh_options}'"},
    }))  # fmt: skip
    run_dir = work / "reports" / "inside-a-job"
    cluster.run("scontrol", "update", "PartitionName=gpu", "State=DOWN")
    try:  # submitted only for its script: it waits in the partition that is down, then goes
        submitted_job(gpuval(
            cluster, "run", "--slurm", "gpu", "-i", str(base), "--run-id", run_dir.name,
            "--reports", str(run_dir.parent), "--tags", "preflight",
        ))  # fmt: skip
    finally:
        cluster.run("scancel", "--name=gpuval-inside-a-job")
        cluster.run("scontrol", "update", "PartitionName=gpu", "State=UP")
    granted = cluster.run("salloc", "--no-shell", "--nodes=3", "--exclusive", "--partition=gpu",
                          "--job-name=e2e-batch-job", "--immediate=20")  # fmt: skip
    allocation = re.search(r"Granted job allocation (\d+)", granted.stderr)
    assert allocation, granted.stderr
    logged = len(cluster.controller_log.read_text())
    try:
        ran = subprocess.run(
            ["bash", str(run_dir / "slurm" / "job.sh")], cwd=REPO, capture_output=True,
            text=True, check=False, timeout=600, env={
                **environment(cluster), "SLURM_JOB_ID": allocation.group(1),
                "SLURM_JOB_NODELIST": "node[1-3]",
            },
        )  # fmt: skip
        (work / "inside-a-job.log").write_text(ran.stdout + ran.stderr)
        state = job_fields(cluster, allocation.group(1))["JobState"]
        during = cluster.controller_log.read_text()[logged:]
    finally:
        cluster.run("scancel", allocation.group(1))
        assert wait_until_idle(cluster), cluster.run("sinfo").stdout
    # The inventory made in the job gives each node Slurm's GPU GRES (4), and these nodes have
    # no nvidia-smi: preflight fails every node (FAIL, exit status 1), as it should.
    assert ran.returncode == 1, (ran.stdout + ran.stderr)[-4000:]
    said = ran.stdout + ran.stderr
    for name in NODES:
        assert f"{name}: preflight found expected {GPUS} GPUs, nvidia-smi lists 0" in said, said
    assert 'nodelist: "node[1-3]"' in (run_dir / "slurm" / "allocation.slurm.yml").read_text()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["hosts"] == NODES, meta
    assert all((run_dir / "raw" / name / "os-release.txt").is_file() for name in NODES)
    assert (run_dir / "results.json").is_file() and (run_dir / "report.html").is_file()
    # The job is still Slurm's: gpuval asked for nothing more and released nothing.
    assert state == "RUNNING" and "_slurm_rpc_allocate_resources" not in during, during


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
    # A first try that failed is tried again, as roles/mpi_preflight does: the second is judged.
    retry = cluster.node("node1").root / PREFLIGHT_RETRY_OUTPUT
    if retry.exists():
        record(f"the MPI preflight's first try failed, its second is judged: {output!r}")
        output = retry.read_text()
    lines = output.splitlines()
    ranks = sorted(line for line in lines if " rank " in line and "FAILED" not in line)
    assert ranks == [
        f"gpuval-mpi-preflight rank {rank}/3 host node{rank + 1}" for rank in range(3)
    ], output
    assert "gpuval-mpi-preflight alltoall pairs 6 bad 0" in lines, output
    assert not [line for line in lines if "FAILED" in line], output


def test_a_rank_a_signal_ends_under_srun_names_its_host_alone(
    slurm: tuple[SlurmCluster, Path], steps_run: tuple[subprocess.CompletedProcess[str], str]
) -> None:
    # Expected: srun reports node2's task ended by SIGSEGV; the preflight's parser names node2,
    # and not the nodes whose tasks exited 0 (or that srun killed after it).
    cluster, _ = slurm
    output = (cluster.node("node1").root / CRASH_OUTPUT).read_text()
    record(f"srun's words for a rank a signal ended: {output!r}")
    (run,) = gpuval_bench.parse(output, tool="mpi-preflight").runs
    assert isinstance(run, MpiPreflightRun)
    assert sorted({(p.host, p.rank) for p in run.problems}) == [("node2", 1)], output


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
    # Two steps of the allocation (after the ranks', the preflight's, its second try's where
    # its first failed, and the crashing one's), each met the other's rank on node1.
    first = 3 + (cluster.node("node1").root / PREFLIGHT_RETRY_OUTPUT).exists()
    ids = f"[{first}{first + 1}]"
    assert re.fullmatch(rf"step {job}\.{ids} met node3's", met["node1"]), met
    assert re.fullmatch(rf"step {job}\.{ids} met node1's", met["node3"]), met
    assert met["node1"].split()[1] != met["node3"].split()[1]


def test_the_nodes_start_no_mpirun_and_hold_no_key_to_each_other(
    slurm: tuple[SlurmCluster, Path], steps_run: tuple[subprocess.CompletedProcess[str], str]
) -> None:
    cluster, _ = slurm
    node = cluster.node("node1")
    assert node.exec(["sh", "-c", "command -v mpirun"], check=False).returncode != 0
    assert not (node.root / "root/.ssh/id_gpuval_ed25519").exists()


def test_a_node_that_leaves_the_allocation_mid_run_is_not_passed_and_the_run_goes_on(
    slurm: tuple[SlurmCluster, Path], steps_run: tuple[subprocess.CompletedProcess[str], str]
) -> None:
    """node3 is set DOWN while a step across the three nodes runs: Slurm ends that step (not
    passed: node3 not tested in it, unconfirmed for node1), takes node3 out of gpuval's
    allocation (salloc --no-kill) and keeps node1 and node2 in it, where the run's next step
    runs, and a later step that needs node3 is skipped as not tested; gpuval releases the
    allocation at the end."""
    cluster, work = slurm
    marker = cluster.node(LEAVER).root / "var/tmp/gpuval-e2e" / f"leave-{LEAVER}"
    started = time.monotonic()
    with subprocess.Popen(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(ini_inventory(cluster, work)),
         str(HERE / "slurm_steps.yml"), "-e", f"e2e_leaver={LEAVER}"],
        cwd=REPO, env=environment(cluster), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    ) as playbook:  # fmt: skip
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline and playbook.poll() is None:
            time.sleep(0.2)
        cluster.run("scontrol", "update", f"NodeName={LEAVER}", "State=DOWN", f"Reason={LEFT}")
        output, _ = playbook.communicate(timeout=120)
    (work / "leaver.ansible.log").write_text(output)
    record(f"slurm_steps.yml ({LEAVER} leaves), {len(NODES)} nodes: "
           f"{time.monotonic() - started:.1f} s")  # fmt: skip
    assert playbook.returncode == 0, output[-4000:]
    node1 = cluster.node("node1").root / "var/tmp/gpuval-e2e"
    left = json.loads((node1 / "slurm-leave.meta.json").read_text())
    said = (node1 / "slurm-leave.txt").read_text()
    assert left["exit_code"] not in (0, None) and not left["skipped"], left
    assert f"srun: error: Node failure on {LEAVER}" in said, said
    stayed = json.loads((node1 / "slurm-stayed.meta.json").read_text())
    assert stayed["exit_code"] == 0, stayed
    lines = sorted((node1 / "slurm-stayed.txt").read_text().split())
    job = lines[-1].removeprefix("step=").split(".")[0]
    # The step after the one node3 left (step 1) of the same allocation, on the nodes that stayed.
    assert lines == ["node=node1", "node=node2", f"step={job}.1", f"step={job}.1"], lines
    assert f"Removing failed node {LEAVER} from JobId={job}" in cluster.controller_log.read_text()
    # The later step that needs node3 again: skipped, not tested (gpuval_mpirun read the job's
    # nodes before it), no srun started.
    after = json.loads((node1 / "slurm-after.meta.json").read_text())
    assert after["skipped"] == f"not tested: {LEAVER} not in Slurm allocation {job}", after
    assert not (node1 / "slurm-after.txt").exists()
    # The step node3 left, as the judge reads it: srun's line names node3, which is not tested
    # in it; node1, which ran it, is neither passed nor failed on its exit status.
    assert lost_nodes(said) == {LEAVER: f"srun: error: Node failure on {LEAVER}"}, said
    verdicts = judged_leave_step(work / "leaver-run", node1)
    assert verdicts == {"node1": "unjudged", LEAVER: "unjudged"}, verdicts
    state = cluster.run("scontrol", "--oneliner", "show", "job", job).stdout
    assert "JobState=CANCELLED" in state and " NodeList=node[1-2] " in state, state
    # Back in service for the tests after this one (ReturnToService=2 may have done it already).
    cluster.run("scontrol", "update", f"NodeName={LEAVER}", "State=RESUME", check=False)
    assert wait_until_idle(cluster, LEAVER), node_fields(cluster, LEAVER)
    assert node_fields(cluster, LEAVER)["State"] == "IDLE", node_fields(cluster, LEAVER)


def judged_leave_step(run: Path, node1: Path) -> dict[str, str]:
    """The step node3 left, judged in a run folder of its own: each host's status of it."""
    (run / "raw" / "node1").mkdir(parents=True)
    for name in ("slurm-leave.txt", "slurm-leave.meta.json"):
        shutil.copy(node1 / name, run / "raw" / "node1" / name)
    (run / "run.json").write_text(json.dumps({"run_id": "leaver", "hosts": NODES}))
    checks = judge_run(build_evidence(read_run_folder(run)), DEFAULTS).checks
    return {c.host: c.status for c in checks if c.check_id == "step.slurm-leave"}


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
    # A node just resumed may stay not responding for a moment (slurmctld's log: "Node node1 now
    # responding" 11 ms after an allocation that left it out): the step waits until it responds,
    # as an operator would, so that only node2 is missing from gpuval's allocation.
    assert wait_until_idle(cluster, "node1"), cluster.run("sinfo").stdout
    # gpuval's allocation cannot have node2: the step across all three is skipped, not run.
    run = run_steps(cluster, work, "node2-drained")
    assert run.returncode == 0, run.stdout[-4000:]
    assert "node2: not tested, Slurm could not give it: IDLE+DRAIN" in run.stdout + run.stderr
    sidecar = json.loads((cluster.node("node1").root / f"{STEP_OUTPUT}.meta.json").read_text())
    assert re.match(r"not tested: node2 not in Slurm allocation \d+", sidecar["skipped"])
    assert node_fields(cluster, "node2")["Reason"] == HAND_REASON


def install_health_doubles(slurm: SlurmCluster, work: Path) -> Path:
    """The GPU doubles with the health recordings on every node, and the gpuval the health
    program runs; the clean `nvidia-smi -q -x` recording (returned) for putting back later."""
    data = work / "health-data"
    shutil.copytree(doubles_data(work), data)
    subprocess.run([sys.executable, str(DOUBLES / "health-data.py"), str(data)], check=True)
    for name in NODES:
        root = slurm.node(name).root
        target = root / DOUBLES_ON_HOST.lstrip("/")
        shutil.copytree(DOUBLES / "bin", target / "bin")
        shutil.copytree(data, target / "data")
        shim = root / HEALTH_GPUVAL.lstrip("/")
        shim.parent.mkdir(parents=True, exist_ok=True)
        shim.write_text(HEALTH_SHIM)
        shim.chmod(0o755)
    return data / "nvidia-smi-q.xml"


def set_gpu_recording(slurm: SlurmCluster, name: str, text: str) -> None:
    """The node's `nvidia-smi -q -x` recording replaced whole (a run never reads half of it)."""
    target = slurm.node(name).root / DOUBLES_ON_HOST.lstrip("/") / "data" / "nvidia-smi-q.xml"
    fresh = target.with_suffix(".new")
    fresh.write_text(text)
    fresh.rename(target)


def health_log(slurm: SlurmCluster, name: str) -> str:
    path = slurm.node(name).root / HEALTH_LOG
    return path.read_text() if path.exists() else ""


def exit_statuses(slurm: SlurmCluster, name: str) -> list[str]:
    """The exit status of each run of the program on the node, as its wrapper logged them."""
    return re.findall(r"gpuval node-health exit status (\d+)", health_log(slurm, name))


def wait_for_node(slurm: SlurmCluster, seen: dict[str, set[str]], done: Callable[[], bool]) -> bool:
    """Poll every node's State (each one seen kept in `seen`) until `done` or HEALTH_WAIT_S."""
    deadline = time.monotonic() + HEALTH_WAIT_S
    while time.monotonic() < deadline:
        for name in NODES:
            seen.setdefault(name, set()).add(node_fields(slurm, name)["State"])
        if done():
            return True
        time.sleep(1)
    return False


def drained(fields: dict[str, str]) -> bool:
    return "DRAIN" in fields["State"].split("+")


def test_the_health_program_drains_a_throttled_node_and_resumes_it_once_healthy(
    slurm: tuple[SlurmCluster, Path],
) -> None:
    """After the hand-drain test: node2 is drained by hand, node1 and node3 idle. slurmd runs
    the program on every node: node3 (GPU0 in hardware thermal slowdown) is drained with the
    gpuval reason; node1 passes and stays idle; node2 passes and stays drained by hand."""
    cluster, work = slurm
    clean = install_health_doubles(cluster, work)
    recording = clean.read_text()
    assert recording.count(SLOWDOWN_OFF) == GPUS
    set_gpu_recording(cluster, THROTTLED, recording.replace(SLOWDOWN_OFF, SLOWDOWN_ON, 1))
    infiniband = f"{DOUBLES_ON_HOST}/data/sys/class/infiniband"
    dropin = cluster.directory / "gpuval-health.conf"
    for name in NODES:
        (cluster.node(name).root / str(dropin.parent).lstrip("/")).mkdir(
            parents=True, exist_ok=True
        )
    variables = {
        "slurm_health_gpuval": HEALTH_GPUVAL,
        "slurm_health_interval_s": HEALTH_INTERVAL_S,
        "slurm_health_args": [
            "--sysfs-infiniband-root", infiniband,
            "--modules-file", f"{DOUBLES_ON_HOST}/data/proc-modules",
        ],
        # At a path the controller has too (the cluster's folder): slurm.conf, its Include line
        # and the drop-in the same on every side, as Slurm wants them (it logs an error for a
        # node whose slurm.conf differs from the controller's).
        "slurm_health_dropin": str(dropin),
        # The controller gets the drop-in below, then one reconfigure for the cluster.
        "slurm_health_reconfigure": False,
    }  # fmt: skip
    started = time.monotonic()
    installed = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(ini_inventory(cluster, work)),
         str(HERE / "slurm_health.yml"), "-e", json.dumps(variables)],
        cwd=REPO, env=environment(cluster), capture_output=True, text=True, check=False,
    )  # fmt: skip
    (work / "slurm_health.ansible.log").write_text(installed.stdout + installed.stderr)
    assert installed.returncode == 0, installed.stdout[-4000:]
    record(f"slurm_health role on {len(NODES)} nodes: {time.monotonic() - started:.1f} s")
    # The controller's slurm.conf includes the same drop-in (the role's README: slurm.conf and
    # the drop-in alike on the nodes and the controller, which is no Ansible host here).
    shutil.copy(cluster.node("node1").root / str(dropin).lstrip("/"), dropin)
    with cluster.conf.open("a") as conf:
        conf.write(f"Include {dropin}\n")
    cluster.run("scontrol", "reconfigure")
    assert f"HealthCheckInterval     = {HEALTH_INTERVAL_S} sec" in cluster.run(
        "scontrol", "show", "config").stdout  # fmt: skip
    seen: dict[str, set[str]] = {}
    assert wait_for_node(cluster, seen, lambda: drained(node_fields(cluster, THROTTLED))), (
        node_fields(cluster, THROTTLED),
        health_log(cluster, THROTTLED),
    )
    record(f"health program: {THROTTLED} drained {time.monotonic() - started:.1f} s after the "
           f"role started (HealthCheckInterval={HEALTH_INTERVAL_S})")  # fmt: skip
    assert node_fields(cluster, THROTTLED)["Reason"] == THROTTLE_REASON
    # The fault goes; the program's next run on the node resumes it.
    set_gpu_recording(cluster, THROTTLED, recording)
    assert wait_for_node(
        cluster, seen,
        lambda: not drained(node_fields(cluster, THROTTLED))
        and exit_statuses(cluster, THROTTLED)[-1:] == ["0"]
        # Each node's first run is unjudged (no counters captured before it): wait for a pass.
        and "node1: PASS" in health_log(cluster, "node1")
        and "node2: PASS" in health_log(cluster, "node2"),
    ), (node_fields(cluster, THROTTLED), health_log(cluster, THROTTLED))  # fmt: skip
    fields = node_fields(cluster, THROTTLED)
    assert fields["State"].split("+")[0] == "IDLE" and "Reason" not in fields, fields
    # node1 was never drained, and the program judged it (it passed).
    assert not [state for state in seen["node1"] if "DRAIN" in state.split("+")], seen
    assert "node1: PASS" in health_log(cluster, "node1")
    # node2 passed too, and stays drained by hand.
    fields = node_fields(cluster, "node2")
    assert drained(fields) and fields["Reason"] == HAND_REASON, fields
    # The program on node3 failed it, then passed it (the wrapper logs each exit status).
    statuses = exit_statuses(cluster, THROTTLED)
    assert statuses[0] == "1" and statuses[-1] == "0", statuses
    took = [
        int(ms) / 1000
        for name in NODES
        for ms in re.findall(r"gpuval-e2e: node-health took (\d+) ms", health_log(cluster, name))
    ]
    record(f"HealthCheckProgram (gpuval node-health) as slurmd ran it: {len(took)} runs on "
           f"{len(NODES)} nodes, {min(took):.1f}-{max(took):.1f} s each "
           f"(budget {HEALTH_BUDGET_S} s)")  # fmt: skip
