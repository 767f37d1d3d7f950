"""Racks (gpuval.checks.racks) on published Fabric blocks.

The trays' `nvidia-smi -q` is the real 8x H100 `-q` cut to a GB200 tray's four GPUs with
published Fabric blocks (tests/unit/test_health_fabric.py says how; sources in
tests/data/outputs/nvidia-smi/fabric-blocks/README.md): the healthy clique 4026 of ClusterUUID
9c6f5af3-... (leptonai/gpud#1106), the Completed/Success block in CliqueId 2 of ClusterUUID
dc6e40c4-... (kubernetes-sigs/dra-driver-nvidia-gpu#626), Azure's Insufficient Resources block
(CliqueId 0, zero ClusterUUID; Azure/azhpc-images#506) and the 580 driver's In Progress block
with every field N/A (NVIDIA/gpu-operator#2511).

What must come out, from the rule (docs/health.md, Racks): every GPU of a declared rack in the
domain most of its trays joined; a tray elsewhere fails naming GPU and field, its peers do not;
no majority judges no tray; no Fabric block or N/A is unjudged; a rack short of trays fails when
the missing ones were measured elsewhere, else is unjudged; undeclared trays are only shown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.run_folders import write_run_json, write_step
from tests.unit.test_health_fabric import (
    IN_PROGRESS,
    INSUFFICIENT,
    UNHEALTHY,
    block,
    healthy_gb200_block,
    q_with,
)

from gpuval.checks import CheckOutcome, judge_run
from gpuval.checks.model import Check
from gpuval.checks.rack_tests import rack_subject
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.pipeline import report_run
from gpuval.runfolder import read_run_folder

HEALTHY = healthy_gb200_block()
# Another clique of another cluster, registered and healthy: only its domain differs.
OTHER_CLIQUE = block(UNHEALTHY).replace("Unhealthy", "Healthy")
ONLY_CLIQUE_DIFFERS = HEALTHY.replace(": 4026\n", ": 2\n")
RACK_UUID = "9c6f5af3-53bf-49b5-a436-b66766c413c3"
OTHER_UUID = "dc6e40c4-d722-4357-9ba6-5291dd461278"


def judged(tmp_path: Path, trays: dict[str, str | None], **declared: Any) -> CheckOutcome:
    """A run of GB200 trays, each with its `-q` (None: the tray left none), all declared with
    `declared` (gpu_model GB200 besides)."""
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    for host, text in trays.items():
        if text is not None:
            write_step(run, host, "nvidia-smi-query", text, tool="nvidia-smi-q",
                       phase="preflight")  # fmt: skip
        else:
            (run / "raw" / host).mkdir(parents=True, exist_ok=True)
    write_run_json(run, "racks", list(trays),
                   declared={h: {"gpu_model": "GB200", **declared} for h in trays})  # fmt: skip
    return judge_run(build_evidence(read_run_folder(run)), DEFAULTS)


def rack_check(outcome: CheckOutcome, host: str) -> Check:
    """A tray's racks.domain, or (`host` a rack's subject) the rack's racks.trays."""
    check_id = "racks.trays" if host.startswith("rack ") else "racks.domain"
    return next(c for c in outcome.checks if c.check_id == check_id and c.host == host)


def test_a_declared_rack_in_one_domain_passes_and_is_carried(tmp_path: Path) -> None:
    trays = {f"tray{i}": q_with([HEALTHY] * 4) for i in (1, 2, 3)}
    outcome = judged(tmp_path, trays, nvl_domain="nvl72-a")
    for host in trays:
        assert rack_check(outcome, host).status == "pass"
    trays_check = rack_check(outcome, rack_subject("nvl72-a"))
    assert trays_check.status == "pass" and (trays_check.measured, trays_check.reference) == (3, 3)
    (rack,) = outcome.racks
    assert (rack.name, rack.declared, rack.cluster_uuid, rack.clique_id) == (
        "nvl72-a", True, RACK_UUID, "4026")  # fmt: skip
    assert (rack.trays_in_domain, rack.trays_expected, rack.gpu_count) == (3, 3, 12)
    assert [n.host for n in rack.nodes] == ["tray1", "tray2", "tray3"]


