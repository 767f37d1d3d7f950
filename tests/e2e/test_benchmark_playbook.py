"""playbooks/benchmark.yml end to end on simulated hosts (no GPU on this machine).

1. Three hosts without GPUs and no pair tests, as `make run` on a machine without GPU: the run
   completes, every GPU phase is skipped with one clear line and a sidecar per step saying why,
   every host's preflight outputs reach the controller, and the report is written; its verdict
   is ERROR (nothing measured is never a pass), which this run does not fail on.
2. The same three hosts broken three ways, each run ending in a report and exit status 2 (a
   failing verdict): every node failing preflight (the inventory says 8 GPUs per node), one node
   failing its install (a package that does not exist), and a node unreachable from the start.
   The failed node's outputs so far reach the controller with a failure record naming the phase,
   the task and its message; the other nodes go on. And a fourth way: node2's link cut when the
   internode phase starts (exit status 4, a host became unreachable): what node2 measured before
   (preflight, health, intranode) is in the run folder all the same.

The runs with recorded GPU outputs are test_recorded_gpu_run.py's. The healthy runs run the
playbook twice: the second run has nothing to install or build, and its wall time (printed, and
written to $GPUVAL_TIMINGS_FILE when set) is the suite's own overhead.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from gpuval.plan.play_times import phase_windows, read_play_times
from tests.e2e.doubles import (
    REPO,
    install_empty_journal,
)
from tests.e2e.runs import (
    SHORT_PAIRS,
    PlaybookRun,
    inventory_dir,
    record,
    run_playbook,
    sidecar,
    summary,
)
from tests.simhosts import faults
from tests.simhosts.cluster import Cluster
from tests.simhosts.fixtures import simulated_hosts

pytestmark = pytest.mark.simhosts
HERE = Path(__file__).parent


def record_timings(label: str, first: PlaybookRun, second: PlaybookRun) -> None:
    record(f"{label}: first run {first.seconds:.0f} s, second run {second.seconds:.0f} s")


@dataclass
class NoGpuCluster:
    cluster: Cluster
    inventory: Path
    reports: Path

    def run(
        self,
        run_id: str,
        extra_vars: dict[str, object] | None = None,
        environment: dict[str, str] | None = None,
    ) -> PlaybookRun:
        variables = {**SHORT_PAIRS, **(extra_vars or {})}
        return run_playbook(
            "benchmark.yml", self.inventory, self.reports, run_id, variables, (), environment
        )


@pytest.fixture(scope="module")
def nogpu(tmp_path_factory: pytest.TempPathFactory, toolkits: list[str]) -> Iterator[NoGpuCluster]:
    work = tmp_path_factory.mktemp("e2e-nogpu")
    with simulated_hosts(3, name="e2e-nogpu", bind_ro=toolkits) as cluster:
        install_empty_journal(cluster)
        yield NoGpuCluster(cluster, inventory_dir(cluster, work / "inventory"), work / "reports")


# Nothing measured, judged as `make run` does on a machine without GPU. (The pair tests between
# simulated hosts measure how busy this machine's cores are; tests/e2e/test_find_the_bad_node.py
# judges them.)
NOTHING_MEASURED = {"bench_pairs_iperf3": False}


@pytest.fixture(scope="module")
def runs_without_gpu(nogpu: NoGpuCluster) -> list[PlaybookRun]:
    first = nogpu.run("nogpu-1", NOTHING_MEASURED)
    second = nogpu.run("nogpu-2", NOTHING_MEASURED)
    record_timings("benchmark.yml, 3 hosts without GPU", first, second)
    return [first, second]


@pytest.fixture(scope="module")
def broken_runs(nogpu: NoGpuCluster, runs_without_gpu: list[PlaybookRun]) -> dict[str, PlaybookRun]:
    """After the healthy runs (the packages are installed): four broken runs, the last one
    with node3 dead."""
    runs = {"every-node-fails-preflight": nogpu.run("all-preflight", {"gpuval_gpus_per_node": 8})}
    # node2 lost Open MPI's compiler wrapper, and the package meant to bring it back does not
    # exist: its install phase fails in apt.
    broken = nogpu.inventory.parent / "host_vars" / "node2.yml"
    broken.write_text("openmpi_packages: [gpuval-no-such-package]\n")
    mpicc = nogpu.cluster.host("node2").root / "usr" / "bin" / "mpicc"
    hidden = mpicc.with_name("mpicc.gpuval-test")
    mpicc.rename(hidden)
    try:
        runs["one-node-fails-install"] = nogpu.run("one-install")
    finally:
        broken.unlink()
        hidden.rename(mpicc)
    runs["node-lost-at-internode"] = cut_node2_at_internode(nogpu)
    faults.kill_host(nogpu.cluster, nogpu.cluster.host("node3"))
    runs["node-unreachable-from-the-start"] = nogpu.run("unreachable")
    for label, run in runs.items():
        record(f"benchmark.yml, 3 hosts, {label}: {run.seconds:.0f} s, exit {run.returncode}")
    return runs


def cut_node2_at_internode(nogpu: NoGpuCluster) -> PlaybookRun:
    """A run whose node2 loses its link (every packet it receives dropped) when the internode
    phase starts, cut by a callback of the tests (callback_plugins/play_fault.py); the link is
    back for the runs after it."""
    cut = [
        sys.executable, "-m", "tests.simhosts", "drop", "--state-dir", nogpu.cluster.state_dir,
        "node2",
    ]  # fmt: skip
    environment = {
        "ANSIBLE_CALLBACK_PLUGINS": f"{REPO / 'plugins/callback'}:{HERE / 'callback_plugins'}",
        "ANSIBLE_CALLBACKS_ENABLED": "gpuval_interrupted,gpuval_preload,play_fault",
        "GPUVAL_FAULT_AT_PLAY": "Benchmark across the nodes",
        "GPUVAL_FAULT_COMMAND": json.dumps(cut),
    }
    try:
        return nogpu.run("node2-lost", NOTHING_MEASURED, environment)
    finally:
        faults.restore_traffic(nogpu.cluster.host("node2"))


def test_run_without_gpu_completes_and_reports_the_skipped_phases(
    runs_without_gpu: list[PlaybookRun],
) -> None:
    for run in runs_without_gpu:
        # Verdict ERROR (below): the report play fails, ansible-playbook exits 2.
        assert run.returncode == 2, run.output[-6000:]
        hosts = ["node1", "node2", "node3"]
        meta = json.loads((run.run_dir / "run.json").read_text())
        assert meta["hosts"] == hosts
        for host in hosts:
            assert (run.run_dir / "raw" / host / "os-release.txt").read_text().strip()
            assert "no NVIDIA driver" in str(sidecar(run, host, "nvidia-smi")["skipped"])
            nccl = sidecar(run, host, "nccl-all_reduce")
            assert nccl["raw"] is None
            assert "no usable GPU" in str(nccl["skipped"])
            assert f"{host}: intranode benchmarks skipped: no usable GPU" in run.output
        assert run.output.count("intranode benchmarks skipped") == 3
        assert run.output.count("internode benchmarks skipped: no usable GPU on node1") == 1
        assert "no usable GPU" in str(sidecar(run, "node1", "internode-nccl-sendrecv")["skipped"])
        assert not (run.run_dir / "raw" / "node2" / "internode-nccl-sendrecv.meta.json").exists()
        # No GPU phase measured anything and no pair test ran: no evidence, never a pass.
        assert summary(run)["verdict"] == "error"
        assert "gpuval verdict ERROR" in run.output
        report = (run.run_dir / "report.html").read_text()
        assert "no usable GPU on this host" in report
        # The hosts' journald holds no kernel message (install_empty_journal): the kernel log
        # is read another way or left unjudged, never a failure of the node.
        assert not [c for c in kernel_log_checks(run) if c["status"] in ("fail", "error")]
        assert not [c for c in kernel_log_checks(run) if c["check_id"] == "parse.error"]


def kernel_log_checks(run: PlaybookRun) -> list[dict[str, str]]:
    """The checks of results.json on a kernel log, before or after the benchmarks."""
    results = json.loads((run.run_dir / "results.json").read_text())
    return [
        check
        for check in results["checks"]
        if Path(str(check.get("source") or "").split(":")[0]).name.startswith("health-kernel-log")
        or check["check_id"] == "health.xid"
    ]


def install_and_build_output(run: PlaybookRun) -> str:
    start = run.output.index("PLAY [Install the CUDA toolkit")
    return run.output[start : run.output.index("PLAY [Benchmark the GPUs inside each node]")]


def changed_tasks(output: str) -> set[str]:
    """The titles ("role : name") of the tasks that changed something on some host."""
    blocks = re.split(r"^TASK \[", output, flags=re.M)[1:]
    return {block.split("] ", 1)[0] for block in blocks if "\nchanged: " in block}


def tasks_of(task_file: Path, role: str) -> set[str]:
    """The titles of a role's task file, blocks' tasks included."""
    pending, titles = list(yaml.safe_load(task_file.read_text())), set()
    while pending:
        task = pending.pop()
        titles.add(f"{role} : {task['name']}")
        pending += task.get("block", [])
    return titles


# The run's ssh key is made per run and removed when the run ends (item 11 of issue 14): setting
# it up changes the nodes on every run by design.
PER_RUN_SSH_KEY = tasks_of(REPO / "roles" / "openmpi" / "tasks" / "ssh.yml", "openmpi")
SET_UP_SSH = next(title for title in PER_RUN_SSH_KEY if "Set up the user's ssh files" in title)


def test_second_run_installs_and_builds_nothing(runs_without_gpu: list[PlaybookRun]) -> None:
    first, second = runs_without_gpu
    assert changed_tasks(install_and_build_output(first)) - PER_RUN_SSH_KEY
    changed = changed_tasks(install_and_build_output(second))
    assert changed <= PER_RUN_SSH_KEY
    assert SET_UP_SSH in changed
    # The run's private key travels to the nodes as a module parameter: never into the output.
    assert "PRIVATE KEY" not in first.output + second.output
    assert second.output.count("nccl-tests build skipped: no GPU architecture known") == 3


# The phases of the plan in a full run's order (gpuval.plan.duration): the Slurm allocation's
# plays name none, the collect, the ssh clean-up and the report are the report phase.
PLAN_PHASES = ["start", "preflight", "health", "install", "openmpi", "build", "intranode",
               "mpi-preflight", "internode", "pairs", "health", "report"]  # fmt: skip


def test_each_phase_keeps_its_play_times_and_the_next_plan_learns_from_them(
    runs_without_gpu: list[PlaybookRun],
) -> None:
    first, second = runs_without_gpu
    windows = phase_windows(read_play_times(first.run_dir).plays)
    assert [window.phase for window in windows] == PLAN_PHASES
    assert 0 < sum(window.duration_s for window in windows) <= first.seconds
    # The first run is in the reports' history: the second run's plan takes Ansible's time per
    # phase from it (three nodes without GPU, as this one).
    plan = json.loads((second.run_dir / "plan.json").read_text())
    sources = [step["source"] for phase in plan["phases"] for step in phase["steps"]
               if step["key"] == "phase-overhead" and phase["name"] != "pairs"]  # fmt: skip
    assert sources == ["history: median of 1"] * (len(PLAN_PHASES) - 1)


def test_the_launch_contract_is_cached_as_plain_values(
    nogpu: NoGpuCluster, runs_without_gpu: list[PlaybookRun]
) -> None:
    """ansible-playbook reads every host's cached facts back for each task; a value it tagged
    with where it came from costs some forty times a plain one to read (openmpi_launch's 70
    tagged values: 10 ms a host a task, in its main process)."""
    cached = sorted((nogpu.inventory.parent / "facts").glob("*node*"))
    assert len(cached) == 3
    for path in cached:
        facts = json.loads(json.loads(path.read_text())["__payload__"])
        contract = facts["openmpi_launch"]
        # At most the contract itself is tagged (where set_fact made it), none of its values.
        plain = contract["value"] if "__ansible_type" in contract else contract
        assert "__ansible_type" not in json.dumps(plain)
        assert plain["mpirun"].endswith("mpirun") and "--mca" in plain["args"]


def failure_record(run: PlaybookRun, host: str, phase: str) -> tuple[str, dict[str, object]]:
    raw = (run.run_dir / "raw" / host / f"failed-{phase}.txt").read_text()
    return raw, sidecar(run, host, f"failed-{phase}")


def failing_checks_of(run: PlaybookRun, host: str) -> list[dict[str, str]]:
    results = json.loads((run.run_dir / "results.json").read_text())
    return [c for c in results["checks"] if c["host"] == host and c["status"] in ("fail", "error")]


def test_every_node_failing_preflight_still_ends_in_a_report(
    broken_runs: dict[str, PlaybookRun],
) -> None:
    run = broken_runs["every-node-fails-preflight"]
    assert run.returncode == 2, run.output[-6000:]
    assert (run.run_dir / "report.html").is_file()
    assert summary(run)["verdict"] == "fail"
    for host in ["node1", "node2", "node3"]:
        # The preflight outputs that say why reached the controller.
        assert (run.run_dir / "raw" / host / "os-release.txt").read_text().strip()
        assert "no NVIDIA driver" in str(sidecar(run, host, "nvidia-smi")["skipped"])
        text, meta = failure_record(run, host, "preflight")
        assert "Stop on problems that make the run meaningless" in text
        assert "expected 8 GPUs, nvidia-smi lists 0" in text
        assert meta["exit_code"] == 1
        # Left out of every later phase.
        assert not (run.run_dir / "raw" / host / "nccl-all_reduce.meta.json").exists()
        assert any("failed-preflight" in str(c.get("source")) for c in failing_checks_of(run, host))


def test_one_node_failing_its_install_is_reported_and_the_others_go_on(
    broken_runs: dict[str, PlaybookRun],
) -> None:
    run = broken_runs["one-node-fails-install"]
    assert run.returncode == 2, run.output[-6000:]
    assert summary(run)["verdict"] == "fail"
    text, _ = failure_record(run, "node2", "install")
    assert "Install the distribution's Open MPI" in text
    assert "gpuval-no-such-package" in text
    assert (run.run_dir / "raw" / "node2" / "os-release.txt").is_file()
    assert not (run.run_dir / "raw" / "node2" / "nccl-all_reduce.meta.json").exists()
    for host in ["node1", "node3"]:
        assert not (run.run_dir / "raw" / host / "failed-install.txt").exists()
        assert "no usable GPU" in str(sidecar(run, host, "nccl-all_reduce")["skipped"])
    measured = list((run.run_dir / "raw" / "node1").glob("pair-iperf3-*node3*.json"))
    assert measured, "node1 and node3 measured their pair without node2"


def test_a_node_unreachable_from_the_start_is_reported(
    broken_runs: dict[str, PlaybookRun],
) -> None:
    run = broken_runs["node-unreachable-from-the-start"]
    assert run.returncode == 2, run.output[-6000:]
    assert summary(run)["verdict"] == "fail"
    text, _ = failure_record(run, "node3", "preflight")
    # ping ignores the unreachable host so that the next task can record it and fail the node
    assert text.startswith(
        "node3 unreachable in phase preflight, task 'Stop on a node that cannot be reached': "
    )
    assert "ssh: connect to host" in text
    assert sorted(p.name for p in (run.run_dir / "raw" / "node3").iterdir()) == [
        "failed-preflight.meta.json", "failed-preflight.txt"
    ]  # fmt: skip
    for host in ["node1", "node2"]:
        assert (run.run_dir / "raw" / host / "os-release.txt").is_file()
    assert failing_checks_of(run, "node3")


def test_a_node_cut_off_mid_run_keeps_what_it_measured(
    broken_runs: dict[str, PlaybookRun],
) -> None:
    run = broken_runs["node-lost-at-internode"]
    assert "play_fault: " in run.output, "the test's callback did not cut node2's link"
    # A host became unreachable mid-run: ansible-playbook exits 4, the report written all the same.
    assert run.returncode == 4, run.output[-6000:]
    assert "fatal: [node2]: UNREACHABLE!" in run.output
    # Nothing measured on these hosts without GPU: never a pass (as the runs without GPU).
    assert summary(run)["verdict"] == "error"
    node2 = run.run_dir / "raw" / "node2"
    # What node2 measured before the cut reached the controller: its preflight, its node health
    # and its intranode steps (skipped on a machine without GPU: a sidecar saying why).
    assert (node2 / "os-release.txt").read_text().strip()
    assert sidecar(run, "node2", "os-release")["exit_code"] == 0
    assert (node2 / "health-kernel-log.txt").is_file()
    assert sidecar(run, "node2", "health-kernel-log")["phase"] == "health"
    assert "no usable GPU" in str(sidecar(run, "node2", "nccl-all_reduce")["skipped"])
    assert (node2 / "p2pBandwidthLatencyTest.meta.json").is_file()
    # And the report names node2 as lost: what it should have done after the cut is missing.
    reasons = [c["reason"] for c in failing_checks_of(run, "node2")]
    assert any("output was lost" in reason for reason in reasons), reasons
    for host in ["node1", "node3"]:  # the others went on to the end
        assert (run.run_dir / "raw" / host / "health-kernel-log-after.meta.json").is_file()


def test_the_report_names_the_task_and_message_that_failed_each_node(
    broken_runs: dict[str, PlaybookRun],
) -> None:
    """The judge reads the failure records (gpuval.plan.steps.failed_phase): the check's reason
    carries the task and the message, not only the step's exit status."""
    cases = [
        ("every-node-fails-preflight", "node1", "expected 8 GPUs, nvidia-smi lists 0"),
        ("one-node-fails-install", "node2", "gpuval-no-such-package"),
        ("node-unreachable-from-the-start", "node3", "unreachable"),
    ]
    for label, host, message in cases:
        reasons = [c["reason"] for c in failing_checks_of(broken_runs[label], host)]
        assert any(message in reason for reason in reasons), (label, reasons)
