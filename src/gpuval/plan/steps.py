"""The step-name registry: every name a step of a run can have, and the steps run.json expects.

A step is one captured command: `raw/<host>/<step>.<ext>` and its sidecar `<step>.meta.json`.
The roles take their step names from here (through the `gpuval_steps` and `gpuval_pairs`
action plugins), run_context writes `expected_steps` into run.json, and the judge reads names
back with `pair_step` and `failed_phase`. Shapes:

    <probe>                               preflight probes (PREFLIGHT_PROBES: nvidia-smi, ...)
    health-<probe>, health-<probe>-after  node health before and after the benchmarks
    <step>-after                          a probe captured again after the benchmarks (after_step)
    p2pBandwidthLatencyTest               intranode, per node
    nccl-<collective>                     intranode nccl-tests, per node
    internode-nccl-<collective>           nccl-tests across all nodes, on the first node
    rack-nccl-<collective>                an NVL72 rack's test over multi-node NVLink, on the
                                          rack's first node (gpuval.checks.rack_tests)
    xrack-nccl-<collective>               the network-only test across racks (MNNVL and NVLS
                                          off, one node per rack), on the first node
    rack-search-nccl-<collective>-r<round>  a group of a failing rack's trays, searched
                                          stage by stage (gpuval.plan.rack_search)
    mpi-preflight                         mpirun across all nodes, on the first node
    mpi-preflight-retry                   the same, once more, where the first try failed
                                          (judged together: gpuval.checks.cluster)
    allnodes-allreduce                    staged mode's all-nodes test, on the first node
    allnodes-allreduce-g<round>           staged mode's group tests of a later round, on the
                                          first node of each group (gpuval.plan.group_testing)
    pair-<kind>-r<round>-<a>--<b>-try<k>  pair tests (kind iperf3 | allreduce | nccl)
    pair-rdma-rail<i>-<memory>-r<round>-<a>--<b>-try<k>
                                          ib_write_bw on rail i (the i-th HCA of both nodes),
                                          memory host or cuda (GPUDirect)
    peer-<...>                            a pair's or all-nodes test's other side (not collected)
    failed-<phase>                        written on the controller when a node fails a phase

For a pair: round is the schedule round (from 1), k the try (1, then repeats), a--b the inventory
names; for iperf3 the direction the data flowed (sender--receiver), else the pair in schedule
order (the rank-0 host first). Host names must not hold "--".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from gpuval.plan.host_order import circle_rounds

P2P = "p2pBandwidthLatencyTest"
MPI_PREFLIGHT = "mpi-preflight"
# One failed try of the preflight is not yet a verdict on a host: it runs once more.
MPI_PREFLIGHT_RETRY = "mpi-preflight-retry"
ALLNODES_ALLREDUCE = "allnodes-allreduce"
INTERNODE_PREFIX = "internode-"
# The two active tests of NVL72 racks, kept apart so a bad InfiniBand rail cannot hide behind
# NVLink: one per rack over multi-node NVLink, one across racks over the network only.
RACK_PREFIX = "rack-"
ACROSS_RACKS_PREFIX = "xrack-"
RackTest = Literal["rack", "across-racks"]
# bench_pairs_mode: auto is all pairs up to this many nodes (N-1 rounds are cheap there and test
# every link), group testing (staged) above it.
PAIRS_MODES = ("auto", "all-pairs", "staged")
ALL_PAIRS_UP_TO = 8
PAIR_KINDS = ("iperf3", "allreduce", "nccl", "rdma")
# Pair kinds with a process of their own on the second host (mpirun starts nccl's ranks itself).
PEER_KINDS = ("iperf3", "allreduce", "rdma")
# Where an rdma pair test's buffers live: host memory, or GPU memory (--use_cuda, GPUDirect).
RDMA_MEMORIES = ("host", "cuda")
PEER_PREFIX = "peer-"
FAILED_PREFIX = "failed-"
# Phases a node can fail in; a failure record is the step failed-<phase>.
PHASES = (
    "preflight",
    "health",
    "install",
    "build",
    "intranode",
    "mpi-preflight",
    "internode",
    "pairs",
)

PAIR_STEP_PREFIX = "pair-"  # what every pair step's name starts with (PAIR_STEP)
PAIR_STEP = re.compile(
    rf"^{PAIR_STEP_PREFIX}(?P<kind>iperf3|allreduce|nccl|rdma)"
    r"(?:-rail(?P<rail>\d+)-(?P<memory>host|cuda))?"
    r"-r(?P<round>\d+)-(?P<a>.+?)--(?P<b>.+)-try(?P<try>\d+)$"
)
STEP_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Probe:
    """One preflight command: its step name, parser hint and how it runs on a node.

    `command` is an argument vector (its first word looked up on the node) or a shell script
    (a string, run through /bin/sh); `gpu` marks probes that need the NVIDIA driver;
    `facts` marks probes whose output the controller reads back to derive the node's facts."""

    name: str
    command: tuple[str, ...] | str
    tool: str
    raw_ext: str = "txt"
    gpu: bool = False
    facts: bool = False