def test_a_tray_in_another_clique_fails_naming_gpu_and_fields_and_its_peers_do_not(
    tmp_path: Path,
) -> None:
    trays = {"tray1": q_with([HEALTHY] * 4), "tray2": q_with([HEALTHY] * 4),
             "tray3": q_with([OTHER_CLIQUE] * 4)}  # fmt: skip
    outcome = judged(tmp_path, trays, nvl_domain="nvl72-a")
    moved = rack_check(outcome, "tray3")
    assert moved.status == "fail"
    for named in ("GPU0", "GPU3", f"ClusterUUID {OTHER_UUID}", "CliqueId 2", "CliqueId 4026"):
        assert named in moved.reason, named
    assert moved.action and "gpuval_nvl_domain" in moved.action
    assert rack_check(outcome, "tray1").status == rack_check(outcome, "tray2").status == "pass"
    short = rack_check(outcome, rack_subject("nvl72-a"))
    assert short.status == "fail" and "tray3" in short.reason and "2 of its 3 trays" in short.reason
    # the per-GPU gate alone passes the tray: the rack is what catches it
    fabric = next(c for c in outcome.checks
                  if c.check_id == "health.nvlink.fabric" and c.host == "tray3")  # fmt: skip
    assert fabric.status == "pass"


def test_only_the_differing_field_is_named(tmp_path: Path) -> None:
    trays = {"tray1": q_with([HEALTHY] * 4), "tray2": q_with([HEALTHY] * 4),
             "tray3": q_with([HEALTHY] * 3 + [ONLY_CLIQUE_DIFFERS])}  # fmt: skip
    moved = rack_check(judged(tmp_path, trays, nvl_domain="nvl72-a"), "tray3")
    assert moved.status == "fail"
    assert moved.reason.startswith("GPU3 in CliqueId 2 where")
    assert "GPU0" not in moved.reason and f"ClusterUUID {RACK_UUID}" in moved.reason


def test_without_a_majority_no_tray_is_judged(tmp_path: Path) -> None:
    trays = {"tray1": q_with([HEALTHY] * 4), "tray2": q_with([OTHER_CLIQUE] * 4)}
    outcome = judged(tmp_path, trays, nvl_domain="nvl72-a")
    assert rack_check(outcome, "tray1").status == "unjudged"
    assert rack_check(outcome, "tray2").status == "unjudged"
    assert "no domain most of its trays share" in rack_check(outcome, "tray1").reason
    assert rack_check(outcome, rack_subject("nvl72-a")).status == "unjudged"
    assert outcome.racks[0].cluster_uuid is None


def test_a_tray_in_no_domain_differs_from_any_rack(tmp_path: Path) -> None:
    """Insufficient Resources, CliqueId 0: no domain at all, so no vote and no doubt."""
    broken = [HEALTHY] * 4
    broken[2] = block(INSUFFICIENT)
    trays = {"tray1": q_with([HEALTHY] * 4), "tray2": q_with(broken)}
    outcome = judged(tmp_path, trays, nvl_domain="nvl72-a")
    out = rack_check(outcome, "tray2")
    assert out.status == "fail"
    assert out.reason.startswith("GPU2 fabric Status Insufficient Resources")
    assert "in no NVLink domain" in out.reason and "GPU0" not in out.reason
    assert rack_check(outcome, "tray1").status == "pass"
    assert rack_check(outcome, rack_subject("nvl72-a")).status == "fail"


def test_no_fabric_block_or_na_fields_are_unjudged_never_passed(tmp_path: Path) -> None:
    trays = {"tray1": q_with([HEALTHY] * 4), "tray2": q_with([HEALTHY] * 4),
             "tray3": None, "tray4": q_with([HEALTHY] * 3 + [block(IN_PROGRESS)])}  # fmt: skip
    outcome = judged(tmp_path, trays, nvl_domain="nvl72-a")
    assert "prints no Fabric block" in rack_check(outcome, "tray3").reason
    assert rack_check(outcome, "tray3").status == "unjudged"
    na = rack_check(outcome, "tray4")
    assert na.status == "unjudged" and "GPU3 print no ClusterUUID or CliqueId (N/A)" in na.reason
    short = rack_check(outcome, rack_subject("nvl72-a"))
    assert short.status == "unjudged" and "tray3" in short.reason and "tray4" in short.reason


def test_a_rack_declared_full_with_trays_missing_from_the_run_is_unjudged(tmp_path: Path) -> None:
    trays = {"tray1": q_with([HEALTHY] * 4), "tray2": q_with([HEALTHY] * 4)}
    outcome = judged(tmp_path, trays, nvl_domain="nvl72-a", nvl_domain_nodes=18)
    short = rack_check(outcome, rack_subject("nvl72-a"))
    assert short.status == "unjudged" and (short.measured, short.reference) == (2, 18)
    assert "16 tray(s) not in this run" in short.reason
    assert rack_check(outcome, "tray1").status == "pass"


