"""The passive health probes: the one table of their commands, read by the health role (through
the gpuval_health_probes action) and by `gpuval node-health` (Slurm's HealthCheckProgram), so a
node is judged on the same evidence either way. Their step names and stages are
gpuval.plan.steps.HEALTH_PASSIVE_STAGES.

The commands read sysfs and /proc at paths a test can point elsewhere (ProbePaths); a probe whose
program or path is missing (`requires`) is recorded as skipped, never run.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from gpuval.plan import steps

# Slurm's health-check program (gpuval node-health) runs these probes within a budget; the
# probes get PROBE_SHARE of it, the rest is for judging and scontrol (judging took about 2 s on
# a loaded 2-core VM).
DEFAULT_BUDGET_S = 60.0
PROBE_SHARE = 2 / 3

# The kernel log since boot. journald first (its times carry their UTC offset). Where journald
# holds no kernel message (containers, minimal VMs) it prints "-- No entries --" or "No journal
# files were found." and may still exit 0: its output decides, not its status. Then dmesg's ISO
# form, then plain dmesg, whose "read kernel buffer failed" says why when nothing can be read.
KERNEL_LOG_SCRIPT = """\
journal=$(mktemp) || exit 1
trap 'rm -f "$journal"' EXIT
journalctl -k -b -o short-iso-precise --no-pager >"$journal" 2>/dev/null
if grep -qv -e '^-- .* --$' -e '^No journal files were' -e '^[[:space:]]*$' "$journal"; then
  cat "$journal"
  exit 0
fi
dmesg --time-format iso 2>/dev/null || dmesg
"""
# One `path:value` line per readable file (grep -H), the paths made absolute; `true`: a file
# that cannot be read (a port without counters) is no failure of the listing.
_SYSFS_LISTING = 'cd {root} && grep -H . {files} 2>/dev/null | sed "s|^|$PWD/|"\ntrue\n'
_PCI_FILES = (
    "class", "vendor", "device", "current_link_speed", "current_link_width", "max_link_speed",
    "max_link_width", "aer_dev_correctable", "aer_dev_fatal", "aer_dev_nonfatal",
)  # fmt: skip
_IB_FILES = (
    "fw_ver", "board_id", "hca_type", "ports/*/state", "ports/*/phys_state", "ports/*/rate",
    "ports/*/link_layer", "ports/*/counters/*", "ports/*/hw_counters/*",
)  # fmt: skip


@dataclass(frozen=True)
class ProbePaths:
    """Where the probes read; the defaults are a Linux node's own."""

    sysfs_pci_root: str = "/sys/bus/pci/devices"
    sysfs_infiniband_root: str = "/sys/class/infiniband"
    modules_file: str = "/proc/modules"
    kernel_log_command: str = ""  # empty: KERNEL_LOG_SCRIPT


@dataclass(frozen=True)
class HealthProbe:
    """One passive probe: its step name (steps.HEALTH_PASSIVE_STAGES), its command (an argument
    vector, or a shell script run through /bin/sh), parser hint, and what the node must have."""

    name: str
    command: tuple[str, ...] | str
    tool: str
    raw_ext: str = "txt"
    requires: tuple[str, ...] = ()

    @property
    def stages(self) -> tuple[str, ...]:
        return steps.HEALTH_PASSIVE_STAGES[self.name]


def _listing(root: str, files: tuple[str, ...]) -> str:
    return _SYSFS_LISTING.format(root=shlex.quote(root), files=" ".join(f"*/{f}" for f in files))


def health_probes(paths: ProbePaths = ProbePaths()) -> tuple[HealthProbe, ...]:
    """Every passive probe, in the order they run."""
    return (
        HealthProbe(
            "health-kernel-log", paths.kernel_log_command or KERNEL_LOG_SCRIPT, "kernel-log"
        ),
        HealthProbe("health-pci", _listing(paths.sysfs_pci_root, _PCI_FILES), "sysfs-pci"),
        # Only where there is an RDMA adapter.
        HealthProbe(
            "health-ib-sysfs",
            _listing(paths.sysfs_infiniband_root, _IB_FILES),
            "sysfs-infiniband",
            requires=(f"{paths.sysfs_infiniband_root}/*/ports",),
        ),
        # Kernels without loadable modules have no /proc/modules.
        HealthProbe(
            "health-modules",
            ("cat", paths.modules_file),
            "kernel-modules",
            requires=(paths.modules_file,),
        ),
        # Cumulative NVLink error counters: their growth over the benchmarks is the evidence.
        HealthProbe(
            "health-nvlink-errors",
            ("nvidia-smi", "nvlink", "-e"),
            "nvidia-smi-nvlink-errors",
            requires=("nvidia-smi",),
        ),
        # The inbox RDMA stack has no ofed_info.
        HealthProbe("health-ofed", ("ofed_info", "-s"), "ofed-info", requires=("ofed_info",)),
        # The PCI tree with each port's ACS settings (root reads the capabilities); -nn: class
        # and vendor IDs, which do not depend on the node's pci.ids.
        HealthProbe("health-lspci", ("lspci", "-D", "-nn", "-vvv"), "lspci", requires=("lspci",)),
        # Before the benchmarks this is the preflight's own nvidia-smi-query step.
        HealthProbe(
            "nvidia-smi-query",
            ("nvidia-smi", "-q", "-x"),
            "nvidia-smi-xml",
            "xml",
            requires=("nvidia-smi",),
        ),
    )


def capture_steps(stage: str, paths: ProbePaths, skip: dict[str, str] | None = None
                  ) -> list[dict[str, Any]]:  # fmt: skip
    """The probes of one stage (before | after) as gpuval_capture steps; `skip`: probe name ->
    why it is recorded as skipped instead of run."""
    found = []
    for probe in health_probes(paths):
        if stage not in probe.stages:
            continue
        step: dict[str, Any] = {
            "name": steps.after_step(probe.name) if stage == "after" else probe.name,
            "command": list(probe.command) if isinstance(probe.command, tuple) else probe.command,
            "tool": probe.tool,
            "raw_ext": probe.raw_ext,
            "requires": list(probe.requires),
        }
        if skip and probe.name in skip:
            step["skip_reason"] = skip[probe.name]
        found.append(step)
    return found
