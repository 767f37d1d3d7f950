"""What nvidia-smi printed, in any of five forms (schema: run-nvidia-smi).

One record shape serves the default table, `-q` text, `-q -x` XML, `--query-gpu` (and
`--query-remapped-rows`, `--query-retired-pages`) `--format=csv` and `nvlink -s`; a field the
form does not print is None (or empty).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PcieLink:
    """PCIe link generation and lane width, current and maximum."""

    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None
    # Newer XML/csv split the maximum into the GPU's and the host's own limits.
    gen_device_max: int | None = None
    gen_host_max: int | None = None


@dataclass
class NvLinkState:
    """One `Link N: 26.562 GB/s` or `Link N: <inactive>` line of `nvidia-smi nvlink -s`."""

    link: int
    speed_gbps: float | None  # GB/s per direction as printed; None when not active
    state: str  # "active", "inactive", or the text printed


@dataclass
class EccCounts:
    """ECC error counts of one timescale, as printed (None where N/A or not printed): volatile
    counts errors since the driver loaded, aggregate over the GPU's life.

    Ampere and later print SRAM and DRAM counts (Hopper splits SRAM uncorrectable into parity
    and SEC-DED); Kepler to Volta print single-bit (corrected) and double-bit (uncorrected)
    counts per memory location, with totals. The csv prints totals for every GPU
    (`ecc.errors.uncorrected.volatile.total`)."""

    sram_correctable: int | None = None
    sram_uncorrectable: int | None = None
    sram_uncorrectable_parity: int | None = None
    sram_uncorrectable_secded: int | None = None
    dram_correctable: int | None = None
    dram_uncorrectable: int | None = None
    corrected_total: int | None = None  # single-bit Total, or csv ...corrected.<t>.total
    uncorrected_total: int | None = None  # double-bit Total, or csv ...uncorrected.<t>.total
    # Per location (pre-Ampere, csv): "corrected.device_memory", "uncorrected.l2_cache", ...
    by_location: dict[str, int | None] = field(default_factory=dict)


@dataclass
class RetiredPage:
    """One row of `--query-retired-pages`: a page retired for ECC errors."""

    address: str
    cause: str | None  # "Single Bit ECC" (several single-bit errors) or "Double Bit ECC"


@dataclass
class RetiredPages:
    """Page retirement (Kepler to Volta; Ampere and later remap rows instead and print N/A)."""

    single_bit: int | None = None  # pages retired for repeated single-bit errors
    double_bit: int | None = None  # pages retired for a double-bit error
    pending: str | None = None  # "Yes": a page waits for the next driver load to retire
    pages: list[RetiredPage] = field(default_factory=list)  # csv --query-retired-pages


@dataclass
class RemappedRows:
    """Row remapping (Ampere and later): rows of memory replaced for ECC errors."""

    correctable: int | None = None  # rows remapped for correctable errors
    uncorrectable: int | None = None  # rows remapped for uncorrectable errors
    correctable_inactive: int | None = None  # 570+: remapped, not yet active
    uncorrectable_inactive: int | None = None
    pending: str | None = None  # "Yes": a remapping waits for a GPU reset
    failure: str | None = None  # "Yes": a remapping failed (the GPU needs service)
    # Bank remap availability histogram: max, high, partial, low, none -> banks.
    histogram: dict[str, int | None] = field(default_factory=dict)


@dataclass
class SmiTemperatures:
    """Degrees C as printed. Drivers before 535 print thresholds as absolute temperatures
    (`*_c`); 535 and later print them in T.Limit form (`*_tlimit_c`): `tlimit_c` is the
    current margin below the maximum operating temperature, and each threshold is the margin
    at which it acts (negative: beyond that limit)."""

    gpu_c: float | None = None
    memory_c: float | None = None
    shutdown_c: float | None = None
    slowdown_c: float | None = None
    max_operating_c: float | None = None
    memory_max_operating_c: float | None = None
    target_c: float | None = None
    tlimit_c: float | None = None
    shutdown_tlimit_c: float | None = None
    slowdown_tlimit_c: float | None = None
    max_operating_tlimit_c: float | None = None
    memory_max_operating_tlimit_c: float | None = None


@dataclass
class SmiPower:
    """Watts as printed: `Power Draw` (drivers before 550), `Average`/`Instantaneous Power
    Draw` (550+); `limit_w` is the current (XML power_limit / current_power_limit) limit."""

    draw_w: float | None = None
    average_draw_w: float | None = None
    instant_draw_w: float | None = None
    limit_w: float | None = None
    requested_limit_w: float | None = None
    default_limit_w: float | None = None
    enforced_limit_w: float | None = None
    min_limit_w: float | None = None
    max_limit_w: float | None = None
    management: str | None = None  # "Supported" (older drivers)


@dataclass
class SmiFabric:
    """The `fabric` block of NVSwitch and GH200/GB200 systems: registration with the fabric
    manager (state "Completed", status "Success" when done) and, on 570+, its health."""

    state: str | None = None
    status: str | None = None
    clique_id: str | None = None
    cluster_uuid: str | None = None
    health: dict[str, str | None] = field(default_factory=dict)  # summary, bandwidth, ...


@dataclass
class SmiHealth:
    """What a node health check judges, from `-q` (text or XML) or the csv queries; values as
    printed, None where N/A or not printed. Persistence mode and the current ECC and MIG
    modes are the GPU's own fields (SmiGpu.persistence_mode, ecc_mode, mig_mode)."""

    ecc_mode_pending: str | None = None
    mig_mode_pending: str | None = None
    vbios_version: str | None = None
    serial: str | None = None
    ecc_volatile: EccCounts = field(default_factory=EccCounts)
    ecc_aggregate: EccCounts = field(default_factory=EccCounts)
    sram_threshold_exceeded: str | None = None
    # Hopper+: aggregate uncorrectable SRAM errors by unit (sram_l2, sram_sm, ...).
    sram_uncorrectable_sources: dict[str, int | None] = field(default_factory=dict)
    channel_repair_pending: str | None = None  # 580+
    tpc_repair_pending: str | None = None
    unrepairable_memory: str | None = None
    retired_pages: RetiredPages = field(default_factory=RetiredPages)
    remapped_rows: RemappedRows = field(default_factory=RemappedRows)
    # Clock event (older drivers: throttle) reasons under the XML's names (gpu_idle,
    # applications_clocks_setting, sw_power_cap, hw_slowdown, hw_thermal_slowdown,
    # hw_power_brake_slowdown, sync_boost, sw_thermal_slowdown, display_clocks_setting) ->
    # "Active" / "Not Active" as printed.
    clock_event_reasons: dict[str, str | None] = field(default_factory=dict)
    # 560+: microseconds spent in each reason since the driver loaded, same names.
    clock_event_reason_counters_us: dict[str, float | None] = field(default_factory=dict)
    temperature: SmiTemperatures = field(default_factory=SmiTemperatures)
    power: SmiPower = field(default_factory=SmiPower)
    fabric: SmiFabric | None = None  # None where no fabric block is printed
    pcie_replays: int | None = None  # PCIe replays since reset
    reset_required: str | None = None
    drain_and_reset_recommended: str | None = None
    recovery_action: str | None = None  # 570+: "None", "Reset", "Reboot", ...


