"""nvidia-smi `-q` text and the health fields of `-q`, `-q -x` and the csv queries, on real
published outputs of several driver eras and on the recordings of a lent H100 (driver 580)."""

from __future__ import annotations

from pathlib import Path

from gpuval.parsers import nvidia_smi
from gpuval.records.base import ParseResult, to_jsonable
from gpuval.records.nvidia_smi import NvidiaSmiRun, SmiGpu, SmiHealth
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = DATA / "outputs" / "nvidia-smi"
DEVICE = DATA / "device" / "h100-x1-2026-11-22"
REASONS = {
    "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
    "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost", "sw_thermal_slowdown",
    "display_clocks_setting",
}  # fmt: skip


def parsed(path: Path, tool: str | None = None) -> tuple[ParseResult, NvidiaSmiRun]:
    result = nvidia_smi.parse(path.read_text(encoding="utf-8"), source=path.name, tool=tool)
    validate(result.to_dict(), "parse-result")
    (run,) = result.runs
    return result, run


def health_of(gpu: SmiGpu) -> SmiHealth:
    assert gpu.health is not None
    return gpu.health


# ---- -q text ------------------------------------------------------------------------------------
def test_driver_580_h100_text_reads_the_same_fields_as_its_xml() -> None:
    result, text = parsed(DEVICE / "nvidia-smi-q.txt")
    assert result.tool == "nvidia-smi-q" and result.warnings == [] and result.errors == []
    assert (text.format, text.driver_version, text.cuda_version) == ("query", "580.159.04", "13.0")
    assert text.timestamp == "Sun Nov 22 19:01:33 2026" and text.attached_gpus == 1
    (gpu,) = text.gpus
    assert (gpu.index, gpu.name, gpu.pci_bus_id) == (0, "NVIDIA H100 80GB HBM3", "00000000:00:06.0")
    assert (gpu.persistence_mode, gpu.ecc_mode, gpu.mig_mode) == ("Enabled", "Enabled", "Disabled")
    assert gpu.pcie is not None
    assert (gpu.pcie.gen_current, gpu.pcie.gen_max, gpu.pcie.width_current) == (5, 5, 16)
    assert (gpu.pcie.gen_device_max, gpu.pcie.gen_host_max) == (5, None)
    health = health_of(gpu)
    assert (health.vbios_version, health.serial) == ("96.00.DA.00.0C", "1752524018760")
    assert health.ecc_volatile.sram_uncorrectable_secded == 0
    assert health.ecc_aggregate.dram_uncorrectable == 0
    assert health.sram_uncorrectable_sources["sram_l2"] == 0
    assert (health.retired_pages.single_bit, health.retired_pages.pending) == (None, None)
    assert health.remapped_rows.histogram == {"max": 2560, "high": 0, "partial": 0, "low": 0,
                                              "none": 0}  # fmt: skip
    assert (health.remapped_rows.pending, health.remapped_rows.failure) == ("No", "No")
    assert set(health.clock_event_reasons) == REASONS
    assert health.clock_event_reasons["gpu_idle"] == "Active"
    assert health.clock_event_reason_counters_us["hw_power_brake_slowdown"] == 0.0
    assert (health.temperature.tlimit_c, health.temperature.shutdown_tlimit_c) == (54.0, -8.0)
    assert health.temperature.shutdown_c is None  # 580 prints only the T.Limit form
    assert (health.power.average_draw_w, health.power.instant_draw_w) == (72.09, 72.14)
    assert (health.power.limit_w, health.power.min_limit_w) == (700.0, 200.0)
    assert health.fabric is not None and health.fabric.state is None  # printed N/A
    assert (health.pcie_replays, health.recovery_action) == (0, "None")
    # The XML captured a moment later: every field the same but two live readings.
    _, xml = parsed(DEVICE / "nvidia-smi-q-x.xml")
    from_xml = to_jsonable(xml.gpus[0])
    from_xml["health"]["temperature"]["memory_c"] = 37.0
    from_xml["health"]["power"]["average_draw_w"] = 72.09
    assert to_jsonable(gpu) == from_xml


