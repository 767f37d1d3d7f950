"""`make bench-staged`: staged mode (group testing) against all pairs on simulated hosts.

acceptance.yml's pair phase (iperf3 pairs only) on N simulated hosts (default 32) with one or
more nodes throttled, once in staged mode and once in all-pairs mode, side by side on the same
cluster after one install run. For each: wall time, rounds (staged: the search's stages, pair
rounds counted one by one; all pairs: N-1), the nodes the report flags, and, for staged, what
the planner predicted (gpuval.plan.group_testing.simulate with the same bad nodes).

Without torch on the nodes the staged screen is one round of disjoint pairs (the group
all-reduce needs torch and judges correctness, not bandwidth). Not part of `make test`: 32
hosts take the machine for a long while. Run from the repository root as root:
  python -m tests.bench.staged_search                        # 32 hosts, node7 throttled
  python -m tests.bench.staged_search --hosts 4 --bad node3  # the path, quickly
  python -m tests.bench.staged_search --healthy-first --bad node7 node20 --modes staged \
      --keep /var/tmp/staged32 --line-rate 1000   # healthy, then two bad nodes; logs kept
  python -m tests.bench.staged_search --cluster bench-staged-1234 ...   # a cluster left up
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from gpuval.plan import inputs
from gpuval.plan.duration import estimate
from gpuval.plan.group_testing import simulate
from gpuval.plan.plan_model import Shape
from gpuval.plan.steps import pair_step
from tests.e2e.doubles import VENV_BIN
from tests.e2e.runs import PlaybookRun, inventory_dir, record, run_playbook
from tests.simhosts import faults
from tests.simhosts.cluster import Cluster, default_state_dir
from tests.simhosts.cluster import load as load_cluster
from tests.simhosts.fixtures import simulated_hosts

# A throttle far below what a healthy pair of simulated hosts measures (several Gbit/s).
THROTTLE = "100mbit"
PAIRS_ONLY: dict[str, object] = {
    "bench_pairs_allreduce": False,
    "bench_pairs_max_tries": 2,
    "gpuval_network_interface": "eth0",
    "report_fail_play": False,
}
STAGES = re.compile(r"staged search, (\d+) stage\(s\)")


def pair_rounds_run(run: PlaybookRun) -> int:
    """Distinct pair rounds of first tries (repeats run within their stage)."""
    return len({
        step.round for path in run.run_dir.glob("raw/*/pair-*.meta.json")
        if (step := pair_step(path.name.removesuffix(".meta.json"))) and step.attempt == 1
    })  # fmt: skip


def flagged(run: PlaybookRun) -> list[str]:
    """The nodes the report flags (`gpuval report` on the run folder: --tags pairs skips the
    report play)."""
    subprocess.run(
        [str(VENV_BIN / "gpuval"), "report", str(run.run_dir), "--quiet"],
        capture_output=True, check=False,
    )  # fmt: skip
    results = run.run_dir / "results.json"
    if not results.is_file():
        return []
    checks = json.loads(results.read_text())["checks"]
    return sorted({
        c["host"] for c in checks if c["check_id"].endswith(".node") and c["status"] == "fail"
    })  # fmt: skip


def load() -> str:
    """The machine's load averages (1, 5, 15 min) beside each figure: a loaded controller
    stretches every round."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def predicted_seconds(hosts: list[str], variables: dict[str, object], bad: int) -> float:
    """What `gpuval plan` predicts for this run (no GPU, no rail, no history: the documented
    defaults): the phases `--tags pairs` runs (the start play is tagged always), plus what
    each of the `bad` faulty nodes adds."""
    defaults = inputs.role_defaults(inputs.roles_dir())
    planned = estimate(Shape(tuple(hosts), 0, 0), inputs.merged(defaults, variables), {})
    ran = sum(phase.total_s for phase in planned.phases if phase.name in ("start", "pairs"))
    return ran + bad * planned.fault_s


