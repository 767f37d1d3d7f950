"""Staged mode's screen judges a group's all-reduce on its bandwidth, not only on correctness: a
slow but correct node must not pass it.

The physics, written down before the code ran (nccl-tests' performance notes,
https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md): 4 nodes x 8 GPUs (R = 32
ranks), one 400 Gb/s NIC each (B = 50 GB/s per direction). A ring all-reduce of S bytes moves
2(N-1)/N x S through every node's link, so it takes 2(N-1)/N x S / B_slowest: algbw =
B_slowest x N/(2(N-1)), busbw = algbw x 2(R-1)/R = 50 x (62/32)/(6/4) = 64.58 GB/s when every
link is healthy. One node's link at 1/10 (5 GB/s) holds every rank to 6.458 GB/s: 10 % of the
bound. The screen's bar is the pair judge's pass band against the bound (70 %): a false group
failure costs one bisection round, a missed slow node a wrong verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuval import plugin_api
from gpuval.plan import steps

NODES = ["node1", "node2", "node3", "node4"]
GPUS = 8
BOUND = 50 * (2 * 31 / 32) / (2 * 3 / 4)  # 64.58 GB/s, from the physics above
STEP = steps.ALLNODES_ALLREDUCE


def group_run(
    tmp_path: Path, busbw: float, rates: dict[str, int] | None = None, backend: str = "nccl"
) -> dict[str, str]:
    """The screen's outcome for a 4-node group whose all-reduce levels at `busbw` GB/s; `rates`:
    each node's declared NIC rate in Gb/s (none declared: the network speed is unknown)."""
    raw = tmp_path / "raw" / "node1"
    raw.mkdir(parents=True)
    declared = {
        host: {"gpu_model": "H100 SXM", "gpus_per_node": GPUS, "system": "HGX H100 8-GPU"}
        | ({"nic_count": 1, "nic_rate_gbit": rates[host]} if rates else {})
        for host in NODES
    }
    (tmp_path / "run.json").write_text(json.dumps({
        "run_id": "screen", "started_at": "2026-11-26T05:00:00Z", "hosts": NODES,
        "expected": {"node1": [STEP]}, "declared": declared,
    }))  # fmt: skip
    sizes = [64 << 20, 256 << 20, 1 << 30]
    rows = [
        {"size_bytes": s, "count": s // 4, "time_us": 1.0, "algbw_gbps": busbw * f / 1.9375,
         "busbw_gbps": busbw * f, "wrong": 0}
        for s, f in zip(sizes, (0.8, 0.95, 1.0), strict=True)
    ]  # fmt: skip
    document = {
        "schema_version": 1, "tool": "gpuval-allreduce-bench", "collective": "all_reduce",
        "world_size": GPUS * len(NODES), "backend": backend, "device_type": "cuda",
        "dtype": "float32", "hosts": [h for h in NODES for _ in range(GPUS)],
        "warmup": 5, "iterations": 20, "rows": rows, "wrong_total": 0, "correct": True,
    }  # fmt: skip
    (raw / f"{STEP}.txt").write_text(json.dumps(document) + "\n")
    (raw / f"{STEP}.meta.json").write_text(json.dumps({
        "schema_version": 1, "name": STEP, "host": "node1", "phase": "pairs",
        "raw": f"{STEP}.txt", "tool": "gpuval-allreduce-bench", "exit_code": 0,
        "timed_out": False, "skipped": None,
    }))  # fmt: skip
    progress = plugin_api.judge_pairs(tmp_path, ["allreduce"], group_steps={"node1": STEP})
    return progress.groups["node1"]


ALL_NDR = dict.fromkeys(NODES, 400)


def test_a_healthy_group_passes_the_screen(tmp_path: Path) -> None:
    assert group_run(tmp_path, 0.9 * BOUND, ALL_NDR)["status"] == "pass"


def test_a_group_held_back_by_one_slow_link_fails_the_screen(tmp_path: Path) -> None:
    # Every port says 400 Gb/s, but one node's path carries 1/10 of it: 10 % of the bound.
    outcome = group_run(tmp_path, BOUND / 10, ALL_NDR)
    assert outcome["status"] == "fail"
    assert "10 %" in outcome["reason"]


def test_a_group_in_the_pair_judges_low_band_fails_the_screen(tmp_path: Path) -> None:
    # 65 % of the bound: the report warns (pass band 70 %, fail band 50 %), the screen bisects.
    assert group_run(tmp_path, 0.65 * BOUND, ALL_NDR)["status"] == "fail"


def test_the_bound_is_the_slowest_nodes_link(tmp_path: Path) -> None:
    # node3's port is known to run at 40 Gb/s: the ring cannot beat it, so 96 % of its bound
    # (6.2 of 6.458 GB/s) is all the group can do, and passes.
    outcome = group_run(tmp_path, 0.96 * BOUND / 10, ALL_NDR | {"node3": 40})
    assert outcome["status"] == "pass"
    assert "node3's link the slowest" in outcome["reason"]


def test_a_group_with_no_known_network_speed_is_not_passed(tmp_path: Path) -> None:
    outcome = group_run(tmp_path, 0.9 * BOUND)
    assert outcome["status"] == "unjudged"
    assert "unjudged on bandwidth" in outcome["reason"]


@pytest.mark.parametrize("rates", [ALL_NDR, None])
def test_a_group_on_cpus_is_not_passed_on_bandwidth(
    tmp_path: Path, rates: dict[str, int] | None
) -> None:
    # gloo's busbw measures the CPUs' reduction, which no network bound describes.
    assert group_run(tmp_path, 0.9 * BOUND, rates, backend="gloo")["status"] == "unjudged"
