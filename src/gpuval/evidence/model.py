"""Evidence: what each host is and what it measured, as typed records, built once per run.

The checks read only this: the declared contract (run.json `declared`), the GPUs, board and
network that the preflight outputs show, and every benchmark run with the file it came from
(a ParsedFile: what the judge reads of a raw file and its sidecar).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from gpuval.catalog.catalog import GpuModel
from gpuval.catalog.network import Port
from gpuval.catalog.systems import System
from gpuval.plan.host_order import natural_key
from gpuval.plan.steps import PairStep, pair_step
from gpuval.records.bandwidth import AllReduceBenchRun, NvbandwidthRun
from gpuval.records.base import Diagnostic
from gpuval.records.collective_bench import CollectiveBenchRun, MpiPreflightRun
from gpuval.records.health import (
    DcgmDiagRun,
    GemmBurnRun,
    KernelLogRun,
    KernelModulesRun,
    LspciRun,
    NvlinkErrorsRun,
    SysfsInfinibandRun,
    SysfsPciRun,
)
from gpuval.records.nccl import NcclRun
from gpuval.records.nvidia_smi import NvidiaSmiRun, NvLinkState, PcieLink
from gpuval.records.p2p import P2PRun
from gpuval.runfolder import RunFolder, StepProblem

R = TypeVar("R")


@dataclass(frozen=True)
class ParsedFile:
    """One raw file as the judge reads it, taken once from the run folder: whose folder holds
    it, its path and step, how its step ran (the sidecar's phase, command, environment, start and
    ending; None or empty without a sidecar), the parser that read it and what the parser made of
    it."""

    host: str
    path: str
    step: str  # the sidecar's name, else the file name's
    tool: str | None  # None: not parsed (missing, or not recognised)
    phase: str | None = None
    command: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    started_at: str | None = None
    # Skipped, timed out, unfinished or a non-zero exit status, with its detail (the sidecar's
    # `problem`); None: it exited 0, or no sidecar says otherwise.
    ended: tuple[StepProblem, str] | None = None
    exit_code: int | None = None
    # What the controller wrote when the node failed a phase (a failed-phase step that ended
    # badly): the task and its message, or why it cannot be read.
    failure_record: str | None = None
    # The nodes Slurm says the step lost while it ran (a step that exited non-zero whose output
    # has srun's `Node failure on node3`), each with srun's own line; {} otherwise.
    lost_nodes: dict[str, str] = field(default_factory=dict)
    runs: tuple[object, ...] = ()
    errors: tuple[Diagnostic, ...] = ()
    warnings: tuple[Diagnostic, ...] = ()

    @property
    def is_pair_try(self) -> bool:
        """A pair step's output: judged by the pair analysis, all tries of a pair together, so
        the per-step checks skip it (a failed first try must not fail a pair its repeat passed)."""
        return pair_step(self.step) is not None


@dataclass(frozen=True)
class Parsed(Generic[R]):
    """One parsed run and the file it came from."""

    file: ParsedFile
    record: R

    @property
    def host(self) -> str:
        return self.file.host

    @property
    def tool(self) -> str:
        return self.file.tool or ""

    def source(self, line: int | None = None) -> str:
        return f"{self.file.path}:{line}" if line else self.file.path


class RunIndex:
    """A host's parsed runs by record type, made in one pass over its files: building the
    evidence and the checks ask for about a hundred kinds per host, and a thousand hosts made a
    scan of every file per kind the judge's largest cost."""

    def __init__(self, files: Iterable[ParsedFile] = ()) -> None:
        # (position in file order, run), per exact record type
        self._by_type: dict[type, list[tuple[int, Parsed[Any]]]] = {}
        position = 0
        for file in files:
            for run in file.runs:
                self._by_type.setdefault(type(run), []).append((position, Parsed(file, run)))
                position += 1
        self._of: dict[type, tuple[Parsed[Any], ...]] = {}

    def of(self, kind: type[R]) -> tuple[Parsed[R], ...]:
        """Every parsed run of record type `kind` (subclasses included), in file order."""
        if kind not in self._of:
            found = [entry for t, runs in self._by_type.items() if issubclass(t, kind)
                     for entry in runs]  # fmt: skip
            found.sort(key=lambda entry: entry[0])
            self._of[kind] = tuple(parsed for _, parsed in found)
        return self._of[kind]

    def first(self, kind: type[R]) -> Parsed[R] | None:
        runs = self.of(kind)
        return runs[0] if runs else None


