"""Parsers of the node health outputs, on real published outputs (tests/data/outputs/*/README.md)
and on the variations they show: kernel logs in every dating form, sysfs listings, lspci -vvv,
/proc/modules, nvidia-smi nvlink -e, ofed_info -s, dcgmi diag -j, the GEMM burn's JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuval.parsers import (
    dcgm_diag,
    gpuval_bench,
    kernel_log,
    kernel_modules,
    lspci,
    nvidia_smi_nvlink_errors,
    software_versions,
    sysfs_infiniband,
    sysfs_pci,
)
from gpuval.records.base import ParseResult
from gpuval.records.health import KernelLogRun, LspciDevice
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs"


def checked(result: ParseResult) -> ParseResult:
    validate(result.to_dict(), "parse-result")
    return result


def log(name: str) -> KernelLogRun:
    result = checked(kernel_log.parse((DATA / "kernel-log" / name).read_text(), source=name))
    assert not result.errors and not result.warnings
    run: KernelLogRun = result.runs[0]
    return run


def events(run: KernelLogRun) -> list[tuple[object, ...]]:
    return [(e.kind, e.code, e.device, e.line) for e in run.events]


def test_dmesg_ctime_xids_with_the_prompt_before_and_a_line_cut_mid_way() -> None:
    run = log("akash-support-244-dmesg-T-xid-43-31-94-cut.txt")
    assert run.format == "dmesg-ctime" and run.line_count == 13
    assert events(run) == [
        ("xid", 43, "0000:00:05", 5), ("xid", 43, "0000:00:05", 6), ("xid", 31, "0000:00:07", 9),
        ("xid", 94, "0000:00:08", 12),
    ]  # fmt: skip
    # dmesg -T prints local time without a zone: kept as printed, never given an offset.
    assert run.events[3].timestamp == "Fri Aug  9 13:32:56 2024"
    assert run.events[3].time_iso is None
    assert run.events[3].message.startswith("pid='<unknown>', name=<unknown>, Contained: SM")


def test_journal_lines_xid79_and_the_drivers_off_bus_line() -> None:
    run = log("open-gpu-kernel-modules-1151-journal-xid79-cut.txt")
    assert run.format == "syslog"
    assert events(run) == [("xid", 79, "0000:2b:00", 2), ("off-bus", 79, "0000:2b:00.0", 3)]
    assert run.events[0].message == "GPU has fallen off the bus."


def test_plain_dmesg_dates_by_seconds_since_boot() -> None:
    run = log("pastebin-jJdbRLSr-dmesg-xid79-driver-375.txt")
    assert run.format == "dmesg"
    assert [(e.code, e.uptime_s, e.timestamp) for e in run.events] == [
        (79, 5107.644336, "5107.644336")
    ]


def test_syslog_with_uptime_an_old_off_bus_line_and_an_xid_without_pci_prefix() -> None:
    run = log("pastebin-xJaypMZt-syslog-off-bus-xid3.txt")
    assert events(run) == [("off-bus", 79, "0000:01:00.0", 1), ("xid", 3, "0000:01:00", 6)]
    assert run.events[1].uptime_s == 269.517039 and run.events[1].timestamp == "Jan 18 11:38:05"


def test_sxid_severity_as_the_line_says_and_xid64_among_boot_lines() -> None:
    run = log("menthos-dataset-sxid-fatal-nonfatal-xid64.txt")
    sxids = [(e.switch, e.code, e.severity) for e in run.events if e.kind == "sxid"]
    assert sxids[:4] == [
        ("nvidia-nvswitch4", 19084, "non-fatal"), ("nvidia-nvswitch0", 20034, "fatal"),
        ("nvidia-nvswitch0", 20034, "fatal"), ("nvidia-nvswitch2", 10002, None),
    ]  # fmt: skip
    assert [(e.code, e.device) for e in run.events if e.kind == "xid"] == [(64, "0000:0f:00")]
    assert run.line_count == 20 and run.format == "plain"


def test_pci_domains_other_than_zero_and_undated_kernel_lines() -> None:
    assert [e.device for e in log("gpud-pr1174-kmsg-xid-149-145-94-domains.txt").events] == [
        "0019:01:00", "0000:00:00", "0018:01:00", "0000:9b:00",
    ]  # fmt: skip
    run = log("open-gpu-kernel-modules-1150-undated-xid45-after-145-149.txt")
    assert {e.code for e in run.events} == {45} and len(run.events) == 8


def test_a_healthy_nodes_whole_dmesg_has_no_event() -> None:
    run = log("h100-x1-dmesg-T-580-no-xid.txt")
    assert run.events == [] and run.line_count == 358
    assert run.first_timestamp == "Sun Nov 22 19:01:01 2026"


def test_iso_times_keep_their_offset_whatever_their_precision() -> None:
    text = (
        "2026-09-14T20:30:27-0400 Farttop kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=0, GPU has "
        "fallen off the bus.\n"
        "2026-11-22T19:01:01,123456+00:00 NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE\n"
        "192.168.11.119: kern: warning: [2026-04-22T21:27:51.291660856Z]: NVRM: Xid "
        "(PCI:0000:3b:00): 119, pid=2, Timeout\n"
    )
    run = checked(kernel_log.parse(text)).runs[0]
    assert run.format == "iso"
    assert [e.time_iso for e in run.events] == [
        "2026-09-14T20:30:27-04:00", "2026-11-22T19:01:01.123456+00:00",
        "2026-04-22T21:27:51.291660+00:00",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "journalctl and dmesg printed no kernel line"),
        ("-- No entries --\n", "-- No entries --"),
        ("No journal files were found.\n", "No journal files were found."),
        (
            "No journal files were opened due to insufficient permissions.\n",
            "No journal files were opened due to insufficient permissions.",
        ),
        (
            "-- No entries --\ndmesg: read kernel buffer failed: Operation not permitted\n",
            "-- No entries --; dmesg: read kernel buffer failed: Operation not permitted",
        ),
        (
            "-- Logs begin at Mon 2026-11-23 10:00:00 UTC, end at Mon 2026-11-23 11:00:00 UTC. --\n"
            "-- No entries --\n",
            "-- No entries --",
        ),
    ],
)
def test_an_empty_or_unreadable_kernel_log_is_unreadable_not_clean_nor_a_parse_error(
    text: str, reason: str
) -> None:
    result = checked(kernel_log.parse(text))
    assert not result.errors and not result.warnings
    (run,) = result.runs
    assert run.unreadable == reason and run.line_count == 0 and run.events == []


def test_journald_markers_are_not_kernel_lines_and_dmesg_after_them_is_read() -> None:
    text = (
        "-- No entries --\n"
        "-- Boot 3f2a9c0e5b6d4e7f8a9b0c1d2e3f4a5b --\n"
        "[ 5107.644336] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.\n"
    )
    run = checked(kernel_log.parse(text)).runs[0]
    assert run.unreadable is None and run.line_count == 1 and run.format == "dmesg"
    assert [(e.code, e.line) for e in run.events] == [(79, 3)]


def test_sysfs_infiniband_counters_firmware_and_port_state() -> None:
    text = (DATA / "sysfs-infiniband" / "SYNTHETIC-mlx5-ndr-saturated-counters.txt").read_text()
    result = checked(sysfs_infiniband.parse(text))
    (device,) = result.runs[0].devices
    assert (device.name, device.fw_ver, device.board_id) == ("mlx5_0", "28.41.1000",
                                                              "MT_0000000838")  # fmt: skip
    port = device.ports[0]
    assert (port.state, port.physical_state, port.rate_gbit, port.link_layer) == (
        "ACTIVE", "LinkUp", 400.0, "InfiniBand")  # fmt: skip
    assert port.counters["link_downed"] == 255 and port.counters["port_xmit_discards"] == 65535


def test_sysfs_infiniband_without_pma_reads_none_and_warns_on_what_is_not_a_listing() -> None:
    text = (DATA / "sysfs-infiniband" / "node-exporter-966-i40iw-no-pma-cut.txt").read_text()
    result = checked(sysfs_infiniband.parse(text))
    port = result.runs[0].devices[0].ports[0]
    assert set(port.counters.values()) == {None} and len(port.counters) == 8
    assert [w.line for w in result.warnings] == [1, 10]  # the quoted command, the cut line


def test_sysfs_pci_links_of_a_real_h100_and_aer_counts() -> None:
    real = checked(sysfs_pci.parse((DATA / "sysfs-pci" / "h100-x1-firecracker-gen5-x16.txt")
                                   .read_text())).runs[0]  # fmt: skip
    gpus = [d for d in real.devices if d.is_gpu]
    assert [(d.address, d.current_speed_gts, d.current_width, d.max_width) for d in gpus] == [
        ("0000:00:06.0", 32.0, 16, 16)]  # fmt: skip
    assert len(real.devices) == 7 and not any(d.is_rdma_nic for d in real.devices)
    text = (DATA / "sysfs-pci" / "SYNTHETIC-gpu-x8-nic-aer-errors.txt").read_text()
    gpu, nic = checked(sysfs_pci.parse(text)).runs[0].devices
    assert (gpu.current_width, gpu.max_width, nic.current_speed_gts, nic.max_speed_gts) == (
        8, 16, 16.0, 32.0)  # fmt: skip
    assert nic.is_rdma_nic and nic.aer["correctable"]["TOTAL_ERR_COR"] == 22
    assert nic.aer["nonfatal"]["CmpltTO"] == 1


def test_proc_modules_and_lsmod() -> None:
    text = (DATA / "kernel-modules" / "SYNTHETIC-proc-modules-peermem.txt").read_text()
    assert "nvidia_peermem" in checked(kernel_modules.parse(text)).runs[0].modules
    lsmod = "Module                  Size  Used by\nnvidia_peermem         16384  0\n"
    assert checked(kernel_modules.parse(lsmod)).runs[0].modules == ["nvidia_peermem"]
    assert kernel_modules.detect(lsmod) == ("kernel-modules", 80)


def test_dcgm_4x_failure_named_per_gpu_after_a_status_line() -> None:
    text = (DATA / "dcgmi-diag" / "SYNTHETIC-4.2.3-r2-memory-fail-gpu2.json").read_text()
    result = checked(dcgm_diag.parse(text))
    run = result.runs[0]
    assert (run.dcgm_version, run.driver_version) == ("4.2.3", "570.148.08")
    memory = next(t for t in run.tests if t.name == "memory")
    assert memory.status == "Fail" and memory.category == "Hardware"
    failed = [r for r in memory.results if r.status == "Fail"]
    assert [(r.entity, r.error_ids) for r in failed] == [("GPU2", [58])]
    assert failed[0].warnings[0].startswith("A memory mismatch was detected on GPU 2")


def test_dcgm_elided_document_is_an_error_naming_the_line() -> None:
    text = (DATA / "dcgmi-diag" / "dcgm-issue139-3.3.1-r3-elided.json").read_text()
    result = checked(dcgm_diag.parse(text))
    assert not result.runs and result.errors[0].line == 6


def test_dcgm_3x_results_without_summary_take_their_worst_status() -> None:
    document = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "GPU Memory", "results": [{"gpu_id": "0", "status": "Pass"},
                                           {"gpu_id": "1", "status": "Fail",
                                            "warnings": [{"warning": "bad", "error_id": 58}]}]}]}],
        "version": "3.3.1"}}  # fmt: skip
    run = checked(dcgm_diag.parse(json.dumps(document))).runs[0]
    assert run.tests[0].status == "Fail" and run.dcgm_version == "3.3.1"
    assert [r.entity for r in run.tests[0].results] == ["GPU0", "GPU1"]


def test_dcgm_runtime_error_and_text_output_are_errors() -> None:
    result = checked(dcgm_diag.parse('{"DCGM Diagnostic": {"runtime_error": "no GPU"}}'))
    assert result.errors and result.runs[0].runtime_error == "no GPU"
    assert checked(dcgm_diag.parse("Error: unable to connect to host engine")).errors


def test_gemm_burn_document_and_a_burn_that_could_not_run() -> None:
    document = {
        "tool": "gpuval-gemm-burn", "schema_version": 1, "dtype": "bf16", "matrix_size": 8192,
        "seconds_requested": 20, "device_type": "cuda", "torch_version": "2.13.0",
        "cuda_version": "13.0", "sampler": "nvidia-smi", "error": None,
        "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:00:06.0",
                  "tflops": 712.5, "iterations": 1700, "seconds": 20.0, "max_abs_error": 0.002,
                  "correct": True, "mismatches": 0, "error": None,
                  "samples": [{"elapsed_s": 1.0, "sm_clock_mhz": 1980, "temperature_c": 55,
                               "power_w": 690, "throttle": ["sw_power_cap"]}]}],
    }  # fmt: skip
    text = "[default0]: " + json.dumps(document) + "\n"
    assert gpuval_bench.detect(text) == ("gpuval-gemm-burn", 95)
    result = checked(gpuval_bench.parse(text))
    (gpu,) = result.runs[0].gpus
    assert (gpu.tflops, gpu.correct, gpu.samples[0].throttle) == (712.5, True, ["sw_power_cap"])
    failed = checked(gpuval_bench.parse(json.dumps({
        "tool": "gpuval-gemm-burn", "schema_version": 1, "gpus": [],
        "error": "cannot burn: torch was built without CUDA"})))  # fmt: skip
    assert "torch was built without CUDA" in failed.errors[0].message
    assert "did not finish" in checked(gpuval_bench.parse("", tool="gpuval-gemm-burn")).errors[
        0].message  # fmt: skip


def as_grep_listing(loop_form: str) -> str:
    """The loop form's content as `grep -H .` prints the same files."""
    lines, device, name = [], "", ""
    for line in loop_form.splitlines():
        if line.startswith("== "):
            path, *attributes = line[3:].split()
            device = path
            lines += [f"{path}/{key}:{value}" for key, value in (a.split("=") for a in attributes)]
        elif line.startswith("-- "):
            name = line[3:]
        else:
            lines.append(f"{device}/{name}:{line}")
    return "\n".join(lines) + "\n"


