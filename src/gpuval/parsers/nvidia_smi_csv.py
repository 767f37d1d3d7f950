"""`nvidia-smi --query-gpu=... --format=csv` (and the `--query-remapped-rows` /
`--query-retired-pages` csv): columns named by the header row, or by the command when the
header was left out (`noheader`)."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from typing import Any

from gpuval.parsers.nvidia_smi_fields import assign, reason_name
from gpuval.parsers.nvidia_smi_fields import integer as _integer
from gpuval.parsers.nvidia_smi_fields import number as _number
from gpuval.parsers.nvidia_smi_fields import value as _value
from gpuval.parsers.text import iter_lines
from gpuval.records.base import ParseResult
from gpuval.records.nvidia_smi import NvidiaSmiRun, PcieLink, RetiredPage, SmiGpu, SmiHealth

_COLUMN_NAME = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*(?: \[[^\]]*\])?$")
_QUERY = re.compile(r"--query-(?:gpu|remapped-rows|retired-pages)[= ]([A-Za-z0-9_.,]+)")
_CSV_GPU_FIELDS: dict[str, str] = {
    "index": "index",
    "name": "name",
    "gpu_name": "name",
    "pci.bus_id": "pci_bus_id",
    "gpu_bus_id": "pci_bus_id",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "persistence_mode": "persistence_mode",
    "ecc.mode.current": "ecc_mode",
    "mig.mode.current": "mig_mode",
    "compute_mode": "compute_mode",
    "pstate": "performance_state",
    "fan.speed": "fan_percent",
    "temperature.gpu": "temperature_c",
    "power.draw": "power_draw_w",
    "power.draw.instant": "power_draw_w",
    "power.limit": "power_limit_w",
    "memory.used": "memory_used_mib",
    "memory.total": "memory_total_mib",
    "utilization.gpu": "utilization_gpu_percent",
}
_CSV_PCIE_FIELDS: dict[str, str] = {
    "pcie.link.gen.current": "gen_current",
    "pcie.link.gen.gpucurrent": "gen_current",
    "pcie.link.gen.max": "gen_max",
    "pcie.link.gen.gpumax": "gen_device_max",
    "pcie.link.gen.hostmax": "gen_host_max",
    "pcie.link.width.current": "width_current",
    "pcie.link.width.max": "width_max",
}
_NUMERIC_GPU_FIELDS = {
    "fan_percent",
    "temperature_c",
    "power_draw_w",
    "power_limit_w",
    "memory_used_mib",
    "memory_total_mib",
    "utilization_gpu_percent",
}


def _split_csv(text: str) -> list[str]:
    return next(csv.reader([text], skipinitialspace=True), [])


def csv_header_line(lines: list[str]) -> int | None:
    """Index of the header row among `lines`: every cell a query name, one of them known."""
    for position, text in enumerate(lines):
        cells = [c.strip() for c in _split_csv(text)]
        if len(cells) < 1 or not all(_COLUMN_NAME.match(c) for c in cells):
            continue
        names = {c.split(" [")[0] for c in cells}
        if names & (set(_CSV_GPU_FIELDS) | set(_CSV_PCIE_FIELDS) | {"driver_version"}):
            return position
    return None


def read_csv(text: str, result: ParseResult) -> NvidiaSmiRun | None:
    lines = list(iter_lines(text))
    header_at = csv_header_line([line.text for line in lines])
    if header_at is not None:
        columns = [c.strip().split(" [")[0] for c in _split_csv(lines[header_at].text)]
        data = lines[header_at + 1 :]
    else:
        query = next((_QUERY.search(line.text) for line in lines if _QUERY.search(line.text)), None)
        if query is None:
            result.error("csv without a header row, and no --query-...= command to name columns")
            return None
        columns = [c for c in query.group(1).split(",") if c]
        data = [line for line in lines if "--query-" not in line.text]
    run = NvidiaSmiRun(format="csv", csv_columns=columns)
    by_page = "retired_pages.address" in columns  # one row per retired page, not per GPU
    for line in data:
        if not line.text.strip():
            continue
        values = _split_csv(line.text)
        if len(values) != len(columns):
            result.warn(
                f"csv row has {len(values)} values for {len(columns)} columns; skipped", line.number
            )
            continue
        gpu = _csv_gpu(run, dict(zip(columns, values, strict=True)))
        same = next((g for g in run.gpus if by_page and _same_gpu(g, gpu)), None)
        if same is not None and same.health is not None and gpu.health is not None:
            same.health.retired_pages.pages.extend(gpu.health.retired_pages.pages)
        else:
            run.gpus.append(gpu)
    if not run.gpus:
        result.warn("csv lists no GPU")
    return run


def _same_gpu(one: SmiGpu, other: SmiGpu) -> bool:
    return (one.pci_bus_id, one.uuid, one.index) == (other.pci_bus_id, other.uuid, other.index)


# csv column -> SmiHealth attribute (dotted) and how to read it.
_CSV_HEALTH: dict[str, tuple[str, Callable[[str | None], Any]]] = {
    "ecc.mode.pending": ("ecc_mode_pending", _value),
    "mig.mode.pending": ("mig_mode_pending", _value),
    "vbios_version": ("vbios_version", _value),
    "serial": ("serial", _value),
    "gpu_serial": ("serial", _value),
    "temperature.gpu": ("temperature.gpu_c", _number),
    "temperature.memory": ("temperature.memory_c", _number),
    "temperature.gpu.tlimit": ("temperature.tlimit_c", _number),
    "power.draw": ("power.draw_w", _number),
    "power.draw.average": ("power.average_draw_w", _number),
    "power.draw.instant": ("power.instant_draw_w", _number),
    "power.limit": ("power.limit_w", _number),
    "power.default_limit": ("power.default_limit_w", _number),
    "enforced.power.limit": ("power.enforced_limit_w", _number),
    "power.min_limit": ("power.min_limit_w", _number),
    "power.max_limit": ("power.max_limit_w", _number),
    "power.management": ("power.management", _value),
    "retired_pages.single_bit_ecc.count": ("retired_pages.single_bit", _integer),
    "retired_pages.sbe": ("retired_pages.single_bit", _integer),
    "retired_pages.double_bit.count": ("retired_pages.double_bit", _integer),
    "retired_pages.dbe": ("retired_pages.double_bit", _integer),
    "retired_pages.pending": ("retired_pages.pending", _value),
    "remapped_rows.correctable": ("remapped_rows.correctable", _integer),
    "remapped_rows.uncorrectable": ("remapped_rows.uncorrectable", _integer),
    "remapped_rows.pending": ("remapped_rows.pending", _value),
    "remapped_rows.failure": ("remapped_rows.failure", _value),
}
_CSV_REASONS = ("clocks_event_reasons.", "clocks_throttle_reasons.")
_CSV_REASON_MASKS = {"active", "supported"}  # bitmasks, kept in `fields` only


def _csv_health(health: SmiHealth, name: str, printed: str | None) -> bool:
    """Read one csv column into `health`; False when it is no health column."""
    if name in _CSV_HEALTH:
        target, convert = _CSV_HEALTH[name]
        assign(health, target, convert(printed))
        return True
    if name.startswith(_CSV_REASONS):
        reason = name.split(".", 1)[1]
        if reason in _CSV_REASON_MASKS:
            return False
        health.clock_event_reasons[reason_name(reason)] = printed
        return True
    parts = name.split(".", 4)  # ecc.errors.{corrected,uncorrected}.{volatile,aggregate}.X
    if parts[:2] != ["ecc", "errors"] or len(parts) != 5 or parts[3] not in _TIMESCALES:
        return False
    kind, counts, where = parts[2], getattr(health, f"ecc_{parts[3]}"), parts[4]
    if where == "total":
        setattr(counts, f"{kind}_total", _integer(printed))
    elif where in ("sram", "dram"):
        setattr(counts, f"{where}_{kind.removesuffix('ed')}able", _integer(printed))
    else:
        counts.by_location[f"{kind}.{where}"] = _integer(printed)
    return True


_TIMESCALES = ("volatile", "aggregate")


def _csv_gpu(run: NvidiaSmiRun, row: dict[str, str]) -> SmiGpu:
    fields = {name: _value(value) for name, value in row.items()}
    gpu = SmiGpu(fields=fields, health=SmiHealth())
    assert gpu.health is not None
    pcie = PcieLink()
    has_health = False
    address = fields.get("retired_pages.address")
    if address is not None:
        page = RetiredPage(address, fields.get("retired_pages.cause"))
        gpu.health.retired_pages.pages.append(page)
        has_health = True
    for name, value in fields.items():
        if _csv_health(gpu.health, name, value):
            has_health = True
        if name in _CSV_PCIE_FIELDS:
            setattr(pcie, _CSV_PCIE_FIELDS[name], _integer(value))
        elif name in _CSV_GPU_FIELDS:
            attribute = _CSV_GPU_FIELDS[name]
            if attribute == "index":
                gpu.index = _integer(value)
            elif attribute in _NUMERIC_GPU_FIELDS:
                setattr(gpu, attribute, _number(value))
            else:
                setattr(gpu, attribute, value)
        elif name == "driver_version" and value is not None:
            run.driver_version = run.driver_version or value
    if any(name in _CSV_PCIE_FIELDS for name in fields):
        gpu.pcie = pcie
    if not has_health and "retired_pages.cause" not in fields:
        gpu.health = None
    return gpu
