"""The step-name registry: name shapes, parsing back, and the steps run.json expects."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuval.plan import steps
from gpuval.plan.health_probes import ProbePaths, capture_steps, health_probes
from gpuval.plan.steps import PLAN_VARIABLES, RunPlan, expected_steps, pair_step

REPO = Path(__file__).resolve().parents[2]


def test_pair_names_round_trip() -> None:
    name = steps.pair_step_name("iperf3", 3, "node2", "node10", 2)
    assert name == "pair-iperf3-r3-node2--node10-try2"
    parsed = pair_step(name)
    assert parsed == steps.PairStep("iperf3", 3, "node2", "node10", 2)
    assert parsed is not None and parsed.name == name
    # Host names may hold single dashes; "--" separates them.
    assert pair_step("pair-nccl-r1-gpu-a--gpu-b-try1") == steps.PairStep(
        "nccl", 1, "gpu-a", "gpu-b", 1
    )


@pytest.mark.parametrize(
    "name", ["nccl-all_reduce", "pair-ping-r1-a--b-try1", "pair-iperf3-r1-a-b-try1", "peer-x"]
)
def test_other_steps_are_not_pairs(name: str) -> None:
    assert pair_step(name) is None


def test_bad_pair_names_are_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        steps.pair_step_name("ping", 1, "a", "b", 1)
    with pytest.raises(ValueError, match="'--'"):
        steps.pair_step_name("iperf3", 1, "a--x", "b", 1)


def test_an_iperf3_try_writes_both_directions_and_peers_are_named_apart() -> None:
    assert steps.pair_entry_steps("iperf3", 1, "a", "b", 1) == [
        "pair-iperf3-r1-a--b-try1",
        "pair-iperf3-r1-b--a-try1",
    ]
    assert steps.pair_entry_steps("allreduce", 2, "a", "b", 3) == ["pair-allreduce-r2-a--b-try3"]
    assert steps.peer("pair-allreduce-r2-a--b-try3") == "peer-allreduce-r2-a--b-try3"
    assert steps.peer(steps.ALLNODES_ALLREDUCE) == "peer-allnodes-allreduce"


def test_failure_records() -> None:
    assert steps.failed("install") == "failed-install"
    assert steps.failed_phase("failed-install") == "install"
    assert steps.failed_phase("failed-everything") is None
    assert steps.failed_phase("nccl-all_reduce") is None
    with pytest.raises(ValueError, match="phase"):
        steps.failed("lunch")


def test_every_step_name_is_a_plain_file_name() -> None:
    names = [*steps.PREFLIGHT_STEPS, steps.P2P, steps.MPI_PREFLIGHT, steps.ALLNODES_ALLREDUCE]
    names += [steps.failed(p) for p in steps.PHASES]
    names += [steps.intranode_nccl(c) for c in steps.COLLECTIVES]
    assert all(steps.STEP_NAME.match(n) for n in names)
    assert len(set(steps.PREFLIGHT_STEPS)) == len(steps.PREFLIGHT_STEPS)


def test_expected_steps_of_three_hosts() -> None:
    expected = expected_steps(["n1", "n2", "n3"], RunPlan())
    intranode = ["p2pBandwidthLatencyTest", *(f"nccl-{c}" for c in steps.COLLECTIVES)]
    internode = [f"internode-nccl-{c}" for c in steps.COLLECTIVES]
    health = [
        "health-kernel-log", "health-pci", "health-ib-sysfs", "health-modules",
        "health-nvlink-errors", "health-ofed", "health-lspci",
        "health-kernel-log-after", "health-pci-after", "health-ib-sysfs-after",
        "health-nvlink-errors-after", "nvidia-smi-query-after",
    ]  # fmt: skip
    # circle schedule of 3 hosts: (n2,n3), (n1,n3), (n1,n2), one round each, the earlier host first
    assert expected["n1"] == [
        *steps.PREFLIGHT_STEPS, *health, *intranode, *internode,
        "pair-iperf3-r2-n1--n3-try1", "pair-iperf3-r2-n3--n1-try1",
        "pair-iperf3-r3-n1--n2-try1", "pair-iperf3-r3-n2--n1-try1",
    ]  # fmt: skip
    assert expected["n2"] == [
        *steps.PREFLIGHT_STEPS, *health, *intranode, "pair-iperf3-r1-n2--n3-try1",
        "pair-iperf3-r1-n3--n2-try1",
    ]  # fmt: skip
    assert expected["n3"] == [*steps.PREFLIGHT_STEPS, *health, *intranode]


def test_a_health_level_adds_the_burn_and_dcgm_to_every_host() -> None:
    plan = RunPlan.from_variables({"health_level": "quick"})
    expected = expected_steps(["a", "b"], plan, ["health"])
    assert expected["a"] == expected["b"]
    assert expected["a"][-2:] == ["health-gemm-burn", "health-dcgm-diag"]
    with pytest.raises(ValueError, match="health_level must be one of"):
        RunPlan.from_variables({"health_level": "thorough"})


def test_the_health_probe_table_has_a_probe_for_each_registered_step() -> None:
    names = [probe.name for probe in health_probes()]
    assert sorted(names) == sorted(steps.HEALTH_PASSIVE_STAGES)
    after = [step["name"] for step in capture_steps("after", ProbePaths())]
    assert after == steps.health_passive_steps("after")


def test_expected_steps_follow_the_plan_and_the_phases_run() -> None:
    plan = RunPlan.from_variables({
        "bench_intranode_collectives": ["all_reduce"], "bench_intranode_p2p": "no",
        "bench_pairs_iperf3": False, "bench_pairs_nccl": "required",
    })  # fmt: skip
    expected = expected_steps(["a", "b"], plan, ["intranode", "pairs"])
    assert expected == {
        "a": ["nccl-all_reduce", "pair-nccl-r1-a--b-try1"],
        "b": ["nccl-all_reduce"],
    }
    staged = RunPlan.from_variables({"bench_pairs_mode": "staged"})
    assert expected_steps(["a", "b"], staged, ["pairs"]) == {"a": [], "b": []}
    assert expected_steps(["a"], RunPlan(), ["pairs"]) == {"a": []}
    with pytest.raises(ValueError, match="phase"):
        expected_steps(["a"], RunPlan(), ["install"])


def test_declared_racks_expect_their_rack_tests_where_bench_internode_runs_them() -> None:
    # Two racks of two trays, a rack of one and an undeclared host, in inventory order: the rack
    # test on the first tray of each rack with two or more, the network-only test across racks
    # on the first rack's first tray; a rack test that never ran then fails as missing.
    racks = {"t1": "rack-a", "t2": "rack-b", "t3": "rack-a", "t4": "rack-b", "t5": "rack-c"}
    hosts = ["t0", "t1", "t2", "t3", "t4", "t5"]
    expected = expected_steps(hosts, RunPlan(), ["internode"], racks)
    internode = [f"internode-nccl-{c}" for c in steps.COLLECTIVES]
    assert expected == {
        "t0": internode,
        "t1": ["rack-nccl-all_reduce", "xrack-nccl-all_reduce"],
        "t2": ["rack-nccl-all_reduce"],
        "t3": [], "t4": [], "t5": [],
    }  # fmt: skip
    one_rack = expected_steps(["t1", "t3"], RunPlan(), ["internode"], racks)
    assert one_rack == {"t1": [*internode, "rack-nccl-all_reduce"], "t3": []}
    assert expected_steps(["t1", "t3"], RunPlan(), ["preflight"], racks) == {
        "t1": list(steps.PREFLIGHT_STEPS), "t3": list(steps.PREFLIGHT_STEPS),
    }  # fmt: skip


def test_plan_variables_refuse_a_string_for_a_list() -> None:
    with pytest.raises(ValueError, match="bench_intranode_collectives must be a list"):
        RunPlan.from_variables({"bench_intranode_collectives": "all_reduce"})


def test_plan_defaults_are_the_roles_defaults() -> None:
    """The roles' defaults/main.yml and the registry's RunPlan must say the same."""
    defaults: dict[str, object] = {}
    for role in ("bench_intranode", "bench_internode", "bench_pairs", "health"):
        defaults.update(yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text()))
    from_roles = RunPlan.from_variables({v: defaults[v] for v in PLAN_VARIABLES.values()})
    assert from_roles == RunPlan()
    assert RunPlan().to_variables() == {
        v: (list(d) if isinstance(d, tuple) else d)
        for v, d in zip(PLAN_VARIABLES.values(), vars(RunPlan()).values(), strict=True)
    }


def test_rdma_steps_name_the_rail_and_the_memory_and_read_back() -> None:
    lanes = steps.rdma_lanes(2, gpudirect=True)
    labels = ["rail0-host", "rail0-cuda", "rail1-host", "rail1-cuda"]
    assert [lane.label for lane in lanes] == labels
    names = steps.pair_entry_steps("rdma", 3, "node2", "node10", 1, lanes)
    assert names[1] == "pair-rdma-rail0-cuda-r3-node2--node10-try1"
    assert pair_step(names[3]) == steps.PairStep(
        "rdma", 3, "node2", "node10", 1, steps.RdmaLane(1, "cuda")
    )
    assert [lane.label for lane in steps.rdma_lanes(1, gpudirect=False)] == ["rail0-host"]


def test_rdma_without_a_rail_and_a_rail_on_another_kind_are_refused() -> None:
    assert pair_step("pair-rdma-r1-a--b-try1") is None
    assert pair_step("pair-nccl-rail0-host-r1-a--b-try1") is None
    with pytest.raises(ValueError, match="rdma kind only"):
        steps.pair_step_name("rdma", 1, "a", "b", 1)


def test_the_pair_tries_reach_run_json_as_a_count_of_at_least_one() -> None:
    assert (
        RunPlan.from_variables({"bench_pairs_max_tries": "1"}).to_variables()[
            "bench_pairs_max_tries"
        ]
        == 1
    )
    for wrong in (0, "three", True):
        with pytest.raises(ValueError, match="bench_pairs_max_tries must be a whole number"):
            RunPlan.from_variables({"bench_pairs_max_tries": wrong})
