"""Findings: one line per problem however many hosts share it, expandable to the hosts, worst
first; and the overview of hosts x subjects."""

from __future__ import annotations

import json
import re
from pathlib import Path

from gpuval.checks.model import Check
from gpuval.pipeline import Judging, judge
from gpuval.report.findings import group_findings, overview, share
from gpuval.report.html import render_report

HOSTS = ["node1", "node2", "node3"]
GPU_STEPS = ["nvidia-smi", "nvidia-smi-topo", "p2pBandwidthLatencyTest", "nccl-all_reduce",
             "nccl-all_gather", "nccl-sendrecv", "nccl-broadcast"]  # fmt: skip


def gpu_less_run(tmp_path: Path) -> Path:
    """Three hosts without GPUs, as `make run` leaves them: each GPU step skipped with the
    reason the roles record, and os-release captured."""
    run = tmp_path / "run"
    for host in HOSTS:
        folder = run / "raw" / host
        folder.mkdir(parents=True)
        for step in GPU_STEPS:
            (folder / f"{step}.meta.json").write_text(json.dumps({
                "schema_version": 1, "name": step, "host": host, "phase": "intranode",
                "raw": None, "command": None, "exit_code": None,
                "skipped": "no usable GPU on this host (nvidia-smi found none)",
            }))  # fmt: skip
    (run / "run.json").write_text(json.dumps({
        "run_id": "gpu-less", "hosts": HOSTS, "expected": {h: GPU_STEPS for h in HOSTS},
    }))  # fmt: skip
    return run


def test_the_steps_skipped_for_the_same_reason_are_one_finding(tmp_path: Path) -> None:
    results = judge(gpu_less_run(tmp_path), Judging(), "now")
    skipped = [c for c in results.checks if c.check_id.startswith("step.")]
    assert len(skipped) == 21 and {c.status for c in skipped} == {"warn"}
    findings = [f for f in group_findings(results.checks) if f.family == "step.<...>"]
    assert len(findings) == 1
    (finding,) = findings
    assert finding.hosts == HOSTS
    step = finding.example.check_id.removeprefix("step.")
    assert finding.headline(3) == (
        f"WARN on 3 of 3 hosts, 7 checks: step '{step}' skipped: no usable GPU on this host "
        "(nvidia-smi found none) (no evidence from it)"
    )
    page = render_report(results)
    assert page.count('data-checks="step.') == 1


def check(host: str, measured: float, status: str = "fail") -> Check:
    return Check(
        check_id="nccl-tests.all_reduce.busbw", host=host, category="bandwidth",
        status=status,  # type: ignore[arg-type]
        reason=f"{measured} GB/s = {measured / 4.5:.0f} % of the 450 GB/s per-direction NVLink 4 "
        "peak; out-of-place busbw at 256 MiB",
        measured=measured, reference=450.0, unit="GB/s", source=f"raw/{host}/nccl-all_reduce.txt",
    )  # fmt: skip


def test_a_finding_lists_its_hosts_worst_first_with_how_much_of_the_peak_they_reached() -> None:
    hosts = [f"gpu{i:04d}" for i in range(1, 257)]
    checks = [check(h, 200.0 + (i * 37) % 100) for i, h in enumerate(hosts)]
    (finding,) = group_findings(checks)
    assert finding.headline(256).startswith("FAIL on 256 of 256 hosts: 200.0 GB/s = 44 % of")
    measured = [c.measured for c in finding.checks]
    assert measured == sorted(measured)  # worst (lowest share of the peak) first
    assert share(finding.checks[0]) == (200.0 / 450.0, "of peak")


def test_share_says_what_the_reference_is() -> None:
    baseline = Check("baseline.variance.busbw.all_reduce", "n1", "bandwidth", "fail", "r", 300.0,
                     355.9, "GB/s")  # fmt: skip
    pairs = Check("pairs.iperf3.node", "n1", "network", "fail", "r", 2.0, 10.0, "Gbit/s")
    ports = Check("network.rdma-ports", "n1", "network", "fail", "r", 6, 8, "ports")
    assert share(baseline) == (300.0 / 355.9, "of baseline")
    assert share(pairs) == (0.2, "of healthy pairs")
    assert share(ports) is None


def test_the_overview_colours_each_host_and_subject_by_its_worst_status() -> None:
    checks = [
        check("node1", 300.0, "pass"), check("node2", 150.0, "fail"),
        Check("hardware.gpu-count", "node2", "hardware", "warn", "r"),
        Check("run.evidence", "cluster", "completeness", "pass", "r"),
    ]  # fmt: skip
    view = overview(checks, ["node1", "node2", "node3"])
    assert view.subjects == ["bandwidth", "completeness", "hardware"]
    assert view.hosts == ["cluster", "node1", "node2", "node3"]
    assert view.cells == ["-P-", "P--", "F-W", "---"]


def test_the_page_filters_and_draws_the_overview_from_its_own_data(tmp_path: Path) -> None:
    results = judge(gpu_less_run(tmp_path), Judging(), "now")
    page = render_report(results)
    data = re.search(r'<script type="application/json" id="gpuval-overview">(.*?)</script>', page)
    assert data
    document = json.loads(data[1])
    assert document["hosts"][-3:] == HOSTS
    assert 'id="finding-filter"' in page and 'class="status-filter" value="unjudged"' in page
