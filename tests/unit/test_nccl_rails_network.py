"""A host whose NCCL found fewer HCA ports than the other hosts of its run
(gpuval.checks.nccl_rails), on the verdict corpus's xrack-gb200-network-test-bad-rail run:
the network-only test across two GB200 racks whose second tray (`slurm-gb200-207-154`, ranks
4-7, placed second: gb200-tray02) lists mlx5_0, mlx5_1 and mlx5_3, its peer all four.

What must come out, from the rule written before gpuval ran (the module's docstring): with the
run's busbw below its reference that tray fails naming mlx5_2, its peer gets no such check; with
busbw at its reference a warning; other ports, as many, warn on both; a host with no list, or a
run NCCL's host names cannot be placed in, names no tray (no claim, or the run's subject).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.run_folders import write_run_json, write_step

from gpuval.checks import judge_run
from gpuval.checks.model import CLUSTER, Check
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.runfolder import read_run_folder

CORPUS = Path(__file__).resolve().parents[1] / "data" / "verdicts"
CASE = CORPUS / "xrack-gb200-network-test-bad-rail"
RAW = Path("raw") / "gb200-tray01" / "xrack-nccl-all_reduce"
LACKING = "[1]mlx5_1:1/IB [2]mlx5_3:1/IB [RO]; OOB ib0:10.128.42.19<0>"
CHECK_ID = "nccl-tests.all_reduce.across-racks.ib-hcas"


def judged(
    tmp_path: Path,
    text: Callable[[str], str] = lambda t: t,
    declared: dict[str, object] | None = None,
    command: Callable[[str], str] = lambda c: c,
) -> list[Check]:
    """The corpus run, its NCCL output, trays' declarations and launch command edited."""
    run = tmp_path / "run"
    shutil.copytree(CASE, run, ignore=shutil.ignore_patterns("expected.json"))
    output = run / RAW.with_suffix(".txt")
    output.write_text(text(output.read_text()))
    sidecar_path = run / RAW.with_suffix(".meta.json")
    sidecar = json.loads(sidecar_path.read_text())
    sidecar["command"] = command(sidecar["command"])
    sidecar_path.write_text(json.dumps(sidecar))
    document = json.loads((run / "run.json").read_text())
    for host in document["declared"].values():
        host.update(declared or {})
    (run / "run.json").write_text(json.dumps(document))
    return judge_run(build_evidence(read_run_folder(run)), DEFAULTS).checks


def hca_checks(checks: list[Check]) -> dict[str, Check]:
    found = [c for c in checks if c.check_id == CHECK_ID]
    assert len(found) == len({c.host for c in found})
    return {c.host: c for c in found}


def test_the_tray_that_lost_a_rail_fails_with_the_low_busbw(tmp_path: Path) -> None:
    checks = judged(tmp_path)
    (only,) = hca_checks(checks).values()
    assert (only.host, only.status, only.measured, only.reference) == ("gb200-tray02", "fail", 3, 4)
    assert "mlx5_2 missing from NCCL's NET/IB list" in only.reason
    assert "slurm-gb200-207-154" in only.reason and "350" in only.reason
    busbw = next(c for c in checks if c.check_id.endswith("across-racks.busbw"))
    assert (busbw.host, busbw.status) == (CLUSTER, "fail")


def test_busbw_at_its_reference_leaves_a_warning(tmp_path: Path) -> None:
    """Two 400G NICs per tray: 175 GB/s, so 138.6 GB/s is 79 %, a pass."""
    checks = judged(tmp_path, declared={"nic_count": 2})
    busbw = next(c for c in checks if c.check_id.endswith("across-racks.busbw"))
    assert busbw.status == "pass"
    (only,) = hca_checks(checks).values()
    assert (only.host, only.status) == ("gb200-tray02", "warn")
    assert "mlx5_2" in only.reason


