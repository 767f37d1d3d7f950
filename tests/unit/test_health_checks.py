"""The node health checks on run folders written the way the health role writes them: real
outputs of a healthy H100 (tests/data/device) pass; each fault (taken from published outputs, or
the real outputs with one field changed as the fault would change it) fails or warns with its
evidence line and an action. Expected verdicts follow NVIDIA's Xid catalog and memory error
management guide, the IBA counter definitions and the thresholds' documented reasoning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuval.checks import judge_run
from gpuval.checks.health import health_subject, suggested_action
from gpuval.checks.model import Check
from gpuval.checks.thresholds import DEFAULTS, Thresholds
from gpuval.evidence import build_evidence
from gpuval.runfolder import read_run_folder

TESTS = Path(__file__).resolve().parents[1]
DEVICE = TESTS / "data" / "device" / "h100-x1-2026-11-22"
OUTPUTS = TESTS / "data" / "outputs"
XML = (DEVICE / "nvidia-smi-q-x.xml").read_text()
CAPTURED = "2026-11-22T20:00:00+00:00"


class RunFolder:
    def __init__(self, root: Path) -> None:
        self.root = root

    def step(self, host: str, name: str, text: str, tool: str, phase: str = "health",
             ext: str = "txt", started: str = CAPTURED, exit_code: int = 0) -> None:  # fmt: skip
        folder = self.root / "raw" / host
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.{ext}").write_text(text)
        (folder / f"{name}.meta.json").write_text(json.dumps({
            "schema_version": 1, "name": name, "host": host, "phase": phase,
            "raw": f"{name}.{ext}", "command": name, "exit_code": exit_code, "tool": tool,
            "started_at": started,
        }))  # fmt: skip

    def healthy(self, host: str, xml: str = XML) -> None:
        """What the health role leaves on a healthy node: the preflight's -q -x, the passive
        probes before the benchmarks and again after them."""
        self.step(host, "nvidia-smi-query", xml, "nvidia-smi-xml", "preflight", "xml")
        self.step(host, "nvidia-smi-query-after", xml, "nvidia-smi-xml", ext="xml")
        for name in ("health-kernel-log", "health-kernel-log-after"):
            self.step(host, name, (DEVICE / "dmesg.txt").read_text(), "kernel-log")
        for name in ("health-pci", "health-pci-after"):
            self.step(host, name, (DEVICE / "sysfs-pci-links.txt").read_text(), "sysfs-pci")
        # The lent H100 has no NVLink: nvidia-smi nvlink -e printed nothing (probes.txt).
        for name in ("health-nvlink-errors", "health-nvlink-errors-after"):
            self.step(host, name, "", "nvidia-smi-nvlink-errors")

    def checks(self, thresholds: Thresholds = DEFAULTS) -> list[Check]:
        return judge_run(build_evidence(read_run_folder(self.root)), thresholds).checks

    def health(self, host: str = "node1", thresholds: Thresholds = DEFAULTS) -> dict[str, Check]:
        return {c.check_id: c for c in self.checks(thresholds)
                if c.host == host and c.category == "health"}  # fmt: skip

    def after_kernel_log(self, text: str, host: str = "node1",
                         thresholds: Thresholds = DEFAULTS) -> dict[str, Check]:  # fmt: skip
        """The health checks of a healthy node whose kernel log after the run reads `text`."""
        self.healthy(host)
        self.step(host, "health-kernel-log-after", text, "kernel-log")
        return self.health(host, thresholds)


@pytest.fixture
def run(tmp_path: Path) -> RunFolder:
    return RunFolder(tmp_path / "run")


def changed(xml: str, element: str, value: str) -> str:
    """The real XML with the first <element> of the GPU set to `value`."""
    new, count = re.subn(rf"<{element}>[^<]*</{element}>", f"<{element}>{value}</{element}>",
                         xml, count=1)  # fmt: skip
    assert count == 1, element
    return new


def with_xml(run: RunFolder, xml: str) -> dict[str, Check]:
    """The health checks of node1 whose nvidia-smi -q -x, before and after the run, is `xml`."""
    run.healthy("node1", xml)
    return run.health()


def test_a_healthy_real_h100_passes_every_health_check(run: RunFolder) -> None:
    run.healthy("node1")
    health = run.health()
    # No NVLink on this GPU (nvlink -s and -e list none): no NVLink counter applies.
    assert set(health) == {"health.xid", "health.memory", "health.clocks", "health.pcie"}
    assert {c.status for c in health.values()} == {"pass"}
    assert "358 kernel log lines" in health["health.xid"].reason
    assert all(c.action is None for c in health.values())


def test_xid79_an_hour_ago_fails_naming_the_gpu_and_the_action(run: RunFolder) -> None:
    line = ("2026-11-22T19:00:00+00:00 node1 kernel: NVRM: Xid (PCI:0000:00:06): 79, pid=0, "
            "GPU has fallen off the bus.\n")  # fmt: skip
    check = run.after_kernel_log(line)["health.xid.0000:00:06"]
    assert check.status == "fail"
    assert check.measured == "Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS)"
    assert "GPU0 (0000:00:06)" in check.reason and "1.0 h before the log was read" in check.reason
    assert check.source == "raw/node1/health-kernel-log-after.txt:1"
    assert check.action and "power-cycle" in check.action and "GPU0 (0000:00:06)" in check.action


def test_a_hardware_xid_older_than_the_window_warns(run: RunFolder) -> None:
    line = "2026-11-19T20:00:00+00:00 NVRM: Xid (PCI:0000:00:06): 48, pid=1, DBE\n"
    check = run.after_kernel_log(line)["health.xid.0000:00:06"]
    assert check.status == "warn" and "72.0 h" in check.reason and "older than 24 h" in check.reason
    wider = Thresholds(xid_window_hours=96)
    assert run.health(thresholds=wider)["health.xid.0000:00:06"].status == "fail"


def test_published_journal_xid79_without_zone_is_judged_as_current(run: RunFolder) -> None:
    text = OUTPUTS / "kernel-log" / "open-gpu-kernel-modules-1151-journal-xid79-cut.txt"
    check = run.after_kernel_log(text.read_text())["health.xid.0000:2b:00"]
    assert check.status == "fail" and "time zone unknown: judged as current" in check.reason
    assert "the GPU at 0000:2b:00" in check.reason  # not a GPU nvidia-smi lists
    # The driver's own off-bus line for the same GPU is the same event, not a second one.
    assert "Xid 79 x1" in check.reason and "Xid 79 x2" not in check.reason


def test_application_xids_warn_and_a_ctxsw_timeout_on_the_same_gpu_fails(run: RunFolder) -> None:
    app = OUTPUTS / "kernel-log" / "akash-support-244-dmesg-T-xid-43-31-94-cut.txt"
    health = run.after_kernel_log(app.read_text())
    # 31 (MMU fault) and 94 (contained ECC): RESTART_APP; 43: IGNORE.
    assert health["health.xid.0000:00:07"].status == "warn"
    assert health["health.xid.0000:00:08"].status == "warn"
    assert health["health.xid.0000:00:05"].status == "pass"
    ctime = OUTPUTS / "kernel-log" / "gpud-pr46-dmesg-ctime-xid-13-109-peermem.txt"
    check = run.after_kernel_log(ctime.read_text())["health.xid.0000:cb:00"]
    assert check.status == "fail" and check.measured.startswith("Xid 109")
    assert "Xid 13 x3, Xid 109 x1" in check.reason


def test_fatal_sxid_fails_per_switch_and_non_fatal_warns(run: RunFolder) -> None:
    text = (OUTPUTS / "kernel-log" / "menthos-dataset-sxid-fatal-nonfatal-xid64.txt").read_text()
    health = run.after_kernel_log(text)
    assert health["health.xid.nvidia-nvswitch0"].status == "fail"
    assert "nvidia-fabricmanager" in (health["health.xid.nvidia-nvswitch0"].action or "")
    assert health["health.xid.nvidia-nvswitch4"].status == "warn"
    assert health["health.xid.0000:0f:00"].status == "fail"  # Xid 64: remapping failed


def test_known_benign_codes_are_configurable(run: RunFolder) -> None:
    text = (OUTPUTS / "kernel-log" / "akash-support-244-dmesg-T-xid-43-31-94-cut.txt").read_text()
    health = run.after_kernel_log(text, thresholds=Thresholds(xid_benign_codes=(31, 94)))
    assert {health[f"health.xid.0000:00:0{n}"].status for n in (5, 7, 8)} == {"pass"}
    assert "configured as benign" in health["health.xid.0000:00:07"].reason


def test_pending_row_remap_fails_with_a_reset_of_that_gpu(run: RunFolder) -> None:
    check = with_xml(run, changed(XML, "remapped_row_pending", "Yes"))["health.memory"]
    assert check.status == "fail" and "GPU0 row remap pending" in check.reason
    assert (
        check.action == "reset GPU0 (nvidia-smi -r -i 0) while it is idle to apply the "
        "pending row remap"
    )


def test_ecc_disabled_on_an_hbm_gpu_fails_and_uncorrectable_errors_fail(run: RunFolder) -> None:
    check = with_xml(run, changed(XML, "current_ecc", "Disabled"))["health.memory"]
    assert check.status == "fail" and "ECC disabled" in check.reason
    assert "nvidia-smi -i 0 -e 1" in (check.action or "")
    # The first dram_uncorrectable of the XML is the volatile count (since the driver loaded).
    check = with_xml(run, changed(XML, "dram_uncorrectable", "2"))["health.memory"]
    assert check.status == "fail"
    assert check.reason == "GPU0 2 uncorrectable ECC error(s) since the driver loaded"


def test_hw_slowdown_active_fails_and_power_cap_below_default_warns(run: RunFolder) -> None:
    slow = changed(XML, "clocks_event_reason_hw_slowdown", "Active")
    check = with_xml(run, slow)["health.clocks"]
    assert check.status == "fail" and "GPU0 hw_slowdown active" in check.reason
    check = with_xml(run, changed(XML, "current_power_limit", "500.00 W"))["health.clocks"]
    assert check.status == "warn" and "power limit 500 W below its default 700 W" in check.reason
    assert check.action == "restore it: nvidia-smi -i 0 -pl 700"


def test_time_in_thermal_slowdown_during_the_run_fails(run: RunFolder) -> None:
    run.healthy("node1")
    after = changed(XML, "clocks_event_reasons_counters_hw_therm_slowdown", "2500000 us")
    run.step("node1", "nvidia-smi-query-after", after, "nvidia-smi-xml", ext="xml")
    check = run.health()["health.clocks"]
    assert check.status == "fail"
    assert "GPU0 spent 2.5 s in hw_thermal_slowdown during the run" in check.reason


IB = "/sys/class/infiniband/mlx5_{n}/ports/1/counters/{name}:{value}\n"


def ib_listing(link_downed: int, symbol_error: int = 0) -> str:
    lines = ["/sys/class/infiniband/mlx5_0/fw_ver:28.39.1002\n"]
    for n in range(2):
        lines += [IB.format(n=n, name="link_downed", value=link_downed if n == 1 else 0),
                  IB.format(n=n, name="symbol_error", value=symbol_error),
                  IB.format(n=n, name="port_rcv_errors", value=0)]  # fmt: skip
    return "".join(lines)


def test_link_downed_growing_during_the_run_fails_naming_the_port(run: RunFolder) -> None:
    run.healthy("node1")
    run.step("node1", "health-ib-sysfs", ib_listing(0), "sysfs-infiniband")
    run.step("node1", "health-ib-sysfs-after", ib_listing(2), "sysfs-infiniband")
    check = run.health()["health.network.counters"]
    assert check.status == "fail"
    assert check.reason == "mlx5_1 port 1 link_downed 0 -> 2 during the run"
    assert check.action == "reseat or replace the cable of mlx5_1 port 1; check the switch port"


def test_counters_that_did_not_grow_pass_and_saturated_ones_warn(run: RunFolder) -> None:
    run.healthy("node1")
    run.step("node1", "health-ib-sysfs", ib_listing(3), "sysfs-infiniband")
    run.step("node1", "health-ib-sysfs-after", ib_listing(3), "sysfs-infiniband")
    assert run.health()["health.network.counters"].status == "pass"
    saturated = OUTPUTS / "sysfs-infiniband" / "SYNTHETIC-mlx5-ndr-saturated-counters.txt"
    for name in ("health-ib-sysfs", "health-ib-sysfs-after"):
        run.step("node1", name, saturated.read_text(), "sysfs-infiniband")
    check = run.health()["health.network.counters"]
    assert check.status == "warn" and "link_downed saturated at 255" in check.reason


def test_one_counter_capture_cannot_judge_growth(run: RunFolder) -> None:
    run.healthy("node1")
    run.step("node1", "health-ib-sysfs", ib_listing(0), "sysfs-infiniband")
    assert run.health()["health.network.counters"].status == "unjudged"


def test_nic_links_and_aer_from_sysfs(run: RunFolder) -> None:
    run.healthy("node1")
    text = (OUTPUTS / "sysfs-pci" / "SYNTHETIC-gpu-x8-nic-aer-errors.txt").read_text()
    run.step("node1", "health-pci-after", text, "sysfs-pci")
    check = run.health()["health.pcie"]
    assert check.status == "fail"
    assert "NIC 0000:18:00.0 1 uncorrectable (nonfatal) PCIe error(s)" in check.reason
    assert "NIC 0000:18:00.0 PCIe link at 16 GT/s of 32" in check.reason
    # The GPU's width is NVML's to judge (topology.pcie-link) when nvidia-smi printed it.
    assert "0000:17:00.0" not in check.reason


def test_dcgm_failure_is_named_per_gpu(run: RunFolder) -> None:
    run.healthy("node1")
    text = (OUTPUTS / "dcgmi-diag" / "SYNTHETIC-4.2.3-r2-memory-fail-gpu2.json").read_text()
    run.step("node1", "health-dcgm-diag", text, "dcgmi-diag", ext="json")
    check = run.health()["health.dcgm"]
    assert check.status == "fail" and check.reason.startswith("memory: Fail on GPU2 (A memory")
    assert check.action == "drain the node; run dcgmi diag -r 3 again on GPU2, RMA what fails twice"
    passing = (OUTPUTS / "dcgmi-diag" / "SYNTHETIC-4.2.3-r2-4gpu-pass.json").read_text()
    run.step("node1", "health-dcgm-diag", passing, "dcgmi-diag", ext="json")
    assert run.health()["health.dcgm"].status == "pass"


def burn(tflops: list[float], throttle: str | None = None, correct: bool = True) -> str:
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "tflops": t, "iterations": 100,
             "seconds": 20.0, "max_abs_error": 0.001, "correct": correct if i == 0 else True,
             "mismatches": 0 if correct or i else 3, "error": None,
             "samples": [{"elapsed_s": 5.0, "sm_clock_mhz": 1410, "temperature_c": 87,
                          "power_w": 700, "throttle": [throttle] if throttle and i == 0 else []}]}
            for i, t in enumerate(tflops)]  # fmt: skip
    return json.dumps({"tool": "gpuval-gemm-burn", "schema_version": 1, "dtype": "bf16",
                       "matrix_size": 8192, "seconds_requested": 20, "device_type": "cuda",
                       "sampler": "nvml", "gpus": gpus, "error": None})  # fmt: skip


def test_gemm_burn_against_the_dense_peak_and_the_siblings(run: RunFolder) -> None:
    run.healthy("node1")
    run.step("node1", "health-gemm-burn", burn([700.0, 720.0, 710.0, 560.0]), "gpuval-gemm-burn")
    health = run.health()
    # 700 of the H100 SXM's 989.4 dense BF16 TFLOPS: 71 %, healthy (MAMF is 80 %).
    assert health["health.burn.GPU0"].status == "pass"
    assert health["health.burn.GPU0"].reference == 989.4
    # 560 is 79 % of the siblings' median 705: below 0.90 -> warn, above 0.75.
    assert health["health.burn.GPU3"].status == "warn"
    assert "79 % of its siblings' median 705" in health["health.burn.GPU3"].reason
    run.step("node1", "health-gemm-burn", burn([300.0, 310.0]), "gpuval-gemm-burn")
    check = run.health()["health.burn.GPU0"]
    assert check.status == "fail" and "30 % of the 989.4 dense bf16 peak" in check.reason


def test_gemm_burn_wrong_results_or_hw_slowdown_fail(run: RunFolder) -> None:
    run.healthy("node1")
    run.step("node1", "health-gemm-burn", burn([700.0, 700.0], correct=False), "gpuval-gemm-burn")
    check = run.health()["health.burn.GPU0"]
    assert check.status == "fail" and "3 product(s) differed from the first" in check.reason
    run.step("node1", "health-gemm-burn", burn([700.0, 700.0], "hw_thermal_slowdown"),
             "gpuval-gemm-burn")  # fmt: skip
    check = run.health()["health.burn.GPU0"]
    assert check.status == "fail" and "hw_thermal_slowdown at 5 s of the burn" in check.reason


def test_a_minority_vbios_across_nodes_is_named(run: RunFolder) -> None:
    for host in ("node1", "node2", "node3"):
        xml = changed(XML, "vbios_version", "96.00.99.00.01") if host == "node3" else XML
        run.healthy(host, xml)
    checks = [c for c in run.checks() if c.check_id == "health.software.vbios"]
    failing = {c.host: c.reason for c in checks if c.status == "fail"}
    assert set(failing) == {"node3", "cluster"}
    assert "the other hosts' 96.00.DA.00.0C" in failing["node3"]


def test_missing_passive_evidence_after_the_health_phase_ran_is_unjudged(run: RunFolder) -> None:
    run.step("node1", "nvidia-smi-query", XML, "nvidia-smi-xml", "preflight", "xml")
    run.step("node1", "health-pci", (DEVICE / "sysfs-pci-links.txt").read_text(), "sysfs-pci")
    assert run.health()["health.xid"].status == "unjudged"
    # A probe that ran and failed, or was skipped, is its step's check (step.*), not unjudged.
    folder = run.root / "raw" / "node1"
    skipped = {
        "schema_version": 1, "name": "health-kernel-log", "host": "node1", "phase": "health",
        "raw": None, "command": None, "exit_code": None, "skipped": "dmesg not found",
    }  # fmt: skip
    (folder / "health-kernel-log.meta.json").write_text(json.dumps(skipped))
    checks = {c.check_id: c for c in run.checks() if c.host == "node1"}
    assert "health.xid" not in checks and checks["step.health-kernel-log"].status == "warn"


@pytest.mark.parametrize(
    ("text", "exit_code", "reason"),
    [
        ("-- No entries --\n", 0, "-- No entries --"),  # journald without kernel messages
        ("No journal files were found.\n", 0, "No journal files were found."),
        ("dmesg: read kernel buffer failed: Operation not permitted\n", 1, "not permitted"),
        ("", 0, "printed no kernel line"),
    ],
)
def test_an_unreadable_kernel_log_is_unjudged_never_a_failure(
    run: RunFolder, text: str, exit_code: int, reason: str
) -> None:
    run.healthy("node1")
    for name in ("health-kernel-log", "health-kernel-log-after"):
        run.step("node1", name, text, "kernel-log", exit_code=exit_code)
    checks = {c.check_id: c for c in run.checks() if c.host == "node1"}
    xid = checks["health.xid"]
    assert xid.status == "unjudged" and reason in xid.reason and "SXid events unseen" in xid.reason
    assert xid.action and "CAP_SYSLOG" in xid.action
    assert not [c for c in checks.values() if c.status == "fail"]
    assert not [c for c in checks.values() if "kernel-log" in (c.source or "") and c is not xid]


def test_table_subjects_and_actions_of_other_modules_checks() -> None:
    assert health_subject("health.xid.0000:3b:00") == "xid"
    assert health_subject("topology.pcie-link") == "pcie"
    assert health_subject("nvbandwidth.host_to_device_memcpy_ce") == "bandwidth"
    assert health_subject("nccl-tests.all_reduce.busbw") is None
    narrow = Check("topology.pcie-link", "node1", "topology", "fail", "GPU1 at x8")
    assert "reseat the GPU" in (suggested_action(narrow) or "")
    fine = Check("topology.pcie-link", "node1", "topology", "pass", "x16")
    assert suggested_action(fine) is None


def test_report_outputs_carry_the_node_health_table(run: RunFolder, tmp_path: Path) -> None:
    from gpuval.pipeline import report_run
    from gpuval.schemas.validation import validate

    run.healthy("node1")
    run.healthy("node2")
    line = "2026-11-22T19:30:00+00:00 NVRM: Xid (PCI:0000:00:06): 79, pid=0, GPU has fallen off\n"
    run.step("node2", "health-kernel-log-after", line, "kernel-log")
    out = tmp_path / "out"
    # nothing benchmarked, but the nodes were inspected: the Xid 79 fails the run
    assert report_run(run.root, out, quiet=True) == 1
    summary = json.loads((out / "summary.json").read_text())
    validate(summary, "summary")
    table = summary["node_health"]
    assert [s["key"] for s in table["subjects"]] == ["xid", "memory", "clocks", "pcie"]
    node2 = next(h for h in table["hosts"] if h["host"] == "node2")
    assert node2["status"] == "fail" and node2["cells"]["xid"]["status"] == "fail"
    assert node2["cells"]["xid"]["source"] == "raw/node2/health-kernel-log-after.txt:1"
    assert "power-cycle" in node2["cells"]["xid"]["action"]
    assert [h["host"] for h in table["hosts"]] == ["node2", "node1"]  # worst first
    failing = next(c for c in summary["failing_checks"] if c["host"] == "node2")
    assert failing["action"] == node2["cells"]["xid"]["action"]
    assert "action: drain the node and power-cycle it" in (out / "junit.xml").read_text()
    page = (out / "report.html").read_text()
    assert '<section id="health">' in page and "Do: drain the node and power-cycle it" in page
    validate(json.loads((out / "results.json").read_text()), "results")


def test_the_real_h100_burn_and_its_readings_after_a_700w_load_pass(run: RunFolder) -> None:
    """Recorded on the lent H100: 30 s of bf16 at 672 TFLOPS (68 % of the 989.4 dense peak),
    held at the 700 W power limit from the third second (sw_power_cap: the limit doing its job,
    not a slowdown), every product correct; nvidia-smi -q -x right after the load, and the
    kernel log's NVRM lines (no Xid; an FBHUB interrupt cleared at boot)."""
    after = (DEVICE / "nvidia-smi-q-x-after-burn.xml").read_text()
    run.healthy("node1", xml=after)
    run.step("node1", "health-gemm-burn", (DEVICE / "gemm-burn-bf16-30s.json").read_text(),
             "gpuval-gemm-burn", ext="json")  # fmt: skip
    run.step("node1", "health-kernel-log-after",
             (DEVICE / "dmesg-nvidia-lines-after-burn.txt").read_text(), "kernel-log")  # fmt: skip
    health = run.health()
    burn_check = health["health.burn.GPU0"]
    assert burn_check.status == "pass" and burn_check.measured == pytest.approx(672.26, abs=0.01)
    assert burn_check.reference == 989.4
    assert "health.nvlink.errors" not in health  # no NVLink on this GPU
    assert {c.status for c in health.values()} == {"pass"}, {
        k: (c.status, c.reason) for k, c in health.items() if c.status != "pass"
    }