def test_q_d_subset_reads_the_fields_it_prints() -> None:
    _, run = parsed(DEVICE / "nvidia-smi-q-d-health.txt")
    (gpu,) = run.gpus
    assert gpu.name is None and gpu.pcie is None  # -d ECC,PAGE_RETIREMENT,... prints neither
    assert gpu.pci_bus_id == "00000000:00:06.0"  # from the GPU block's header
    health = health_of(gpu)
    assert health.remapped_rows.correctable == 0 and health.ecc_aggregate.sram_correctable == 0
    assert health.temperature.memory_c == 36.0 and health.power.limit_w == 700.0


def test_driver_535_8x4090_one_gpu_power_capped() -> None:
    _, run = parsed(REAL / "q-gpud-535.154.05-8x4090-sw-power-cap.txt")
    assert len(run.gpus) == run.attached_gpus == 8
    idle, loaded = health_of(run.gpus[0]), health_of(run.gpus[1])
    assert run.gpus[0].pcie is not None and run.gpus[0].pcie.gen_current == 1  # idle at P8
    assert idle.clock_event_reasons["sw_power_cap"] == "Not Active"
    assert loaded.clock_event_reasons["sw_power_cap"] == "Active"
    assert loaded.clock_event_reasons["gpu_idle"] == "Not Active"
    assert (loaded.power.draw_w, loaded.power.limit_w) == (445.38, 450.0)
    assert (loaded.temperature.gpu_c, loaded.temperature.tlimit_c) == (72.0, 11.0)
    assert loaded.temperature.target_c == 84.0
    assert run.gpus[1].ecc_mode == "Disabled" and loaded.ecc_volatile.sram_correctable is None
    assert loaded.remapped_rows.histogram["max"] == 192


def test_driver_535_8xh100_fabric_completed_and_pcie_replays() -> None:
    _, run = parsed(REAL / "q-gpud-535.161.08-8xH100-fabric-completed.txt")
    gpu = run.gpus[0]
    assert gpu.pci_bus_id == "00000000:19:00.0"
    health = health_of(gpu)
    assert health.fabric is not None
    assert (health.fabric.state, health.fabric.status) == ("Completed", "Success")
    assert (health.pcie_replays, health.serial) == (67, "1650124031592")
    assert health.reset_required == "No" and health.drain_and_reset_recommended == "No"
    assert health.power.draw_w == 67.74  # GPU Power Readings, not Module Power Readings (N/A)
    assert health.sram_threshold_exceeded == "No"
    assert all(health_of(g).fabric is not None for g in run.gpus)


def test_volta_single_and_double_bit_layout_and_absolute_thresholds() -> None:
    _, run = parsed(REAL / "q-gpud-560.35.03-titan-v-single-double-bit-ecc.txt")
    health = health_of(run.gpus[0])
    assert health.ecc_volatile.by_location["corrected.device_memory"] is None  # printed N/A
    assert "uncorrected.cbu" in health.ecc_aggregate.by_location
    assert health.ecc_volatile.corrected_total is None
    temperature = health.temperature
    assert (temperature.gpu_c, temperature.shutdown_c, temperature.slowdown_c) == (
        44.0,
        100.0,
        97.0,
    )
    assert (temperature.max_operating_c, temperature.memory_max_operating_c) == (91.0, 95.0)
    assert temperature.tlimit_c is None
    assert (health.power.draw_w, health.power.max_limit_w) == (29.02, 300.0)


def test_old_drivers_and_a_copy_without_banner() -> None:
    result, run = parsed(REAL / "q-nvidia-docker-954-396-gtx1080-excerpt.txt")
    assert (run.driver_version, run.cuda_version) == ("396.54", None)
    assert run.gpus[0].name == "GeForce GTX 1080" and result.warnings == []
    assert health_of(run.gpus[0]).vbios_version == "86.04.60.00.80"
    _, run = parsed(REAL / "q-netdata-4892-410-gtx960m-excerpt.txt")
    assert run.gpus[0].uuid == "GPU-101b1cf0-fdf7-b374-a62c-76b25134fcf2"
    text = (REAL / "q-nvidia-docker-914-v100-no-banner-excerpt.txt").read_text(encoding="utf-8")
    assert nvidia_smi.detect(text) == ("nvidia-smi-q", 85)
    _, run = parsed(REAL / "q-nvidia-docker-914-v100-no-banner-excerpt.txt")
    (gpu,) = run.gpus
    assert (gpu.name, gpu.pci_bus_id, gpu.persistence_mode) == (
        "Tesla V100-SXM2-16GB", "00000000:8A:00.0", "Enabled",
    )  # fmt: skip
    assert health_of(gpu).serial == "0323817061811"


