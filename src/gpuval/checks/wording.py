"""How checks say things: sizes, percentages, peaks, and status bands."""

from __future__ import annotations

from gpuval.catalog import Peak
from gpuval.checks.model import Status

MAX_LISTED = 3  # examples named in one reason line


def size_text(size: float) -> str:
    """1073741824 -> '1 GiB'; sizes that are not whole binary units stay in bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


def percent(fraction: float) -> str:
    return f"{fraction * 100:.0f} %"


def percent_of(value: float, reference: float) -> str:
    """`value` as a percentage of `reference`; "n/a %" without a reference."""
    return percent(value / reference) if reference else "n/a %"


def number_text(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def peak_sentence(value: float, peak: Peak) -> str:
    """'355.9 GB/s = 79 % of the 450 GB/s per-direction NVLink 4 peak (40 % of the 900 GB/s
    duplex figure, which counts both directions)'."""
    return (
        f"{value:.1f} GB/s = {percent(value / peak.per_direction_gbps)} of the "
        f"{peak.per_direction_gbps:g} GB/s per-direction {peak.link} peak "
        f"({percent(value / peak.duplex_gbps)} of the {peak.duplex_gbps:g} GB/s duplex figure, "
        "which counts both directions)"
    )


def band_status(fraction: float, pass_fraction: float, fail_fraction: float) -> Status:
    if fraction >= pass_fraction:
        return "pass"
    return "warn" if fraction >= fail_fraction else "fail"


def listed(items: list[str], limit: int = MAX_LISTED) -> str:
    """'a; b; c (and 4 more)'."""
    more = f" (and {len(items) - limit} more)" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more
