"""playbooks/benchmark.yml end to end on two simulated hosts where test doubles print recorded
real outputs of a 4x H100 node in place of nvidia-smi, all_reduce_perf and
p2pBandwidthLatencyTest (tests/fixtures/gpu-doubles): the intranode, internode (mpirun over ssh
between the hosts), collect and report phases run through to a report with the recorded numbers,
and the pair run and the internode run start the same launcher with the same environment.

Its own file, beside test_benchmark_playbook.py's runs without GPU: the simulated-host files run
two at a time, a file at a time, and a file this long would hold one of the two the longest.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.doubles import DOUBLES_VARS, NCCL_DIR, install_doubles
from tests.e2e.runs import (
    SHORT_PAIRS,
    PlaybookRun,
    inventory_dir,
    record,
    run_playbook,
    sidecar,
    summary,
)
from tests.simhosts.fixtures import simulated_hosts

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


@pytest.fixture(scope="module")
def run_with_doubles(
    tmp_path_factory: pytest.TempPathFactory, toolkits: list[str]
) -> Iterator[PlaybookRun]:
    """One run: that a second run installs and builds nothing is runs_without_gpu's to show."""
    work = tmp_path_factory.mktemp("e2e-doubles")
    with simulated_hosts(2, name="e2e-doubles", bind_ro=toolkits) as cluster:
        install_doubles(cluster, work)
        inventory = inventory_dir(cluster, work / "inventory")
        doubles = {**DOUBLES_VARS, **SHORT_PAIRS}
        run = run_playbook("benchmark.yml", inventory, work / "reports", "doubles-1", doubles)
        record(f"benchmark.yml, 2 hosts with recorded GPU outputs: {run.seconds:.0f} s")
        yield run


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
