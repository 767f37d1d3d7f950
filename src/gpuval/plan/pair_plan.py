"""The pair phase in commands: which pair kinds run (and why the others do not), where each host
is reached and which HCA is its rail i, and for every planned entry what each of its two hosts
runs. roles/bench_pairs only runs what this plan says; the gpuval_pairs action plugin builds it
between the rounds from the role's settings (`PairSettings.from_variables`, the bench_pairs_*
variables) and each node's facts (`NodeFacts.from_variables`: the role's setup probe, preflight,
nccl_tests and the openmpi launch contract).

An entry's `run` holds, per kind it tries, the commands of both sides: `a` is the pair's first
host (the iperf3 and ib_write_bw client, torchrun's rank 0, mpirun's launcher; its files are the
measurements), `b` the second (the servers, rank 1; its files go to the peer folder). Whether a
partner is still in the play is only known when a round runs, so the role adds that skip itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

from gpuval.plan import pair_rounds, steps
from gpuval.plan.host_order import PAIR_SEPARATOR

# Ansible's `bool` filter: these are true, everything else false.
TRUE_WORDS = frozenset(("y", "yes", "on", "1", "true", "t"))
# `auto | required | false` switches: these words (any case) turn the kind off.
OFF_WORDS = frozenset(("false", "no", "off"))
ALLREDUCE_TOOL = "gpuval-allreduce-bench"


def as_bool(value: Any) -> bool:
    """As Ansible's `bool` filter reads a variable."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value == 1
    return isinstance(value, str) and value.strip().lower() in TRUE_WORDS


def switch(value: Any) -> str:
    """An auto | required | false variable: "false" when off, "auto" as given, else "required"
    (true and any other word run the kind anyway)."""
    if str(value).lower() in OFF_WORDS:
        return "false"
    return "auto" if value == "auto" else "required"


def text(value: Any) -> str:
    """A command argument: None is left out as empty."""
    return "" if value is None else str(value)


@dataclass(frozen=True)
class PairSettings:
    """The role's knobs (roles/bench_pairs/defaults/main.yml documents each)."""

    iperf3: bool = True
    iperf3_seconds: int = 10
    iperf3_port: int = 5201
    iperf3_args: tuple[str, ...] = ()
    iperf3_timeout_s: int = 60
    allreduce: str = "auto"
    python: str = "python3"
    pythonpath: str = ""
    tools_dir: str = "/var/tmp/gpuval/bench"
    allreduce_min_bytes: str = "1M"
    allreduce_max_bytes: str = "64M"
    allreduce_iterations: int = 20
    allreduce_warmup: int = 5
    allreduce_timeout_s: int = 300
    master_port: int = 29500
    nccl: str = "auto"
    nccl_collective: str = "all_reduce"
    nccl_min_bytes: str = "8"
    nccl_max_bytes: str = "1G"
    nccl_timeout_s: int = 900
    rdma: str = "auto"
    rdma_gpudirect: bool = True
    # HCA -> GPU index for --use_cuda; an HCA not listed uses GPU i for rail i.
    rdma_gpus: Mapping[str, int] = field(default_factory=dict)
    rdma_seconds: int = 5
    rdma_qps: int = 1
    rdma_gid_index: str = ""
    rdma_port_base: int = 18515
    rdma_timeout_s: int = 60
    rdma_binary: str = "ib_write_bw"
    # The rails of a pair measured at the same time (host memory, then GPU memory); false: one
    # lane after another, for diagnosis.
    rdma_parallel: bool = True
    collect_each_round: bool = True

    @classmethod
    def variables(cls) -> list[str]:
        """The role variable of each setting."""
        return [f"bench_pairs_{setting.name}" for setting in fields(cls)]

    @classmethod
    def from_variables(cls, variables: Mapping[str, Any]) -> PairSettings:
        """The settings from the role variables that are set (bench_pairs_<attribute>)."""
        values: dict[str, Any] = {}
        for setting in fields(cls):
            variable = f"bench_pairs_{setting.name}"
            if variables.get(variable) is None:
                continue
            value = variables[variable]
            default = getattr(cls(), setting.name)
            if setting.name in ("allreduce", "nccl", "rdma"):
                values[setting.name] = switch(value)
            elif isinstance(default, bool):
                values[setting.name] = as_bool(value)
            elif isinstance(default, int):
                values[setting.name] = int(value)
            elif isinstance(default, tuple):
                values[setting.name] = tuple(str(item) for item in value)
            elif isinstance(default, Mapping):
                values[setting.name] = {str(k): v for k, v in value.items()}
            else:
                values[setting.name] = text(value)
        return cls(**values)


