"""Verdict thresholds: defaults with their reasoning, and a JSON override file.

Fractions are of the theoretical per-direction (unidirectional) peak from the hardware catalog.
Reasoning (numbers from shared/notes/references.md):
- Practice reaches 80-90 % of the per-direction spec at best. Public healthy references sit at
  78-83 %: 4x H100 all_reduce 355.9/450 = 79 %, 8x A100 ~235/300 = 78 %, 8x H100 p2p 376/450 =
  83 %. Run-to-run spread is 5-10 %. A healthy 79 % reading that lands 10 % low is ~71 %, so
  "pass" starts at 0.70.
- Below 0.50 something is physically wrong (a lost NVLink bundle, a x8 PCIe link, traffic on the
  wrong path); note that 0.40 of a *duplex* figure is 0.80 per direction, so the per-direction
  peak is the only honest reference. Between the two bands: warn.
- Large messages: busbw saturates from ~256 MiB-512 MiB (seed 002: A100 sweep); smaller rows
  measure latency, not bandwidth.
- p2p cells: a pair below 0.85 of the median of its siblings stands out from the 5-10 % noise
  of p2pBandwidthLatencyTest; below 0.50 of it the pair is broken.
- Hosts: SuperBench flags 5 % below baseline; with 5-10 % spread, 10 % below the median of
  comparable hosts (at least 3) is an outlier worth a warning.
- NVLS / CollNet: busbw up to ~1.1x the link spec is reported for 8x H100 NVLS (460-480 of 450);
  readings up to 1.25x with NVLS seen pass with a caveat, anything above the peak without it warns
  (the reference is then probably wrong: check the GPU model).
- Pair tests (iperf3, all-reduce or nccl-tests between two nodes) are judged against what the
  healthy pairs of the cluster reach: a pair below 0.80 of it is low. SuperBench calls 5 % off
  baseline defective, but pairs of hosts behind shared switches spread more than a single
  host's runs do, and a throttled or mis-negotiated link lands far lower (a 1 Gbit/s link among
  15 Gbit/s ones is 7 %). A failed or low pair is run again to confirm, up to 3 tries in all: one
  retry separates a transient hiccup from a fault, a third breaks a tie between them.
- Pairs are also judged against the network itself. iperf3 against the TCP interface's line
  rate: below 0.50 warns, below 0.25 fails. TCP over a healthy 10-25 Gb/s link reaches 90 %+, but
  one stream is bound by one CPU core, so on faster links the tool rather than the link can
  fall short (pass -P in bench_pairs_iperf3_args there); a link that negotiated 1 Gb/s on a 10
  Gb/s port, or a throttled path, lands at 10 %. Busbw pairs use the busbw bands against the
  across-node bound. ib_write_bw rails against the port rate: below 0.90 warns, below 0.75
  fails. RDMA bypasses the CPU, so a healthy rail runs near the rate (Azure gates GPUDirect
  ib_write_bw at 380 of 400 Gb/s, 95 %); a rail that trained at half width or speed lands at
  50 %, a bent cable's retransmissions in between.
- Node health. Xids are judged within xid_window_hours (24) before the kernel log was read, in
  the current boot only (the probe reads since boot): Azure's health checks kept nodes drained
  over Xids that a reset had long since cleared; a hardware Xid older than the window warns,
  within it fails. xid_benign_codes: Xids a site knows to be harmless there (none by default).
  The GEMM burn against the dense tensor peak of the catalog: the best matmul shapes reach
  80-87 % of it (ml-engineering's MAMF table: H100 SXM 794.5 of 989, A100 SXM 271.2 of 312); a
  fixed square shape and a minute of heat cost some more, so a healthy GPU lands above 55 %;
  below 35 %, less than half of healthy, the clocks are held down (power cap, thermal or HW
  slowdown, a GPU stuck in a low P-state). Identical GPUs of one node run within a few percent
  of each other: 10 % below the node's median warns, 25 % below fails. A GPU within
  temperature_margin_warn_c (5 °C) of its slowdown temperature warns.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuval.schemas.validation import fragment_validator

MIB = 1024 * 1024


class ThresholdsError(ValueError):
    """An override file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Thresholds:
    busbw_pass_fraction: float = 0.70
    busbw_fail_fraction: float = 0.50
    large_message_min_bytes: int = 256 * MIB
    p2p_pass_fraction: float = 0.70
    p2p_fail_fraction: float = 0.50
    p2p_sibling_warn_fraction: float = 0.85
    p2p_sibling_fail_fraction: float = 0.50
    host_outlier_fraction: float = 0.90
    host_outlier_min_hosts: int = 3
    nvls_max_over_peak: float = 1.25
    pair_low_fraction: float = 0.80
    pair_line_rate_warn_fraction: float = 0.50
    pair_line_rate_fail_fraction: float = 0.25
    # ib_write_bw on a healthy rail runs close to the port rate: Azure's HPC health checks gate
    # GPUDirect ib_write_bw at 380 Gb/s on 400 Gb/s NDR (95 %); 90 % leaves room for spread.
    # https://github.com/Azure/azurehpc-health-checks/blob/main/conf/nd96isr_h100_v5.conf
    pair_rdma_line_rate_warn_fraction: float = 0.90
    pair_rdma_line_rate_fail_fraction: float = 0.75
    xid_window_hours: float = 24.0
    xid_benign_codes: tuple[int, ...] = ()
    burn_pass_fraction: float = 0.55
    burn_fail_fraction: float = 0.35
    burn_sibling_warn_fraction: float = 0.90
    burn_sibling_fail_fraction: float = 0.75
    temperature_margin_warn_c: float = 5.0


