"""Evidence: the run folder's typed records, organised per host and across the cluster (the pair
tests, the MPI preflight, the all-nodes benchmark), built once; the checks and the judgement read
each raw file only as its ParsedFile, and judge nothing else."""

from gpuval.evidence.build import (
    all_nodes_runs,
    build_evidence,
    mpi_preflight_tries,
    nccl_version_number,
    pair_evidence,
    parsed_files,
    runs_of,
)
from gpuval.evidence.model import (
    Declared,
    ExpectedPairStep,
    HostEvidence,
    HostFacts,
    MpiPreflightTries,
    PairTry,
    Parsed,
    ParsedFile,
    RunEvidence,
    Topology,
)
from gpuval.runfolder import RUN_JSON  # the contract's file, named in the checks' sources

__all__ = [
    "RUN_JSON",
    "Declared",
    "ExpectedPairStep",
    "HostEvidence",
    "HostFacts",
    "MpiPreflightTries",
    "PairTry",
    "Parsed",
    "ParsedFile",
    "RunEvidence",
    "Topology",
    "all_nodes_runs",
    "build_evidence",
    "mpi_preflight_tries",
    "nccl_version_number",
    "pair_evidence",
    "parsed_files",
    "runs_of",
]