# Fields of nvidia-smi --query-gpu, in this order.
QUERY_GPU_FIELDS = (
    "index",
    "name",
    "pci.bus_id",
    "uuid",
    "driver_version",
    "compute_cap",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "memory.total",
)

PREFLIGHT_PROBES = (
    Probe("nvidia-smi-query", ("nvidia-smi", "-q", "-x"), "nvidia-smi-xml", "xml", gpu=True),
    Probe(
        "nvidia-smi-query-gpu",
        ("nvidia-smi", f"--query-gpu={','.join(QUERY_GPU_FIELDS)}", "--format=csv"),
        "nvidia-smi-csv",
        "csv",
        gpu=True,
        facts=True,
    ),
    Probe("nvidia-smi", ("nvidia-smi",), "nvidia-smi", gpu=True, facts=True),
    Probe("nvidia-smi-topo", ("nvidia-smi", "topo", "-m"), "nvidia-smi-topo", gpu=True),
    Probe("nvidia-smi-nvlink", ("nvidia-smi", "nvlink", "-s"), "nvidia-smi-nvlink", gpu=True),
    # -n: numeric class codes (0300 VGA, 0302 3D controller), which name no vendor marketing.
    Probe("lspci-nvidia", ("lspci", "-D", "-n", "-d", "10de:"), "context", facts=True),
    Probe("nvcc-version", ("nvcc", "--version"), "nvcc-version", facts=True),
    # The script is filled in by the controller (it names the headers to read).
    Probe("nccl-version", "", "nccl-version", facts=True),
    Probe("mpirun-version", ("mpirun", "--version"), "mpirun-version", facts=True),
    # Read back for preflight_rdma_hcas, the HCAs bench_pairs measures rail by rail.
    Probe("ibstat", ("ibstat",), "ibstat", facts=True),
    Probe("ibv_devinfo", ("ibv_devinfo", "-v"), "ibv_devinfo", facts=True),
    # The IMEX domain of a GB200/GB300 tray (every node READY, connected); nodes without the
    # IMEX service record the step as skipped. The text form: its layout is published (-j not).
    Probe("nvidia-imex-ctl", ("nvidia-imex-ctl", "-N"), "nvidia-imex-ctl"),
    Probe("ip-addr", ("ip", "-j", "addr"), "context", "json"),
    # Each interface's line rate: the reference of the TCP pair tests (every node has sysfs,
    # not every node ethtool). grep exits 2 for interfaces without a speed file (lo, bridges).
    Probe("sysfs-net", "grep -H . /sys/class/net/*/speed /sys/class/net/*/operstate", "sysfs-net"),
    Probe("os-release", "uname -a; cat /etc/os-release", "os-release"),
)
PREFLIGHT_STEPS = tuple(probe.name for probe in PREFLIGHT_PROBES)


# --- Node health: the health phase's passive probes are captured before the benchmarks and
# again after them; the second capture is the step of the same name with AFTER_SUFFIX.
HEALTH_PHASE = "health"
AFTER_SUFFIX = "-after"
# Passive probes (gpuval.plan.health_probes holds their commands) and the stages they run in.
HEALTH_PASSIVE_STAGES = {
    "health-kernel-log": ("before", "after"),
    "health-pci": ("before", "after"),
    "health-ib-sysfs": ("before", "after"),
    "health-modules": ("before",),
    "health-nvlink-errors": ("before", "after"),
    # The installed OFED does not change while the benchmarks run.
    "health-ofed": ("before",),
    # ACS settings and the PCI tree are configuration: the benchmarks do not change them.
    "health-lspci": ("before",),
    # Before the benchmarks this is the preflight's own nvidia-smi-query.
    "nvidia-smi-query": ("after",),
}
HEALTH_GEMM_BURN = "health-gemm-burn"
HEALTH_DCGM_DIAG = "health-dcgm-diag"
HEALTH_NVBANDWIDTH = "health-nvbandwidth"
HEALTH_LEVELS = ("none", "quick", "standard", "extended")


def after_step(step: str) -> str:
    return step + AFTER_SUFFIX


