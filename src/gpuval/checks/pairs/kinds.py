"""The pair kinds (what each measures, in which unit) and the suite's pair thresholds."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from gpuval.checks.thresholds import DEFAULTS, Thresholds
from gpuval.plan.steps import RdmaLane

Outcome = Literal["ok", "failed", "wrong", "skipped"]  # wrong: the results were wrong


@dataclass(frozen=True)
class PairKind:
    name: str
    tools: frozenset[str]
    unit: str
    directed: bool  # iperf3: each direction is its own measurement
    label: str
    lane: RdmaLane | None = None  # rdma: the rail and memory judged

    @property
    def check_name(self) -> str:
        return f"{self.name}.{self.lane.label}" if self.lane else self.name

    def on(self, lane: RdmaLane | None) -> PairKind:
        """This kind on one rdma lane (labelled with it); itself for the other kinds."""
        if lane is None:
            return self
        label = f"{self.label} rail {lane.rail} ({lane.memory} memory)"
        return replace(self, label=label, lane=lane)


KINDS = {
    "iperf3": PairKind("iperf3", frozenset({"iperf3"}), "Gbit/s", True, "iperf3 TCP"),
    "allreduce": PairKind(
        "allreduce", frozenset({"gpuval-allreduce-bench"}), "GB/s", False, "all-reduce busbw"
    ),
    "nccl": PairKind(
        "nccl", frozenset({"nccl-tests", "rccl-tests"}), "GB/s", False, "nccl-tests busbw"
    ),
    "rdma": PairKind("rdma", frozenset({"ib_write_bw"}), "Gb/s", False, "ib_write_bw"),
}


@dataclass(frozen=True)
class PairThresholds:
    """The suite's pair thresholds (reasoning in gpuval.checks.thresholds)."""

    low_fraction: float = DEFAULTS.pair_low_fraction  # below it of the reference: low
    line_rate_warn_fraction: float = DEFAULTS.pair_line_rate_warn_fraction
    line_rate_fail_fraction: float = DEFAULTS.pair_line_rate_fail_fraction
    busbw_pass_fraction: float = DEFAULTS.busbw_pass_fraction
    busbw_fail_fraction: float = DEFAULTS.busbw_fail_fraction
    rdma_line_rate_warn_fraction: float = DEFAULTS.pair_rdma_line_rate_warn_fraction
    rdma_line_rate_fail_fraction: float = DEFAULTS.pair_rdma_line_rate_fail_fraction

    @property
    def floor_fraction(self) -> float:
        """Below it of what healthy pairs reach, one try fails without a repeat: under half of
        healthy is no noise but something physically wrong (a port negotiated down, a throttled
        path), the reasoning of the busbw fail band in gpuval.checks.thresholds. Between it and
        low_fraction a single try is low but unconfirmed."""
        return self.busbw_fail_fraction

    @classmethod
    def from_thresholds(cls, thresholds: Thresholds) -> PairThresholds:
        return cls(
            thresholds.pair_low_fraction,
            thresholds.pair_line_rate_warn_fraction, thresholds.pair_line_rate_fail_fraction,
            thresholds.busbw_pass_fraction, thresholds.busbw_fail_fraction,
            thresholds.pair_rdma_line_rate_warn_fraction,
            thresholds.pair_rdma_line_rate_fail_fraction,
        )  # fmt: skip
