"""The NVLink fabric gate: the `Fabric` block nvidia-smi -q prints for every GPU.

Every GPU of an NVSwitch board or NVL72 tray registers with the fabric: State Completed and
Status Success once done. On a multi-node NVLink domain (GB200/GB300 NVL72: 18 trays x 4 GPUs)
a GPU has joined the rack only when it also holds a non-zero CliqueId and a ClusterUUID that
is not all zeros; a node can look perfect alone while its GPUs never joined ("Insufficient
Resources" with CliqueId 0 and a zero ClusterUUID: Azure's HPC image gate,
https://github.com/Azure/azhpc-images/pull/506). Elsewhere (HGX H100/H200/B200 boards) a zero
ClusterUUID is what a fabric without a multi-node domain reports
(https://github.com/meta-pytorch/torchcomms/pull/1385), so the identity is judged only where the
catalog puts the node in a multi-node domain. The driver's (570+) Health fields are judged on
every board that prints them: NVML's nvmlGpuFabricInfo_v3 health mask and summary,
https://docs.nvidia.com/deploy/nvml-api/group__nvmlFabricDefs.html.
"""

from __future__ import annotations

import re

from gpuval.catalog.systems import systems
from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check, health_gpus
from gpuval.checks.model import Status
from gpuval.evidence import HostEvidence
from gpuval.records.nvidia_smi import SmiFabric

FABRIC_SOURCE = (
    "https://docs.nvidia.com/deploy/nvml-api/group__nvmlFabricDefs.html (fabric state, "
    "status, clique, cluster UUID and health mask); https://github.com/Azure/azhpc-images/pull/506"
)
REGISTER_ACTION = "start (or restart) nvidia-fabricmanager, then reset the GPUs"
JOIN_ACTION = (
    "check the NVLink switch trays' fabric manager (NMX) and the tray's NVLink cables, then "
    "reset the GPUs; drain the node until every GPU shows its rack's CliqueId and ClusterUUID"
)
HEALTH_ACTION = "drain the node and check the NVLink fabric (switch trays, cables) of {gpu}"

_ZERO_UUID = re.compile(r"^[0-]+$")

# Health fields (text labels and XML tags, compared without case or separators) -> the
# printed values that are healthy, and the status of any other known value. A value outside
# both is not one NVML documents: unjudged, never a pass.
_HEALTHY: dict[str, tuple[set[str], dict[str, Status]]] = {
    "summary": ({"healthy"}, {"unhealthy": "fail", "limited capacity": "warn"}),
    "bandwidth": ({"full"}, {"degraded": "fail"}),
    "routerecoveryinprogress": ({"false"}, {"true": "warn"}),
    "routeunhealthy": ({"false"}, {"true": "fail"}),
    "accesstimeoutrecovery": ({"false"}, {"true": "warn"}),
}
# "Incorrect Configuration": None when correct, else the fault (SysGUID, Chassis SN, No
# Partition, Insufficient NVLinks, Incompatible GPU Firmware, Invalid Location).
_CONFIGURATION = "incorrectconfiguration"
_CORRECT = {"none", "false", "correct configuration"}


def _plain(name: str) -> str:
    return re.sub(r"[^a-z]", "", name.lower())


def domain_nodes(host: HostEvidence) -> int | None:
    """Nodes of the multi-node NVLink domain the node is a tray of (18 on an NVL72 rack): its
    system's, or, without one, that of every catalog system of its model when they agree;
    None: the node's NVLink ends at its own board."""
    if host.system is not None:
        return host.system.nvlink_domain_nodes
    model = host.model
    boards = [s for s in systems() if model and s.gpu_models and model.model in s.gpu_models]
    sizes = {s.nvlink_domain_nodes for s in boards}
    return sizes.pop() if len(sizes) == 1 else None


def in_nvlink_domain(host: HostEvidence) -> bool:
    """Whether the node's GPUs belong to a multi-node NVLink domain (an NVL72 tray)."""
    return domain_nodes(host) is not None


def zero_uuid(cluster_uuid: str) -> bool:
    """An all-zero ClusterUUID: the GPU is in no multi-node domain."""
    return bool(_ZERO_UUID.match(cluster_uuid.strip()))