def cluster_for(name: str | None, hosts: int) -> AbstractContextManager[Cluster]:
    """The cluster named (left up and installed by an earlier run), or a new one of `hosts`."""
    if name is None:
        return simulated_hosts(hosts, name="bench-staged")
    cluster = load_cluster(default_state_dir(name))
    if cluster is None:
        raise SystemExit(f"no simulated cluster {name} is up (python -m tests.simhosts list)")
    if len(cluster.hosts) != hosts:  # the plan and the search are worked out for --hosts
        raise SystemExit(
            f"cluster {name} has {len(cluster.hosts)} hosts: pass --hosts {len(cluster.hosts)}"
        )
    return nullcontext(cluster)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog="example: python -m tests.bench.staged_search"
    )
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument(
        "--bad", nargs="*", default=["node7"], help="nodes to throttle (none: a healthy cluster)"
    )
    parser.add_argument("--iperf3-seconds", type=int, default=2)
    parser.add_argument(
        "--modes", nargs="+", choices=["staged", "all-pairs"], default=["staged", "all-pairs"],
        help="the modes to run, in this order (all pairs at 32 hosts takes its 31 rounds, and as "
        "many again for the repeats of a bad node's pairs)",
    )  # fmt: skip
    parser.add_argument(
        "--healthy-first", action="store_true",
        help="before throttling, a staged pair phase on the healthy cluster (it must end after "
        "the screen)",
    )  # fmt: skip
    parser.add_argument(
        "--keep", type=Path, help="keep the run folders and Ansible's output of each run here"
    )
    parser.add_argument(
        "--line-rate", type=int, metavar="MBIT",
        help="every host's NIC this fast (link and sysfs speed): a rate the machine can carry "
        "for all pairs of a round at once (the simulated veths say 10000)",
    )  # fmt: skip
    parser.add_argument(
        "--cluster", metavar="NAME",
        help="a cluster an earlier run of this bench left up, installed (python -m "
        "tests.simhosts list): its install run is skipped",
    )  # fmt: skip
    arguments = parser.parse_args()
    names = [f"node{i}" for i in range(1, arguments.hosts + 1)]
    try:
        predicted = simulate(names, arguments.bad, by_pairs=True)
    except ValueError as problem:  # --bad names a node the --hosts do not have
        parser.error(str(problem))
    variables = {**PAIRS_ONLY, "bench_pairs_iperf3_seconds": arguments.iperf3_seconds}
    found: dict[str, object] = {"hosts": arguments.hosts, "bad": arguments.bad}
    with (
        tempfile.TemporaryDirectory(prefix="gpuval-bench-staged-") as folder,
        cluster_for(arguments.cluster, arguments.hosts) as cluster,
    ):
        work = Path(folder)
        reports = arguments.keep or work / "reports"
        inventory = inventory_dir(cluster, work / "staged")
        if arguments.cluster is None:  # install once, healthy
            first = run_playbook(
                "acceptance.yml", inventory, reports, "install",
                {**variables, "bench_pairs_mode": "staged"},
            )  # fmt: skip
            record(
                f"acceptance.yml, {arguments.hosts} hosts, install run: {first.seconds:.1f} s "
                f"(load {load()})"
            )
        if arguments.line_rate:
            for host in cluster.hosts:
                faults.line_rate(host, arguments.line_rate)
        healthy: list[str] = []
        runs = [("healthy", "staged", healthy)] if arguments.healthy_first else []
        runs += [(mode, mode, arguments.bad) for mode in arguments.modes]
        for label, mode, bad in runs:
            # The nodes keep each run's outputs under its id, and the collect brings all of
            # them: a cluster reused with the same ids would mix in an earlier run's files.
            run_id = f"{label}-{os.getpid()}"
            for name in bad:
                faults.throttle(cluster.host(name), THROTTLE)
            # Ansible's log file stamps every line with its time: where a round's seconds go.
            timed = {"ANSIBLE_LOG_PATH": str(reports / f"{run_id}.timed.log")}
            run = run_playbook(
                "acceptance.yml", inventory, reports, run_id,
                {**variables, "bench_pairs_mode": mode}, ["--tags", "pairs"],
                # All pairs on 32 hosts takes about half an hour on 2 cores.
                environment=timed if arguments.keep else None, limit_s=None,
            )  # fmt: skip
            stages = [int(n) for n in STAGES.findall(run.output)]
            rounds, nodes = pair_rounds_run(run), flagged(run)
            plan_s = predicted_seconds(names, {**variables, "bench_pairs_mode": mode}, len(bad))
            found[label] = {
                "wall_s": round(run.seconds, 1), "planned_s": round(plan_s, 1), "load": load(),
                "controller_cpu_s": round(run.controller_cpu_s, 1),
                "pair_rounds": rounds,
                "search_stages": stages[-1] if stages else None, "flagged": nodes,
                "exit": run.returncode,
            }  # fmt: skip
            record(
                f"pair phase, {arguments.hosts} hosts, {mode}, {', '.join(bad) or 'none'} "
                f"throttled to {THROTTLE}: {run.seconds:.1f} s ({run.controller_cpu_s:.1f} s of "
                f"controller CPU), {rounds} pair round(s), the "
                f"report flags {', '.join(nodes) or 'none'} (exit {run.returncode}); gpuval plan "
                f"predicted {plan_s:.1f} s (load {load()})"
            )
    found["predicted_staged_rounds"] = predicted.rounds
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