def jinja_int(value: Any) -> int:
    """As Jinja's `int` filter: 0 for what is not a number."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class NodeFacts:
    """What the plan needs to know of one node."""

    address: str
    torch_version: str = ""
    has_gpu: bool = False
    gpu_count: int = 0
    nccl_tests_bin_dir: str = ""
    rdma_hcas: tuple[str, ...] = ()
    has_rdma_binary: bool = False
    # The openmpi launch contract as this node holds it: its environment and the addresses
    # it reaches the others on.
    launch_env: Mapping[str, str] = field(default_factory=dict)
    launch_addresses: Mapping[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        """GPUs the pair tests use: preflight's count when it found a usable GPU, else none."""
        return self.gpu_count if self.has_gpu else 0

    @classmethod
    def from_variables(cls, host: str, variables: Mapping[str, Any]) -> NodeFacts:
        """From a host's variables (hostvars): openmpi's private address, else the inventory's."""
        launch = variables.get("openmpi_launch") or {}
        address = variables.get("openmpi_address", variables.get("ansible_host", host))
        return cls(
            address=str(address),
            torch_version=text(variables.get("bench_pairs_torch_version")),
            has_gpu=bool(variables.get("preflight_has_gpu")),
            gpu_count=jinja_int(variables.get("preflight_gpu_count", 0)),
            nccl_tests_bin_dir=text(variables.get("nccl_tests_bin_dir")),
            rdma_hcas=tuple(str(h) for h in variables.get("bench_pairs_rdma_node_hcas") or ()),
            has_rdma_binary=bool(variables.get("bench_pairs_has_rdma_binary")),
            launch_env={str(k): text(v) for k, v in (launch.get("env") or {}).items()},
            launch_addresses={str(k): str(v) for k, v in (launch.get("addresses") or {}).items()},
        )


# Variables NodeFacts.from_variables reads of each host.
NODE_VARIABLES = (
    "openmpi_address",
    "ansible_host",
    "openmpi_launch",
    "bench_pairs_torch_version",
    "preflight_has_gpu",
    "preflight_gpu_count",
    "nccl_tests_bin_dir",
    "bench_pairs_rdma_node_hcas",
    "bench_pairs_has_rdma_binary",
)


class PlannedEntry(pair_rounds.Entry):
    """A schedule entry with its label (`pair`: a--b), its two `hosts`, what they `run`, and the
    role's task files each side includes, in order (`parts`: "a", "b"); `collect_by`: the part
    whose task brings the first node's new files to the controller ("" where none does)."""

    pair: str
    hosts: list[str]
    run: dict[str, dict[str, Any]]
    parts: dict[str, list[str]]
    collect_by: str


# The kinds whose clients' task (a gpuval_capture) brings the first node's new files itself, when
# one is the entry's last: a round then costs no collect task of its own. After the others (the
# all-reduce, nccl-tests), the role's ENTRY_COLLECT part does.
SELF_COLLECTING_KINDS = ("iperf3", "rdma")
ENTRY_COLLECT = "entry_collect"


# Seconds gpuval_capture waits between SIGTERM and SIGKILL of a step past its timeout (the plan
# passes it on), so a hung step costs its timeout plus this.
RDMA_KILL_GRACE_S = 5


def groups_budget(planned: Sequence[Mapping[str, Any]], kill_grace_s: int) -> int:
    """Seconds one gpuval_capture call of these steps takes at most: consecutive steps of one
    `group` run together and cost the longest of them, a step alone its own timeout; a hung
    step also costs the kill grace, a skipped one nothing."""
    total, group, longest = 0, None, 0
    for step in planned:
        cost = 0 if step.get("skip_reason") else int(step["timeout"]) + kill_grace_s
        if step.get("group") is not None and step.get("group") == group:
            longest = max(longest, cost)
            continue
        total, group, longest = total + longest, step.get("group"), cost
    return total + longest


