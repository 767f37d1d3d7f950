"""Build each host's evidence once, from the typed records of its parsed raw files."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import datetime
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from gpuval import parsers
from gpuval.catalog.catalog import GpuModel, identify_gpu
from gpuval.catalog.systems import detect_system, find_system
from gpuval.evidence.model import (
    BeforeAfter,
    Declared,
    ExpectedPairStep,
    GpuNvlinks,
    GpuPcie,
    HostEvidence,
    HostHealth,
    IbPortState,
    Interface,
    MpiPreflightTries,
    PairTry,
    Parsed,
    ParsedFile,
    RunEvidence,
    RunIndex,
    Topology,
    pci_key,
)
from gpuval.parsers.slurm_text import lost_nodes
from gpuval.plan.steps import (
    AFTER_SUFFIX,
    HEALTH_PHASE,
    MPI_PREFLIGHT_RETRY,
    failed_phase,
    pair_step,
)
from gpuval.records.bandwidth import AllReduceBenchRun, NvbandwidthRun
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
from gpuval.records.interfaces import NetInterfacesRun
from gpuval.records.nccl import NcclDevice, NcclRun
from gpuval.records.network import InfinibandRun
from gpuval.records.nvidia_smi import NvidiaSmiRun
from gpuval.records.p2p import P2PRun
from gpuval.records.software import SoftwareVersionRun
from gpuval.records.topology import AmdTopologyRun, TopologyRun
from gpuval.runfolder import RawFile, RefusedPath, RunFolder, host_file

R = TypeVar("R")


def _failure_record(raw: RawFile, run_dir: Path) -> str:
    """What the controller wrote when the node failed a phase: the task and its message."""
    try:
        path = host_file(run_dir, raw.host, PurePosixPath(raw.path).name)
        if path is None:
            return "its record is missing"
        text = parsers.read_text(path).strip()
    except RefusedPath as problem:
        return f"its record cannot be read ({problem})"
    except OSError as problem:
        return f"its record cannot be read ({problem.strerror or problem})"
    return " ".join(text.split()) or "its record is empty"


def _lost_nodes(raw: RawFile, run_dir: Path) -> dict[str, str]:
    """The nodes Slurm says a step that exited non-zero lost while it ran (srun's own lines, see
    gpuval.parsers.slurm_text); {} where the output cannot be read (its own checks say why)."""
    try:
        path = host_file(run_dir, raw.host, PurePosixPath(raw.path).name)
        return lost_nodes(parsers.read_text(path)) if path else {}
    except (RefusedPath, OSError):
        return {}


def parsed_file(raw: RawFile, run_dir: Path) -> ParsedFile:
    """The judge's view of one raw file (what it reads of the sidecar and of the parse)."""
    sidecar, parse = raw.sidecar, raw.parse
    ended = sidecar.problem() if sidecar else None
    failed = sidecar is not None and ended is not None and failed_phase(sidecar.name) is not None
    return ParsedFile(
        host=raw.host,
        path=raw.path,
        step=raw.step,
        tool=parse.tool if parse else None,
        phase=sidecar.phase if sidecar else None,
        command=sidecar.command if sidecar else None,
        env=dict(sidecar.env) if sidecar else {},
        started_at=sidecar.started_at if sidecar else None,
        ended=ended,
        exit_code=sidecar.exit_code if sidecar else None,
        failure_record=_failure_record(raw, run_dir) if failed else None,
        lost_nodes=_lost_nodes(raw, run_dir) if ended and ended[0] == "exit_status" else {},
        runs=tuple(parse.runs) if parse else (),
        errors=tuple(parse.errors) if parse else (),
        warnings=tuple(parse.warnings) if parse else (),
    )


def parsed_files(files: Iterable[RawFile], run_dir: Path) -> list[ParsedFile]:
    """The raw files of the run folder at `run_dir`, in their order."""
    return [parsed_file(raw, run_dir) for raw in files]


def runs_of(files: Iterable[ParsedFile], kind: type[R]) -> Iterator[Parsed[R]]:
    """Every parsed run of record type `kind`, in file order."""
    for file in files:
        for run in file.runs:
            if isinstance(run, kind):
                yield Parsed(file, run)


