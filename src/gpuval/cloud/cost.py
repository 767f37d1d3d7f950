"""The cost guard: what a run will cost, shown and checked against its limits before launching.

Lambda prices On-Demand instances by the hour and bills them "in one-minute increments", from
launch until the instance is terminated, "regardless if they're actively being used"
(https://docs.lambda.ai/public-cloud/billing). The plan takes the hourly price from the API's
instance types (`price_cents_per_hour`), never from a table of our own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gpuval.cloud.lambda_api import Offer

SECONDS_PER_BILLED_MINUTE = 60
# The time-to-live allows a quarter more than `gpuval plan` predicts: its step defaults come from
# one H100 run and simulated hosts, and a slow step must not have its nodes terminated under it.
PREDICTION_MARGIN = 1.25


class PlanRefused(ValueError):
    """A plan that must not be launched: over a limit, an unknown type, no capacity."""


@dataclass(frozen=True)
class CostPlan:
    instance_type: str
    gpu_description: str
    gpus_per_instance: int
    region: str
    count: int
    price_cents_per_hour: int
    hours: float

    @property
    def hourly_usd(self) -> float:
        return self.count * self.price_cents_per_hour / 100

    @property
    def total_usd(self) -> float:
        return round(self.hourly_usd * self.hours, 2)

    def lines(self) -> list[str]:
        each = self.price_cents_per_hour / 100
        return [
            f"launch {self.count} x {self.instance_type} ({self.gpus_per_instance}x "
            f"{self.gpu_description or 'GPU'}) in {self.region}",
            f"price ${each:.2f}/h each, ${self.hourly_usd:.2f}/h in all (Lambda Cloud API)",
            f"expected duration {self.hours:g} h: expected cost ${self.total_usd:.2f}",
        ]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hourly_usd": self.hourly_usd, "total_usd": self.total_usd}


def plan_run(
    offers: Mapping[str, Offer], *, instance_type: str, region: str, count: int, hours: float
) -> CostPlan:
    """The plan for `count` instances of a type in a region, refused when the type is unknown or
    the region has no capacity for it now."""
    if count < 1:
        raise PlanRefused(f"instance count must be at least 1, not {count}")
    if hours <= 0:
        raise PlanRefused(f"expected duration must be more than 0 hours, not {hours}")
    offer = offers.get(instance_type)
    if offer is None:
        known = ", ".join(sorted(offers)) or "none"
        raise PlanRefused(f"Lambda offers no instance type {instance_type!r} (offered: {known})")
    if region not in offer.regions_with_capacity:
        elsewhere = ", ".join(offer.regions_with_capacity) or "no region at the moment"
        raise PlanRefused(
            f"no capacity for {instance_type} in {region} (capacity now: {elsewhere}); "
            "nothing was launched"
        )
    kind = offer.instance_type
    return CostPlan(
        instance_type=instance_type,
        gpu_description=kind.gpu_description,
        gpus_per_instance=kind.gpus,
        region=region,
        count=count,
        price_cents_per_hour=kind.price_cents_per_hour,
        hours=hours,
    )


def time_to_live_hours(predicted_s: float, active_timeout_s: float, ssh_timeout_s: float) -> float:
    """Hours the instances may live when the user gave none: the predicted run with its margin,
    plus the launch's own waits (active, then ssh), rounded up to a tenth of an hour."""
    if not math.isfinite(predicted_s) or predicted_s <= 0:
        raise PlanRefused(
            f"the predicted duration must be more than 0 seconds, not {predicted_s}: set "
            "lambda_cloud_hours, or check what gpuval plan predicts for these nodes"
        )
    seconds = predicted_s * PREDICTION_MARGIN + active_timeout_s + ssh_timeout_s
    return math.ceil(seconds / 360) / 10


def check_limits(plan: CostPlan, *, max_usd: float, max_instances: int) -> None:
    """Refuse a plan above the run's spending limit or instance limit."""
    if plan.count > max_instances:
        raise PlanRefused(
            f"{plan.count} instances exceed the limit of {max_instances} per run "
            "(lambda_cloud_max_instances); nothing was launched"
        )
    if plan.total_usd > max_usd:
        raise PlanRefused(
            f"expected cost ${plan.total_usd:.2f} exceeds the limit of ${max_usd:.2f} per run "
            "(lambda_cloud_max_spend_usd); launch fewer or cheaper instances, set a shorter "
            "lambda_cloud_hours (or turn off what gpuval plan says costs most), or raise the "
            "limit; nothing was launched"
        )


def billed_usd(price_cents_per_hour: int, seconds: float) -> float:
    """What one instance costs for `seconds` of life, billed by the started minute: at least one
    for an instance that was launched at all (times are recorded to the second)."""
    minutes = max(1, math.ceil(seconds / SECONDS_PER_BILLED_MINUTE))
    return round(price_cents_per_hour * minutes / 60 / 100, 2)