DEFAULTS = Thresholds()


# Each pair is one band, (lower, upper): a reading below `lower` fails, below `upper` warns. Equal
# bounds are a band without a warning zone; a lower bound above the upper one makes no sense.
ORDERED_BANDS: tuple[tuple[str, str], ...] = (
    ("busbw_fail_fraction", "busbw_pass_fraction"),
    ("p2p_fail_fraction", "p2p_pass_fraction"),
    ("p2p_sibling_fail_fraction", "p2p_sibling_warn_fraction"),
    ("pair_line_rate_fail_fraction", "pair_line_rate_warn_fraction"),
    ("pair_rdma_line_rate_fail_fraction", "pair_rdma_line_rate_warn_fraction"),
    ("burn_fail_fraction", "burn_pass_fraction"),
    ("burn_sibling_fail_fraction", "burn_sibling_warn_fraction"),
)
# The types and ranges of every threshold (fractions from 0 to 1, counts, hours) are written once,
# in the profile schema; a --thresholds file is held to the same section.
SCHEMA_SECTION = "profile.schema.json#/properties/thresholds"


def threshold_problems(written: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, what is wrong) for what the schema cannot say about threshold values already of the
    right types and ranges: every number finite (NaN passes every range check: a comparison with
    it is always false), and each band of ORDERED_BANDS ordered, the defaults filling in the
    bound not written."""
    problems = [
        (key, f"{value!r} is not allowed: a threshold is a finite number")
        for key, value in written.items()
        if isinstance(value, float) and not math.isfinite(value)
    ]
    if problems:
        return problems
    merged = {**dataclasses.asdict(DEFAULTS), **written}
    for lower, upper in ORDERED_BANDS:
        if merged[lower] > merged[upper]:
            values = f"{merged[lower]:g} > {merged[upper]:g}"
            why = f"below {lower} a reading fails, below {upper} it warns"
            if lower in written:
                problems.append((lower, f"must not exceed {upper} ({values}): {why}"))
            else:
                problems.append((upper, f"must not be below {lower} ({values}): {why}"))
    return problems


# The tries of a pair measurement are what the run was given, recorded in its run.json, not a
# judge's threshold: a file written for an earlier gpuval may still name them.
_TRIES_ARE_NO_THRESHOLD = (
    "; pair_max_tries is no threshold: set the tries in the profile (repeats.pair_max_tries) or "
    "as bench_pairs_max_tries; run.json records them and the judge reads them there"
)


def load_thresholds(path: Path | None) -> Thresholds:
    """The defaults, overridden by the keys of a JSON object file, held to the profile schema's
    thresholds and to `threshold_problems` (unknown keys are errors, so a typo cannot silently
    keep a default)."""
    if path is None:
        return DEFAULTS
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ThresholdsError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ThresholdsError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ThresholdsError(
            f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from exc
    if not isinstance(document, dict):
        raise ThresholdsError(f"{path}: must hold a JSON object of threshold names to numbers")
    fields = {f.name: f.type for f in dataclasses.fields(Thresholds)}
    unknown = sorted(set(document) - set(fields))
    if unknown:
        raise ThresholdsError(
            f"{path}: unknown threshold(s) {', '.join(unknown)}; known: {', '.join(fields)}"
            + (_TRIES_ARE_NO_THRESHOLD if "pair_max_tries" in unknown else "")
        )
    wrong = [
        (str(p.absolute_path[0]), f"{p.instance!r} is not allowed: {p.message}"
         + (f"; expects {p.schema['description']}" if "description" in p.schema else ""))
        for p in fragment_validator(SCHEMA_SECTION).iter_errors(document)
    ] or threshold_problems(document)  # fmt: skip
    if wrong:
        raise ThresholdsError("\n".join(f"{path}: key {key}: {what}" for key, what in wrong))
    values: dict[str, Any] = {
        key: tuple(value) if isinstance(value, list) else int(value) if fields[key] == "int"
        else float(value)
        for key, value in document.items()
    }  # fmt: skip
    return dataclasses.replace(DEFAULTS, **values)