def mpi_preflight_tries(files: Iterable[ParsedFile]) -> list[MpiPreflightTries]:
    """The MPI preflight's runs (read by its own parser only), each retry with the first try
    on its launcher that it repeated, in file order."""
    runs = list(runs_of((f for f in files if f.tool == "mpi-preflight"), MpiPreflightRun))
    retries = {run.host: run for run in runs if run.file.step == MPI_PREFLIGHT_RETRY}
    tries = []
    for run in runs:
        if run.file.step == MPI_PREFLIGHT_RETRY:
            continue
        retry = retries.pop(run.host, None)
        if retry is not None and _started_before(retry.file, run.file):
            tries.append(MpiPreflightTries(run, earlier_retry=retry))
        else:
            tries.append(MpiPreflightTries(run, retry))
    return tries + [MpiPreflightTries(None, retry) for retry in retries.values()]


def _started_before(file: ParsedFile, other: ParsedFile) -> bool:
    """Whether `file` started before `other`, by their sidecars (False where one lacks it)."""
    if not file.started_at or not other.started_at:
        return False
    try:
        return datetime.fromisoformat(file.started_at) < datetime.fromisoformat(other.started_at)
    except ValueError:
        return False


def all_nodes_runs(files: Iterable[ParsedFile]) -> list[Parsed[CollectiveBenchRun]]:
    """gpuval-allreduce-bench's runs outside the pair steps (those are pair tries)."""
    return list(runs_of((f for f in files if not f.is_pair_try), CollectiveBenchRun))


def read_pair_tries(files: Iterable[ParsedFile]) -> list[PairTry]:
    """Every pair step's output, in file order: each file read once."""
    tries = []
    for file in files:
        step = pair_step(file.step)
        if step is None:
            continue
        tries.append(PairTry(
            file.step, step, file.host, file.path, file.ended, file.tool,
            file.errors[0] if file.errors else None, file.runs, file.lost_nodes,
        ))  # fmt: skip
    return tries


def expected_pair_steps(folder: RunFolder) -> list[ExpectedPairStep]:
    """The pair steps run.json expects, host by host (sorted), in run.json's order."""
    return [
        ExpectedPairStep(host, name, step)
        for host in sorted(folder.hosts)
        for name in folder.expected_steps(host)
        if (step := pair_step(name))
    ]


def superseded_pair_tries(tries: Iterable[PairTry]) -> set[str]:
    """Paths of pair tries that a later try of the same step replaced."""
    tries = list(tries)
    last: dict[tuple[str, str, str, int], int] = {}
    for t in tries:
        key = (t.step.kind, t.step.src, t.step.dst, t.step.round)
        last[key] = max(t.step.attempt, last.get(key, 0))
    return {
        t.path
        for t in tries
        if t.step.attempt < last[(t.step.kind, t.step.src, t.step.dst, t.step.round)]
    }


def _declared(document: dict[str, Any]) -> Declared:
    rate = document.get("nic_rate_gbit")
    return Declared(
        gpu_model=document.get("gpu_model"),
        gpus_per_node=document.get("gpus_per_node"),
        system=document.get("system"),
        nic_count=document.get("nic_count"),
        nic_rate_gbit=float(rate) if rate is not None else None,
        ib_hcas=tuple(document.get("ib_hcas", ())),
        network_interface=document.get("network_interface"),
        nvl_domain=document.get("nvl_domain"),
        nvl_domain_nodes=document.get("nvl_domain_nodes"),
    )


def _short(hostname: str) -> str:
    return hostname.split(".", 1)[0].lower()


class AcrossNodeDevices:
    """The GPUs runs across nodes list per host (nccl-tests' device list, the suite's all-reduce
    bench's ranks; both name hosts by hostname, and an inventory name that is that hostname, or
    its short form, matches). The run's file lies with its first host, so the other hosts have
    no output of their own to count their GPUs from. Indexed once by short host name."""

    def __init__(self, files: Iterable[ParsedFile]) -> None:
        files = list(files)
        self.nccl: dict[str, list[NcclDevice]] = {}
        for parsed in runs_of(files, NcclRun):
            if len(parsed.record.hosts) > 1:
                for device in parsed.record.devices:
                    if device.host:
                        self.nccl.setdefault(_short(device.host), []).append(device)
        self.bench: dict[str, list[tuple[int, int, str | None]]] = {}  # (rank, index, name)
        for bench in runs_of(files, CollectiveBenchRun):
            names = bench.record.devices
            index: dict[str, int] = {}
            for rank, hostname in enumerate(bench.record.hosts):
                short = _short(hostname)
                name = names[rank] if rank < len(names) else None
                self.bench.setdefault(short, []).append((rank, index.get(short, 0), name))
                index[short] = index.get(short, 0) + 1

    def on(self, host: str) -> list[NcclDevice]:
        short = _short(host)
        return self.nccl.get(short, []) + [
            NcclDevice(rank=rank, host=host, device=index, name=name)
            for rank, index, name in self.bench.get(short, [])
        ]