def test_sysfs_pci_grep_form_reads_like_the_loop_form() -> None:
    loop = (DATA / "sysfs-pci" / "SYNTHETIC-gpu-x8-nic-aer-errors.txt").read_text()
    grep = checked(sysfs_pci.parse(as_grep_listing(loop)))
    assert sysfs_pci.detect(as_grep_listing(loop)) == ("sysfs-pci", 85)
    devices = [(d.address, d.class_code, d.vendor, d.current_width, d.max_width, d.aer)
               for d in grep.runs[0].devices]  # fmt: skip
    expected = [(d.address, d.class_code, d.vendor, d.current_width, d.max_width, d.aer)
                for d in checked(sysfs_pci.parse(loop)).runs[0].devices]  # fmt: skip
    assert devices == expected and not grep.warnings
    real = (DATA / "sysfs-pci" / "dev-vm-grep-virtio-no-link.txt").read_text()
    run = checked(sysfs_pci.parse(real)).runs[0]
    assert [d.vendor for d in run.devices] == ["0x8086"] + ["0x1af4"] * 5
    assert not any(d.is_gpu or d.is_rdma_nic or d.current_width for d in run.devices)


# --- nvidia-smi nvlink -e, ofed_info -s -------------------------------------------------------

PROBES = DATA.parent / "device" / "h100-x1-probes-2026-11-23" / "probes.txt"


