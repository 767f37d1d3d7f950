"""Racks: the nodes of one multi-node NVLink domain (a GB200/GB300 NVL72 rack, 18 compute trays
of 4 GPUs). Every GPU of a tray that joined its rack's domain prints the rack's ClusterUUID and
CliqueId in the Fabric block of nvidia-smi -q (NVML's nvmlGpuFabricInfo: the clique and cluster
a GPU's fabric manager placed it in, https://docs.nvidia.com/deploy/nvml-api/group__nvmlFabricDefs.html;
one NVL72 rack is one NVLink domain, https://www.nvidia.com/en-us/data-center/gb200-nvl72/).

The inventory names each tray's rack (`gpuval_nvl_domain`) and may say how many trays the rack
holds (`gpuval_nvl_domain_nodes`, 18 for a full rack); without the count, the run's nodes that
name the rack are all of it. Per declared rack:

- racks.domain, per node: every GPU holds the rack's domain, the ClusterUUID and CliqueId of a
  strict majority of the rack's nodes that printed a Fabric block; a GPU with another fails its
  node, naming the GPU and the field. Without such a majority no node is judged (unjudged, never
  failed: nothing says which side is the rack), and a node that printed no Fabric block, or N/A
  where the identity belongs, is unjudged;
- racks.trays, on the rack's own subject `rack <name>` (as a host is a node's): the domain
  holds every tray the rack declares. Short of trays that were measured elsewhere fails; short
  only of trays that left nothing to measure, or that are not in the run, is unjudged (the
  missing ones are named either way).

NVL72 trays without `gpuval_nvl_domain` are grouped by what they report and shown, not judged
beyond the per-GPU gate of health.nvlink.fabric.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check, health_gpus
from gpuval.checks.health.fabric import JOIN_ACTION, domain_nodes, zero_uuid
from gpuval.checks.model import Status
from gpuval.checks.rack_tests import rack_subject
from gpuval.checks.wording import listed
from gpuval.evidence import HostEvidence

RACK_SOURCE = (
    "https://docs.nvidia.com/deploy/nvml-api/group__nvmlFabricDefs.html (a GPU's clique and "
    "cluster UUID); https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (one NVLink domain "
    "per rack)"
)
MOVED_ACTION = JOIN_ACTION + "; if the node belongs to another rack, correct its gpuval_nvl_domain"
CAPTURE_ACTION = "capture nvidia-smi -q on the node (preflight) and rerun"

Identity = tuple[str, str]  # (ClusterUUID, CliqueId) as printed


@dataclass(frozen=True)
class RackGpu:
    """One GPU's Fabric block as printed (None: N/A or not printed)."""

    name: str  # "GPU2"
    state: str | None
    status: str | None
    cluster_uuid: str | None
    clique_id: str | None

    def identity(self) -> Identity | None:
        """The domain the GPU joined; None when it is in none (not registered, N/A, a zero
        CliqueId or ClusterUUID)."""
        registered = (self.state or "").lower() == "completed" and (
            self.status or ""
        ).lower() == "success"
        if not registered or self.cluster_uuid is None or self.clique_id is None:
            return None
        if zero_uuid(self.cluster_uuid) or self.clique_id.strip() == "0":
            return None
        return self.cluster_uuid.strip(), self.clique_id.strip()


@dataclass(frozen=True)
class RackNode:
    host: str
    gpus: tuple[RackGpu, ...]  # empty: no Fabric block (or no nvidia-smi -q at all)
    status: Status | None  # its racks.domain check; None: not judged (undeclared rack)

    def identity(self) -> Identity | None:
        """The domain every GPU of the node joined; None when they are not all in one."""
        found = {gpu.identity() for gpu in self.gpus}
        return found.pop() if len(found) == 1 else None

    def fabric_lines(self) -> list[tuple[str, str]]:
        """(GPUs, what they printed) per distinct Fabric block, for the report's rack table."""
        lines: dict[str, list[str]] = {}
        for gpu in self.gpus:
            printed = (f"{gpu.state}, {gpu.status}, ClusterUUID {gpu.cluster_uuid}, "
                       f"CliqueId {gpu.clique_id}")  # fmt: skip
            lines.setdefault(printed, []).append(gpu.name)
        return [(", ".join(names), printed) for printed, names in lines.items()]