def _gpu_names(runs: RunIndex, attributed: list[NcclDevice]) -> list[str]:
    """GPU names from the preflight's nvidia-smi, then benchmark device lists."""
    names = [gpu.name for p in runs.of(NvidiaSmiRun) for gpu in p.record.gpus if gpu.name]
    for nccl in runs.of(NcclRun):
        names += [d.name for d in nccl.record.devices if d.name]
    for p2p in runs.of(P2PRun):
        names += [d.name for d in p2p.record.devices if d.name]
    for bench in runs.of(AllReduceBenchRun):
        env = bench.record.environment
        if env.device_name:
            names.append(env.device_name)
        elif env.hardware and (match := re.search(r"name='([^']+)'", env.hardware)):
            names.append(match.group(1))
    for nvb in runs.of(NvbandwidthRun):
        names += [d.name for d in nvb.record.devices if d.name]
    names += [d.name for d in attributed if d.name]
    return [n.strip() for n in names if n.strip()]


def _first_model(names: list[str]) -> GpuModel | None:
    for name in names:
        if model := identify_gpu(name):
            return model
    return None


def _gpu_count(runs: RunIndex, attributed: list[NcclDevice]) -> int | None:
    """nvidia-smi's list, else topo's GPU columns, else p2p's num_gpus, else the devices of a
    single-host nccl-tests run, else those a run across nodes lists on this host."""
    smi = [len(p.record.gpus) for p in runs.of(NvidiaSmiRun)]
    topo = [
        sum(d.startswith("GPU") for d in p.record.devices)
        for p in runs.of(TopologyRun)
        if p.record.matrix == "topology"
    ]
    p2p = [p.record.num_gpus or 0 for p in runs.of(P2PRun)]
    nccl = [len(p.record.devices) for p in runs.of(NcclRun) if len(p.record.hosts) <= 1]
    across = [len({(d.device, d.pci_bus) for d in attributed})]
    for counts in (smi, topo, p2p, nccl, across):
        largest = max(counts, default=0)
        if largest:
            return largest
    return None


def _amd_topology(runs: RunIndex) -> Topology | None:
    """rocm-smi --showtopo / amd-smi topology as a GPU matrix of XGMI/PCIE cells (no NICs)."""
    for parsed in runs.of(AmdTopologyRun):
        run = parsed.record
        size = len(run.link_types)
        if size == 0 or any(len(row) != size for row in run.link_types):
            continue
        links = [
            ["X" if i == j else (run.link_types[i][j] or "").upper() for j in range(size)]
            for i in range(size)
        ]
        return Topology([f"GPU{i}" for i in range(size)], links, [], {}, parsed.source())
    return None


def _topology(runs: RunIndex) -> Topology | None:
    for parsed in runs.of(TopologyRun):
        run = parsed.record
        if run.matrix != "topology":
            continue
        gpu_index = [i for i, d in enumerate(run.devices) if d.startswith("GPU")]
        nic_index = [i for i, d in enumerate(run.devices) if not d.startswith("GPU")]
        if not gpu_index or any(len(run.links) <= i for i in gpu_index):
            continue

        def cell(row: int, col: int, links: list[list[str | None]] = run.links) -> str:
            value = links[row][col] if col < len(links[row]) else None
            return (value or "").strip()

        return Topology(
            gpus=[run.devices[i] for i in gpu_index],
            links=[[cell(r, c) for c in gpu_index] for r in gpu_index],
            nics=[run.nic_legend.get(run.devices[i], run.devices[i]) for i in nic_index],
            nic_cells={run.devices[r]: [cell(r, c) for c in nic_index] for r in gpu_index},
            source=parsed.source(),
        )
    return _amd_topology(runs)


def _pcie(runs: RunIndex) -> list[GpuPcie]:
    """Each GPU's PCIe link from the most detailed nvidia-smi form that printed it."""
    for parsed in runs.of(NvidiaSmiRun):
        found = [
            GpuPcie(f"GPU{gpu.index if gpu.index is not None else i}", gpu.pcie, parsed.source())
            for i, gpu in enumerate(parsed.record.gpus)
            if gpu.pcie is not None
        ]
        if found:
            return found
    return []


