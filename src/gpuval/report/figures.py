"""Key figures (gpuval.figures) computed from a judged run: the pair tests' node medians and
nvidia-smi's error counters; the busbw and p2p figures are summary.json's host metrics
(gpuval.report.summary.key_figures). Each GPU is counted once however many nvidia-smi outputs
print it. Views only: nothing here judges."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from gpuval.checks.pairs import KINDS, row_kind
from gpuval.figures import KeyFigure
from gpuval.records.nvidia_smi import EccCounts, NvidiaSmiRun, SmiGpu, SmiHealth
from gpuval.results import RunResults


def _sum_known(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _uncorrected(counts: EccCounts) -> int | None:
    if counts.uncorrected_total is not None:
        return counts.uncorrected_total
    # Hopper splits SRAM uncorrectable into parity and SEC-DED and leaves the sum N/A.
    sram = counts.sram_uncorrectable
    if sram is None:
        sram = _sum_known([counts.sram_uncorrectable_parity, counts.sram_uncorrectable_secded])
    return _sum_known([sram, counts.dram_uncorrectable])


def _corrected(counts: EccCounts) -> int | None:
    if counts.corrected_total is not None:
        return counts.corrected_total
    return _sum_known([counts.sram_correctable, counts.dram_correctable])


def health_counters(health: SmiHealth) -> dict[str, int | None]:
    return {
        "ecc_uncorrected": _uncorrected(health.ecc_aggregate),
        "ecc_corrected": _corrected(health.ecc_aggregate),
        "retired_pages": _sum_known(
            [health.retired_pages.single_bit, health.retired_pages.double_bit]
        ),
        "remapped_rows": health.remapped_rows.uncorrectable,
        "pcie_replays": health.pcie_replays,
    }


def _gpu_key(gpu: SmiGpu, position: int) -> str:
    return gpu.uuid or gpu.pci_bus_id or str(gpu.index if gpu.index is not None else position)


def health_figures(results: RunResults) -> list[KeyFigure]:
    # host -> counter -> GPU -> highest count printed (the same GPU in -q -x and the csv once)
    seen: dict[str, dict[str, dict[str, int]]] = {}
    for raw in results.files:
        if raw.parse is None:
            continue
        for run in raw.parse.runs:
            if not isinstance(run, NvidiaSmiRun):
                continue
            for position, gpu in enumerate(run.gpus):
                if gpu.health is None:
                    continue
                for counter, value in health_counters(gpu.health).items():
                    if value is None:
                        continue
                    per_gpu = seen.setdefault(raw.host, {}).setdefault(counter, {})
                    key = _gpu_key(gpu, position)
                    per_gpu[key] = max(value, per_gpu.get(key, value))
    return [
        KeyFigure(host, f"health.{counter}", float(sum(per_gpu.values())), "count", False)
        for host, counters in seen.items()
        for counter, per_gpu in sorted(counters.items())
    ]


def pair_figures(results: RunResults) -> list[KeyFigure]:
    """Each node's median pair value per kind (a pair counted once: iperf3's weaker direction),
    from the pairs table, so a two-host cluster has its figure too."""
    values: dict[tuple[str, str], dict[tuple[str, str], float]] = {}
    units: dict[str, str] = {}
    for row in results.pairs.get("pairs", []):
        value = row.get("pair_value")
        if str(row.get("kind")) not in KINDS or not isinstance(value, (int, float)):
            continue
        kind = row_kind(row)  # rdma: one figure per rail and memory
        units[kind.check_name] = kind.unit
        for node in (str(row["a"]), str(row["b"])):
            pairs = values.setdefault((node, kind.check_name), {})
            pairs[(str(row["a"]), str(row["b"]))] = float(value)
    return [
        KeyFigure(node, f"pair.{name}", statistics.median(pairs.values()), units[name], True)
        for (node, name), pairs in sorted(values.items())
    ]