@dataclass(frozen=True)
class Rack:
    """A rack as the report shows it: declared (named by the inventory) or grouped by the
    domain its nodes report."""

    name: str
    declared: bool
    nodes: tuple[RackNode, ...]
    cluster_uuid: str | None  # the rack's domain; None: no majority (or none reported)
    clique_id: str | None
    trays_expected: int | None  # declared racks: the trays it must hold
    trays_in_domain: int
    status: Status | None  # its racks.trays check; None: not judged

    @property
    def gpu_count(self) -> int:
        return sum(len(node.gpus) for node in self.nodes)


def _gpus(host: HostEvidence) -> tuple[RackGpu, ...]:
    parsed = host.health.smi.latest
    if parsed is None:
        return ()
    found = []
    for name, gpu in health_gpus(parsed):
        fabric = gpu.health.fabric if gpu.health else None
        if fabric is not None and fabric.state is not None:
            found.append(RackGpu(name, fabric.state, fabric.status, fabric.cluster_uuid,
                                 fabric.clique_id))  # fmt: skip
    return tuple(found)


def _majority(nodes: list[RackNode]) -> Identity | None:
    """The domain a strict majority of the nodes that joined one share (a node in no domain,
    or split across two, is in none of them and has no say)."""
    joined = [identity for node in nodes if (identity := node.identity()) is not None]
    if not joined:
        return None
    identity, count = Counter(joined).most_common(1)[0]
    return identity if 2 * count > len(joined) else None


def _gpu_problem(rack: str, gpu: RackGpu, domain: Identity | None) -> Problem | None:
    """What keeps one GPU out of its rack's domain (said without the GPU's name). A GPU in no
    domain differs from its rack whatever the rack's is; one in another domain differs only
    from a majority's."""
    fields = (("ClusterUUID", gpu.cluster_uuid, domain[0] if domain else None),
              ("CliqueId", gpu.clique_id, domain[1] if domain else None))  # fmt: skip
    absent = [label for label, printed, _ in fields if printed is None]
    if absent:
        return ("unjudged", f"print no {' or '.join(absent)} (N/A) where rack {rack} needs its "
                "NVLink domain", None)  # fmt: skip
    if gpu.identity() is None:
        return ("fail", f"fabric Status {gpu.status}, ClusterUUID {gpu.cluster_uuid}, CliqueId "
                f"{gpu.clique_id}: in no NVLink domain, where rack {rack} needs one",
                MOVED_ACTION)  # fmt: skip
    if domain is None:
        return ("unjudged", f"in ClusterUUID {gpu.cluster_uuid}, CliqueId {gpu.clique_id}; rack "
                f"{rack} has no domain most of its trays share, so none is judged against the "
                "others", None)  # fmt: skip
    differing = [f"{label} {printed}" for label, printed, wanted in fields
                 if (printed or "").strip() != wanted]  # fmt: skip
    if not differing:
        return None
    return ("fail", f"in {', '.join(differing)} where rack {rack}'s NVLink domain is "
            f"{_named(domain)}", MOVED_ACTION)  # fmt: skip


def _node_problems(rack: str, node: RackNode, domain: Identity | None) -> list[Problem]:
    """The node's GPUs' problems, the GPUs that share one named together."""
    if not node.gpus:
        return [("unjudged", f"prints no Fabric block (no nvidia-smi -q, or N/A) where its "
                 f"rack {rack} needs its ClusterUUID and CliqueId", CAPTURE_ACTION)]  # fmt: skip
    by_problem: dict[Problem, list[str]] = {}
    for gpu in node.gpus:
        if (problem := _gpu_problem(rack, gpu, domain)) is not None:
            by_problem.setdefault(problem, []).append(gpu.name)
    return [(status, f"{', '.join(names)} {text}", action)
            for (status, text, action), names in by_problem.items()]  # fmt: skip


def _named(domain: Identity | None) -> str:
    return f"ClusterUUID {domain[0]}, CliqueId {domain[1]}" if domain else "no domain"


def _expected_trays(hosts: list[HostEvidence]) -> int:
    declared = [h.declared.nvl_domain_nodes for h in hosts if h.declared.nvl_domain_nodes]
    return max(declared) if declared else len(hosts)


