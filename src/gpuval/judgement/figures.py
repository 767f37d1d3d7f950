"""Key figures (gpuval.records.key_figures), the host metrics and their outliers, made by the
judge: the baseline and value rules judge the figures, and every output shows these same numbers.

- host metrics: per host, the large-message busbw of each collective (the floor of the plateau
  the busbw check judges) and the lowest unidirectional P2P cell; several runs: the lowest;
- key figures: the host metrics, the pair tests' node medians and nvidia-smi's error counters
  (each GPU counted once however many nvidia-smi outputs print it);
- outliers: hosts well below the others on a metric (gpuval.checks.consistency's rule)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from gpuval.checks.consistency import below_median
from gpuval.checks.pairs import KINDS, row_kind
from gpuval.checks.thresholds import Thresholds
from gpuval.evidence import ParsedFile
from gpuval.judgement.model import (
    BUSBW_PREFIX,
    P2P_METRIC,
    BusbwSeries,
    HostMetrics,
    Outlier,
    P2PMatrices,
    busbw_metric,
)
from gpuval.records.key_figures import KeyFigure
from gpuval.records.nvidia_smi import EccCounts, NvidiaSmiRun, SmiGpu, SmiHealth


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


def health_figures(files: list[ParsedFile]) -> list[KeyFigure]:
    # host -> counter -> GPU -> highest count printed (the same GPU in -q -x and the csv once)
    seen: dict[str, dict[str, dict[str, int]]] = {}
    for file in files:
        for run in file.runs:
            if not isinstance(run, NvidiaSmiRun):
                continue
            for position, gpu in enumerate(run.gpus):
                if gpu.health is None:
                    continue
                for counter, value in health_counters(gpu.health).items():
                    if value is None:
                        continue
                    per_gpu = seen.setdefault(file.host, {}).setdefault(counter, {})
                    key = _gpu_key(gpu, position)
                    per_gpu[key] = max(value, per_gpu.get(key, value))
    return [
        KeyFigure(host, f"health.{counter}", float(sum(per_gpu.values())), "count", False)
        for host, counters in seen.items()
        for counter, per_gpu in sorted(counters.items())
    ]


def pair_figures(pair_rows: list[dict[str, Any]]) -> list[KeyFigure]:
    """Each node's median pair value per kind (a pair counted once: iperf3's weaker direction),
    from the pairs table, so a two-host cluster has its figure too."""
    values: dict[tuple[str, str], dict[tuple[str, str], float]] = {}
    units: dict[str, str] = {}
    for row in pair_rows:
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


def host_metrics(busbw: list[BusbwSeries], p2p: list[P2PMatrices]) -> HostMetrics:
    """Each host's large-message busbw per series key and lowest P2P cell; several runs of one
    metric on a host: the lowest counts."""
    names: list[str] = []
    values: dict[str, dict[str, float]] = {}

    def add(host: str, metric: str, value: float | None) -> None:
        if metric not in names:
            names.append(metric)
        if value is not None:
            found = values.setdefault(host, {})
            found[metric] = min(value, found.get(metric, value))

    for series in busbw:
        add(series.host, busbw_metric(series.key), series.large_message_gbps)
    for run in p2p:
        add(run.host, P2P_METRIC, run.min_unidirectional)
    return HostMetrics(names, values)


def metric_figure_name(metric: str) -> str:
    """A host metric's name as a key figure: "busbw.all_reduce", "busbw.internode.all_reduce",
    "p2p.min"."""
    if metric == P2P_METRIC:
        return "p2p.min"
    return "busbw." + metric.removeprefix(BUSBW_PREFIX).replace(" ", ".")


def unordered_figures(
    metrics: HostMetrics, hosts: list[str], files: list[ParsedFile], pair_rows: list[dict[str, Any]]
) -> list[KeyFigure]:
    """The host metrics of `hosts` as key figures, then the pair and health figures."""
    found = [
        KeyFigure(host, metric_figure_name(metric), value, "GB/s", True)
        for host in hosts
        for metric, value in metrics.of(host).items()
        if value is not None
    ]
    return found + pair_figures(pair_rows) + health_figures(files)


def in_host_order(figures: list[KeyFigure], hosts: list[str]) -> list[KeyFigure]:
    """Host by host in `hosts` order (others after them, by name), each host's by name."""
    order = {name: i for i, name in enumerate(hosts)}
    return sorted(figures, key=lambda f: (order.get(f.host, len(order)), f.host, f.name))


def outliers(metrics: HostMetrics, hosts: list[str], thresholds: Thresholds) -> list[Outlier]:
    """Hosts below host_outlier_fraction of the median of the hosts that have the metric."""
    found = []
    for metric in metrics.names:
        present = [
            (h, v) for h in hosts if (v := metrics.values.get(h, {}).get(metric)) is not None
        ]
        judged = below_median([v for _, v in present], len(present), thresholds)
        if judged is not None:
            median, low = judged
            found += [Outlier(present[i][0], metric, present[i][1], median) for i in low]
    return found