def _nvlinks(runs: RunIndex) -> list[GpuNvlinks]:
    for parsed in runs.of(NvidiaSmiRun):
        if parsed.record.format != "nvlink":
            continue
        return [
            GpuNvlinks(f"GPU{gpu.index if gpu.index is not None else i}", gpu.nvlinks or [],
                       parsed.source())
            for i, gpu in enumerate(parsed.record.gpus)
        ]  # fmt: skip
    return []


def _ib_ports(runs: RunIndex) -> list[IbPortState]:
    """Ports from ibstat, else ibv_devinfo (the same adapters; never counted twice)."""
    by_tool: dict[str, list[IbPortState]] = {}
    boards = _board_ids(runs)
    for parsed in runs.of(InfinibandRun):
        for device in parsed.record.devices:
            part = device.attributes.get("vendor_part_id")
            model = device.ca_type or (f"MT{part}" if part and part.isdigit() else part)
            board = device.attributes.get("board_id") or boards.get(device.name)
            adapter = " ".join(filter(None, (model, board))) or None
            for port in device.ports:
                by_tool.setdefault(parsed.tool, []).append(IbPortState(
                    device.name, port.port, port.state, port.physical_state, port.rate_gbps,
                    port.link_layer, parsed.source(port.line), adapter,
                ))  # fmt: skip
    return by_tool.get("ibstat") or by_tool.get("ibv_devinfo") or []


def _board_ids(runs: RunIndex) -> dict[str, str]:
    """Each adapter's board id from the sysfs listing (ibstat prints none), so that two boards
    of one chip (a 400G single-port and a 2x200G ConnectX-7) are told apart."""
    return {
        device.name: device.board_id
        for parsed in runs.of(SysfsInfinibandRun)
        for device in parsed.record.devices
        if device.board_id
    }


def _interfaces(runs: RunIndex) -> list[Interface]:
    return [
        Interface(i.name, i.speed_mbit, i.operstate, parsed.source(i.line))
        for parsed in runs.of(NetInterfacesRun)
        for i in parsed.record.interfaces
    ]


_NCCL_VERSION = re.compile(r"(\d+)\s*[.,]\s*(\d+)\s*[.,]\s*(\d+)")


def nccl_version_number(text: str | None) -> str | None:
    """'2.26.2+cuda12.8' (NCCL_DEBUG) and '(2, 26, 2)' (torch) both -> '2.26.2', so hosts
    read by different tools compare equal."""
    match = _NCCL_VERSION.search(text or "")
    return ".".join(match.groups()) if match else text


def _software(runs: RunIndex, component: str, named: bool = False) -> str | None:
    for parsed in runs.of(SoftwareVersionRun):
        run = parsed.record
        if run.component == component and run.version:
            return (
                f"{run.implementation} {run.version}"
                if named and run.implementation
                else (run.version)
            )
    return None


def _first(values: Iterable[str | None]) -> str | None:
    return next((v.strip() for v in values if v and v.strip()), None)


def _versions(runs: RunIndex) -> dict[str, str]:
    smi = [p.record for p in runs.of(NvidiaSmiRun)]
    nccl = [p.record for p in runs.of(NcclRun)]
    bench = [p.record for p in runs.of(AllReduceBenchRun)]
    collective = [p.record for p in runs.of(CollectiveBenchRun)]
    found = {
        "driver": _first(r.driver_version for r in smi),
        "cuda": _first(r.cuda_version for r in smi),
        "nccl": nccl_version_number(
            _first([r.nccl_version for r in nccl] + [r.environment.nccl for r in bench])
            or _first(r.nccl_version for r in collective)
            or _software(runs, "nccl")
        ),
        "mpi": _software(runs, "mpi", named=True),
        "cuda_toolkit": _software(runs, "cuda-toolkit"),
        "nccl_tests": _first(r.nccl_tests_version for r in nccl),
    }
    return {key: value for key, value in found.items() if value}


# --- Node health: each probe paired before/after; the capture after the benchmarks is the step
# of the same name with AFTER_SUFFIX (the preflight's nvidia-smi-query, the health phase's
# nvidia-smi-query-after).


def _before_after(parsed: Iterable[Parsed[R]]) -> BeforeAfter[R]:
    """The first run of a step without AFTER_SUFFIX, and the first of one with it."""
    before: Parsed[R] | None = None
    after: Parsed[R] | None = None
    for run in parsed:
        if run.file.step.endswith(AFTER_SUFFIX):
            after = after or run
        else:
            before = before or run
        if before and after:
            break
    return BeforeAfter(before, after)


def _with_health(parsed: Parsed[NvidiaSmiRun] | None) -> Parsed[NvidiaSmiRun] | None:
    """Only the forms that print the health fields (-q text, -q -x XML) count."""
    if parsed is None or not any(gpu.health is not None for gpu in parsed.record.gpus):
        return None
    return parsed


