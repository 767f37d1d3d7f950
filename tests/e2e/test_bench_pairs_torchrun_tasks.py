"""roles/bench_pairs' torchrun tasks (allnodes.yml: staged mode's group tests; allreduce.yml: the
all-reduce pairs of a round) through ansible-playbook with Ansible's forks at 2, four nodes on
this machine (connection local), torchrun replaced by a double.

A task runs on `forks` hosts at a time (ansible.cfg: 50). Run synchronously, a group of four
starts two members, which wait in the rendezvous for two that start only once they end; a round
of the pairs node1--node4 and node2--node3 starts node1 and node2, each waiting for a partner
that has not started. At 1,024 nodes every group over 50 and every round whose first 50 hosts
hold no whole pair fails so, after its timeout. The double is a rendezvous: it exits 1 unless
every node of its group (`--nnodes`, keyed by `--master-addr`) has started within 40 s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpuval.plan import pair_rounds, steps
from gpuval.plan.pair_plan import NodeFacts, PairPlan, PairSettings
from tests.e2e.local_playbook import REPO, run_locally

HOSTS = ["node1", "node2", "node3", "node4"]
FORKS = 2

DOUBLE = """#!{python}
import pathlib, sys, time
args = dict(a.removeprefix("--").split("=", 1) for a in sys.argv[1:] if a.startswith("--n")
            or a.startswith("--master-addr"))
group = pathlib.Path({markers!r}) / args["master-addr"]
group.mkdir(parents=True, exist_ok=True)
(group / args["node-rank"]).touch()
for _ in range(400):
    if len(list(group.iterdir())) >= int(args["nnodes"]):
        print("all", args["nnodes"], "nodes met")
        sys.exit(0)
    time.sleep(0.1)
print("rendezvous: not every node started within 40 s", file=sys.stderr)
sys.exit(1)
"""


def torchrun_plan(tmp_path: Path, collect_each_round: bool = False) -> PairPlan:
    """Four nodes with torch, each on its own loopback address (a pair's rendezvous is its
    first node's), torchrun's Python replaced by the double; with `collect_each_round`, a
    round's entries bring the first node's files to the controller."""
    double = tmp_path / "python3"
    double.write_text(DOUBLE.format(python=sys.executable, markers=str(tmp_path / "markers")))
    double.chmod(0o755)
    nodes = {
        h: NodeFacts(address=f"127.0.0.{i}", torch_version="2") for i, h in enumerate(HOSTS, 1)
    }
    settings = PairSettings(
        python=str(double), allreduce_timeout_s=45, collect_each_round=collect_each_round
    )
    return PairPlan(settings, nodes, HOSTS)


def run_tasks(tmp_path: Path, tasks: str, variables: dict[str, Any]) -> None:
    run_dir = tmp_path / "run"
    completed = run_locally(tmp_path, HOSTS, {
        "name": "torchrun tasks", "gather_facts": False,
        "vars": {
            "gpuval_node_run_dir": str(run_dir / "node" / "{{ inventory_hostname }}"),
            "bench_pairs_peer_dir": str(tmp_path / "peers" / "{{ inventory_hostname }}"),
            "bench_pairs_run_dir": str(run_dir), "bench_pairs_collect_timeout_s": 60,
            **variables,
        },
        "tasks": [{"name": "Run them", "ansible.builtin.include_tasks": str(
            REPO / "roles/bench_pairs/tasks" / tasks
        )}],
    }, forks=FORKS)  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr


def outcome(folder: Path, step: str) -> tuple[object, object]:
    sidecar = json.loads((folder / f"{step}.meta.json").read_text())
    return sidecar["exit_code"], sidecar["timed_out"]


def test_a_group_of_more_nodes_than_forks_starts_together(tmp_path: Path) -> None:
    plan = torchrun_plan(tmp_path)
    parts = plan.all_nodes_run(HOSTS, steps.group_allreduce(1))
    run_tasks(tmp_path, "allnodes.yml", {"bench_pairs_search": {"group_runs": parts}})
    leader = tmp_path / "run" / "node" / "node1"
    assert outcome(leader, parts["node1"]["name"]) == (0, False)
    for host in HOSTS[1:]:
        assert outcome(tmp_path / "peers" / host, parts[host]["name"]) == (0, False), host
    # gpuval_collect brought the leader's output to the controller.
    assert (tmp_path / "run" / "raw" / "node1" / f"{parts['node1']['name']}.meta.json").is_file()


def test_a_round_of_more_hosts_than_forks_starts_every_pair_together(tmp_path: Path) -> None:
    plan = torchrun_plan(tmp_path)
    # node1 and node2 come first in the play, and neither is the other's partner.
    round_entries = plan.rounds_with_commands(
        [[pair_rounds.entry(1, a, b, {"allreduce": 1}) for a, b in (("node1", "node4"),
                                                                   ("node2", "node3"))]]
    )[0]  # fmt: skip
    run_tasks(tmp_path, "round.yml", {"bench_pairs_round": round_entries})
    for item in round_entries:
        sides = item["run"]["allreduce"]
        first, second = item["a"], item["b"]
        assert outcome(tmp_path / "run" / "node" / first, sides["a"]["name"]) == (0, False)
        assert outcome(tmp_path / "peers" / second, sides["b"]["name"]) == (0, False)


def test_a_host_in_no_pair_of_the_round_runs_nothing_not_even_the_collect(tmp_path: Path) -> None:
    """A search's confirmation round tests a few hosts of hundreds: the others skip it whole.
    The pair's second node writes only into its peer folder, so only the first collects."""
    plan = torchrun_plan(tmp_path, collect_each_round=True)
    only = plan.rounds_with_commands([[pair_rounds.entry(1, "node1", "node4", {"allreduce": 1})]])
    for host in HOSTS:  # what an earlier phase left on every node
        node = tmp_path / "run" / "node" / host
        node.mkdir(parents=True)
        (node / "earlier.txt").write_text("an earlier phase's output\n")
    run_tasks(tmp_path, "round.yml", {"bench_pairs_round": only[0]})
    raw = tmp_path / "run" / "raw"
    assert sorted(path.name for path in raw.iterdir()) == ["node1"]
    assert (raw / "node1" / "earlier.txt").is_file()
    assert (tmp_path / "peers" / "node4" / "peer-allreduce-r1-node1--node4-try1.txt").is_file()
    assert not (tmp_path / "peers" / "node2").exists()