# --- NVLink error counters (nvidia-smi nvlink -e) and OFED across nodes -----------------------

PROBES = TESTS / "data" / "device" / "h100-x1-probes-2026-11-23" / "probes.txt"


def nvlink_errors(crc: int, replay: int = 0) -> str:
    """Two GPUs in the published form (tests/data/outputs/nvidia-smi/nvlink-errors-*), GPU1's
    link 2 with the given counts."""
    lines = []
    for gpu in (0, 1):
        lines.append(f"GPU {gpu}: NVIDIA H100 80GB HBM3 (UUID: GPU-0000000{gpu})")
        for link in range(3):
            bad = gpu == 1 and link == 2
            lines += [f"\t Link {link}: Replay Errors: {replay if bad else 0}",
                      f"\t Link {link}: Recovery Errors: 0",
                      f"\t Link {link}: CRC Errors: {crc if bad else 0}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def test_nvlink_crc_errors_growing_during_the_run_fail_naming_gpu_and_link(run: RunFolder) -> None:
    run.healthy("node1")
    run.step("node1", "health-nvlink-errors", nvlink_errors(4), "nvidia-smi-nvlink-errors")
    run.step("node1", "health-nvlink-errors-after", nvlink_errors(90, replay=2),
             "nvidia-smi-nvlink-errors")  # fmt: skip
    check = run.health()["health.nvlink.errors"]
    assert check.status == "fail"
    assert "GPU1 link 2 CRC Errors 4 -> 90 during the run" in check.reason
    assert "GPU1 link 2 Replay Errors 0 -> 2 during the run" in check.reason
    assert "RMA GPU1" in (check.action or "") and "nvmlNvLinkErrorCounter_t" in str(check.reference)
    assert check.source == "raw/node1/health-nvlink-errors-after.txt"
    run.step("node1", "health-nvlink-errors-after", nvlink_errors(4), "nvidia-smi-nvlink-errors")
    check = run.health()["health.nvlink.errors"]
    assert check.status == "pass" and "6 NVLink(s), 18 replay/recovery/CRC" in check.reason


def test_nonzero_nvlink_counters_without_a_capture_before_warn(run: RunFolder) -> None:
    run.healthy("node1")
    run.step("node1", "health-nvlink-errors-after", nvlink_errors(4), "nvidia-smi-nvlink-errors")
    check = run.health()["health.nvlink.errors"]
    assert check.status == "warn" and "no capture before the run" in check.reason


def test_no_nvlink_on_the_lent_h100_is_no_nvlink_counter_check(run: RunFolder) -> None:
    # What the lent single H100 printed (probes.txt): nothing, exit 0, before and after, for
    # nvlink -e and nvlink -s alike. No link, no counter: nothing to judge and nothing unjudged.
    assert "### nvidia-smi nvlink -e\n### rc=0\n" in PROBES.read_text()
    assert "### nvidia-smi nvlink -s\n### rc=0\n" in PROBES.read_text()
    run.healthy("node1")
    run.step("node1", "nvidia-smi-nvlink", "", "nvidia-smi-nvlink", "preflight")
    assert "health.nvlink.errors" not in run.health()
    assert not [c for c in run.checks() if c.status == "error"]


def test_links_that_nvlink_s_lists_and_nvlink_e_does_not_are_unjudged(run: RunFolder) -> None:
    """An 8x A100's nvlink -s (published: 12 links per GPU, 96 in all) with an empty nvlink -e:
    the counters of links that exist were not read, which is no pass."""
    run.healthy("node1")
    states = (OUTPUTS / "nvidia-smi" / "nvlink-gpud-testdata-8xA100-12-links.txt").read_text()
    run.step("node1", "nvidia-smi-nvlink", states, "nvidia-smi-nvlink", "preflight")
    check = run.health()["health.nvlink.errors"]
    assert check.status == "unjudged"
    assert "nvlink -e listed no NVLink where nvlink -s lists 96" in check.reason


def test_nvlink_counters_all_na_are_unjudged(run: RunFolder) -> None:
    run.healthy("node1")
    text = "GPU 0: NVIDIA B200 (UUID: GPU-1)\n\t Link 0: CRC Errors: N/A\n"
    for name in ("health-nvlink-errors", "health-nvlink-errors-after"):
        run.step("node1", name, text, "nvidia-smi-nvlink-errors")
    assert run.health()["health.nvlink.errors"].status == "unjudged"


def test_a_minority_ofed_across_nodes_is_named(run: RunFolder) -> None:
    for host, line in (("node1", "MLNX_OFED_LINUX-5.8-1.1.2.1:"), ("node2", "MLNX_OFED_LINUX-"
                       "5.8-1.1.2.1:"), ("node3", "OFED-internal-24.10-1.1.4:")):  # fmt: skip
        run.healthy(host)
        run.step(host, "health-ofed", line + "\n", "ofed-info")
    checks = [c for c in run.checks() if c.check_id == "health.network.ofed"]
    failing = {c.host: c.reason for c in checks if c.status == "fail"}
    assert set(failing) == {"node3", "cluster"}
    assert (
        "OFED-internal-24.10-1.1.4 here, the other hosts' MLNX_OFED_LINUX-5.8-1.1.2.1"
        in (failing["node3"])
    )
    assert health_subject("health.network.ofed") == "network"


def lspci_device(address: str, kind: str, ids: str, port: str | None = None,
                 bus: tuple[int, int, int] | None = None, redirect: bool = False,
                 denied: bool = False) -> str:  # fmt: skip
    """One `lspci -D -nn -vvv` block in its printed layout (as in tests/data/outputs/lspci)."""
    lines = [f"{address} {kind}: Vendor Device {ids}"]
    if bus:
        lines.append("\tBus: primary={:02x}, secondary={:02x}, subordinate={:02x}, "
                     "sec-latency=0".format(*bus))  # fmt: skip
    if denied:
        lines.append("\tCapabilities: <access denied>")
    elif port:
        sign = "+" if redirect else "-"
        lines += [f"\tCapabilities: [68] Express (v2) {port}, MSI 00",
                  "\tCapabilities: [f24 v1] Access Control Services",
                  "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ "
                  "EgressCtrl+ DirectTrans+",
                  f"\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir{sign} CmpltRedir{sign} "
                  f"UpstreamFwd{sign} EgressCtrl- DirectTrans-"]  # fmt: skip
    return "\n".join(lines) + "\n\n"


GPU_PCI = "3D controller [0302]", "[10de:2330]"
NIC_PCI = "Infiniband controller [0207]", "[15b3:1021]"
BRIDGE = "PCI bridge [0604]"


def switch_tree(nic_port_redirects: bool, denied: bool = False) -> str:
    """A root port above a PCIe switch (upstream port on bus 01, downstream ports on bus 02),
    the GPU behind one downstream port (bus 03) and the NIC behind the other (bus 04)."""
    return "".join([
        lspci_device("0000:00:01.0", BRIDGE, "[8086:0bcd]", "Root Port (Slot+)", (0, 1, 4),
                     redirect=True, denied=denied),
        lspci_device("0000:01:00.0", BRIDGE, "[1000:c030]", "Upstream Port", (1, 2, 4),
                     denied=denied),
        lspci_device("0000:02:00.0", BRIDGE, "[1000:c030]", "Downstream Port (Slot+)",
                     (2, 3, 3), denied=denied),
        lspci_device("0000:02:01.0", BRIDGE, "[1000:c030]", "Downstream Port (Slot+)",
                     (2, 4, 4), redirect=nic_port_redirects, denied=denied),
        lspci_device("0000:03:00.0", *GPU_PCI, "Endpoint", denied=denied),
        lspci_device("0000:04:00.0", *NIC_PCI, "Endpoint", denied=denied),
    ])  # fmt: skip


def test_acs_redirect_on_the_switch_port_above_the_nic_fails_naming_it(run: RunFolder) -> None:
    run.step("node1", "health-lspci", switch_tree(nic_port_redirects=True), "lspci")
    acs = run.health()["health.pcie.acs"]
    assert acs.status == "fail"
    assert "0000:02:01.0 (Downstream Port)" in acs.reason
    assert "the GPU at 0000:03:00.0 and NIC 0000:04:00.0" in acs.reason
    assert acs.action == ("disable ACS on 0000:02:01.0 (setpci, or the BIOS option), as NCCL's "
                          "guide says")  # fmt: skip
    assert acs.reference is not None and "pci-access-control-services-acs" in acs.reference


def test_acs_off_on_the_switch_passes(run: RunFolder) -> None:
    run.step("node1", "health-lspci", switch_tree(nic_port_redirects=False), "lspci")
    acs = run.health()["health.pcie.acs"]
    # The root port above the switch redirects; their path stays inside the switch.
    assert acs.status == "pass" and acs.action is None
    assert acs.reason.startswith("1 GPU-NIC pair(s) under a PCIe switch with no ACS redirect")


def test_gpu_and_nic_on_different_root_ports_meet_at_the_root_complex_and_pass(
    run: RunFolder,
) -> None:
    tree = "".join([
        lspci_device("0000:00:01.0", BRIDGE, "[8086:0bcd]", "Root Port (Slot+)", (0, 1, 1),
                     redirect=True),
        lspci_device("0000:00:03.0", BRIDGE, "[8086:0bcd]", "Root Port (Slot+)", (0, 2, 2),
                     redirect=True),
        lspci_device("0000:01:00.0", *GPU_PCI, "Endpoint"),
        lspci_device("0000:02:00.0", *NIC_PCI, "Endpoint"),
    ])  # fmt: skip
    run.step("node1", "health-lspci", tree, "lspci")
    acs = run.health()["health.pcie.acs"]
    assert acs.status == "pass"
    assert "1 meet only at the root complex, where ACS does not change their path" in acs.reason


def test_acs_unreadable_without_root_is_unjudged(run: RunFolder) -> None:
    run.step("node1", "health-lspci", switch_tree(True, denied=True), "lspci")
    acs = run.health()["health.pcie.acs"]
    assert acs.status == "unjudged"
    assert "meet at 0000:01:00.0, whose capabilities lspci could not read" in acs.reason


def test_acs_without_bus_ranges_is_unjudged_and_without_a_nic_is_not_judged(
    run: RunFolder,
) -> None:
    flat = lspci_device("0000:03:00.0", *GPU_PCI) + lspci_device("0000:04:00.0", *NIC_PCI)
    run.step("node1", "health-lspci", flat, "lspci")
    assert run.health()["health.pcie.acs"].status == "unjudged"
    run.step("node1", "health-lspci", lspci_device("0000:03:00.0", *GPU_PCI), "lspci")
    assert "health.pcie.acs" not in run.health()
