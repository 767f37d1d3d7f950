"""What nvidia-smi printed, in any of four forms (schema: run-nvidia-smi).

One record shape serves the default table, `-q -x` XML, `--query-gpu --format=csv` and
`nvlink -s`; a field the form does not print is None (or empty).
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
    # csv: every queried column (units stripped from the name) -> value as printed or None.
    fields: dict[str, str | None] = field(default_factory=dict)


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
    format: str  # "table", "xml", "csv" or "nvlink"
    timestamp: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    gpus: list[SmiGpu] = field(default_factory=list)
    processes: list[SmiProcess] = field(default_factory=list)
    mig_devices: list[MigDevice] = field(default_factory=list)
    csv_columns: list[str] = field(default_factory=list)