def health_passive_steps(stage: str) -> list[str]:
    """The passive probes' step names of one health stage (before | after)."""
    return [
        after_step(name) if stage == "after" else name
        for name, stages in HEALTH_PASSIVE_STAGES.items()
        if stage in stages
    ]


def intranode_nccl(collective: str) -> str:
    return f"nccl-{collective}"


def internode_nccl(collective: str) -> str:
    return f"{INTERNODE_PREFIX}nccl-{collective}"


def rack_nccl(collective: str) -> str:
    """The rack test: `collective` over the multi-node NVLink of one rack."""
    return f"{RACK_PREFIX}nccl-{collective}"


def across_racks_nccl(collective: str) -> str:
    """The network-only test: `collective` across racks, MNNVL and NVLS off."""
    return f"{ACROSS_RACKS_PREFIX}nccl-{collective}"


def rack_test(step: str) -> RackTest | None:
    """Which of the two rack tests a step is; None for every other step."""
    if any(step == rack_nccl(c) for c in COLLECTIVES):
        return "rack"
    if any(step == across_racks_nccl(c) for c in COLLECTIVES):
        return "across-racks"
    return None


def failed(phase: str) -> str:
    """The failure record of a node that failed `phase`."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; known: {', '.join(PHASES)}")
    return FAILED_PREFIX + phase


def failed_phase(name: str) -> str | None:
    """The phase of a failure record's step name; None for every other step."""
    phase = name.removeprefix(FAILED_PREFIX)
    return phase if name.startswith(FAILED_PREFIX) and phase in PHASES else None


def pairs_mode_for(mode: str, hosts: int) -> str:
    """The pair phase's mode for this many nodes: all-pairs or staged (auto decides by count)."""
    if mode not in PAIRS_MODES:
        raise ValueError(f"bench_pairs_mode must be one of {', '.join(PAIRS_MODES)}, not {mode!r}")
    if mode == "auto":
        return "all-pairs" if hosts <= ALL_PAIRS_UP_TO else "staged"
    return mode


def group_allreduce(round_number: int) -> str:
    """A group test's step on its first node: the screen (round 1) is the all-nodes test."""
    return ALLNODES_ALLREDUCE if round_number <= 1 else f"{ALLNODES_ALLREDUCE}-g{round_number}"


def peer(name: str) -> str:
    """Where the second side of a pair or all-nodes test writes (never collected)."""
    return PEER_PREFIX + name.removeprefix(PAIR_STEP_PREFIX)


@dataclass(frozen=True)
class PairStep:
    kind: str
    round: int
    src: str  # as named: the iperf3 sender, or the pair's first host
    dst: str
    attempt: int
    lane: RdmaLane | None = None  # rdma only

    @property
    def name(self) -> str:
        return pair_step_name(self.kind, self.round, self.src, self.dst, self.attempt, self.lane)


@dataclass(frozen=True, order=True)
class RdmaLane:
    """One rdma measurement of a pair: rail i (the i-th HCA of each node) and the memory."""

    rail: int
    memory: str

    @property
    def label(self) -> str:
        return f"rail{self.rail}-{self.memory}"

    @property
    def order(self) -> tuple[int, bool]:
        """Rails in order, host memory before GPU memory on each (GPUDirect is held against it)."""
        return self.rail, self.memory != "host"


def rdma_lanes(rails: int, gpudirect: bool) -> list[RdmaLane]:
    """Every rail with host memory, and with GPU memory too when both nodes have GPUs."""
    memories = RDMA_MEMORIES if gpudirect else RDMA_MEMORIES[:1]
    return [RdmaLane(rail, memory) for rail in range(rails) for memory in memories]


def pair_step_name(
    kind: str, round_: int, src: str, dst: str, attempt: int, lane: RdmaLane | None = None
) -> str:
    """pair-<kind>[-rail<i>-<memory>]-r<round>-<src>--<dst>-try<attempt>; the lane for rdma only."""
    if kind not in PAIR_KINDS:
        raise ValueError(f"unknown pair kind {kind!r}; known: {', '.join(PAIR_KINDS)}")
    if "--" in src or "--" in dst:
        raise ValueError(f"host names must not hold '--': {src!r}, {dst!r}")
    if (kind == "rdma") != (lane is not None) or (lane and lane.memory not in RDMA_MEMORIES):
        raise ValueError(f"a rail and memory go with the rdma kind only: {kind!r}, {lane!r}")
    qualifier = f"-{lane.label}" if lane else ""
    return f"{PAIR_STEP_PREFIX}{kind}{qualifier}-r{round_}-{src}--{dst}-try{attempt}"