@dataclass(frozen=True)
class Topology:
    """The GPU part of one `nvidia-smi topo -m`: names, cells, and the cells to each NIC."""

    gpus: list[str]
    links: list[list[str]]  # square, GPU x GPU, "X" on the diagonal
    nics: list[str]
    nic_cells: dict[str, list[str]]  # GPU name -> its cell to each NIC, in `nics` order
    source: str

    def cell(self, src: int, dst: int) -> str | None:
        index = {name: i for i, name in enumerate(self.gpus)}
        a, b = index.get(f"GPU{src}"), index.get(f"GPU{dst}")
        return self.links[a][b] if a is not None and b is not None else None


@dataclass(frozen=True)
class GpuPcie:
    """One GPU's PCIe link as NVML reports it."""

    gpu: str  # "GPU3"
    link: PcieLink
    source: str


@dataclass(frozen=True)
class GpuNvlinks:
    """One GPU's NVLink states (`nvidia-smi nvlink -s`)."""

    gpu: str
    links: list[NvLinkState]
    source: str


@dataclass(frozen=True)
class IbPortState:
    """One RDMA port as ibstat / ibv_devinfo printed it."""

    device: str
    port: int
    state: str | None
    physical_state: str | None
    rate_gbit: float | None
    link_layer: str | None
    source: str
    # The adapter model: ibstat's `CA type` ("MT4129") or ibv_devinfo's vendor_part_id, with the
    # board id where a capture printed one; ports of one model train at the same rate.
    adapter: str | None = None

    @property
    def name(self) -> str:
        return f"{self.device} port {self.port}"

    @property
    def active(self) -> bool:
        return "active" in (self.state or "").lower()


@dataclass(frozen=True)
class Interface:
    """One network interface's sysfs speed and state."""

    name: str
    speed_mbit: int | None
    operstate: str | None
    source: str


@dataclass(frozen=True)
class Declared:
    """What the inventory says a host is (run.json `declared`); None: not declared."""

    gpu_model: str | None = None
    gpus_per_node: int | None = None
    system: str | None = None
    nic_count: int | None = None
    nic_rate_gbit: float | None = None
    ib_hcas: tuple[str, ...] = ()
    network_interface: str | None = None
    nvl_domain: str | None = None  # the multi-node NVLink domain (NVL72 rack) of the node
    nvl_domain_nodes: int | None = None  # trays that domain holds (18: a full NVL72 rack)


@dataclass
class HostFacts:
    """What a host is, for results.json and the report's provenance table."""

    name: str
    reachable: bool = True
    gpu_model: str | None = None  # the catalog model judged against (declared, else detected)
    gpu_count: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    nccl_version: str | None = None
    mpi_version: str | None = None
    nccl_tests_version: str | None = None
    gpu_name: str | None = None  # as printed; gpu_model is the catalog model it maps to
    cuda_toolkit_version: str | None = None  # nvcc's; cuda_version is the driver's (nvidia-smi)
    system: str | None = None  # the catalog system (board) judged against


# --- Node health: passive probes before and after the benchmarks, active checks -------------


@dataclass(frozen=True)
class BeforeAfter(Generic[R]):
    """A probe captured before the benchmarks and again after them (either may be missing)."""

    before: Parsed[R] | None = None
    after: Parsed[R] | None = None

    @property
    def latest(self) -> Parsed[R] | None:
        return self.after or self.before