def started_at_once(timeout: int) -> dict[str, int]:
    """How the role starts a torchrun (a pair's two sides, a group's members): in the
    background (gpuval_capture's `background`), then waited for with one blocking task. A task
    runs on Ansible's `forks` hosts at a time, so torchruns run in the task would start in
    waves: the first forks members of a bigger group (or the first sides of pairs whose
    partners come later) would wait in the rendezvous until their timeout for members that
    start only after them. Started this way each host's task returns at once and every member
    runs together, whatever forks is. The wait outlives the capture's `timeout` (which kills
    the process) and its kill grace."""
    return {"wait_timeout": timeout + 70}


# gpuval_capture's kill grace for the servers (its default) and its limit on the listening wait.
SERVER_KILL_GRACE_S = 5
READY_LIMIT_S = 90


def server_start_timeout(longest_server_s: int) -> int:
    """Seconds a pair's second node may take to start its servers in the background (nothing
    waits for them to end in the round): the host's earlier servers of the kind must end
    first (they outlive their client's timeout when it could not connect), then these must
    listen, and 30 s for the task."""
    return longest_server_s + SERVER_KILL_GRACE_S + READY_LIMIT_S + 30


def listening_command(ports: Sequence[int], what: str) -> str:
    """Shell that waits (polling every 0.1 s, 60 s at most) until every port listens."""
    wanted = " or ".join(f"sport = :{port}" for port in ports)
    return (
        "set -o pipefail; for _ in $(seq 600); do "
        f"[ \"$(ss -Hltn '( {wanted} )' | wc -l)\" -ge {len(ports)} ] && exit 0; sleep 0.1; done; "
        f'echo "{what} servers not listening after 60 s on ports '
        f'{", ".join(str(p) for p in ports)}" >&2; exit 1'
    )


