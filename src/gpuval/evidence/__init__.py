"""Evidence: the run folder's typed records, organised per host and built once; the checks
judge nothing else."""

from gpuval.evidence.build import build_evidence, nccl_version_number, runs_of
from gpuval.evidence.model import (
    Declared,
    HostEvidence,
    HostFacts,
    Parsed,
    RunEvidence,
    Topology,
)

__all__ = [
    "Declared",
    "HostEvidence",
    "HostFacts",
    "Parsed",
    "RunEvidence",
    "Topology",
    "build_evidence",
    "nccl_version_number",
    "runs_of",
]
