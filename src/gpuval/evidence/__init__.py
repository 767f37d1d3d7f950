"""Evidence: the run folder's typed records, organised per host and across the cluster (the pair
tests), built once; the checks judge nothing else."""

from gpuval.evidence.build import build_evidence, nccl_version_number, pair_evidence, runs_of
from gpuval.evidence.model import (
    Declared,
    ExpectedPairStep,
    HostEvidence,
    HostFacts,
    PairTry,
    Parsed,
    RunEvidence,
    Topology,
)

__all__ = [
    "Declared",
    "ExpectedPairStep",
    "HostEvidence",
    "HostFacts",
    "PairTry",
    "Parsed",
    "RunEvidence",
    "Topology",
    "build_evidence",
    "nccl_version_number",
    "pair_evidence",
    "runs_of",
]
