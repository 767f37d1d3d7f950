"""The pair plan in commands (gpuval.plan.pair_plan): what roles/bench_pairs runs on each node.

Expected command lines are written from the tools' own usage (iperf3 -c/-s -1 -J -t -p -R,
ib_write_bw -d/-p/-F/--report_gbits/-D/-q/-x/--use_cuda, torch.distributed.run's static
rendezvous, nccl-tests' -b/-e/-f/-g/-c), not from the code under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuval.plan import pair_rounds, steps
from gpuval.plan.pair_plan import (
    NodeFacts,
    PairPlan,
    PairSettings,
    as_bool,
    groups_budget,
    switch,
)


def node(address: str, **facts: Any) -> NodeFacts:
    """A node with torch, GPUs, nccl-tests, two HCAs and ib_write_bw unless told otherwise."""
    defaults: dict[str, Any] = {
        "torch_version": "2.4.0",
        "has_gpu": True,
        "gpu_count": 8,
        "nccl_tests_bin_dir": "/opt/nccl-tests/build",
        "rdma_hcas": ("mlx5_0", "mlx5_1"),
        "has_rdma_binary": True,
    }
    return NodeFacts(address=address, **{**defaults, **facts})


def plan(nodes: dict[str, NodeFacts], **settings: Any) -> PairPlan:
    return PairPlan(PairSettings(**settings), nodes, list(nodes))


def test_switches_and_truth_read_as_ansible_reads_them() -> None:
    assert [switch(v) for v in ("auto", False, "no", "Off", "required", True)] == [
        "auto", "false", "false", "false", "required", "required",
    ]  # fmt: skip
    assert [as_bool(v) for v in ("yes", "on", "1", 1, True, "false", "no", "", None, 0)] == [
        True, True, True, True, True, False, False, False, False, False,
    ]  # fmt: skip
    settings = PairSettings.from_variables(
        {
            "bench_pairs_iperf3": "no",
            "bench_pairs_allreduce": False,
            "bench_pairs_rdma": True,
            "bench_pairs_iperf3_port": "6000",
            "bench_pairs_iperf3_args": ["-P", 4],
            "bench_pairs_rdma_gpus": {"mlx5_1": 3},
            "bench_pairs_rdma_gid_index": 3,
            "bench_pairs_rdma_parallel": "no",
            "bench_pairs_pythonpath": None,  # unset: the default
            "other_role_variable": "ignored",
        }
    )
    assert settings == PairSettings(
        iperf3=False,
        allreduce="false",
        rdma="required",
        iperf3_port=6000,
        iperf3_args=("-P", "4"),
        rdma_gpus={"mlx5_1": 3},
        rdma_gid_index="3",
        rdma_parallel=False,
    )


def test_node_facts_from_hostvars() -> None:
    facts = NodeFacts.from_variables(
        "node1",
        {
            "ansible_host": "192.0.2.1",
            "openmpi_address": "10.0.0.1",
            "preflight_has_gpu": False,
            "preflight_gpu_count": "8",
            "bench_pairs_rdma_node_hcas": ["mlx5_0"],
            "openmpi_launch": {"env": {"NCCL_SOCKET_IFNAME": "eth1"}, "addresses": {"node2": "n2"}},
        },
    )
    # openmpi's private address before the inventory's; no usable GPU: the tests use none.
    assert facts.address == "10.0.0.1"
    assert (facts.gpu_count, facts.gpus, facts.rdma_hcas) == (8, 0, ("mlx5_0",))
    assert facts.launch_env == {"NCCL_SOCKET_IFNAME": "eth1"}
    assert NodeFacts.from_variables("node3", {}).address == "node3"
    assert NodeFacts.from_variables("node3", {"ansible_host": "h3"}).address == "h3"


def test_every_kind_runs_when_every_node_can() -> None:
    both = plan({"node1": node("10.0.0.1"), "node2": node("10.0.0.2")})
    assert both.kinds == ["iperf3", "allreduce", "nccl", "rdma"]
    assert set(both.skipped.values()) == {""}
    assert both.rdma_rails == 2
    assert both.lanes == steps.rdma_lanes(2, gpudirect=True)
    assert both.summary("all-pairs", parallel=True) == (
        "pair tests (all-pairs, pairs of a round at the same time): iperf3, allreduce, nccl, rdma"
        " between 2 node(s); ib_write_bw on 2 rail(s) (rails together), GPUDirect too"
    )


def test_one_node_has_no_pair_and_says_only_that() -> None:
    # Its role never probes it (no torch import, no iperf3): no skip reason is read off facts
    # that were never gathered.
    alone = plan({"node1": node("10.0.0.1", torch_version="")})
    assert alone.summary("all-pairs", parallel=True) == (
        "no pair tests: 1 node(s) in the play, a pair needs two"
    )


def test_auto_kinds_are_skipped_naming_the_nodes_that_lack_what_they_need() -> None:
    nodes = {
        "node1": node("a1"),
        "node2": node("a2", torch_version="", nccl_tests_bin_dir=""),
        "node3": node("a3", has_gpu=False, rdma_hcas=()),
    }
    skipped = plan(nodes).skipped
    assert skipped == {
        "allreduce": "torch not importable on node2 (bench_pairs_pythonpath names where torch is)",
        # No usable GPU first, then no nccl-tests, each node once.
        "nccl": "no usable GPU or no nccl-tests on node3, node2",
        "rdma": "no RDMA HCA on node3 (preflight found none; bench_pairs_rdma_hcas or"
        " gpuval_ib_hcas names them)",
        "rdma_gpudirect": "no usable GPU on node3",
    }
    assert plan(nodes).kinds == ["iperf3"]
    # required (or true) runs them anyway: the nodes that lack them fail their pairs.
    forced = plan(nodes, allreduce="required", nccl="required", rdma="required")
    assert forced.kinds == ["iperf3", "allreduce", "nccl", "rdma"]
    # A node with fewer HCAs than another fails its missing rails: rail 1 is node1's and node2's.
    assert forced.rdma_rails == 2
    assert forced.hosts_with_rail == [["node1", "node2"], ["node1", "node2"]]
    assert forced.lanes == steps.rdma_lanes(2, gpudirect=False)
    no_binary = plan({"node1": node("a1"), "node2": node("a2", has_rdma_binary=False)})
    assert no_binary.skipped["rdma"] == "no ib_write_bw (perftest) on node2"
    off = plan(nodes, iperf3=False, allreduce="false", nccl="false", rdma="false")
    assert off.kinds == []
    assert off.skipped["rdma"] == "turned off (bench_pairs_rdma: false)"
    assert off.summary("staged", parallel=False) == (
        "pair tests (staged, one pair after another): none between 3 node(s); all-reduce pairs"
        " skipped: turned off (bench_pairs_allreduce: false); nccl-tests pairs skipped: turned"
        " off (bench_pairs_nccl: false); ib_write_bw (RDMA) pairs skipped: turned off"
        " (bench_pairs_rdma: false)"
    )


def iperf3_entry(pair_plan: PairPlan) -> Any:
    return pair_plan.with_commands(pair_rounds.entry(3, "node1", "node2", {"iperf3": 2}))


def test_iperf3_second_node_serves_twice_and_first_measures_both_ways() -> None:
    pair_plan = plan(
        {"node1": node("10.0.0.1"), "node2": node("10.0.0.2")},
        iperf3_seconds=7,
        iperf3_args=("-P", "4"),
        iperf3_timeout_s=30,
    )
    planned = iperf3_entry(pair_plan)
    assert (planned["pair"], planned["hosts"]) == ("node1--node2", ["node1", "node2"])
    run = planned["run"]["iperf3"]
    assert run["server"]["name"] == "peer-iperf3-r3-node1--node2-try2"
    assert run["server"]["command"] == ("iperf3 -s -1 -J -p 5201 & iperf3 -s -1 -J -p 5202; wait")
    assert [c["name"] for c in run["clients"]] == [
        "pair-iperf3-r3-node1--node2-try2",
        "pair-iperf3-r3-node2--node1-try2",
    ]
    assert [c["command"] for c in run["clients"]] == [
        ["iperf3", "-c", "10.0.0.2", "-J", "-t", "7", "-P", "4", "-p", "5201"],
        ["iperf3", "-c", "10.0.0.2", "-J", "-t", "7", "-P", "4", "-p", "5202", "-R"],
    ]
    assert {c["tool"] for c in run["clients"]} == {"iperf3"}
    assert {c["raw_ext"] for c in run["clients"]} == {"json"}
    # No client step carries a skip reason: the role adds one only when the partner is lost.
    assert all("skip_reason" not in c for c in run["clients"])
    # The server outlives both clients.
    assert run["server"]["timeout"] == 2 * 30 + 10
    assert "sport = :5201 or sport = :5202" in run["listening"]
    # Starting them may first wait for the host's earlier servers (timeout and kill grace),
    # then 90 s for the listening, then 30 s for the task.
    assert run["start_timeout"] == (70 + 5) + 90 + 30


def test_the_launch_contract_address_wins_over_the_node_address() -> None:
    nodes = {
        "node1": node("192.0.2.1", launch_addresses={"node2": "10.9.0.2"}),
        "node2": node("192.0.2.2"),
    }
    pair_plan = plan(nodes)
    assert iperf3_entry(pair_plan)["run"]["iperf3"]["clients"][0]["command"][2] == "10.9.0.2"
    assert pair_plan.facts()["addresses"] == {"node1": "192.0.2.1", "node2": "10.9.0.2"}


def test_allreduce_runs_torchrun_on_both_nodes_with_rank_0_on_the_first() -> None:
    nodes = {
        "node1": node("10.0.0.1", gpu_count=4, launch_env={"NCCL_SOCKET_IFNAME": "eth1"}),
        "node2": node("10.0.0.2", has_gpu=False),
    }
    pair_plan = plan(nodes, pythonpath="/shared/venv/site-packages", tools_dir="/w/bench")
    run = pair_plan.with_commands(pair_rounds.entry(1, "node1", "node2", {"allreduce": 1}))["run"]
    allreduce = run["allreduce"]
    tail = ["--max-restarts=0", "/w/bench/allreduce_bench.py", "--min-bytes", "1M",
            "--max-bytes", "64M", "--iterations", "20", "--warmup", "5"]  # fmt: skip
    assert allreduce["a"]["command"] == [
        "python3", "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=4",
        "--node-rank=0", "--master-addr=10.0.0.1", "--master-port=29500", *tail,
    ]  # fmt: skip
    # Without a usable GPU one process (gloo on the CPU).
    assert allreduce["b"]["command"] == [
        "python3", "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
        "--node-rank=1", "--master-addr=10.0.0.1", "--master-port=29500", *tail,
    ]  # fmt: skip
    assert (allreduce["a"]["name"], allreduce["b"]["name"]) == (
        "pair-allreduce-r1-node1--node2-try1",
        "peer-allreduce-r1-node1--node2-try1",
    )
    assert allreduce["a"]["tool"] == "gpuval-allreduce-bench" and "tool" not in allreduce["b"]
    assert allreduce["a"]["env"] == {
        "NCCL_SOCKET_IFNAME": "eth1",
        "PYTHONPATH": "/shared/venv/site-packages",
    }
    assert allreduce["skip_reason"] == ""
    # required without torch on node2: the pair records why it did not run.
    required = plan({**nodes, "node2": node("10.0.0.2", torch_version="")}, allreduce="required")
    entry = required.with_commands(pair_rounds.entry(1, "node1", "node2", {"allreduce": 1}))
    assert entry["run"]["allreduce"]["skip_reason"] == "torch not importable on node2"


def test_nccl_runs_one_rank_per_gpu_across_the_pair_from_the_first_node() -> None:
    pair_plan = plan(
        {"node1": node("a1", gpu_count=8), "node2": node("a2")},
        nccl_collective="all_gather",
        nccl_max_bytes="8G",
    )
    nccl = pair_plan.with_commands(pair_rounds.entry(2, "node1", "node2", {"nccl": 1}))["run"][
        "nccl"
    ]
    assert nccl["name"] == "pair-nccl-r2-node1--node2-try1"
    assert (nccl["hosts"], nccl["ranks_per_host"]) == (["node1", "node2"], 8)
    assert nccl["program"] == [
        "/opt/nccl-tests/build/all_gather_perf",
        "-b", "8", "-e", "8G", "-f", "2", "-g", "1", "-c", "1",
    ]  # fmt: skip
    assert nccl["env"] == {"NCCL_DEBUG": "INFO"}


def test_rdma_serves_every_lane_on_its_own_port_and_measures_them_from_the_first_node() -> None:
    nodes = {"node1": node("10.0.0.1"), "node2": node("10.0.0.2", rdma_hcas=("mlx5_2",))}
    pair_plan = plan(
        nodes, rdma="required", rdma_seconds=1, rdma_gid_index="3", rdma_gpus={"mlx5_2": 6},
        rdma_parallel=False,
    )  # fmt: skip
    lanes = pair_plan.lanes
    rdma = pair_plan.with_commands(pair_rounds.entry(1, "node1", "node2", {"rdma": 1}, lanes))[
        "run"
    ]["rdma"]
    common = ["-F", "--report_gbits", "-D", "1", "-q", "1", "-x", "3"]
    assert [c["name"] for c in rdma["clients"]] == [
        "pair-rdma-rail0-host-r1-node1--node2-try1",
        "pair-rdma-rail0-cuda-r1-node1--node2-try1",
        "pair-rdma-rail1-host-r1-node1--node2-try1",
        "pair-rdma-rail1-cuda-r1-node1--node2-try1",
    ]
    # Client k: node1's HCA of the rail, port 18515 + k, node2's address last; GPU memory on
    # the GPU of rail i (no GPU named for mlx5_0 or mlx5_1).
    assert [c["command"] for c in rdma["clients"]] == [
        ["ib_write_bw", "-d", "mlx5_0", "-p", "18515", *common, "10.0.0.2"],
        ["ib_write_bw", "-d", "mlx5_0", "-p", "18516", *common, "--use_cuda=0", "10.0.0.2"],
        ["ib_write_bw", "-d", "mlx5_1", "-p", "18517", *common, "10.0.0.2"],
        ["ib_write_bw", "-d", "mlx5_1", "-p", "18518", *common, "--use_cuda=1", "10.0.0.2"],
    ]
    # Sequential (diagnosis): every lane its own group, so one runs after another.
    assert [c["group"] for c in rdma["clients"]] == [
        "rail0-host", "rail0-cuda", "rail1-host", "rail1-cuda",
    ]  # fmt: skip
    # node2 has no second HCA: rail 1 is skipped on the client, and no server waits for it.
    assert [c.get("skip_reason", "") for c in rdma["clients"]] == [
        "", "", "no HCA for rail 1 on node2", "no HCA for rail 1 on node2",
    ]  # fmt: skip
    assert [s["name"] for s in rdma["servers"]] == [
        "peer-rdma-rail0-host-r1-node1--node2-try1",
        "peer-rdma-rail0-cuda-r1-node1--node2-try1",
    ]
    assert [s["command"] for s in rdma["servers"]] == [
        ["ib_write_bw", "-d", "mlx5_2", "-p", "18515", *common],
        ["ib_write_bw", "-d", "mlx5_2", "-p", "18516", *common, "--use_cuda=6"],
    ]
    # The servers start together in one call; only their ports are waited for.
    assert {s["group"] for s in rdma["servers"]} == {"servers"}
    assert "sport = :18515 or sport = :18516 )" in rdma["listening"]
    # Two lanes run, each may cost its timeout and the kill grace; a server outlives them both.
    assert rdma["clients_s"] == 2 * (60 + 5)
    assert [s["timeout"] for s in rdma["servers"]] == [2 * 65 + 10] * 2
    assert rdma["server_timeout"] == 2 * 65 + 10
    assert rdma["kill_grace_s"] == 5
    assert pair_plan.facts()["rails"] == {"node1": ["mlx5_0", "mlx5_1"], "node2": ["mlx5_2"]}
    assert pair_plan.hosts_with_rail == [["node1", "node2"], ["node1"]]


def eight_rails() -> dict[str, NodeFacts]:
    hcas = tuple(f"mlx5_{i}" for i in range(8))
    return {"node1": node("10.0.0.1", rdma_hcas=hcas), "node2": node("10.0.0.2", rdma_hcas=hcas)}


@pytest.mark.parametrize("parallel", [True, False])
def test_rails_run_together_per_memory_and_a_group_costs_its_longest_lane(parallel: bool) -> None:
    pair_plan = plan(eight_rails(), rdma_parallel=parallel)
    entry = pair_rounds.entry(1, "node1", "node2", {"rdma": 1}, pair_plan.lanes)
    rdma = pair_plan.with_commands(entry)["run"]["rdma"]
    clients = rdma["clients"]
    ports = [int(c["command"][c["command"].index("-p") + 1]) for c in clients]
    if parallel:
        # Every rail's host-memory lane, then every rail's GPU-memory lane; lane k keeps port
        # 18515 + k and its name whatever the order.
        assert [c["group"] for c in clients] == ["host"] * 8 + ["cuda"] * 8
        assert ports == [18515 + 2 * rail for rail in range(8)] + [
            18516 + 2 * rail for rail in range(8)
        ]
        assert [c["name"] for c in clients[:2]] == [
            "pair-rdma-rail0-host-r1-node1--node2-try1",
            "pair-rdma-rail1-host-r1-node1--node2-try1",
        ]
        assert clients[8]["name"] == "pair-rdma-rail0-cuda-r1-node1--node2-try1"
        groups = 2
    else:
        assert ports == list(range(18515, 18515 + 16))
        assert len({c["group"] for c in clients}) == 16
        groups = 16
    # The same 16 lanes either way, each with its own HCA and, on GPU memory, its own GPU.
    assert sorted(c["name"] for c in clients) == sorted(entry["steps"]["rdma"])
    cuda = sorted(c["command"][2] + a for c in clients for a in c["command"] if "use_cuda" in a)
    assert cuda == sorted(f"mlx5_{i}--use_cuda={i}" for i in range(8))
    assert rdma["clients_s"] == groups * (60 + 5)
    assert rdma["server_timeout"] == groups * 65 + 10
    assert rdma["task_timeout"] == groups * 65 + 70
    # The background start may first wait for the host's earlier servers of the kind (their
    # timeout and kill grace), then 90 s for the listening, then 30 s for the task.
    assert rdma["start_timeout"] == (groups * 65 + 10 + 5) + 90 + 30
    assert [s["timeout"] for s in rdma["servers"]] == [groups * 65 + 10] * 16


def test_a_group_of_skipped_lanes_costs_nothing_and_steps_alone_cost_each_their_own() -> None:
    lanes = [
        {"timeout": 60, "group": "host"},
        {"timeout": 90, "group": "host"},
        {"timeout": 60, "group": "cuda", "skip_reason": "no HCA for rail 0 on node2"},
        {"timeout": 30},
        {"timeout": 30},
        {"timeout": 10, "group": "host"},
    ]
    assert groups_budget(lanes, 5) == 95 + 0 + 35 + 35 + 15
    assert groups_budget([], 5) == 0


def test_without_a_gid_index_or_gpudirect_the_options_are_left_out() -> None:
    pair_plan = plan({"node1": node("a1"), "node2": node("a2")}, rdma_gpudirect=False)
    lanes = pair_plan.lanes
    rdma = pair_plan.with_commands(pair_rounds.entry(1, "node1", "node2", {"rdma": 1}, lanes))
    assert rdma["run"]["rdma"]["clients"][0]["command"] == [
        "ib_write_bw", "-d", "mlx5_0", "-p", "18515", "-F", "--report_gbits", "-D", "5",
        "-q", "1", "a2",
    ]  # fmt: skip
    assert pair_plan.skipped["rdma_gpudirect"] == "turned off (bench_pairs_rdma_gpudirect: false)"


def test_an_entry_runs_only_the_kinds_it_tries() -> None:
    pair_plan = plan({"node1": node("a1"), "node2": node("a2")})
    entry = pair_rounds.entry(4, "node1", "node2", {"iperf3": 3, "nccl": 2})
    assert set(pair_plan.with_commands(entry)["run"]) == {"iperf3", "nccl"}


@pytest.mark.parametrize("allreduce", ["auto", "false"])
def test_all_nodes_run_ranks_every_node_in_inventory_order(allreduce: str) -> None:
    nodes = {"node10": node("a10"), "node2": node("a2", gpu_count=2), "node3": node("a3")}
    parts = plan(nodes, allreduce=allreduce).all_nodes_run()
    if allreduce == "false":
        # Only the first node records the step, as skipped.
        assert list(parts) == ["node10"]
        assert parts["node10"]["skip_reason"] == (
            "all-reduce benchmark not run: turned off (bench_pairs_allreduce: false)"
        )
        return
    assert list(parts) == ["node10", "node2", "node3"]
    assert [p["name"] for p in parts.values()] == [
        "allnodes-allreduce", "peer-allnodes-allreduce", "peer-allnodes-allreduce",
    ]  # fmt: skip
    assert parts["node2"]["command"][3:8] == [
        "--nnodes=3", "--nproc-per-node=2", "--node-rank=1", "--master-addr=a10",
        "--master-port=29500",
    ]  # fmt: skip
    assert parts["node10"]["leader"] and not parts["node3"]["leader"]
    assert all("skip_reason" not in p for p in parts.values())


def test_a_group_test_ranks_its_own_nodes_under_its_first() -> None:
    nodes = {f"node{i}": node(f"a{i}") for i in range(1, 5)}
    parts = plan(nodes).all_nodes_run(["node3", "node4", "node9"], steps.group_allreduce(2))
    assert list(parts) == ["node3", "node4"]  # node9 is not in the play
    assert [p["name"] for p in parts.values()] == [
        "allnodes-allreduce-g2", "peer-allnodes-allreduce-g2",
    ]  # fmt: skip
    assert parts["node4"]["command"][3:7] == [
        "--nnodes=2", "--nproc-per-node=8", "--node-rank=1", "--master-addr=a3",
    ]  # fmt: skip


def test_every_torchrun_is_started_at_once_and_outlives_its_kill() -> None:
    """The role starts torchruns in the background and waits: a task runs on `forks` hosts at
    a time, and run in the task they would start a group bigger than forks in waves. The wait
    outlives the capture's timeout (which kills torchrun and writes the sidecar) and the kill
    grace."""
    nodes = {f"node{i}": node(f"a{i}") for i in range(1, 5)}
    pair_plan = plan(nodes, allreduce_timeout_s=300)
    pair = pair_plan.with_commands(pair_rounds.entry(1, "node1", "node2", {"allreduce": 1}))
    sides = [pair["run"]["allreduce"], *pair_plan.all_nodes_run().values()]
    for side in sides:
        assert side["timeout"] == 300
        assert side["wait_timeout"] == side["timeout"] + 70


@pytest.mark.parametrize(
    ("tries", "collect_each_round", "first", "collect_by"),
    [
        # iperf3's clients bring the first node's files in their own task: no collect part.
        ({"iperf3": 1}, True, ["iperf3"], "iperf3"),
        # RDMA last: its clients bring them.
        ({"rdma": 1, "iperf3": 1}, True, ["iperf3", "rdma"], "rdma"),
        # nccl-tests last (run by mpirun, no gpuval_capture): a collect part of its own.
        ({"nccl": 1, "iperf3": 1}, True, ["iperf3", "nccl", "entry_collect"], "entry_collect"),
        ({"allreduce": 1}, True, ["allreduce", "entry_collect"], "entry_collect"),
        # Nothing collected each round: no part collects.
        ({"nccl": 1, "iperf3": 1}, False, ["iperf3", "nccl"], ""),
    ],
)
def test_each_side_includes_its_kinds_in_order_and_only_the_first_collects(
    tries: dict[str, int], collect_each_round: bool, first: list[str], collect_by: str
) -> None:
    nodes = {h: node(f"10.0.0.{i}", torch_version="2", has_gpu=True) for i, h in
             enumerate(("node1", "node2"), 1)}  # fmt: skip
    planned = plan(nodes, collect_each_round=collect_each_round).with_commands(
        pair_rounds.entry(1, "node1", "node2", tries)
    )
    kinds = [part for part in first if part != "entry_collect"]
    assert planned["parts"] == {"a": first, "b": kinds}
    assert planned["collect_by"] == collect_by
    assert list(planned["run"]) == kinds