def test_nvlink_errors_of_a_published_gb300_keep_every_counter_by_name() -> None:
    path = DATA / "nvidia-smi" / "nvlink-errors-srt-slurm-307-gb300-one-link.txt"
    result = checked(nvidia_smi_nvlink_errors.parse(path.read_text(), str(path)))
    assert not result.errors and not result.warnings
    (gpu,) = result.runs[0].gpus
    assert (gpu.index, gpu.name, gpu.uuid) == (0, "NVIDIA GB300", None)
    assert [(k.link, k.counters) for k in gpu.links] == [
        (0, {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0})
    ]


def test_nvlink_errors_na_other_counter_names_and_per_lane_crc_are_kept() -> None:
    text = (
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1234)\n"
        "\t Link 0: Replay Errors: 3\n"
        "\t Link 0: Data CRC Errors: 1\n"
        "\t Link 0: Flit CRC Errors: N/A\n"
        "\t Link 0: Lane 2 CRC Errors: 7\n"
        "\t Link 1: Effective Errors: 0\n"
    )
    result = checked(nvidia_smi_nvlink_errors.parse(text, "e.txt"))
    assert not result.errors and not result.warnings
    links = result.runs[0].gpus[0].links
    assert links[0].counters == {"Replay Errors": 3, "Data CRC Errors": 1,
                                 "Flit CRC Errors": None, "Lane 2 CRC Errors": 7}  # fmt: skip
    assert (links[1].link, links[1].counters, links[1].line) == (1, {"Effective Errors": 0}, 6)