def _registration(name: str, fabric: SmiFabric) -> Problem | None:
    state, status = (fabric.state or "").lower(), (fabric.status or "").lower()
    if state == "completed" and status == "success":
        return None
    return ("fail", f"{name} fabric State {fabric.state}, Status {fabric.status}: not "
            "registered with the NVLink fabric", REGISTER_ACTION)  # fmt: skip


def _identity(name: str, fabric: SmiFabric) -> list[Problem]:
    """CliqueId and ClusterUUID of a GPU that must have joined a multi-node domain."""
    found: list[Problem] = []
    missing = [label for label, printed in (("CliqueId", fabric.clique_id),
               ("ClusterUUID", fabric.cluster_uuid)) if printed is None]  # fmt: skip
    if missing:
        found.append(("unjudged", f"{name} prints no {' or '.join(missing)} (N/A or absent) "
                      "where its NVL72 tray must show the rack's", None))  # fmt: skip
    if fabric.clique_id is not None and fabric.clique_id.strip() == "0":
        found.append(("fail", f"{name} CliqueId 0: not in the rack's NVLink domain",
                      JOIN_ACTION))  # fmt: skip
    if fabric.cluster_uuid is not None and zero_uuid(fabric.cluster_uuid):
        found.append(("fail", f"{name} ClusterUUID {fabric.cluster_uuid}: all zeros, not in "
                      "the rack's NVLink domain", JOIN_ACTION))  # fmt: skip
    return found


def _health(name: str, fabric: SmiFabric) -> list[Problem]:
    found: list[Problem] = []
    for field, printed in fabric.health.items():
        if printed is None:
            continue  # N/A, Not Supported: a driver or board without the health mask
        key, shown = _plain(field), printed.strip().lower()
        label = field.replace("_", " ")
        status: Status | None
        if key == _CONFIGURATION:
            status = None if shown in _CORRECT else "fail"
        elif key in _HEALTHY:
            healthy, known = _HEALTHY[key]
            status = None if shown in healthy else known.get(shown, "unjudged")
        else:
            continue  # Partition Assigned and fields NVML adds later: shown, not judged
        if status is not None:
            action = HEALTH_ACTION.format(gpu=name) if status in ("fail", "warn") else None
            found.append((status, f"{name} fabric Health {label}: {printed}", action))
    return found


def fabric_checks(judge: JudgeState, host: HostEvidence) -> None:
    """health.nvlink.fabric: each GPU's Fabric block of nvidia-smi -q (text or XML); a GPU
    that fails any field fails the node, naming the GPU and the field."""
    parsed = host.health.smi.latest
    if parsed is None:
        return
    domain = in_nvlink_domain(host)
    problems: list[Problem] = []
    registered: list[SmiFabric] = []
    for name, gpu in health_gpus(parsed):
        fabric = gpu.health.fabric if gpu.health else None
        if fabric is None or fabric.state is None:
            if domain:
                problems.append(("unjudged", f"{name} prints no fabric State (N/A or no Fabric "
                                 "block) where its NVL72 tray must register", None))  # fmt: skip
            continue
        registration = _registration(name, fabric)
        if registration is not None:
            problems.append(registration)
        if domain:
            problems.extend(_identity(name, fabric))
        problems.extend(_health(name, fabric))
        if registration is None:
            registered.append(fabric)
    if not registered and not problems:
        return
    add_check(judge, host, "health.nvlink.fabric", problems, _passed(registered, domain),
              parsed.source(), reference=FABRIC_SOURCE if domain else None)  # fmt: skip


def _passed(registered: list[SmiFabric], domain: bool) -> str:
    if not domain:
        return (f"{len(registered)} GPU(s) registered with the NVSwitch fabric (fabric manager: "
                "Completed, Success)")  # fmt: skip
    cliques = sorted({f"CliqueId {f.clique_id} of ClusterUUID {f.cluster_uuid}"
                      for f in registered})  # fmt: skip
    return (f"{len(registered)} GPU(s) in the rack's NVLink domain (Completed, Success, "
            f"{', '.join(cliques)})")  # fmt: skip