@dataclass(frozen=True)
class PairPlan:
    """The plan over the hosts still in the play (`active`, in inventory order)."""

    settings: PairSettings
    nodes: Mapping[str, NodeFacts]
    active: Sequence[str]

    def _lacking(self, has: Any) -> list[str]:
        return [h for h in self.active if not has(self.nodes[h])]

    @cached_property
    def skipped(self) -> dict[str, str]:
        """Why a kind (or GPUDirect) does not run; '' when it does."""
        s = self.settings
        no_torch = self._lacking(lambda n: n.torch_version)
        no_usable_gpu = self._lacking(lambda n: n.has_gpu)
        no_gpu = list(dict.fromkeys(no_usable_gpu + self._lacking(lambda n: n.nccl_tests_bin_dir)))
        no_hca = self._lacking(lambda n: n.rdma_hcas)
        no_binary = self._lacking(lambda n: n.has_rdma_binary)
        torch_hint = " (bench_pairs_pythonpath names where torch is)"
        hca_hint = " (preflight found none; bench_pairs_rdma_hcas or gpuval_ib_hcas names them)"
        reasons = {
            "allreduce": _why_not("allreduce", s.allreduce, [
                (no_torch, "torch not importable on {}" + torch_hint),
            ]),
            "nccl": _why_not("nccl", s.nccl, [
                (no_gpu, "no usable GPU or no nccl-tests on {}"),
            ]),
            "rdma": _why_not("rdma", s.rdma, [
                (no_hca, "no RDMA HCA on {}" + hca_hint),
                (no_binary, f"no {s.rdma_binary} (perftest) on {{}}"),
            ]),
            "rdma_gpudirect": "",
        }  # fmt: skip
        if not s.rdma_gpudirect:
            reasons["rdma_gpudirect"] = "turned off (bench_pairs_rdma_gpudirect: false)"
        elif no_usable_gpu:
            reasons["rdma_gpudirect"] = f"no usable GPU on {', '.join(no_usable_gpu)}"
        return reasons

    @cached_property
    def kinds(self) -> list[str]:
        wanted = ["iperf3"] if self.settings.iperf3 else []
        return wanted + [k for k in ("allreduce", "nccl", "rdma") if not self.skipped[k]]

    @cached_property
    def rdma_rails(self) -> int:
        """Rail i is the i-th HCA of each node: as many rails as the node with the most HCAs
        (a node with fewer fails its missing rails)."""
        return max((len(self.nodes[h].rdma_hcas) for h in self.active), default=0)

    @cached_property
    def hosts_with_rail(self) -> list[list[str]]:
        """Rail i -> the hosts with an i-th HCA."""
        return [
            [h for h in self.active if len(self.nodes[h].rdma_hcas) > rail]
            for rail in range(self.rdma_rails)
        ]

    @cached_property
    def lanes(self) -> list[steps.RdmaLane]:
        return steps.rdma_lanes(self.rdma_rails, not self.skipped["rdma_gpudirect"])

    def address(self, viewer: str, host: str) -> str:
        """Where `viewer` reaches `host`: the launch contract's address, else the host's own."""
        return self.nodes[viewer].launch_addresses.get(host) or self.nodes[host].address

    def env(self, host: str) -> dict[str, str]:
        """The launch contract's environment (interface, NCCL_IB_HCA, libraries), torch's path."""
        pythonpath = {"PYTHONPATH": self.settings.pythonpath} if self.settings.pythonpath else {}
        return {**self.nodes[host].launch_env, **pythonpath}

    def summary(self, mode: str, parallel: bool) -> str:
        """One line: which pair tests run, between how many nodes, and what is skipped."""
        if len(self.active) < 2:  # the nodes were never probed for what a pair needs
            return f"no pair tests: {len(self.active)} node(s) in the play, a pair needs two"
        how = "pairs of a round at the same time" if parallel else "one pair after another"
        line = (
            f"pair tests ({mode}, {how}): {', '.join(self.kinds) or 'none'} between"
            f" {len(self.active)} node(s)"
        )
        for kind, label in (("allreduce", "all-reduce"), ("nccl", "nccl-tests")):
            if self.skipped[kind]:
                line += f"; {label} pairs skipped: {self.skipped[kind]}"
        if self.skipped["rdma"]:
            return line + f"; ib_write_bw (RDMA) pairs skipped: {self.skipped['rdma']}"
        gpudirect = self.skipped["rdma_gpudirect"]
        rails = "rails together" if self.settings.rdma_parallel else "one lane after another"
        return (
            line + f"; ib_write_bw on {self.rdma_rails} rail(s) ({rails}), GPUDirect "
            f"{'skipped: ' + gpudirect if gpudirect else 'too'}"
        )

    # ------------------------------------------------------------------ commands

    def torchrun(self, host: str, nodes: int, rank: int, master: str) -> list[str]:
        """allreduce_bench.py under torchrun, static rendezvous (the node rank is given, so
        rank 0 is the node whose output is the measurement; c10d would rank by host name)."""
        s = self.settings
        return [
            s.python, "-m", "torch.distributed.run", f"--nnodes={nodes}",
            f"--nproc-per-node={self.nodes[host].gpus or 1}", f"--node-rank={rank}",
            f"--master-addr={self.address(host, master)}", f"--master-port={s.master_port}",
            "--max-restarts=0", f"{s.tools_dir}/allreduce_bench.py",
            "--min-bytes", s.allreduce_min_bytes, "--max-bytes", s.allreduce_max_bytes,
            "--iterations", str(s.allreduce_iterations), "--warmup", str(s.allreduce_warmup),
        ]  # fmt: skip

    def all_nodes_run(
        self, group: Sequence[str] | None = None, name: str = steps.ALLNODES_ALLREDUCE
    ) -> dict[str, dict[str, Any]]:
        """Staged mode's all-nodes all-reduce over `group` (default every active host): per host
        its part (the group's active hosts under one torchrun, node rank = its place; the first
        host's output is the step `name`), all started at once (`started_at_once`). Without the
        allreduce kind only the first host records the step as skipped."""
        members = [h for h in group if h in self.active] if group is not None else self.active
        if not members:
            return {}
        leader = members[0]
        timeout = self.settings.allreduce_timeout_s
        skip = self.skipped["allreduce"]
        parts: dict[str, dict[str, Any]] = {}
        for rank, host in enumerate(members):
            if skip and host != leader:
                continue
            part: dict[str, Any] = {
                "leader": host == leader,
                "name": name if host == leader else steps.peer(name),
                "command": self.torchrun(host, len(members), rank, leader),
                "env": self.env(host),
                "timeout": timeout,
                **started_at_once(timeout),
            }
            if host == leader:
                part["tool"] = ALLREDUCE_TOOL
            if skip:
                part["skip_reason"] = f"all-reduce benchmark not run: {skip}"
            parts[host] = part
        return parts

    def _iperf3(self, item: pair_rounds.Entry) -> dict[str, Any]:
        """b serves two one-off tests; a sends to b, then (-R, the next port) b sends to a."""
        s = self.settings
        port, timeout = s.iperf3_port, s.iperf3_timeout_s
        client = ["iperf3", "-c", self.address(item["a"], item["b"]), "-J", "-t"]
        client += [str(s.iperf3_seconds), *s.iperf3_args]
        directions = (["-p", str(port)], ["-p", str(port + 1), "-R"])
        return {
            "server": {
                "name": item["peers"]["iperf3"][0],
                "command": f"iperf3 -s -1 -J -p {port} & iperf3 -s -1 -J -p {port + 1}; wait",
                # Outlives the clients, so a hung test ends at the client's timeout.
                "timeout": 2 * timeout + 10,
            },
            "start_timeout": server_start_timeout(2 * timeout + 10),
            "listening": listening_command([port, port + 1], "iperf3"),
            "clients": [
                {
                    "name": name,
                    "command": client + direction,
                    "tool": "iperf3",
                    "raw_ext": "json",
                    "timeout": timeout,
                }
                for name, direction in zip(item["steps"]["iperf3"], directions, strict=True)
            ],
            "clients_timeout": 2 * timeout + 60,
        }

    def _allreduce(self, item: pair_rounds.Entry) -> dict[str, Any]:
        a, b = item["a"], item["b"]
        no_torch = self._lacking(lambda n: n.torch_version)
        without = [h for h in no_torch if h in (a, b)]
        timeout = self.settings.allreduce_timeout_s
        return {
            "a": {
                "name": item["steps"]["allreduce"][0],
                "command": self.torchrun(a, 2, 0, a),
                "env": self.env(a),
                "tool": ALLREDUCE_TOOL,
            },
            "b": {
                "name": item["peers"]["allreduce"][0],
                "command": self.torchrun(b, 2, 1, a),
                "env": self.env(b),
            },
            "skip_reason": f"torch not importable on {', '.join(without)}" if without else "",
            "timeout": timeout,
            **started_at_once(timeout),
        }

    def _nccl(self, item: pair_rounds.Entry) -> dict[str, Any]:
        """nccl-tests across both nodes from a, one rank per GPU, through the launch contract."""
        s = self.settings
        a = self.nodes[item["a"]]
        program = [f"{a.nccl_tests_bin_dir}/{s.nccl_collective}_perf"]
        program += ["-b", s.nccl_min_bytes, "-e", s.nccl_max_bytes, "-f", "2", "-g", "1", "-c", "1"]
        return {
            "name": item["steps"]["nccl"][0],
            "hosts": [item["a"], item["b"]],
            "ranks_per_host": max(a.gpus, 1),
            "program": program,
            "env": {"NCCL_DEBUG": "INFO"},
            "timeout": s.nccl_timeout_s,
            "task_timeout": s.nccl_timeout_s + 60,
        }

    def rdma_command(self, host: str, partner: str, lane: steps.RdmaLane, k: int) -> list[str]:
        """ib_write_bw for measurement k of a pair on `host`'s HCA of the lane's rail: the
        second node serves on port_base + k, the first connects to it (the partner's address)."""
        s = self.settings
        hcas = self.nodes[host].rdma_hcas
        hca = hcas[lane.rail] if lane.rail < len(hcas) else ""
        command = [s.rdma_binary, "-d", hca, "-p", str(s.rdma_port_base + k), "-F"]
        command += ["--report_gbits", "-D", str(s.rdma_seconds), "-q", str(s.rdma_qps)]
        if s.rdma_gid_index:
            command += ["-x", s.rdma_gid_index]
        if lane.memory == "cuda":
            command.append(f"--use_cuda={s.rdma_gpus.get(hca, lane.rail)}")
        return command

    def rail_missing(self, item: pair_rounds.Entry, rail: int) -> str:
        """Why the pair cannot measure `rail` ('' when it can): a node without an HCA for it."""
        having = self.hosts_with_rail[rail] if rail < len(self.hosts_with_rail) else []
        without = [h for h in (item["a"], item["b"]) if h not in having]
        return f"no HCA for rail {rail} on {', '.join(without)}" if without else ""

    def _rdma(self, item: pair_rounds.Entry) -> dict[str, Any]:
        """b serves every lane at once, each on its own port, in one call; a measures them in
        one call too: every rail's host-memory lane together, then every rail's GPU-memory lane
        together (each rail its own HCA, GPU and port), or one lane after another when
        bench_pairs_rdma_parallel is off."""
        s = self.settings
        a, b = item["a"], item["b"]
        lanes = [steps.RdmaLane(int(lane["rail"]), str(lane["memory"])) for lane in item["lanes"]]
        # Measurement k keeps port base + k and its step name, whatever order a measures in.
        order = list(range(len(lanes)))
        if s.rdma_parallel:  # every rail's host-memory lane, then every rail's GPU-memory lane
            order.sort(key=lambda k: (steps.RDMA_MEMORIES.index(lanes[k].memory), k))
        servers: list[dict[str, Any]] = []
        clients: list[dict[str, Any]] = []
        ports: list[int] = []
        for k in order:
            lane = lanes[k]
            missing = self.rail_missing(item, lane.rail)
            client: dict[str, Any] = {
                "name": item["steps"]["rdma"][k],
                "command": [*self.rdma_command(a, b, lane, k), self.address(a, b)],
                "tool": "ib_write_bw",
                "timeout": s.rdma_timeout_s,
                "group": lane.memory if s.rdma_parallel else lane.label,
            }
            if missing:
                client["skip_reason"] = missing
            else:
                servers.append(
                    {
                        "name": item["peers"]["rdma"][k],
                        "command": self.rdma_command(b, a, lane, k),
                        "tool": "ib_write_bw",
                        "group": "servers",
                    }
                )
                ports.append(s.rdma_port_base + k)
            clients.append(client)
        # A server waits while a measures every group before its own: it outlives them all.
        clients_s = groups_budget(clients, RDMA_KILL_GRACE_S)
        server_timeout = clients_s + 10
        # An earlier pair's servers on this host may have served lanes this pair skips.
        every_lane_s = groups_budget([{**c, "skip_reason": ""} for c in clients], RDMA_KILL_GRACE_S)
        for server in servers:
            server["timeout"] = server_timeout
        return {
            "servers": servers,
            "listening": listening_command(ports, "ib_write_bw"),
            "clients": clients,
            "kill_grace_s": RDMA_KILL_GRACE_S,
            "clients_s": clients_s,
            "server_timeout": server_timeout,
            "task_timeout": server_timeout + 60,
            "start_timeout": server_start_timeout(every_lane_s + 10),
        }

    def with_commands(self, item: pair_rounds.Entry) -> PlannedEntry:
        """The entry with what each side runs for each kind it tries."""
        build = {
            "iperf3": self._iperf3,
            "allreduce": self._allreduce,
            "nccl": self._nccl,
            "rdma": self._rdma,
        }
        kinds = [kind for kind in steps.PAIR_KINDS if kind in item["tries"]]
        collect_by = ""
        if self.settings.collect_each_round and kinds:
            collect_by = kinds[-1] if kinds[-1] in SELF_COLLECTING_KINDS else ENTRY_COLLECT
        # Only the first node writes into its run folder (the second's servers and torchrun
        # write into the peer folder, which stays on the node): only it collects.
        first = kinds + ([ENTRY_COLLECT] if collect_by == ENTRY_COLLECT else [])
        return {
            **item,
            "pair": f"{item['a']}{PAIR_SEPARATOR}{item['b']}",
            "hosts": [item["a"], item["b"]],
            "run": {kind: build[kind](item) for kind in kinds},
            "parts": {"a": first, "b": kinds},
            "collect_by": collect_by,
        }

    def rounds_with_commands(
        self, rounds: Sequence[Sequence[pair_rounds.Entry]]
    ) -> list[list[PlannedEntry]]:
        return [[self.with_commands(item) for item in items] for items in rounds]

    def facts(self) -> dict[str, Any]:
        """What the plan found, for the role and its log: kinds, reasons, rails, addresses."""
        return {
            "kinds": self.kinds,
            "skip_reasons": self.skipped,
            "rdma_rails": self.rdma_rails,
            "hosts_with_rail": self.hosts_with_rail,
            "rails": {h: list(self.nodes[h].rdma_hcas) for h in self.active},
            "addresses": {h: self.address(self.active[0], h) for h in self.active},
        }


def _why_not(kind: str, setting: str, missing: list[tuple[list[str], str]]) -> str:
    """Why a pair kind does not run: turned off ("false"), or, when "auto", the first thing
    some host lacks (`missing`: those hosts and the reason with {} for their names); '' when
    it runs."""
    if setting == "false":
        return f"turned off (bench_pairs_{kind}: false)"
    if setting == "auto":
        for hosts, reason in missing:
            if hosts:
                return reason.format(", ".join(hosts))
    return ""