def _host_health(files: list[ParsedFile], runs: RunIndex) -> HostHealth:
    smi = _before_after(
        p for p in runs.of(NvidiaSmiRun) if p.file.tool in ("nvidia-smi-xml", "nvidia-smi-q")
    )
    names = {
        key: f"GPU{gpu.index if gpu.index is not None else i}"
        for parsed in runs.of(NvidiaSmiRun)
        for i, gpu in enumerate(parsed.record.gpus)
        if (key := pci_key(gpu.pci_bus_id))
    }
    return HostHealth(
        ran=any(f.phase == HEALTH_PHASE for f in files),
        steps=frozenset(f.step for f in files),
        kernel_log=_before_after(runs.of(KernelLogRun)),
        smi=BeforeAfter(_with_health(smi.before), _with_health(smi.after)),
        infiniband=_before_after(runs.of(SysfsInfinibandRun)),
        pci=_before_after(runs.of(SysfsPciRun)),
        nvlink_errors=_before_after(runs.of(NvlinkErrorsRun)),
        lspci=runs.first(LspciRun),
        modules=runs.first(KernelModulesRun),
        dcgm=list(runs.of(DcgmDiagRun)),
        burn=list(runs.of(GemmBurnRun)),
        gpu_names_by_pci=names,
    )


# A thousand nodes declare the same few systems: each name looked up in the catalog once.
_declared_system = cache(find_system)


def _host(
    folder: RunFolder,
    name: str,
    files: list[ParsedFile],
    reachable: bool,
    superseded: set[str],
    across: AcrossNodeDevices,
) -> HostEvidence:
    runs = RunIndex(files)
    declared = _declared(folder.declared(name))
    attributed = across.on(name)
    names = _gpu_names(runs, attributed)
    detected = _first_model(names)
    declared_model = identify_gpu(declared.gpu_model) if declared.gpu_model else None
    topology = _topology(runs)
    model = declared_model or detected
    system = detect_system(model, topology.links) if model and topology else None
    return HostEvidence(
        name=name,
        reachable=reachable,
        files=files,
        runs=runs,
        declared=declared,
        gpu_names=names,
        detected_model=detected,
        declared_model=declared_model,
        gpu_count=_gpu_count(runs, attributed),
        topology=topology,
        detected_system=system,
        declared_system=_declared_system(declared.system) if declared.system else None,
        pcie=_pcie(runs),
        nvlinks=_nvlinks(runs),
        ib_ports=_ib_ports(runs),
        interfaces=_interfaces(runs),
        versions=_versions(runs),
        nccl=[p for p in runs.of(NcclRun) if p.file.path not in superseded],
        all_reduce_bench=list(runs.of(AllReduceBenchRun)),
        p2p=list(runs.of(P2PRun)),
        nvbandwidth=list(runs.of(NvbandwidthRun)),
        health=_host_health(files, runs),
    )


def _answered(tries: Iterable[PairTry]) -> set[str]:
    """Hosts named by a pair step that finished with a parsed result: every file of a pair lies
    with its first host, so the last host of a pair-only run has no folder of its own."""
    return {host for t in tries if t.answered for host in (t.step.src, t.step.dst)}


def pair_evidence(folder: RunFolder) -> RunEvidence:
    """The pair tests alone, no host's evidence: the controller judges the tries between rounds
    this way (no network reference is needed to know which try was low)."""
    tries = read_pair_tries(parsed_files(folder.files, folder.run_dir))
    return RunEvidence(folder, {}, [], tries, expected_pair_steps(folder))


def build_evidence(folder: RunFolder) -> RunEvidence:
    files = parsed_files(folder.files, folder.run_dir)
    pair_tries = read_pair_tries(files)
    unreachable = sorted(set(folder.without_folder) - _answered(pair_tries))
    lost = set(unreachable)
    superseded = superseded_pair_tries(pair_tries)
    across = AcrossNodeDevices(files)
    by_host: dict[str, list[ParsedFile]] = {}
    for file in files:
        by_host.setdefault(file.host, []).append(file)
    hosts = {
        name: _host(folder, name, by_host.get(name, []), name not in lost, superseded,
                    across)
        for name in folder.hosts
    }  # fmt: skip
    return RunEvidence(
        folder, hosts, unreachable, pair_tries, expected_pair_steps(folder), files,
        mpi_preflight_tries(files), all_nodes_runs(files),
    )  # fmt: skip
