"""`make bench-ansible`: the suite's own overhead, in seconds, on simulated hosts.

1. Overhead: benchmark.yml on 3 hosts with the recorded-output GPU doubles, run once to install
   and build (nothing to download: toolkit and NCCL bound in, the doubles instead of a build),
   then a second time, which has nothing to install or build. Its overhead is its wall time less
   the time a benchmark process was running on some node (the union of the steps' sidecar
   intervals). With --mitogen DIR (where `pip install --target DIR mitogen` put it), a third run
   under Mitogen's strategy.
2. Pair phase: acceptance.yml on 8 hosts (iperf3 pairs only) once to install, then its pair
   phase alone (--tags pairs) with the pairs of a round at the same time, and one pair after
   another (bench_pairs_parallel=false): 7 rounds of 4 pairs allow 4x.

Run from the repository root as root (simulated hosts): python -m tests.bench.ansible_overhead
[--mitogen DIR] [--skip pairs] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from tests.e2e.doubles import DOUBLES_VARS, install_doubles, setup_toolkits
from tests.e2e.runs import PlaybookRun, inventory_dir, process_seconds, record, run_playbook
from tests.simhosts.fixtures import simulated_hosts

PAIRS_ONLY: dict[str, object] = {
    "bench_pairs_allreduce": False,
    "bench_pairs_max_tries": 1,
    "gpuval_network_interface": "eth0",
    "report_fail_play": False,
}


def overhead(run: PlaybookRun) -> tuple[float, float]:
    """(seconds a benchmark process ran, seconds of everything else)."""
    busy = process_seconds(run.run_dir)
    return busy, run.seconds - busy


def task_results(run: PlaybookRun) -> int:
    """Task results that were not skipped, in the run's output: a measure of the suite's own
    work that, unlike seconds, does not depend on how busy the controller is. (Task banners do:
    a play of strategy free prints one again for each host that reaches the task after another
    host's task began.)"""
    return sum(
        line.startswith(("ok: [", "changed: [", "failed: [", "fatal: ["))
        for line in run.output.splitlines()
    )


def _timed_log(keep: Path | None, run_id: str) -> dict[str, str]:
    """With --keep, Ansible's log file, which stamps every line with its time: where the
    seconds go."""
    return {"ANSIBLE_LOG_PATH": str(keep / f"{run_id}.timed.log")} if keep else {}


def measure_overhead(
    work: Path, hosts: int, mitogen: Path | None, keep: Path | None
) -> dict[str, float]:
    found: dict[str, float] = {}
    reports = keep or work / "reports"
    with simulated_hosts(hosts, name="bench-overhead", bind_ro=setup_toolkits()) as cluster:
        install_doubles(cluster, work)
        inventory = inventory_dir(cluster, work / "overhead")
        variables = {**DOUBLES_VARS, "bench_pairs_iperf3_seconds": 2, "report_fail_play": False}
        first = run_playbook("benchmark.yml", inventory, reports, "first", variables)
        record(f"benchmark.yml, {hosts} hosts with GPU doubles, first run: {first.seconds:.1f} s")
        runs: dict[str, tuple[str, dict[str, str]]] = {"ansible-core": ("second", {})}
        if mitogen:
            strategy = {
                "ANSIBLE_STRATEGY_PLUGINS": str(mitogen / "ansible_mitogen/plugins/strategy"),
                "ANSIBLE_STRATEGY": "mitogen_linear",
                # In front of, not instead of, a PYTHONPATH that holds gpuval itself.
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(mitogen), os.environ.get("PYTHONPATH")])
                ),
            }
            runs["mitogen"] = ("mitogen", strategy)
        for label, (run_id, environment) in runs.items():
            environment = {**environment, **_timed_log(keep, run_id)}
            run = run_playbook(
                "benchmark.yml", inventory, reports, run_id, variables, environment=environment
            )
            busy, rest = overhead(run)
            done = task_results(run)
            record(
                f"benchmark.yml, {hosts} hosts, second run ({label}): {run.seconds:.1f} s wall, "
                f"{busy:.1f} s benchmark processes, {rest:.1f} s suite overhead "
                f"({run.controller_cpu_s:.1f} s of controller CPU), {done} task results not "
                f"skipped, exit {run.returncode}"
            )
            found[f"{label}_wall_s"], found[f"{label}_overhead_s"] = run.seconds, rest
            found[f"{label}_results"] = done
            found[f"{label}_controller_cpu_s"] = run.controller_cpu_s
    return found


def measure_pairs(work: Path, hosts: int, seconds: int, keep: Path | None) -> dict[str, float]:
    variables = {**PAIRS_ONLY, "bench_pairs_iperf3_seconds": seconds}
    reports = keep or work / "reports"
    with simulated_hosts(hosts, name="bench-pairs") as cluster:
        inventory = inventory_dir(cluster, work / "pairs")
        first = run_playbook("acceptance.yml", inventory, reports, "pairs-0", variables)
        record(f"acceptance.yml, {hosts} hosts, first run (install): {first.seconds:.1f} s")
        timed = {}
        for label, parallel in (("parallel", True), ("one pair after another", False)):
            run_id = f"pairs-{parallel}"
            run = run_playbook(
                "acceptance.yml", inventory, reports, run_id,
                {**variables, "bench_pairs_parallel": parallel}, ["--tags", "pairs"],
                environment=_timed_log(keep, run_id),
            )  # fmt: skip
            timed[label] = run.seconds
            record(
                f"pair phase, {hosts} hosts, {label}: {run.seconds:.1f} s, exit {run.returncode}"
            )
        speedup = timed["one pair after another"] / timed["parallel"]
        record(
            f"pair phase, {hosts} hosts: {speedup:.2f}x faster with the pairs of a round at once"
        )
    return {"pairs_parallel_s": timed["parallel"], "pairs_speedup": speedup}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--pair-hosts", type=int, default=8)
    parser.add_argument("--iperf3-seconds", type=int, default=3)
    parser.add_argument("--mitogen", type=Path, help="folder holding ansible_mitogen")
    parser.add_argument("--skip", choices=["overhead", "pairs"], action="append", default=[])
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the runs' folders and timestamped Ansible logs here",
    )
    arguments = parser.parse_args()
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="gpuval-bench-ansible-") as folder:
        work = Path(folder)
        if "overhead" not in arguments.skip:
            results |= measure_overhead(work, arguments.hosts, arguments.mitogen, arguments.keep)
        if "pairs" not in arguments.skip:
            results |= measure_pairs(
                work, arguments.pair_hosts, arguments.iperf3_seconds, arguments.keep
            )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