@dataclass
class HostHealth:
    """The health outputs of one host. `ran`: the health phase left a step on this host, so a
    passive probe that left no step at all is missing evidence rather than a phase that never
    ran; `steps`: the host's step names (a skipped or failed probe still has its step)."""

    ran: bool = False
    steps: frozenset[str] = frozenset()
    kernel_log: BeforeAfter[KernelLogRun] = field(default_factory=BeforeAfter)
    smi: BeforeAfter[NvidiaSmiRun] = field(default_factory=BeforeAfter)  # -q / -q -x forms
    infiniband: BeforeAfter[SysfsInfinibandRun] = field(default_factory=BeforeAfter)
    pci: BeforeAfter[SysfsPciRun] = field(default_factory=BeforeAfter)
    nvlink_errors: BeforeAfter[NvlinkErrorsRun] = field(default_factory=BeforeAfter)
    lspci: Parsed[LspciRun] | None = None  # before the benchmarks only
    modules: Parsed[KernelModulesRun] | None = None
    dcgm: list[Parsed[DcgmDiagRun]] = field(default_factory=list)
    burn: list[Parsed[GemmBurnRun]] = field(default_factory=list)
    gpu_names_by_pci: dict[str, str] = field(default_factory=dict)  # pci_key -> "GPU3"

    def gpu_name(self, pci: str | None) -> str:
        """'GPU3 (0000:3b:00)' for a PCI address nvidia-smi listed, else the address."""
        key = pci_key(pci)
        name = self.gpu_names_by_pci.get(key or "")
        return f"{name} ({key})" if name else f"the GPU at {pci}" if pci else "the GPU"


def pci_key(address: str | None) -> str | None:
    """'00000000:3B:00.0' (nvidia-smi), 'PCI:0000:3b:00' (Xid) and '0000:3b:00.0' (sysfs) ->
    '0000:3b:00': domain, bus and device, which is what an Xid line names."""
    if not address:
        return None
    parts = address.lower().removeprefix("pci:").split(":")
    if len(parts) != 3:
        return None
    domain, bus, device = parts[0], parts[1], parts[2].split(".")[0]
    try:
        return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}"
    except ValueError:
        return None


def rail_order(ports: Iterable[tuple[str, str | None]]) -> list[str]:
    """HCAs in rail order when none are declared, from (device, link layer) of each port: the
    devices with an InfiniBand port, else (RoCE nodes) every device, in natural order (mlx5_2
    before mlx5_10). preflight's preflight_rdma_hcas and the judge both number rails so."""
    listed = list(ports)
    infiniband = {d for d, layer in listed if (layer or "").lower() == "infiniband"}
    return sorted(infiniband or {d for d, _ in listed}, key=natural_key)


@dataclass
class HostEvidence:
    """Everything judged about one host."""

    name: str
    reachable: bool
    files: list[ParsedFile]
    runs: RunIndex  # the runs of `files` by record type
    declared: Declared
    gpu_names: list[str]  # as printed, preflight outputs first
    detected_model: GpuModel | None  # from the first name the catalog knows
    declared_model: GpuModel | None
    gpu_count: int | None
    topology: Topology | None
    detected_system: System | None
    declared_system: System | None
    pcie: list[GpuPcie]
    nvlinks: list[GpuNvlinks]
    ib_ports: list[IbPortState]
    interfaces: list[Interface]
    versions: dict[str, str]  # driver, cuda, nccl, mpi, cuda_toolkit, nccl_tests
    nccl: list[Parsed[NcclRun]] = field(default_factory=list)
    all_reduce_bench: list[Parsed[AllReduceBenchRun]] = field(default_factory=list)
    p2p: list[Parsed[P2PRun]] = field(default_factory=list)
    nvbandwidth: list[Parsed[NvbandwidthRun]] = field(default_factory=list)
    health: HostHealth = field(default_factory=HostHealth)

    @property
    def model(self) -> GpuModel | None:
        """The model judged against: the declared one (the contract), else what was seen."""
        return self.declared_model or self.detected_model

    @property
    def system(self) -> System | None:
        return self.declared_system or self.detected_system

    def rdma_ports(self) -> list[IbPortState]:
        """The ports that carry GPU traffic: the declared HCAs, else every InfiniBand port, else
        (RoCE nodes) every port ibstat lists."""
        if self.declared.ib_hcas:
            return [p for p in self.ib_ports if p.device in self.declared.ib_hcas]
        infiniband = [p for p in self.ib_ports if (p.link_layer or "").lower() == "infiniband"]
        return infiniband or list(self.ib_ports)

    def rail_hcas(self) -> list[str]:
        """The HCAs in rail order, as bench_pairs numbers them: the declared gpuval_ib_hcas in
        their order, else rail_order of the ports found."""
        if self.declared.ib_hcas:
            return list(self.declared.ib_hcas)
        return rail_order((p.device, p.link_layer) for p in self.ib_ports)

    def active_rails(self) -> list[Port]:
        return [
            Port(p.rate_gbit, p.link_layer, p.name)
            for p in self.rdma_ports()
            if p.active and p.rate_gbit
        ]

    def tcp_interface(self) -> Interface | None:
        """The interface TCP tests use: the declared one, else the only one that is up."""
        if self.declared.network_interface:
            named = [i for i in self.interfaces if i.name == self.declared.network_interface]
            return named[0] if named else None
        up = [i for i in self.interfaces if i.name != "lo" and i.operstate == "up"]
        return up[0] if len(up) == 1 else None

    def facts(self) -> HostFacts:
        model = self.model
        system = self.system
        return HostFacts(
            name=self.name,
            reachable=self.reachable,
            gpu_model=model.model if model else self.declared.gpu_model,
            gpu_count=self.gpu_count,
            driver_version=self.versions.get("driver"),
            cuda_version=self.versions.get("cuda"),
            nccl_version=self.versions.get("nccl"),
            mpi_version=self.versions.get("mpi"),
            nccl_tests_version=self.versions.get("nccl_tests"),
            gpu_name=self.gpu_names[0] if self.gpu_names else None,
            cuda_toolkit_version=self.versions.get("cuda_toolkit"),
            system=system.name if system else None,
        )