def test_nvlink_errors_printed_nothing_on_the_lent_h100_means_no_links_not_an_error() -> None:
    # probes.txt: "### nvidia-smi nvlink -e" is directly followed by "### rc=0".
    recorded = PROBES.read_text().split("### nvidia-smi nvlink -e\n", 1)[1]
    output = recorded.split("### rc=", 1)[0]
    result = checked(nvidia_smi_nvlink_errors.parse(output, "health-nvlink-errors.txt"))
    assert output == "" and not result.errors and result.runs[0].gpus == []
    assert "no GPU reports an NVLink" in result.warnings[0].message


def test_nvlink_errors_garbage_names_the_file_and_line() -> None:
    result = checked(nvidia_smi_nvlink_errors.parse("oops\n  Link 0: CRC Errors: x\n", "e.txt"))
    assert result.runs == [] and "no `GPU N: NAME` line" in result.errors[0].message
    assert [(w.source, w.line) for w in result.warnings] == [("e.txt", 1), ("e.txt", 2)]


def test_ofed_info_mlnx_ofed_published_and_doca_forms() -> None:
    path = DATA / "software-versions" / "ofed-info-baidu-cce-guide-5.8-trailing-spaces.txt"
    result = checked(software_versions.parse(path.read_text(), str(path)))
    assert result.tool == "ofed-info"
    run = result.runs[0]
    assert (run.component, run.implementation, run.version) == ("ofed", "MLNX_OFED_LINUX",
                                                               "5.8-1.1.2.1")  # fmt: skip
    # DOCA-Host's form, as the OFED package names it (`OFED-internal-<version>:`)
    doca = checked(software_versions.parse("OFED-internal-24.10-1.1.4:\n", tool="ofed-info"))
    assert (doca.runs[0].implementation, doca.runs[0].version) == ("OFED-internal", "24.10-1.1.4")
    missing = software_versions.parse("bash: ofed_info: command not found\n", "o.txt", "ofed-info")
    assert missing.runs == [] and missing.errors[0].line == 1