def pair_step(name: str) -> PairStep | None:
    """The parts of a pair step's name; None for any other step."""
    match = PAIR_STEP.match(name)
    if not match or (match["kind"] == "rdma") != (match["rail"] is not None):
        return None
    lane = RdmaLane(int(match["rail"]), match["memory"]) if match["rail"] is not None else None
    return PairStep(
        match["kind"], int(match["round"]), match["a"], match["b"], int(match["try"]), lane
    )


def pair_entry_steps(
    kind: str, round_number: int, a: str, b: str, attempt: int, lanes: Sequence[RdmaLane] = ()
) -> list[str]:
    """The steps one try of a pair writes on its first host: iperf3 both directions (a->b,
    then b->a with -R), rdma one per lane (a writes to b), the other kinds one step."""
    if kind == "rdma":
        return [pair_step_name(kind, round_number, a, b, attempt, lane) for lane in lanes]
    steps = [pair_step_name(kind, round_number, a, b, attempt)]
    if kind == "iperf3":
        steps.append(pair_step_name(kind, round_number, b, a, attempt))
    return steps


# -------------------------------------------------------------------- what a run expects

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "sendrecv")


@dataclass(frozen=True)
class RunPlan:
    """The knobs that decide which steps a run has, with the suite's defaults (the same as the
    roles' defaults/main.yml, which a unit test holds equal)."""

    intranode_collectives: tuple[str, ...] = COLLECTIVES
    intranode_p2p: bool = True
    internode_collectives: tuple[str, ...] = COLLECTIVES
    rack_collectives: tuple[str, ...] = ("all_reduce",)
    pairs_mode: str = "auto"  # auto | all-pairs | staged (pairs_mode_for)
    pairs_iperf3: bool = True
    pairs_allreduce: str = "auto"  # auto | required | false
    pairs_nccl: str = "auto"
    health_level: str = "none"  # none | quick | standard | extended
    # Tries a pair measurement may get (its first and the repeats of a low or failed one): the
    # judge words a pair's verdict with it ("1 of 3 configured tries made").
    pairs_max_tries: int = 3

    @classmethod
    def from_variables(cls, variables: Mapping[str, Any]) -> RunPlan:
        """The plan with the role variables that are set (inventory, -e) over the defaults."""
        values: dict[str, Any] = {}
        for attribute, variable in PLAN_VARIABLES.items():
            if variable in variables and variables[variable] is not None:
                values[attribute] = _plan_value(attribute, variables[variable])
        return cls(**values)

    def to_variables(self) -> dict[str, Any]:
        """The plan as role variables (run.json `config`)."""
        plain = asdict(self)
        return {
            variable: list(value) if isinstance(value, tuple) else value
            for attribute, variable in PLAN_VARIABLES.items()
            for value in [plain[attribute]]
        }


# Role variable of each plan knob.
PLAN_VARIABLES = {
    "intranode_collectives": "bench_intranode_collectives",
    "intranode_p2p": "bench_intranode_p2p",
    "internode_collectives": "bench_internode_collectives",
    "rack_collectives": "bench_internode_rack_collectives",
    "pairs_mode": "bench_pairs_mode",
    "pairs_iperf3": "bench_pairs_iperf3",
    "pairs_allreduce": "bench_pairs_allreduce",
    "pairs_nccl": "bench_pairs_nccl",
    "health_level": "health_level",
    "pairs_max_tries": "bench_pairs_max_tries",
}


def _plan_value(attribute: str, value: Any) -> Any:
    default = getattr(RunPlan(), attribute)
    if isinstance(default, tuple):
        if isinstance(value, str) or not isinstance(value, Iterable):
            raise ValueError(f"{PLAN_VARIABLES[attribute]} must be a list, not {value!r}")
        return tuple(str(item) for item in value)
    if isinstance(default, bool):
        return _truth(value)
    if isinstance(default, int):
        return _positive_count(PLAN_VARIABLES[attribute], value)
    if attribute in ("pairs_allreduce", "pairs_nccl"):
        return "false" if not _truth(value) else str(value)
    if attribute == "pairs_mode":
        pairs_mode_for(str(value), 0)  # refuses a mode it does not know
    if attribute == "health_level" and str(value) not in HEALTH_LEVELS:
        raise ValueError(f"health_level must be one of {', '.join(HEALTH_LEVELS)}, not {value!r}")
    return str(value)


def _positive_count(variable: str, value: Any) -> int:
    """A whole number of at least 1 (Ansible may hand it over as text)."""
    try:
        count = int(str(value).strip())
    except ValueError:
        count = 0
    if isinstance(value, bool) or count < 1:
        raise ValueError(f"{variable} must be a whole number of at least 1, not {value!r}")
    return count