def test_more_trays_than_the_catalogs_domain_is_a_declaration_to_correct(tmp_path: Path) -> None:
    trays = {"tray1": q_with([HEALTHY] * 4)}
    short = rack_check(
        judged(tmp_path, trays, nvl_domain="a", nvl_domain_nodes=20), rack_subject("a")
    )
    assert short.status == "unjudged" and "holds 18" in short.reason


def test_undeclared_trays_are_grouped_by_what_they_report_and_not_judged(tmp_path: Path) -> None:
    trays = {"tray1": q_with([HEALTHY] * 4), "tray2": q_with([OTHER_CLIQUE] * 4),
             "tray3": q_with([HEALTHY] * 4)}  # fmt: skip
    outcome = judged(tmp_path, trays)
    assert not [c for c in outcome.checks if c.check_id.startswith("racks.")]
    groups = {(r.cluster_uuid, r.clique_id): [n.host for n in r.nodes] for r in outcome.racks}
    assert groups == {(RACK_UUID, "4026"): ["tray1", "tray3"], (OTHER_UUID, "2"): ["tray2"]}
    assert all(not r.declared and r.status is None for r in outcome.racks)


def test_results_json_and_the_report_show_the_racks(tmp_path: Path) -> None:
    trays = {"tray1": q_with([HEALTHY] * 4), "tray2": q_with([OTHER_CLIQUE] * 4),
             "tray3": q_with([HEALTHY] * 4)}  # fmt: skip
    judged(tmp_path, trays, nvl_domain="nvl72-a")
    out = tmp_path / "out"
    report_run(tmp_path / "run", out_dir=out, quiet=True)
    (rack,) = json.loads((out / "results.json").read_text())["racks"]
    assert (rack["name"], rack["status"], rack["trays_in_domain"]) == ("nvl72-a", "fail", 2)
    assert rack["nodes"][1]["gpus"][0]["clique_id"] == "2"
    page = (out / "report.html").read_text()
    assert (
        'id="racks"' in page
        and f"GPU0, GPU1, GPU2, GPU3: Completed, Success, ClusterUUID {OTHER_UUID}" in page
    )


def test_a_run_without_racks_has_no_rack_key_or_section(tmp_path: Path) -> None:
    run = tmp_path / "run"
    h100 = q_with([HEALTHY] * 4, name="NVIDIA H100 80GB HBM3")  # an HGX board: no rack
    write_step(run, "node1", "nvidia-smi-query", h100, tool="nvidia-smi-q", phase="preflight")
    out = tmp_path / "out"
    report_run(run, out_dir=out, quiet=True)
    assert "racks" not in json.loads((out / "results.json").read_text())
    assert 'id="racks"' not in (out / "report.html").read_text()


def test_each_rack_is_its_own_subject_in_the_report_junit_and_prometheus(tmp_path: Path) -> None:
    """Two racks, the second holding a tray of another clique: only `rack nvl72-b` fails, and
    every output names it, where one `cluster` check would have left it to the reason."""
    run = tmp_path / "run"
    trays = {"a1": HEALTHY, "a2": HEALTHY, "b1": HEALTHY, "b2": HEALTHY, "b3": OTHER_CLIQUE}
    for host, gpu_block in trays.items():
        write_step(run, host, "nvidia-smi-query", q_with([gpu_block] * 4), tool="nvidia-smi-q",
                   phase="preflight")  # fmt: skip
    write_run_json(run, "racks", list(trays), declared={
        h: {"gpu_model": "GB200", "nvl_domain": f"nvl72-{h[0]}"} for h in trays})  # fmt: skip
    outcome = judge_run(build_evidence(read_run_folder(run)), DEFAULTS)
    assert rack_check(outcome, rack_subject("nvl72-a")).status == "pass"
    assert rack_check(outcome, rack_subject("nvl72-b")).status == "fail"
    out = tmp_path / "out"
    report_run(run, out_dir=out, quiet=True, prometheus_file=tmp_path / "gpuval.prom")
    assert '<testsuite name="rack nvl72-b"' in (out / "junit.xml").read_text()
    prometheus = (tmp_path / "gpuval.prom").read_text()
    assert 'gpuval_host_status{host="rack nvl72-b",status="fail"} 1.0' in prometheus
    assert 'gpuval_host_status{host="rack nvl72-a",status="pass"} 1.0' in prometheus