def test_a_gpu_block_without_fields_is_kept_with_a_warning() -> None:
    text = (
        "==============NVSMI LOG==============\n\nAttached GPUs : 2\n"
        "GPU 00000000:3B:00.0\nGPU 00000000:4C:00.0\n    Product Name : NVIDIA H100 80GB HBM3\n"
    )
    result = nvidia_smi.parse(text, source="q.txt")
    (run,) = result.runs
    assert [g.pci_bus_id for g in run.gpus] == ["00000000:3B:00.0", "00000000:4C:00.0"]
    assert run.gpus[0].name is None and run.gpus[1].name == "NVIDIA H100 80GB HBM3"
    assert [(w.line, w.message) for w in result.warnings] == [
        (4, "GPU 00000000:3B:00.0 printed no fields")
    ]


# ---- -q -x XML ---------------------------------------------------------------------------------
def test_pascal_xml_single_bit_errors_retired_pages_and_throttle_reasons() -> None:
    _, run = parsed(REAL / "xml-netdata-tesla-p100.xml")
    (gpu,) = run.gpus
    health = health_of(gpu)
    assert health.ecc_aggregate.by_location["corrected.device_memory"] == 3
    assert health.ecc_aggregate.corrected_total == 3 and health.ecc_aggregate.uncorrected_total == 0
    assert health.ecc_volatile.corrected_total == 0
    assert health.ecc_aggregate.by_location["corrected.l1_cache"] is None
    retired = health.retired_pages
    assert (retired.single_bit, retired.double_bit, retired.pending) == (0, 0, "No")
    assert health.remapped_rows.correctable is None  # <remapped_rows>N/A</remapped_rows>
    assert set(health.clock_event_reasons) == REASONS  # clocks_throttle_reasons
    assert health.clock_event_reasons["gpu_idle"] == "Active"
    temperature = health.temperature
    assert (temperature.gpu_c, temperature.shutdown_c, temperature.slowdown_c) == (38.0, 85.0, 82.0)
    power = health.power
    assert (power.draw_w, power.limit_w, power.enforced_limit_w) == (26.16, 250.0, 250.0)
    assert (power.min_limit_w, power.management) == (125.0, "Supported")
    assert (health.vbios_version, health.serial) == ("86.00.52.00.02", "0324217145110")
    assert health.fabric is None


def test_a100_mig_xml_sram_dram_counts() -> None:
    _, run = parsed(REAL / "xml-netdata-a100-sxm4-mig.xml")
    (gpu,) = run.gpus
    health = health_of(gpu)
    assert gpu.mig_mode == "Enabled" and health.mig_mode_pending == "Enabled"
    assert health.ecc_volatile.sram_uncorrectable is None  # N/A in MIG mode
    assert (health.ecc_aggregate.sram_uncorrectable, health.ecc_aggregate.dram_correctable) == (
        0,
        0,
    )
    assert health.temperature.max_operating_c == 85.0
    assert health.temperature.memory_max_operating_c == 95.0


def test_ada_xml_event_reasons_and_fabric_block() -> None:
    _, run = parsed(REAL / "xml-netdata-rtx-4090-driver-535.xml")
    health = health_of(run.gpus[0])
    # The value split over two lines in this copy is still one value.
    assert health.clock_event_reasons["applications_clocks_setting"] == "Not Active"
    assert set(health.clock_event_reasons) == REASONS
    assert health.fabric is not None and health.fabric.status is None