def test_a_host_name_the_inventory_knows_comes_first(tmp_path: Path) -> None:
    """NCCL's hostnames are inventory names here, swapped against the placement."""

    def swap(text: str) -> str:
        text = text.replace("slurm-gb200-207-136", "TRAY2").replace("slurm-gb200-207-154", "TRAY1")
        return text.replace("TRAY1", "gb200-tray01").replace("TRAY2", "gb200-tray02")

    (only,) = hca_checks(judged(tmp_path, text=swap)).values()
    assert (only.host, only.status) == ("gb200-tray01", "fail")


def test_srun_order_is_unknown_so_the_run_is_named(tmp_path: Path) -> None:
    checks = judged(tmp_path, command=lambda c: "srun --nodes=2 " + c.split(" racks.hosts ")[-1])
    (only,) = hca_checks(checks).values()
    assert (only.host, only.status) == (CLUSTER, "fail")
    assert "slurm-gb200-207-154" in only.reason
    assert not [c for c in checks if c.host.startswith("gb200-tray") and c.status == "fail"]


def test_ranks_not_host_by_host_place_no_tray(tmp_path: Path) -> None:
    def interleave(text: str) -> str:
        return text.replace(
            "#  Rank  1 Group  0 Pid  14840 on slurm-gb200-207-136",
            "#  Rank  1 Group  0 Pid  14840 on slurm-gb200-207-154",
        )

    (only,) = hca_checks(judged(tmp_path, text=interleave)).values()
    assert only.host == CLUSTER


def test_other_ports_as_many_warn_on_both(tmp_path: Path) -> None:
    other = LACKING.replace("[2]mlx5_3:1/IB", "[2]mlx5_3:1/IB [3]mlx5_9:1/IB")
    found = hca_checks(judged(tmp_path, text=lambda t: t.replace(LACKING, other)))
    statuses = {host: check.status for host, check in found.items()}
    assert statuses == {"gb200-tray01": "warn", "gb200-tray02": "warn"}
    assert "mlx5_9" in found["gb200-tray01"].reason and "mlx5_2" in found["gb200-tray02"].reason


def test_a_host_with_no_list_is_not_judged(tmp_path: Path) -> None:
    def no_port(text: str) -> str:
        return text.replace("[0]mlx5_0:1/IB " + LACKING, "[RO]; OOB ib0:10.128.42.19<0>")

    assert hca_checks(judged(tmp_path, text=no_port)) == {}


def test_same_lists_make_no_check(tmp_path: Path) -> None:
    whole = LACKING.replace("[2]mlx5_3:1/IB", "[2]mlx5_2:1/IB [3]mlx5_3:1/IB")
    assert hca_checks(judged(tmp_path, text=lambda t: t.replace(LACKING, whole))) == {}


def test_two_hosts_of_four_that_lost_the_same_rail_are_both_named(tmp_path: Path) -> None:
    """CONSTRUCTED from the corpus output: four hosts named as the inventory names them, in a
    plain run across nodes; node3 and node4 list no mlx5_2."""
    whole = "[0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB ib0:10.0.0.1<0>"
    lists = "\n".join(
        f"node{i}:100:100 [0] NCCL INFO NET/IB : Using "
        + (whole if i < 3 else "[0]mlx5_0:1/IB " + LACKING)
        for i in range(1, 5)
    )
    text = (CASE / RAW.with_suffix(".txt")).read_text()
    head, _, rest = text.partition("slurm-gb200-207-136:2630772:2630772 [0] NCCL INFO NET/IB")
    text = head + lists + "\n" + rest.split("\n", 2)[2]
    run = tmp_path / "run"
    write_step(run, "node1", "internode-nccl-all_reduce", text, tool="nccl-tests",
               phase="internode", command="mpirun -np 8 all_reduce_perf")  # fmt: skip
    hosts = [f"node{i}" for i in range(1, 5)]
    write_run_json(run, "four", hosts, declared={h: {"gpu_model": "GB200"} for h in hosts})
    checks = judge_run(build_evidence(read_run_folder(run)), DEFAULTS).checks
    found = {c.host: c for c in checks if c.check_id.endswith(".ib-hcas")}
    assert sorted(found) == ["node3", "node4"]
    assert all("mlx5_2 missing" in c.reason and "most other hosts" in c.reason
               for c in found.values())  # fmt: skip
