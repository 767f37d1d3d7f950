"""Node health: the hardware evidence that bandwidth tests miss. A node whose kernel log shows a
GPU that fell off the bus, whose GPU waits for a row remap, or whose InfiniBand link went down
during the run fails here, however good its bandwidth looked.

Subjects (check ids `health.<subject>...`, each non-pass check with an `action`), by module:
- xid.py, xid: the kernel log's Xid/SXid lines, each code's meaning and action from the catalog
  (xid.json), judged within the current boot and `xid_window_hours`; a GPU that fell off the bus
  or that the driver could not initialise, with or without an Xid line;
- memory.py, memory: ECC mode and counts, retired pages, row remapping, repairs pending
  (nvidia-smi -q), and the one rule for a pending remap or a remap failure (Xid 63 / 64 too);
- clocks.py, clocks: slowdown reasons and their counters over the run, temperatures against the
  slowdown threshold, power limit against the default, persistence and MIG modes;
- pcie.py, pcie: RDMA NICs' link width and speed and every device's AER counters (sysfs); the
  kernel log's PCIe lines (pcie.kernel-log: AER errors on a GPU or a port above one, a GPU's
  boot link notice); GPUs' links are judged by topology.pcie-link (NVML) and only fall back to
  sysfs here; ACS redirect on the PCIe switch ports between a GPU and an RDMA NIC (lspci -vvv);
- nvlink.py, nvlink: the NVLink error counters over the run (nvidia-smi nvlink -e); it also
  holds topology.nvlink-state, the link states;
- fabric.py, nvlink: each GPU's fabric registration (State, Status, and on NVL72 trays CliqueId
  and ClusterUUID) and its fabric Health fields (nvidia-smi -q);
- imex.py, nvlink: the IMEX domain of a multi-node NVLink rack (nvidia-imex-ctl -N: domain UP,
  every node READY, every connection Connected);
- network.py, network: RDMA port error counters and RoCE transport counters over the run
  (sysfs counters/ and hw_counters/), congestion marks as the fabric's finding, GPUDirect
  RDMA's kernel module;
- versions.py, software and network: VBIOS and kernel, NIC firmware and OFED (ofed_info -s) the
  same on every node;
- burn.py, burn: the GEMM burn per GPU, against the catalog's dense peak and the node's siblings;
- dcgm.py, dcgm: DCGM diagnostics, each failed test named per GPU;
- common.py: what they share (a check from a list of problems, a probe that left no trace).
Checks of other modules that belong in the node health table are mapped by OTHER_SUBJECTS.
"""

from __future__ import annotations

from gpuval.checks.context import JudgeState
from gpuval.checks.health.burn import burn_checks
from gpuval.checks.health.clocks import clock_checks
from gpuval.checks.health.dcgm import dcgm_checks
from gpuval.checks.health.fabric import fabric_checks
from gpuval.checks.health.imex import imex_checks
from gpuval.checks.health.memory import memory_checks
from gpuval.checks.health.network import ib_counter_checks, peermem_checks
from gpuval.checks.health.nvlink import nvlink_error_checks
from gpuval.checks.health.pcie import pcie_acs_checks, pcie_health_checks
from gpuval.checks.health.versions import version_consistency_checks
from gpuval.checks.health.xid import xid_checks
from gpuval.checks.model import Check

# The node health table: (subject, column title), in column order.
HEALTH_SUBJECTS = (
    ("xid", "Xid / SXid"),
    ("memory", "Memory"),
    ("clocks", "Clocks & heat"),
    ("pcie", "PCIe"),
    ("nvlink", "NVLink"),
    ("network", "InfiniBand / RoCE"),
    ("software", "Versions"),
    ("burn", "GPU burn"),
    ("dcgm", "DCGM"),
    ("bandwidth", "HBM & host copies"),
)
# Checks of other modules shown in the node health table, with what to do when they fail.
OTHER_SUBJECTS: dict[str, tuple[str, str]] = {
    "topology.pcie-link": (
        "pcie",
        "reseat the GPU (or its riser) and check the slot's link "
        "settings in the BIOS; RMA the GPU if the link stays narrow",
    ),
    "topology.nvlink-state": (
        "nvlink",
        "reset the GPUs and restart nvidia-fabricmanager; if "
        "the link stays down, check the NVLink connections or "
        "RMA the GPU or baseboard",
    ),
    "network.rdma-ports": (
        "network",
        "reseat or replace the port's cable or transceiver and check the switch port",
    ),
    "nvbandwidth.": (
        "bandwidth",
        "compare with the node's siblings; check the GPU's PCIe link and NUMA placement",
    ),
}


def health_subject(check_id: str) -> str | None:
    """The node health column of a check, None for checks outside the table."""
    if check_id.startswith("health."):
        return check_id.split(".")[1]
    return next((s for prefix, (s, _) in OTHER_SUBJECTS.items()
                 if check_id == prefix or (prefix.endswith(".") and check_id.startswith(prefix))),
                None)  # fmt: skip


def suggested_action(check: Check) -> str | None:
    """The check's own action, else its subject's for a check of another module that did not
    pass."""
    if check.action or check.status == "pass":
        return check.action
    subject = health_subject(check.check_id)
    return next((action for prefix, (s, action) in OTHER_SUBJECTS.items()
                 if s == subject and check.check_id.startswith(prefix)), None)  # fmt: skip


def health_checks(judge: JudgeState) -> None:
    for host in judge.evidence.hosts.values():
        if not host.reachable:
            continue
        xid_checks(judge, host)
        memory_checks(judge, host)
        clock_checks(judge, host)
        pcie_health_checks(judge, host)
        pcie_acs_checks(judge, host)
        fabric_checks(judge, host)
        imex_checks(judge, host)
        nvlink_error_checks(judge, host)
        ib_counter_checks(judge, host)
        peermem_checks(judge, host)
        burn_checks(judge, host)
        dcgm_checks(judge, host)
    version_consistency_checks(judge)