def lspci_devices(name: str, warnings: int = 0) -> list[LspciDevice]:
    path = DATA / "lspci" / name
    result = checked(lspci.parse(path.read_text(), str(path)))
    assert not result.errors and len(result.warnings) == warnings
    devices: list[LspciDevice] = result.runs[0].devices
    return devices


def test_lspci_published_switch_port_excerpt_warns_about_its_cut_start() -> None:
    path = DATA / "lspci" / "heymeco-rockchip-6-pex8725-acs-redirect-excerpt.txt"
    result = checked(lspci.parse(path.read_text(), str(path)))
    # The excerpt starts inside the previous port's ACS capability: said once, at line 1.
    assert [(w.source, w.line) for w in result.warnings] == [(str(path), 1)]
    [port] = result.runs[0].devices
    assert (port.address, port.class_name, port.class_code, port.vendor, port.line) == (
        "0000:02:08.0", "PCI bridge", "0604", None, 6)  # fmt: skip
    assert (port.primary_bus, port.secondary_bus, port.subordinate_bus) == (0x02, 0x82, 0x82)
    assert port.bridges_bus(0x82) and not port.bridges_bus(0x83)
    assert (port.port_type, port.acs_control, port.capabilities_denied) == (None, None, False)


def test_lspci_published_acs_flags_under_a_header_written_here() -> None:
    path = DATA / "lspci" / "heymeco-rockchip-6-pex8725-acs-redirect-excerpt.txt"
    acs_lines = "".join(path.read_text().splitlines(keepends=True)[:2])
    text = "0000:02:01.0 PCI bridge: PLX Technology, Inc. PEX 8725\n" + acs_lines
    [port] = checked(lspci.parse(text, "acs.txt")).runs[0].devices
    assert port.acs_capability == dict.fromkeys(
        ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl",
         "DirectTrans"), True)  # fmt: skip
    assert port.acs_control == {"SrcValid": True, "TransBlk": False, "ReqRedir": True,
                                "CmpltRedir": True, "UpstreamFwd": True, "EgressCtrl": False,
                                "DirectTrans": False}  # fmt: skip
    assert port.acs_redirects


