"""Node health outputs: the kernel log's Xid/SXid events, the RDMA adapters' sysfs counters, PCIe
links and AER counters from sysfs, the PCI tree and its ACS settings (lspci -vvv), the loaded
kernel modules, NVLink error counters, DCGM diagnostics and the GEMM burn (schemas:
run-kernel-log, run-sysfs-infiniband, run-sysfs-pci, run-lspci, run-kernel-modules,
run-nvidia-smi-nvlink-errors, run-dcgmi-diag, run-gpuval-gemm-burn)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class KernelEvent:
    """One line of the kernel log that reports a GPU or NVSwitch problem."""

    # "xid" (NVRM: Xid), "sxid" (nvidia-nvswitchN: SXid), "off-bus" (fell off the bus),
    # "init-failed" (the driver could not initialise or probe the GPU), "aer" (a PCIe error the
    # kernel's AER driver reported), "pcie-limited" (the boot notice of a link below capability)
    kind: str
    code: int | None  # the Xid / SXid number; 79 for an off-bus line
    device: str | None  # PCI address as printed ("0000:3b:00"), or None
    message: str  # what follows the code on the line
    line: int
    timestamp: str | None = None  # as printed
    # ISO-8601 with its UTC offset, when the line's time has one (journalctl -o short-iso,
    # dmesg --time-format iso); None for dmesg -T / syslog times (local, zone unknown).
    time_iso: str | None = None
    uptime_s: float | None = None  # dmesg's "[ 5107.644336]": seconds since boot
    switch: str | None = None  # SXid: "nvidia-nvswitch3"
    # SXid: "fatal" / "non-fatal" as the line says; aer: "fatal", "non-fatal", "corrected" or
    # "unrecovered" (AER could not recover the device); pcie-limited: "width" or "speed"
    severity: str | None = None
    port: str | None = None  # pcie-limited: the port the notice names as the limit


@dataclass
class KernelLogRun:
    # "iso", "dmesg-ctime", "syslog", "dmesg", "dmesg-relative" (dmesg -d / -H: seconds since the
    # previous line), "plain": how the lines are dated
    format: str
    line_count: int
    events: list[KernelEvent] = field(default_factory=list)
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    # Why no kernel line could be read (journald empty, dmesg not permitted, nothing printed):
    # the log is then no evidence either way, never a clean one.
    unreadable: str | None = None
    # PCI addresses the log itself shows as NVIDIA GPUs (`pci 0000:01:00.0: [10de:1402] type 00
    # class 0x030000`), for PCIe lines on a GPU no other probe listed.
    gpus: list[str] = field(default_factory=list)


@dataclass
class IbSysfsPort:
    port: int
    state: str | None = None  # "ACTIVE" from "4: ACTIVE"
    physical_state: str | None = None  # "LinkUp" from "5: LinkUp"
    rate_gbit: float | None = None  # from "400 Gb/sec (4X NDR)"
    link_layer: str | None = None
    # counters/<name> (the IB PMA port counters) and hw_counters/<name> (driver counters);
    # None where sysfs prints "N/A (no PMA)".
    counters: dict[str, int | None] = field(default_factory=dict)
    hw_counters: dict[str, int | None] = field(default_factory=dict)
    line: int | None = None  # first line naming the port


@dataclass
class IbSysfsDevice:
    name: str  # "mlx5_0"
    fw_ver: str | None = None
    board_id: str | None = None
    hca_type: str | None = None
    ports: list[IbSysfsPort] = field(default_factory=list)
    line: int | None = None


@dataclass
class SysfsInfinibandRun:
    devices: list[IbSysfsDevice] = field(default_factory=list)


def _pci_hex(value: str | None) -> str:
    """A PCI id as hex digits, whichever way it was printed: sysfs "0x030200", lspci "0302"."""
    return (value or "").lower().removeprefix("0x")


class PciIdentity:
    """What a PCI device is, from its vendor and class ids (each record spells them its way);
    one rule for every record of PCI devices."""

    vendor: str | None
    class_code: str | None

    @property
    def is_gpu(self) -> bool:
        """An NVIDIA display or 3D controller (class 0300 / 0302)."""
        return _pci_hex(self.vendor) == "10de" and _pci_hex(self.class_code)[:4] in ("0300", "0302")

    @property
    def is_rdma_nic(self) -> bool:
        """An InfiniBand controller (class 0207), or a network controller (02xx) of
        Mellanox/NVIDIA networking (ConnectX in Ethernet mode is RoCE)."""
        pci_class = _pci_hex(self.class_code)[:4]
        return pci_class == "0207" or (
            _pci_hex(self.vendor) == "15b3" and pci_class.startswith("02")
        )


@dataclass
class PciDevice(PciIdentity):
    """One /sys/bus/pci/devices/<address>: its class, link and AER counters."""

    address: str  # "0000:3b:00.0"
    class_code: str | None = None  # "0x030200"
    vendor: str | None = None  # "0x10de"
    device: str | None = None
    current_speed_gts: float | None = None  # "32.0 GT/s PCIe"
    max_speed_gts: float | None = None
    current_width: int | None = None
    max_width: int | None = None
    # aer_dev_correctable / aer_dev_fatal / aer_dev_nonfatal: "correctable" etc. -> name -> count
    aer: dict[str, dict[str, int]] = field(default_factory=dict)
    line: int | None = None


@dataclass
class SysfsPciRun:
    devices: list[PciDevice] = field(default_factory=list)


@dataclass
class LspciDevice(PciIdentity):
    """One device block of `lspci -vvv`: where it sits in the PCI tree, its link, and whether
    ACS sends its peer-to-peer traffic up to the root complex."""

    address: str  # "0000:02:08.0"; domain 0000 where lspci printed none
    class_name: str  # "PCI bridge", as printed
    class_code: str | None = None  # "0604": from -nn, else from a known class name
    vendor: str | None = None  # "10de": from -nn, else from a known vendor name
    device: str | None = None  # "20b0": from -nn only
    description: str = ""  # the rest of the header line
    # The Express capability's port type: "Root Port", "Upstream Port", "Downstream Port",
    # "Endpoint", ... as printed; None where that capability was not printed.
    port_type: str | None = None
    primary_bus: int | None = None  # a bridge's `Bus: primary=00, secondary=01, subordinate=05`
    secondary_bus: int | None = None
    subordinate_bus: int | None = None
    acs_capability: dict[str, bool] | None = None  # ACSCap: {"ReqRedir": True, ...}
    acs_control: dict[str, bool] | None = None  # ACSCtl: what is enabled
    capabilities_denied: bool = False  # `Capabilities: <access denied>`: lspci ran without root
    link_capable_speed_gts: float | None = None  # LnkCap
    link_capable_width: int | None = None
    link_speed_gts: float | None = None  # LnkSta
    link_width: int | None = None
    line: int | None = None

    @property
    def is_root_port(self) -> bool:
        return self.port_type == "Root Port"

    @property
    def acs_redirects(self) -> bool:
        """ACS sends requests or completions between peers up to the root complex."""
        control = self.acs_control or {}
        return control.get("ReqRedir", False) or control.get("CmpltRedir", False)

    def bridges_bus(self, bus: int) -> bool:
        """Whether `bus` lies behind this bridge."""
        return (self.secondary_bus is not None and self.subordinate_bus is not None
                and self.secondary_bus <= bus <= self.subordinate_bus)  # fmt: skip

    @property
    def bus(self) -> int:
        return int(self.address.split(":")[1], 16)

    @property
    def domain(self) -> str:
        return self.address.split(":")[0]


@dataclass
class LspciRun:
    devices: list[LspciDevice] = field(default_factory=list)


@dataclass
class KernelModulesRun:
    """`/proc/modules` or `lsmod`: the loaded modules, by name."""

    modules: list[str] = field(default_factory=list)


@dataclass
class DcgmResult:
    entity: str  # "GPU0", "All"
    status: str  # "Pass", "Fail", "Warn", "Skip", as printed
    warnings: list[str] = field(default_factory=list)
    error_ids: list[int] = field(default_factory=list)


@dataclass
class DcgmTest:
    category: str | None
    name: str
    status: str | None  # 4.x test_summary status, else the worst of its results
    results: list[DcgmResult] = field(default_factory=list)
    info: list[str] = field(default_factory=list)


@dataclass
class DcgmDiagRun:
    dcgm_version: str | None = None
    driver_version: str | None = None
    runtime_error: str | None = None
    tests: list[DcgmTest] = field(default_factory=list)


@dataclass
class BurnSample:
    """Clocks, temperature and throttling of one GPU at one moment of the burn."""

    elapsed_s: float
    sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    throttle: list[str] = field(default_factory=list)  # active slowdown reasons by name


@dataclass
class BurnGpu:
    index: int
    name: str | None = None
    pci_bus_id: str | None = None
    tflops: float | None = None  # over the whole burn
    iterations: int | None = None
    seconds: float | None = None
    max_abs_error: float | None = None  # of the checked product against its reference
    correct: bool | None = None
    mismatches: int | None = None  # consistency checks whose product differed from the first
    error: str | None = None  # why the GPU could not be burnt
    samples: list[BurnSample] = field(default_factory=list)


@dataclass
class GemmBurnRun:
    schema_version: int | None
    dtype: str | None
    matrix_size: int | None
    seconds_requested: float | None
    device_type: str | None  # "cuda" or "cpu"
    torch_version: str | None = None
    cuda_version: str | None = None
    sampler: str | None = None  # "nvml", "nvidia-smi" or None (not sampled)
    gpus: list[BurnGpu] = field(default_factory=list)
    error: str | None = None  # the run as a whole failed (no GPU, torch without CUDA...)


@dataclass
class NvlinkLinkCounters:
    """One NVLink's error counters, by name as printed ("Replay Errors", "CRC Errors", "Data CRC
    Errors", "Lane 0 CRC Errors", ...); None where the driver printed N/A."""

    link: int
    counters: dict[str, int | None] = field(default_factory=dict)
    line: int | None = None  # first line naming the link


@dataclass
class NvlinkGpuErrors:
    index: int
    name: str
    uuid: str | None = None
    links: list[NvlinkLinkCounters] = field(default_factory=list)
    line: int | None = None


@dataclass
class NvlinkErrorsRun:
    """`nvidia-smi nvlink -e`: per GPU, each link's error counters. No GPU at all: nvidia-smi
    printed nothing, which it does where no GPU has an NVLink."""

    gpus: list[NvlinkGpuErrors] = field(default_factory=list)