@dataclass
class SmiGpu:
    index: int | None = None  # XML: position in the file, which follows nvidia-smi's order
    name: str | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None
    # Textual states as printed ("On", "Enabled", "WDDM", "Disabled", "N/A" -> None).
    persistence_mode: str | None = None
    ecc_mode: str | None = None
    ecc_volatile_uncorrected: str | None = None  # table's "Volatile Uncorr. ECC" cell
    mig_mode: str | None = None
    compute_mode: str | None = None
    performance_state: str | None = None
    fan_percent: float | None = None
    temperature_c: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    utilization_gpu_percent: float | None = None
    pcie: PcieLink | None = None
    nvlinks: list[NvLinkState] | None = None
    # nvlink -s: a message printed for the GPU instead of its links, e.g. "Unable to retrieve
    # NVLink information as all links are inActive".
    nvlink_message: str | None = None
    # csv: every queried column (units stripped from the name) -> value as printed or None.
    fields: dict[str, str | None] = field(default_factory=dict)
    # -q (text, XML) and the csv health columns; None for the table and nvlink -s.
    health: SmiHealth | None = None


@dataclass
class SmiProcess:
    gpu: int | None
    pid: int | None
    type: str | None
    name: str
    memory_mib: float | None
    gi: str | None = None  # MIG GPU instance, "N/A" outside MIG
    ci: str | None = None


@dataclass
class MigDevice:
    gpu: int
    gi: int
    ci: int
    mig_dev: int
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None


@dataclass
class NvidiaSmiRun:
    format: str  # "table", "query" (-q text), "xml", "csv" or "nvlink"
    timestamp: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    gpus: list[SmiGpu] = field(default_factory=list)
    processes: list[SmiProcess] = field(default_factory=list)
    mig_devices: list[MigDevice] = field(default_factory=list)
    csv_columns: list[str] = field(default_factory=list)