# --- Across the cluster: pair tests (find the bad node) ------------------------------------


@dataclass(frozen=True)
class PairTry:
    """One pair step's output, read once: the step its name gives, the file, how the step ended
    (its sidecar) and what the parser made of the output."""

    name: str  # the step name (the sidecar's, else the file name's)
    step: PairStep
    host: str  # whose folder holds it (the pair's first host)
    path: str
    # Skipped, timed out, unfinished or a non-zero exit status, with its detail (the sidecar's
    # `problem`); None: it exited 0, or no sidecar says otherwise.
    ended: tuple[StepProblem, str] | None
    tool: str | None  # the parser that read the output; None: missing, or not recognised
    first_error: Diagnostic | None = None  # the parser's first error
    runs: tuple[object, ...] = ()  # the parser's records
    lost_nodes: dict[str, str] = field(default_factory=dict)  # as ParsedFile.lost_nodes

    @property
    def answered(self) -> bool:
        """It finished and its output parsed without error into at least one record."""
        return self.ended is None and bool(self.runs) and self.first_error is None


@dataclass(frozen=True)
class ExpectedPairStep:
    """A pair step run.json expects of a host (try 1 of each pair it schedules in advance)."""

    host: str
    name: str
    step: PairStep


@dataclass(frozen=True)
class MpiPreflightTries:
    """One launcher's MPI preflight: its first try and, where that failed, the second. At least
    one of the two is there. A retry that started before the first try is an earlier start's
    under the same run id: kept apart (`earlier_retry`), judged by neither."""

    first: Parsed[MpiPreflightRun] | None
    retry: Parsed[MpiPreflightRun] | None = None
    earlier_retry: Parsed[MpiPreflightRun] | None = None

    @property
    def not_step_checked(self) -> list[str]:
        """Paths whose ending is no failure of its own: a first try judged with its retry, and
        an earlier start's retry."""
        return [t.file.path for t in (self.first if self.retry else None, self.earlier_retry) if t]

    @property
    def retry_due(self) -> bool:
        """Its only try failed: it runs once more before a host is failed on it."""
        run = self.first.record if self.first and not self.retry else None
        return run is not None and not run.passed


@dataclass
class RunEvidence:
    """The run folder, each host's evidence and the runs across the cluster: the pair tests, the
    MPI preflight and the all-nodes benchmark."""

    folder: RunFolder
    hosts: dict[str, HostEvidence]
    unreachable: list[str]  # listed in run.json, no folder, and no pair test answered
    pair_tries: list[PairTry] = field(default_factory=list)  # in the folder's file order
    expected_pair_steps: list[ExpectedPairStep] = field(default_factory=list)  # hosts sorted
    files: list[ParsedFile] = field(default_factory=list)  # every raw file, in folder order
    mpi_preflights: list[MpiPreflightTries] = field(default_factory=list)
    # The all-nodes runs of gpuval-allreduce-bench (a pair step's runs are pair tries).
    all_nodes_runs: list[Parsed[CollectiveBenchRun]] = field(default_factory=list)

    def host(self, name: str) -> HostEvidence | None:
        return self.hosts.get(name)
