"""gpuval plan: the cost model's arithmetic, worked out by hand from the role defaults and the
documented step defaults (gpuval.plan.step_costs), and the history as a source."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from gpuval.cli import main
from gpuval.history.store import TABLES
from gpuval.plan import duration, group_testing, inputs, plan_model
from gpuval.plan.host_order import circle_rounds
from gpuval.plan.step_history import measured_durations

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = inputs.role_defaults(ROOT / "roles")
# nccl-tests 8 B .. 1 GiB, factor 2: 8 + 16 + ... + 2**30 bytes, 25 iterations out of and in
# place, at the documented 50 GB/s, after a 5 s start.
NCCL_1G_S = 5 + (2**31 - 8) * 25 * 2 / 50e9


CONTROLLER_CORES = 16
# CPU seconds a pair round costs the controller for a host it does not test (its skipped include).
IDLE_CPU_S = 0.05
# Ansible's fixed part of a round, once per wave of 50 hosts: 0.2 s, and 0.2 s of collect.
ROUND_FIXED_S = 0.2 + 0.2


def shape(nodes: int, gpus: int = 8, rails: int = 8) -> plan_model.Shape:
    return plan_model.Shape(
        tuple(f"n{i}" for i in range(nodes)), gpus, rails, controller_cores=CONTROLLER_CORES
    )


def controller_s(nodes: int, tested: int | None = None) -> float:
    """A pair round's controller work, over 16 cores: 1 CPU second for each host it tests
    (all of them unless said), IDLE_CPU_S for each other host of the play."""
    tested = nodes if tested is None else tested
    return (1.0 * tested + IDLE_CPU_S * (nodes - tested)) / CONTROLLER_CORES


def phase_s(nodes: int, plays: int = 1) -> float:
    """Ansible's own time for a phase: 4 s per play for each wave of 50 hosts, and 0.9 CPU
    seconds per host and play over 16 cores."""
    return plays * (4 * math.ceil(nodes / 50) + 0.9 * nodes / CONTROLLER_CORES)


def hosts_of(count: int) -> list[str]:
    return [f"node{i}" for i in range(1, count + 1)]


def pairs_phase(estimate: plan_model.RunEstimate) -> plan_model.PhaseCost:
    return next(phase for phase in estimate.phases if phase.name == "pairs")


def test_the_role_defaults_the_hand_arithmetic_starts_from() -> None:
    assert DEFAULTS["bench_pairs_iperf3_seconds"] == 10
    assert DEFAULTS["bench_pairs_rdma_seconds"] == 5
    assert DEFAULTS["bench_pairs_nccl_max_bytes"] == "1G"
    assert DEFAULTS["bench_pairs_mode"] == "auto"
    assert DEFAULTS["bench_pairs_rdma_parallel"] is True


# All pairs with the rails one after another: the mode to diagnose in, and the most to pay.
ALL_PAIRS_RAIL_BY_RAIL = {
    **DEFAULTS,
    "bench_pairs_mode": "all-pairs",
    "bench_pairs_rdma_parallel": False,
}


def test_16_nodes_all_pairs_round_by_round() -> None:
    estimate = duration.estimate(shape(16), ALL_PAIRS_RAIL_BY_RAIL, {})
    # iperf3 2 x (10 + 0.1) s, torch all-reduce 15 s, nccl pair sweep + 2 x 0.1 s launch,
    # 8 rails x 2 memories x (5 + 2) s one after another; per round Ansible's fixed part with
    # the collect and the controller's work for the 16 hosts.
    one_round = 20.2 + 15 + (NCCL_1G_S + 0.2) + 8 * 2 * 7 + ROUND_FIXED_S + controller_s(16)
    assert estimate.pair_rounds == 15
    assert pairs_phase(estimate).total_s == pytest.approx(phase_s(16) + 15 * one_round)


@pytest.mark.parametrize(("nodes", "turns"), [(100, 1), (102, 2), (200, 2)])
def test_over_forks_pairs_a_round_runs_in_turns_and_ansible_in_waves(
    nodes: int, turns: int
) -> None:
    """50 forks: a round's pairs in turns of at most 50 pairs (the first sides' clients in one
    wave each), every kind once a turn; Ansible's fixed part once per wave of 50 hosts, its
    work for each host once a round."""
    estimate = duration.estimate(shape(nodes), {**DEFAULTS, "bench_pairs_mode": "all-pairs"}, {})
    kinds = 20.2 + 15 + (NCCL_1G_S + 0.2) + 2 * 7
    waves = math.ceil(nodes / 50)
    one_round = turns * kinds + waves * ROUND_FIXED_S + controller_s(nodes)
    assert estimate.pair_rounds == nodes - 1
    assert pairs_phase(estimate).total_s == pytest.approx(phase_s(nodes) + (nodes - 1) * one_round)
    # The faulty node's pair of each of its nodes - 1 rounds, alone (one turn, one wave), two
    # more tries each: the repeats pack failing pairs into disjoint pairs, and all of them share
    # the faulty node; the pair's two hosts are worked for, the others skip the round.
    repeat = kinds + ROUND_FIXED_S + controller_s(nodes, tested=2)
    assert estimate.fault_s == pytest.approx((nodes - 1) * 2 * repeat)


def test_rails_in_parallel_cost_one_rail_per_memory() -> None:
    sequential = duration.estimate(shape(16), ALL_PAIRS_RAIL_BY_RAIL, {})
    parallel = duration.estimate(
        shape(16), {**ALL_PAIRS_RAIL_BY_RAIL, "bench_pairs_rdma_parallel": True}, {}
    )
    saved = pairs_phase(sequential).total_s - pairs_phase(parallel).total_s
    assert saved == pytest.approx(15 * 7 * 2 * 7)  # 15 rounds, 7 of the 8 rails, 2 memories, 7 s


# One round of pairs with the role defaults, rails in parallel: iperf3 2 x (10 + 0.1) s, torch
# all-reduce 15 s, nccl pair sweep + 2 x 0.1 s launch, 2 memories x (5 + 2) s, Ansible's fixed
# part with the collect; the controller's work for every host of the play comes on top.
ONE_ROUND = 20.2 + 15 + (NCCL_1G_S + 0.2) + 2 * 7 + ROUND_FIXED_S


def all_nodes_s(size: int) -> float:
    """The torch all-reduce's 15 s plus 0.1 s of launch per node."""
    return 15 + 0.1 * size