def _trays_problems(name: str, expected: int, hosts: list[HostEvidence], nodes: list[RackNode],
                    domain: Identity | None) -> list[Problem]:  # fmt: skip
    """What keeps the rack from holding every tray it declares, each missing tray named."""
    catalog = next((size for h in hosts if (size := domain_nodes(h)) is not None), None)
    if catalog is not None and expected > catalog:
        return [("unjudged", f"rack {name} declares {expected} trays where the catalog's NVLink "
                 f"domain holds {catalog}: correct gpuval_nvl_domain_nodes", None)]  # fmt: skip
    if len(hosts) > expected:
        return [("unjudged", f"{len(hosts)} nodes of the run name rack {name}, which declares "
                 f"{expected} trays: correct gpuval_nvl_domain or gpuval_nvl_domain_nodes",
                 None)]  # fmt: skip
    inside = [n.host for n in nodes if domain is not None and n.identity() == domain]
    if len(inside) >= expected:
        return []
    elsewhere = [n.host for n in nodes if n.status == "fail"]
    unknown = [h.name for h in hosts if h.name not in inside and h.name not in elsewhere]
    short = f"rack {name} holds {len(inside)} of its {expected} trays in one NVLink domain"
    problems: list[Problem] = []
    if elsewhere:
        problems.append(("fail", f"{short}: {listed(elsewhere)} outside it", MOVED_ACTION))
    if unknown:
        problems.append(("unjudged", f"{short}: {listed(unknown)} not shown in it (unreachable, "
                         "no Fabric block, N/A, or no domain most trays share)", None))  # fmt: skip
    if expected > len(hosts):
        problems.append(("unjudged", f"{short}: {expected - len(hosts)} tray(s) not in this "
                         "run, so the rack is unconfirmed", "run gpuval on every tray of the "
                         "rack"))  # fmt: skip
    return problems


def _declared_rack(judge: JudgeState, name: str, hosts: list[HostEvidence]) -> Rack:
    reachable = [h for h in hosts if h.reachable]
    measured = [RackNode(h.name, _gpus(h), None) for h in reachable]
    domain = _majority(measured)
    nodes = []
    for host, node in zip(reachable, measured, strict=True):
        parsed = host.health.smi.latest
        passed = f"all {len(node.gpus)} GPU(s) in rack {name}'s NVLink domain ({_named(domain)})"
        status = add_check(judge, host, "racks.domain", _node_problems(name, node, domain),
                           passed, parsed.source() if parsed else None, reference=RACK_SOURCE,
                           category="topology")  # fmt: skip
        nodes.append(RackNode(host.name, node.gpus, status))
    expected = _expected_trays(hosts)
    inside = sum(1 for n in nodes if domain is not None and n.identity() == domain)
    status = add_check(judge, rack_subject(name), "racks.trays",
                       _trays_problems(name, expected, hosts, nodes, domain),
                       f"rack {name} holds all {expected} declared trays in one NVLink domain",
                       None, measured=inside, reference=expected, unit="trays",
                       category="topology")  # fmt: skip
    return Rack(name, True, tuple(nodes), domain[0] if domain else None,
                domain[1] if domain else None, expected, inside, status)  # fmt: skip


def _reported_racks(hosts: list[HostEvidence]) -> list[Rack]:
    """NVL72 trays without a declared rack, grouped by the domain their GPUs report."""
    groups: dict[Identity | None, list[RackNode]] = {}
    for host in hosts:
        node = RackNode(host.name, _gpus(host), None)
        groups.setdefault(node.identity(), []).append(node)
    racks = []
    for identity, nodes in groups.items():
        name = _named(identity) if identity else "in no one NVLink domain"
        racks.append(Rack(name, False, tuple(nodes), identity[0] if identity else None,
                          identity[1] if identity else None, None,
                          len(nodes) if identity else 0, None))  # fmt: skip
    return racks


def rack_checks(judge: JudgeState) -> list[Rack]:
    """racks.domain and racks.trays of every declared rack, and the racks the report shows."""
    declared: dict[str, list[HostEvidence]] = {}
    undeclared = []
    for host in judge.evidence.hosts.values():
        if host.declared.nvl_domain:
            declared.setdefault(host.declared.nvl_domain, []).append(host)
        elif host.reachable and domain_nodes(host) is not None:
            undeclared.append(host)
    racks = [_declared_rack(judge, name, hosts) for name, hosts in declared.items()]
    return racks + _reported_racks(undeclared)
