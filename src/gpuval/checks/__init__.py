"""The judge: a run's evidence in, checks (status, measured, reference, reason, source) out.

One module per subject, each a set of functions of the evidence, the catalog and the
thresholds: folder (the run folder and its steps), nccl (collectives), p2p (GPU pairs inside a
node), topology (the board), network (ports), hardware (declared vs detected), consistency
(across hosts), pairs (find the bad node), cluster (MPI preflight, all-nodes bench), health
(Xid, memory, clocks, PCIe/NVLink/RDMA errors, GPU burn, DCGM) and racks (NVL72 NVLink domains).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuval.checks.cluster import cluster_checks
from gpuval.checks.consistency import outlier_checks, version_checks
from gpuval.checks.context import JudgeState
from gpuval.checks.folder import (
    evidence_check,
    expected_step_checks,
    folder_checks,
    parse_checks,
    step_checks,
)
from gpuval.checks.hardware import hardware_checks
from gpuval.checks.health import health_checks
from gpuval.checks.model import Check, Expectation
from gpuval.checks.nccl import collective_checks
from gpuval.checks.network import network_checks
from gpuval.checks.p2p import gpu_pair_checks
from gpuval.checks.pairs import PairAnalysis, PairThresholds, analyse_pairs
from gpuval.checks.rack_search import rack_search_checks
from gpuval.checks.racks import Rack, rack_checks
from gpuval.checks.thresholds import Thresholds
from gpuval.checks.topology import topology_checks
from gpuval.evidence import RunEvidence


@dataclass
class CheckOutcome:
    checks: list[Check]
    expectations: list[Expectation]
    pairs: PairAnalysis
    racks: list[Rack]


def judge_run(evidence: RunEvidence, thresholds: Thresholds) -> CheckOutcome:
    """All checks of a run, in a deterministic order, and the peaks they used."""
    judge = JudgeState(evidence, thresholds)
    folder_checks(judge)
    step_checks(judge)
    expected_step_checks(judge)
    parse_checks(judge)
    hardware_checks(judge)
    topology_checks(judge)
    network_checks(judge)
    collective_checks(judge)
    rack_search_checks(judge)
    gpu_pair_checks(judge)
    health_checks(judge)
    racks = rack_checks(judge)
    pairs = analyse_pairs(evidence, PairThresholds.from_thresholds(thresholds))
    judge.checks += pairs.checks
    cluster_checks(judge)
    version_checks(judge)
    outlier_checks(judge)
    evidence_check(judge)
    return CheckOutcome(judge.checks, list(judge.expectations.values()), pairs, racks)