def test_staged_at_1024_nodes_is_the_all_nodes_test_plus_the_searchs_own_rounds() -> None:
    estimate = duration.estimate(shape(1024), {**DEFAULTS, "bench_pairs_mode": "staged"}, {})
    waves = 21  # 1024 hosts, 50 forks
    # The screen: every node started at once, so one all-nodes run; Ansible's own time for the
    # phase, the round's fixed part (start, wait, collect) once per wave of 50, and the
    # controller's work for each of the 1024 hosts.
    assert pairs_phase(estimate).total_s == pytest.approx(
        phase_s(1024) + all_nodes_s(1024) + ROUND_FIXED_S * waves + controller_s(1024)
    )
    # One bad node: after the screen, 9 rounds of groups (both halves of the failing group at
    # once: groups of 512 ... 2, 1024 ... 4 hosts, the fixed part in waves of 50), then the two
    # suspects of the last pair meet two partners each in two rounds of two pairs, and each of
    # those rounds repeats its failing pair twice (3 tries). The controller works for the hosts
    # each round tests; the others skip it.
    groups = sum(
        all_nodes_s(2**k)
        + ROUND_FIXED_S * math.ceil(2 ** (k + 1) / 50)
        + controller_s(1024, 2 ** (k + 1))
        for k in range(1, 10)
    )
    pairs = 2 * (ONE_ROUND + controller_s(1024, 4)) + 2 * 2 * (ONE_ROUND + controller_s(1024, 2))
    assert estimate.fault_s == pytest.approx(groups + pairs)


def test_the_plan_takes_the_searchs_own_rounds_not_a_bound() -> None:
    estimate = duration.estimate(shape(16), {**DEFAULTS, "bench_pairs_mode": "staged"}, {})
    played = group_testing.simulate(hosts_of(16), ["node1"])
    assert [kind for kind, _, _ in played.stages] == ["groups"] * 4 + ["pairs"] * 2
    assert duration.fault_search(16, 2, by_pairs=False) == played
    # Groups of 8, 4 and 2 (their all-nodes runs at once), then two rounds of pairs, each
    # repeating its failing pair twice: where 2*log2(16)+2 = 10 pair rounds were priced before.
    groups = sum(
        all_nodes_s(size) + ROUND_FIXED_S + controller_s(16, 2 * size) for size in (8, 4, 2)
    )
    pairs = 2 * (ONE_ROUND + controller_s(16, 4)) + 2 * 2 * (ONE_ROUND + controller_s(16, 2))
    assert estimate.fault_s == pytest.approx(groups + pairs)
    assert "adds 5 round(s) of the search (3 of groups, 2 of pairs" in pairs_phase(estimate).note


def test_without_the_all_reduce_the_screen_is_a_round_of_pairs() -> None:
    variables = {**DEFAULTS, "bench_pairs_mode": "staged", "bench_pairs_allreduce": False}
    estimate = duration.estimate(shape(16), variables, {})
    one_round = ONE_ROUND - 15
    assert pairs_phase(estimate).total_s == pytest.approx(
        phase_s(16) + one_round + controller_s(16)
    )
    # The failed pair's two nodes meet two partners each: two rounds of pairs (4 hosts); the
    # screen and both rounds repeat their failing pair twice (3 tries).
    assert estimate.fault_s == pytest.approx(
        2 * (one_round + controller_s(16, 4)) + 3 * 2 * (one_round + controller_s(16, 2))
    )


