"""What a failing GPU prints in the kernel log besides an Xid line, on real published logs
(tests/data/outputs/kernel-log/README.md): a GPU fallen off the bus as current drivers print it
(over continuation lines, no Xid 79), a GPU the driver could not initialise, AER errors on a GPU
or on the port above it, the boot notice of a narrowed link, dmesg's relative times, and Xid 45
judged by the Xid it names as its cause. Expected verdicts follow NVIDIA's Xid catalog (79 and 143
need a reset or power cycle; 144-150 are NVLink hardware errors) and the kernel's AER guide
(uncorrectable errors make the link unreliable)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.test_health_checks import RunFolder

from gpuval.catalog.health import xid_meaning
from gpuval.checks.model import Check
from gpuval.parsers import kernel_log
from gpuval.records.health import KernelLogRun
from gpuval.schemas.validation import validate

LOGS = Path(__file__).resolve().parents[1] / "data" / "outputs" / "kernel-log"


@pytest.fixture
def folder(tmp_path: Path) -> RunFolder:
    return RunFolder(tmp_path / "run")


def log(name: str) -> KernelLogRun:
    result = kernel_log.parse((LOGS / name).read_text(), source=name)
    validate(result.to_dict(), "parse-result")
    assert not result.errors and not result.warnings
    parsed: KernelLogRun = result.runs[0]
    return parsed


def judged(folder: RunFolder, name: str) -> dict[str, Check]:
    """The health checks of a healthy node whose kernel log after the run is the log `name`."""
    return folder.after_kernel_log((LOGS / name).read_text())


def events(run: KernelLogRun) -> list[tuple[object, ...]]:
    return [(e.kind, e.device, e.line, e.severity) for e in run.events]


def test_current_drivers_off_bus_message_over_continuation_lines_is_an_event() -> None:
    parsed = log("nvsentinel-155-dmesg-off-bus-no-xid-570.txt")
    assert events(parsed) == [("off-bus", "0000:b3:00.0", 1, None), ("init-failed", None, 4, None)]
    assert parsed.events[0].code == 79 and parsed.events[0].uptime_s == 1843.308145


def test_rm_init_adapter_failures_with_and_without_a_pci_address() -> None:
    parsed = log("gpu-operator-1146-syslog-uptime-rminitadapter.txt")
    assert {(e.kind, e.device) for e in parsed.events} == {("init-failed", "0000:0a:00.0")}
    # Each "rm_init_adapter failed" line completes the RmInitAdapter line above it.
    assert len(parsed.events) == 6 and parsed.format == "syslog"
    assert parsed.events[0].message == (
        "RmInitAdapter failed! (0x24:0x72:1568) (rm_init_adapter failed, device minor number 5)"
    )
    old = log("bumblebee-722-dmesg-rminitadapter-old-driver.txt")
    assert events(old) == [("init-failed", None, 1, None)]


def test_aer_lines_with_relative_times_and_the_error_names_below_them() -> None:
    parsed = log("returnn-1500-dmesg-reltime-aer-cant-recover.txt")
    assert parsed.format == "dmesg-relative" and parsed.first_timestamp == "+0.000844"
    assert events(parsed)[:4] == [
        ("aer", "0000:03:00.0", 1, "unrecovered"), ("aer", "0000:03:00.1", 2, "unrecovered"),
        ("aer", "0000:00:03.0", 3, "unrecovered"), ("aer", "0000:00:03.0", 5, "fatal"),
    ]  # fmt: skip
    assert parsed.events[3].message == "Uncorrected (Fatal), Transaction Layer: SDES, CmpltTO"
    assert parsed.events[0].uptime_s is None  # relative times are no time since boot
    assert parsed.gpus == ["0000:03:00.0"]  # the nvidia driver holds it


def test_surprise_down_on_the_port_then_xid79() -> None:
    parsed = log("gpu-burn-1-dmesg-aer-surprise-down-xid79-cut.txt")
    assert [(e.kind, e.severity, e.line) for e in parsed.events] == [
        ("aer", "corrected", 2), ("aer", "fatal", 6), ("xid", None, 13)]  # fmt: skip
    assert parsed.events[1].message.endswith("Surprise Down Error")


def test_boot_link_notice_width_or_speed_and_the_gpu_the_log_names() -> None:
    gen1 = log("pci-dmesg-gpu-boot-link-gen1-limited.txt")
    assert gen1.gpus == ["0000:01:00.0"]
    assert [(e.device, e.severity, e.port) for e in gen1.events] == [
        ("0000:01:00.0", "speed", "0000:00:01.0"),
        ("0000:02:00.0", "speed", "0000:00:1c.0"),
    ]
    x8 = log("pci-dmesg-gpu-boot-link-x8-derived.txt")
    assert (x8.events[0].severity, x8.events[0].message) == ("width", "8.0 GT/s x8 of 8.0 GT/s x16")


def test_off_bus_without_xid_fails_naming_the_gpu(folder: RunFolder) -> None:
    health = judged(folder, "nvsentinel-155-dmesg-off-bus-no-xid-570.txt")
    check = health["health.xid.0000:b3:00"]
    assert check.status == "fail" and "the GPU at 0000:b3:00.0" in check.reason
    assert isinstance(check.measured, str) and "fallen off the bus" in check.measured
    assert check.action and "power-cycle" in check.action
    # The unnamed probe failure after it is the same GPU, not a second finding.
    assert "health.xid.unknown" not in health


def test_rm_init_adapter_failure_fails_naming_the_gpu(folder: RunFolder) -> None:
    health = judged(folder, "gpu-operator-1146-syslog-uptime-rminitadapter.txt")
    check = health["health.xid.0000:0a:00"]
    assert check.status == "fail" and "the GPU at 0000:0a:00.0" in check.reason
    assert "initialisation failure x6" in check.reason
    assert check.action and "reset" in check.action


def test_rm_init_adapter_failure_without_an_address_still_fails(folder: RunFolder) -> None:
    health = judged(folder, "bumblebee-722-dmesg-rminitadapter-old-driver.txt")
    assert health["health.xid.unknown"].status == "fail"


def test_xid45_is_judged_by_the_nvlink_xid_that_caused_it(folder: RunFolder) -> None:
    health = judged(folder, "open-gpu-kernel-modules-1150-undated-xid45-after-145-149.txt")
    check = health["health.xid.0000:dc:00"]
    assert check.status == "fail"
    assert check.measured == "Xid 45 caused by Xid 149 (NVLINK_NETIR_ERROR)"


def test_aer_cant_recover_on_a_gpu_fails_and_the_port_above_is_named(folder: RunFolder) -> None:
    health = judged(folder, "returnn-1500-dmesg-reltime-aer-cant-recover.txt")
    check = health["health.pcie.kernel-log"]
    assert check.status == "fail"
    assert "the GPU at 0000:03:00.0" in check.reason and "can't recover" in check.reason
    # Without the PCI tree, the root port's fatal error is named and what is below it unknown.
    assert "0000:00:03.0" in check.reason


def test_surprise_down_on_a_port_without_the_tree_warns(folder: RunFolder) -> None:
    health = judged(folder, "gpu-burn-1-dmesg-aer-surprise-down-xid79-cut.txt")
    pcie = health["health.pcie.kernel-log"]
    assert pcie.status == "warn" and "Surprise Down Error" in pcie.reason
    assert "lspci -vvv" in pcie.reason
    assert health["health.xid.0000:02:00"].status == "fail"  # its Xid 79


def test_boot_notices_a_narrowed_gpu_link_warns_and_gen1_at_boot_passes(folder: RunFolder) -> None:
    check = judged(folder, "pci-dmesg-gpu-boot-link-x8-derived.txt")["health.pcie.kernel-log"]
    assert check.status == "warn" and "x8 of 8.0 GT/s x16" in check.reason
    assert "0000:00:01.0" in check.reason
    check = judged(folder, "pci-dmesg-gpu-boot-link-gen1-limited.txt")["health.pcie.kernel-log"]
    assert check.status == "pass" and "1 boot notice(s)" in check.reason


def test_a_fatal_aer_error_on_the_root_port_above_a_gpu_fails_naming_both(
    folder: RunFolder,
) -> None:
    """The PCI tree is the real lspci blocks of a root port (raspberrypi/linux#5352) and an A100
    (open-mpi/hwloc#653), renumbered to the returnn log's addresses: the port as 00:03.0 with bus
    03 behind it, the GPU as 03:00.0."""
    lspci = LOGS.parent / "lspci"
    port = (lspci / "raspberrypi-linux-5352-root-port-excerpt.txt").read_text()
    port = port.replace("00:00.0 PCI bridge", "00:03.0 PCI bridge", 1).replace(
        "secondary=01, subordinate=05", "secondary=03, subordinate=03")  # fmt: skip
    gpu = (
        (lspci / "hwloc-653-a100-sxm4-nn-excerpt.txt").read_text().replace("da:00.0", "03:00.0", 1)
    )
    folder.step("node1", "health-lspci", f"{port}\n{gpu}", "lspci")
    health = judged(folder, "returnn-1500-dmesg-reltime-aer-cant-recover.txt")
    check = health["health.pcie.kernel-log"]
    assert check.status == "fail"
    assert "port 0000:00:03.0 above the GPU at 0000:03:00" in check.reason
    assert "SDES, CmpltTO" in check.reason


def test_logs_of_every_dating_form_are_recognised_without_an_xid_line() -> None:
    for name in ("returnn-1500-dmesg-reltime-aer-cant-recover.txt",
                 "pci-dmesg-gpu-boot-link-gen1-limited.txt",
                 "gpu-operator-1146-syslog-uptime-rminitadapter.txt"):  # fmt: skip
        assert kernel_log.detect((LOGS / name).read_text()), name
    # journalctl -k -o short-iso(-precise): an ISO time with its offset, the host, "kernel:".
    iso = "".join(
        f"2026-11-22T19:01:0{i}.123456+0000 node1 kernel: pci 0000:00:0{i}.0: enabled\n"
        for i in range(3)
    )
    assert kernel_log.detect(iso) == ("kernel-log", 40)


def test_the_catalog_follows_nvidias_current_xid_catalog() -> None:
    """Rows of https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html: code,
    mnemonic, immediate and investigatory buckets."""
    rows = {
        79: ("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", "CONTACT_SUPPORT"),
        147: ("NVLINK_TREX_ERROR", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
        148: ("NVLINK_NVLPW_CTRL_ERROR", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
        151: ("ROBUST_CHANNEL_KEY_ROTATION_ERROR", "RESTART_VM", "CONTACT_SUPPORT"),
        158: ("GPU_FATAL_TIMEOUT", "RESET_GPU", "CONTACT_SUPPORT"),
        167: ("PCIE_FATAL_TIMEOUT", None, None),
    }
    for code, (mnemonic, immediate, investigatory) in rows.items():
        meaning = xid_meaning(code)
        assert (meaning.code, meaning.mnemonic) == (code, mnemonic)
        assert (meaning.immediate, meaning.investigatory) == (immediate, investigatory)
    assert xid_meaning(147).kind == "hardware" and xid_meaning(167).kind == "unknown"


def test_xid45_alone_or_after_an_application_xid_is_no_hardware_fault(folder: RunFolder) -> None:
    lines = (
        "2026-11-22T19:00:00+00:00 node1 kernel: NVRM: Xid (PCI:0000:00:06): 45, pid=7, "
        "name=python3, Ch 00000001\n"
        "2026-11-22T19:00:01+00:00 node1 kernel: NVRM: Xid (PCI:0000:00:07): 45, pid=8, "
        "name=python3, Ch 00000001 caused by previous Xid 13\n"
    )
    health = folder.after_kernel_log(lines)
    assert health["health.xid.0000:00:06"].status == "pass"  # a program was stopped
    check = health["health.xid.0000:00:07"]
    assert (
        check.status == "warn"
        and check.measured == "Xid 45 caused by Xid 13 (ROBUST_CHANNEL_GR_EXCEPTION)"
    )