# ---- csv ----------------------------------------------------------------------------------------
def test_health_csv_of_the_h100() -> None:
    _, run = parsed(DEVICE / "nvidia-smi-query-health.csv")
    (gpu,) = run.gpus
    health = health_of(gpu)
    assert health.temperature.memory_c == 36.0 and health.power.default_limit_w == 700.0
    assert health.clock_event_reasons == {
        "hw_slowdown": "Not Active", "sw_thermal_slowdown": "Not Active",
        "hw_thermal_slowdown": "Not Active", "hw_power_brake_slowdown": "Not Active",
    }  # fmt: skip
    assert gpu.fields["clocks_event_reasons.active"] == "0x0000000000000001"  # idle bit
    assert health.ecc_volatile.uncorrected_total == 0
    assert health.ecc_aggregate.uncorrected_total == 0
    assert health.retired_pages.pending is None  # [N/A]


def test_remapped_rows_and_retired_pages_csv_of_the_h100() -> None:
    _, run = parsed(DEVICE / "nvidia-smi-remapped-rows.csv")
    (gpu,) = run.gpus
    rows = health_of(gpu).remapped_rows
    assert (rows.correctable, rows.uncorrectable, rows.pending, rows.failure) == (0, 0, "No", "No")
    # Two rows, one per cause, both with address [N/A]: one GPU, no retired page.
    _, run = parsed(DEVICE / "nvidia-smi-retired-pages.csv")
    (gpu,) = run.gpus
    assert gpu.pci_bus_id == "00000000:00:06.0" and health_of(gpu).retired_pages.pages == []


def test_retired_page_rows_are_grouped_per_gpu() -> None:
    # The shape of --query-retired-pages (nvidia-smi --help-query-retired-pages).
    text = (
        "gpu_bus_id, gpu_uuid, retired_pages.address, retired_pages.cause\n"
        "00000000:07:00.0, GPU-a, 0x000000000001a2b3, Double Bit ECC\n"
        "00000000:07:00.0, GPU-a, 0x000000000004c5d6, Single Bit ECC\n"
        "00000000:0B:00.0, GPU-b, [N/A], Single Bit ECC\n"
    )
    (run,) = nvidia_smi.parse(text).runs
    pages = [[(p.address, p.cause) for p in health_of(g).retired_pages.pages] for g in run.gpus]
    assert pages == [
        [("0x000000000001a2b3", "Double Bit ECC"), ("0x000000000004c5d6", "Single Bit ECC")],
        [],
    ]


def test_inventory_csv_has_no_health() -> None:
    _, run = parsed(DEVICE / "nvidia-smi-query-gpu.csv")
    assert run.gpus[0].health is None


# ---- nvlink -s ----------------------------------------------------------------------------------
def test_inactive_links_name_their_gpu() -> None:
    _, run = parsed(REAL / "nvlink-azhpc-diagnostics-73-v100-inactive.txt")
    inactive = [
        (gpu.index, link.link) for gpu in run.gpus for link in gpu.nvlinks or [] if
        link.state == "inactive"
    ]  # fmt: skip
    assert inactive == [(3, 3), (3, 5)]


def test_all_links_inactive_message_is_kept_on_its_gpu() -> None:
    _, run = parsed(REAL / "nvlink-gpud-1085-b200-all-links-inactive.txt")
    (gpu,) = run.gpus
    assert (gpu.index, gpu.name, gpu.nvlinks) == (2, "NVIDIA B200", [])
    assert gpu.nvlink_message == "Unable to retrieve NVLink information as all links are inActive"


def test_a100_nvlinks_all_active() -> None:
    _, run = parsed(REAL / "nvlink-gpud-testdata-8xA100-12-links.txt")
    assert len(run.gpus) == 8
    assert {(len(g.nvlinks or []), link.speed_gbps, link.state) for g in run.gpus
            for link in g.nvlinks or []} == {(12, 25.0, "active")}  # fmt: skip


def test_empty_nvlink_output_is_a_run_without_gpus() -> None:
    # The lent H100 (no NVLink peers) printed nothing for `nvidia-smi nvlink -s`.
    result, run = parsed(DEVICE / "nvidia-smi-nvlink-s.txt", tool="nvidia-smi-nvlink")
    assert run.format == "nvlink" and run.gpus == [] and result.errors == []
    assert [w.message for w in result.warnings] == [
        "nvlink -s printed nothing: no GPU reports an NVLink"
    ]