def test_auto_mode_is_all_pairs_up_to_8_nodes() -> None:
    auto = {**DEFAULTS, "bench_pairs_mode": "auto"}
    assert duration.estimate(shape(8), auto, {}).pairs_mode == "all-pairs"
    assert duration.estimate(shape(9), auto, {}).pairs_mode == "staged"


@pytest.mark.parametrize("nodes", [2, 3, 4, 7, 16, 33])
def test_the_round_count_is_the_circle_schedules(nodes: int) -> None:
    hosts = [f"n{i}" for i in range(nodes)]
    assert duration.all_pairs_rounds(nodes, parallel=True) == len(circle_rounds(hosts))


def test_odd_and_one_after_another_round_counts() -> None:
    assert duration.all_pairs_rounds(5, parallel=True) == 5
    assert duration.all_pairs_rounds(6, parallel=False) == 15


def _history(reports: Path, gpus: int, sidecars: dict[str, tuple[str, float, int]]) -> None:
    """A history database with one run of two nodes of `gpus` GPUs and the given sidecars."""
    run = reports / f"run-{gpus}-{len(list(reports.glob('run-*')))}"
    folder = run / "raw" / "n1"
    folder.mkdir(parents=True)
    for name, (command, seconds, exit_code) in sidecars.items():
        document = {"name": name, "command": command, "duration_s": seconds,
                    "exit_code": exit_code, "timed_out": False, "skipped": None}  # fmt: skip
        (folder / f"{name}.meta.json").write_text(json.dumps(document))
    with sqlite3.connect(reports / "history.sqlite") as db:
        if not db.execute("SELECT name FROM sqlite_master WHERE name='runs'").fetchall():
            db.executescript(TABLES)
        db.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, 'pass', NULL, NULL, 2, 1, 0)",
            (run.name, str(run), "2026-11-20T00:00:00Z", "2026-11-20T01:00:00Z"),
        )
        for host in ("n1", "n2"):
            db.execute(
                "INSERT INTO hosts VALUES (?, ?, 'pass', 'H100', ?, NULL, NULL)",
                (run.name, host, gpus),
            )


def test_history_median_replaces_the_default(tmp_path: Path) -> None:
    iperf3 = "iperf3 -c 10.0.0.2 -J -t 10"
    _history(tmp_path, 8, {
        "pair-iperf3-r1-n1--n2-try1": (iperf3, 10.5, 0),
        "pair-iperf3-r1-n2--n1-try1": (iperf3, 12.0, 0),
        "pair-iperf3-r2-n1--n3-try1": (iperf3, 11.5, 0),
        "pair-iperf3-r2-n3--n1-try1": (iperf3, 99.0, 1),  # failed: not what a step takes
        "pair-iperf3-r3-n1--n4-try1": ("iperf3 -c 10.0.0.4 -J -t 5", 6.0, 0),  # other seconds
    })  # fmt: skip
    _history(tmp_path, 4, {"pair-iperf3-r1-n1--n2-try1": (iperf3, 50.0, 0)})  # other shape
    # A node without dcgmi: its diagnostic is skipped, with no duration; it took no time.
    skipped = {
        "name": "health-dcgm-diag",
        "command": "dcgmi diag -r 1 -j",
        "duration_s": None,
        "exit_code": None,
        "timed_out": False,
        "skipped": "dcgmi not found on this host",
    }
    (tmp_path / "run-8-0" / "raw" / "n1" / "health-dcgm-diag.meta.json").write_text(
        json.dumps(skipped)
    )  # fmt: skip
    first = duration.estimate(shape(4), {**DEFAULTS, "health_level": "quick"}, {})
    measured = measured_durations(tmp_path / "history.sqlite", 8, duration.cost_keys(first))
    assert measured == {"pair-iperf3 -t 10": [10.5, 12.0, 11.5], "health-dcgm-diag": [0.0]}
    estimate = duration.estimate(shape(4), DEFAULTS, measured)
    iperf3_step = next(s for s in pairs_phase(estimate).steps if s.key == "pair-iperf3 -t 10")
    assert (iperf3_step.each_s, iperf3_step.source) == (11.5, "history: median of 3")
    others = [s for s in pairs_phase(estimate).steps if s is not iperf3_step]
    assert {s.source for s in others} == {"default"}


