"""Key figures: the few numbers per host that history, baselines, `gpuval compare` and the
Prometheus file follow from run to run (summary.json `figures`).

- `busbw.<key>`: the large-message busbw per collective (GB/s), as summary.json's host metrics
  (key `all_reduce`, `internode.all_reduce`, `all_reduce_bench.all_reduce`);
- `p2p.min`: the lowest off-diagonal cell of the unidirectional P2P bandwidth matrix (GB/s);
- `pair.<kind>`: the median of the node's pair tests of that kind (iperf3 Gbit/s, busbw GB/s);
- `health.<counter>`: nvidia-smi's lifetime error counters summed over the node's GPUs (ECC
  corrected and uncorrected, retired pages, rows remapped for uncorrectable errors) and PCIe
  replays since reset.

This module is the record alone (cheap to import: `gpuval history` reads it); the judge computes
the figures (gpuval.judgement.figures) and the baseline and value rules judge them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KeyFigure:
    host: str
    name: str  # e.g. "busbw.all_reduce", "pair.iperf3", "health.ecc_uncorrected"
    value: float
    unit: str
    higher_is_better: bool  # bandwidth: True; error counters: False

    @property
    def family(self) -> str:
        """The figure's family: "busbw", "p2p", "pair" or "health"."""
        return self.name.split(".", 1)[0]


def figure_entry(figure: KeyFigure) -> dict[str, Any]:
    """One item of summary.json's `figures`."""
    return {
        "host": figure.host,
        "name": figure.name,
        "value": figure.value,
        "unit": figure.unit,
        "higher_is_better": figure.higher_is_better,
    }


def figures_from_summary(summary: dict[str, Any]) -> list[KeyFigure]:
    """The key figures of a summary.json document (its `figures`)."""
    return [
        KeyFigure(
            str(item["host"]),
            str(item["name"]),
            float(item["value"]),
            str(item["unit"]),
            bool(item["higher_is_better"]),
        )
        for item in summary.get("figures", [])
    ]