def test_lspci_published_a100_with_numeric_ids_and_no_domain() -> None:
    [gpu] = lspci_devices("hwloc-653-a100-sxm4-nn-excerpt.txt")
    assert (gpu.address, gpu.class_name, gpu.class_code, gpu.vendor, gpu.device) == (
        "0000:da:00.0", "3D controller", "0302", "10de", "20b0")  # fmt: skip
    assert gpu.port_type == "Endpoint" and gpu.is_gpu and not gpu.is_rdma_nic
    assert gpu.secondary_bus is None and gpu.acs_control is None


def test_lspci_published_connectx6_by_name_with_its_link_capability() -> None:
    [nic] = lspci_devices("l2fwd-nv-6-connectx6-dx-excerpt.txt")
    assert (nic.address, nic.class_code, nic.vendor, nic.device) == (
        "0000:b3:00.0", "0200", "15b3", None)  # fmt: skip
    assert nic.is_rdma_nic and nic.port_type == "Endpoint"
    assert (nic.link_capable_speed_gts, nic.link_capable_width) == (16.0, 16)
    assert (nic.link_speed_gts, nic.link_width) == (None, None)  # LnkSta is cut off


def test_lspci_published_switch_downstream_and_root_ports() -> None:
    [downstream] = lspci_devices("linux-media-88-pericom-downstream-nn-excerpt.txt")
    assert (downstream.address, downstream.class_code, downstream.vendor, downstream.device) == (
        "0000:02:01.0", "0604", "12d8", "2304")  # fmt: skip
    assert downstream.port_type == "Downstream Port" and not downstream.is_root_port
    assert (downstream.primary_bus, downstream.secondary_bus, downstream.subordinate_bus) == (
        2, 3, 3)  # fmt: skip
    [root] = lspci_devices("raspberrypi-linux-5352-root-port-excerpt.txt")
    assert root.port_type == "Root Port" and root.is_root_port
    assert (root.primary_bus, root.secondary_bus, root.subordinate_bus) == (0, 1, 5)


