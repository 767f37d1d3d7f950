"""Installed software versions, from the preflight probes (nvcc, mpirun, the NCCL probe, OS)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SoftwareVersionRun:
    """One component's version as the node reported it."""

    component: str  # cuda-toolkit | mpi | nccl | os
    version: str | None  # as printed, e.g. "13.0.88", "4.1.4", "2.32.3", "12"
    implementation: str | None = None  # "Open MPI", "MPICH", "Intel MPI", "Debian GNU/Linux"
    details: dict[str, str] = field(default_factory=dict)  # other facts printed beside it