def _truth(value: Any) -> bool:
    """Ansible's words for false (a YAML false, "no", "off", "0", ...) are false."""
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "no", "off", "0", "n", "f", "")
    return bool(value)


def rack_test_hosts(
    hosts: Sequence[str], racks: Mapping[str, str]
) -> dict[RackTest, dict[str, list[str]]]:
    """Where the two NVL72 rack tests run, per test: the host that launches a run -> the hosts
    of that run, in inventory order (`racks`: host -> its declared rack, gpuval_nvl_domain).
    The rack test runs on each rack of two hosts or more, from its first host; the network-only
    test on the first host of every rack, from the first rack's, when there are two racks or
    more. bench_internode runs them from this answer (gpuval_steps), run.json expects them."""
    members: dict[str, list[str]] = {}
    for host in hosts:
        if racks.get(host):
            members.setdefault(racks[host], []).append(host)
    heads = [rack_hosts[0] for rack_hosts in members.values()]
    return {
        "rack": {
            rack_hosts[0]: rack_hosts for rack_hosts in members.values() if len(rack_hosts) > 1
        },
        "across-racks": {heads[0]: heads} if len(heads) > 1 else {},
    }


def _expect_rack_tests(
    expected: dict[str, list[str]], hosts: Sequence[str], plan: RunPlan, racks: Mapping[str, str]
) -> None:
    """The two NVL72 rack tests, on the hosts that launch them."""
    placed = rack_test_hosts(hosts, racks)
    for host in placed["rack"]:
        expected[host] += [rack_nccl(c) for c in plan.rack_collectives]
    for host in placed["across-racks"]:
        expected[host] += [across_racks_nccl(c) for c in plan.rack_collectives]


# Phases whose steps run.json can list in advance (the others leave no step of their own).
PLANNED_PHASES = ("preflight", "health", "intranode", "internode", "pairs")


def expected_steps(
    hosts: Sequence[str],
    plan: RunPlan,
    phases: Iterable[str] = PLANNED_PHASES,
    racks: Mapping[str, str] | None = None,
) -> dict[str, list[str]]:
    """Per host, the steps it must leave a sidecar for, so a step that never ran fails closed.

    Of the `phases` a playbook runs: every host runs the preflight probes and the intranode
    steps; the first host the internode collectives; in all-pairs mode with two hosts or more,
    try 1 of every scheduled pair, on the pair's first host: iperf3 both ways when on, the
    all-reduce and nccl pairs only when "required" ("auto" may skip them on nodes without torch
    or GPUs). Staged mode (auto above ALL_PAIRS_UP_TO nodes) knows no pair in advance. The
    health phase: its passive probes before and after the benchmarks, and with a health_level
    the GEMM burn and DCGM diagnostics (each recorded as skipped where the node cannot run it);
    nvbandwidth is left out, as it runs only at the levels that ask for it and with a binary
    built. With `racks` (host -> its declared NVL72 rack, gpuval_nvl_domain): the two rack
    tests on the hosts rack_test_hosts places them, which bench_internode runs them from."""
    wanted = set(phases)
    unknown = wanted - set(PLANNED_PHASES)
    if unknown:
        raise ValueError(f"unknown phase(s) {sorted(unknown)}; known: {', '.join(PLANNED_PHASES)}")
    intranode = ([P2P] if plan.intranode_p2p else []) + [
        intranode_nccl(c) for c in plan.intranode_collectives
    ]
    health = (
        [*health_passive_steps("before"), *health_passive_steps("after")]
        + ([HEALTH_GEMM_BURN, HEALTH_DCGM_DIAG] if plan.health_level != "none" else [])
        if "health" in wanted
        else []
    )
    expected: dict[str, list[str]] = {
        host: [*(PREFLIGHT_STEPS if "preflight" in wanted else ())]
        + health
        + (intranode if "intranode" in wanted else [])
        for host in hosts
    }
    if hosts and "internode" in wanted:
        expected[hosts[0]] += [internode_nccl(c) for c in plan.internode_collectives]
        _expect_rack_tests(expected, hosts, plan, racks or {})
    all_pairs = pairs_mode_for(plan.pairs_mode, len(hosts)) == "all-pairs"
    if "pairs" not in wanted or not all_pairs or len(hosts) < 2:
        return expected
    kinds = (["iperf3"] if plan.pairs_iperf3 else []) + [
        kind for kind in ("allreduce", "nccl") if getattr(plan, f"pairs_{kind}") == "required"
    ]
    for number, pairs in enumerate(circle_rounds(hosts), start=1):
        for a, b in pairs:
            for kind in kinds:
                expected[a] += pair_entry_steps(kind, number, a, b, 1)
    return expected