def test_over_the_budget_exits_1_and_names_the_biggest_saving_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["plan", "--nodes", "16", "--gpus-per-node", "8", "--rails", "8", "--reports",
            str(tmp_path), "--max-minutes", "30",
            "-e", "bench_pairs_mode=all-pairs bench_pairs_rdma_parallel=false"]  # fmt: skip
    assert main(argv) == 1
    advice = capsys.readouterr().err.splitlines()
    assert "nothing was started" in advice[0]
    # Staged leaves the all-nodes test (15 s + 16 x 0.1 s) of the ~43 min of pairs; that alone fits.
    assert advice[1].split()[:2] == ["-e", "bench_pairs_mode=staged"]
    assert len(advice) == 2


def test_an_inventory_gives_the_hosts_gpus_and_rails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    inventory = tmp_path / "cluster.ini"
    inventory.write_text(
        "[gpu_nodes]\na\nb\nc\n[gpu_nodes:vars]\ngpuval_gpus_per_node=8\n"
        "gpuval_ib_hcas=mlx5_0,mlx5_1\n"
    )
    argv = ["plan", "-i", str(inventory), "--reports", str(tmp_path), "--json"]
    assert main(argv) == 0
    plan = json.loads(capsys.readouterr().out)
    assert (plan["nodes"], plan["gpus_per_node"], plan["rails"]) == (3, 8, 2)
    assert plan["pair_rounds"] == 3  # odd: each host sits one round out


def test_the_controllers_cores_share_the_work_for_every_host(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Planned on a laptop for a 32-core controller: each pair round's controller work for
    the 1,024 hosts is 1 CPU second each over 32 cores, 32 s."""
    argv = ["plan", "--nodes", "1024", "--gpus-per-node", "8", "--controller-cores", "32"]
    assert main([*argv, "--reports", str(tmp_path), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["controller_cores"] == 32
    pairs = next(phase for phase in plan["phases"] if phase["name"] == "pairs")
    share = next(step for step in pairs["steps"] if step["key"] == "round-cpu-per-host")
    assert (share["count"], share["each_s"]) == (1, pytest.approx(32.0))


def test_unknown_gpu_count_is_an_error_saying_what_to_set(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["plan", "--nodes", "4", "--reports", str(tmp_path)]) == 2
    assert "--gpus-per-node" in capsys.readouterr().err


def test_extra_vars_read_as_ansible_playbook_reads_them(tmp_path: Path) -> None:
    mapping = tmp_path / "vars.yml"
    mapping.write_text("bench_pairs_nccl: false\n")
    found = inputs.extra_vars(
        ["bench_pairs_iperf3_seconds=5 bench_pairs_mode=staged", '{"health_level": "quick"}',
         f"@{mapping}"]
    )  # fmt: skip
    assert found == {
        "bench_pairs_iperf3_seconds": 5, "bench_pairs_mode": "staged", "health_level": "quick",
        "bench_pairs_nccl": False,
    }  # fmt: skip
    with pytest.raises(ValueError, match="KEY=VALUE"):
        inputs.extra_vars(["bench_pairs_mode"])


@pytest.mark.parametrize("option", ["--max-minutes", "--price-per-hour"])
def test_a_budget_or_price_of_zero_or_less_is_a_usage_error(
    option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["plan", "--nodes", "2", "--gpus-per-node", "8", option, "-5"])
    assert stopped.value.code == 2
    assert "'-5' is not allowed: a finite number above 0" in capsys.readouterr().err


def test_a_controller_of_no_cores_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["plan", "--nodes", "2", "--gpus-per-node", "8", "--controller-cores", "0"])
    assert stopped.value.code == 2
    assert "--controller-cores: '0' is not allowed: a whole number, 1 or more" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("levels", "named"),
    [
        (3, "health_levels must map a level name"),
        ({"standard": ["burn"]}, "health_levels.standard must be a mapping"),
        ({"standard": {"burn_seconds": "long"}}, "health_levels.standard.burn_seconds must be"),
        ({"standard": {"timeout_s": -1}}, "health_levels.standard.timeout_s must be"),
    ],
)
def test_a_malformed_health_level_is_a_usage_error_naming_its_key(
    levels: object, named: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    extra = json.dumps({"health_level": "standard", "health_levels": levels})
    arguments = ["plan", "--nodes", "2", "--gpus-per-node", "8", "--reports", str(tmp_path)]
    assert main([*arguments, "-e", extra]) == 2
    assert named in capsys.readouterr().err


def test_a_screen_by_pairs_is_followed_by_the_confirmation_pairs_only() -> None:
    """Without the all-reduce the screen is a round of disjoint pairs; one faulty node then
    costs its failed pair's two nodes meeting two partners each: two rounds of pairs, no group."""
    variables = {**DEFAULTS, "bench_pairs_mode": "staged", "bench_pairs_allreduce": False}
    note = pairs_phase(duration.estimate(shape(32), variables, {})).note
    assert "adds 2 round(s) of the search (0 of groups, 2 of pairs" in note