def test_lspci_published_without_root_notes_access_denied() -> None:
    devices = lspci_devices("fastfetch-1658-access-denied-excerpt.txt", warnings=1)
    assert [(d.address, d.class_name, d.capabilities_denied) for d in devices] == [
        ("0000:4c:00.0", "Non-Volatile memory controller", True),
        ("0000:59:00.0", "System peripheral", True),
        ("0000:59:00.1", "System peripheral", False),  # the excerpt ends before its capabilities
    ]


def test_lspci_newer_link_status_and_message_number_forms() -> None:
    text = (
        "0000:c1:00.0 Infiniband controller [0207]: Mellanox Technologies MT2910 Family "
        "[ConnectX-7] [15b3:1021]\n"
        "\tCapabilities: [60] Express (v2) Endpoint, IntMsgNum 0\n"
        "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported\n"
        "\t\tLnkSta:\tSpeed 16GT/s (downgraded), Width x8 (downgraded)\n"
        "\t\tLnkCap2: Supported Link Speeds: 2.5-32GT/s, Crosslink- Retimer+ 2Retimers+ DRS-\n"
    )
    [nic] = checked(lspci.parse(text, "n.txt")).runs[0].devices
    assert (nic.port_type, nic.is_rdma_nic) == ("Endpoint", True)
    assert (nic.link_capable_speed_gts, nic.link_capable_width) == (32.0, 16)
    assert (nic.link_speed_gts, nic.link_width) == (16.0, 8)


def test_lspci_bad_input_names_the_file_and_line() -> None:
    result = checked(lspci.parse("lspci: command not found\n", "l.txt"))
    assert result.runs == [] and "no device header" in result.errors[0].message
    assert [(w.source, w.line) for w in result.warnings] == [("l.txt", 1)]
    text = ("00:01.0 PCI bridge: Intel Corporation Device 1234\n"
            "\tBus: primary=00, secondary=zz\n"
            "\tBus: primary=00, secondary=05, subordinate=04, sec-latency=0\n"
            "\t\tACSCtl:\t<garbled>\n")  # fmt: skip
    result = checked(lspci.parse(text, "b.txt"))
    assert [(w.source, w.line) for w in result.warnings] == [("b.txt", 2), ("b.txt", 3),
                                                             ("b.txt", 4)]  # fmt: skip
    [bridge] = result.runs[0].devices
    assert (bridge.secondary_bus, bridge.acs_control) == (None, None)


def test_the_logs_span_is_its_first_and_last_dated_kernel_line() -> None:
    text = (
        "-- Boot 3f2a --\n"
        "a kernel line without a time\n"
        "2026-11-23T03:00:34,037767+00:00 node kernel: Linux version 6.18\n"
        "2026-11-23T03:00:35+0000 node kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, off\n"
        # Dated only after its event: the event, and so the line, has no time.
        "NVRM: Xid (PCI:0000:3b:00): 48, seen at 2026-11-23T03:00:36+00:00\n"
        "another kernel line without a time\n"
    )
    run = checked(kernel_log.parse(text)).runs[0]
    assert (run.format, run.line_count) == ("iso", 5)
    assert run.first_timestamp == "2026-11-23T03:00:34,037767+00:00"
    assert run.last_timestamp == "2026-11-23T03:00:35+0000"
    assert [(e.code, e.line, e.timestamp, e.time_iso) for e in run.events] == [
        (79, 4, "2026-11-23T03:00:35+0000", "2026-11-23T03:00:35+00:00"),
        (48, 5, None, None),
    ]


def test_an_event_mark_split_by_a_terminal_control_sequence_is_read() -> None:
    text = "[ 5107.644336] NVRM: Xi\x1b[0md (PCI:0000:3b:00): 79, pid=1, GPU has fallen off\n"
    run = checked(kernel_log.parse(text)).runs[0]
    assert [(e.code, e.uptime_s) for e in run.events] == [(79, 5107.644336)]
