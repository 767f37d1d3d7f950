"""The fields of one GPU in `nvidia-smi -q -x` XML and in the plain `nvidia-smi -q` text, read
by one table: each field names its XML paths and its text paths (labels, lower case, as the
driver eras print them), the first one printed wins.

Both forms print the same tree (the text is the XML's layout with labels for tags), so a reader
of either is a `Source`: a value at a path, the leaves under a path, whether a path exists.
Tag and label names follow nvidia-smi's own documentation (`man nvidia-smi`, the XML DTD
nvsmi_device_v*.dtd) and the published outputs in tests/data/outputs/nvidia-smi.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Any, Protocol

from gpuval.parsers.text import parse_int, parse_number
from gpuval.records.nvidia_smi import PcieLink, SmiFabric, SmiGpu, SmiHealth

_ABSENT = {
    "",
    "N/A",
    "[N/A]",
    "NOT SUPPORTED",
    "[NOT SUPPORTED]",
    "UNKNOWN ERROR",
    "[UNKNOWN ERROR]",
}


def value(token: str | None) -> str | None:
    """A printed value, or None for N/A and the like."""
    if token is None:
        return None
    token = token.strip()
    return None if token.upper() in _ABSENT else token


_LEADING_NUMBER = re.compile(r"[-+]?\d[\d_,]*(?:\.\d+)?")
_LEADING_INTEGER = re.compile(r"\d+")


def number(token: str | None) -> float | None:
    """The leading number of a value with a unit ('81559 MiB', '70.00 W', '-8 C', '56C')."""
    return _leading_number(value(token))


def integer(token: str | None) -> int | None:
    """The leading integer of a value ('16x', '2560 bank(s)', '0')."""
    return _leading_integer(value(token))


def _leading_number(printed: str | None) -> float | None:
    """`number` of what `value` returned."""
    found = None if printed is None else _LEADING_NUMBER.match(printed)
    return parse_number(found.group(0)) if found else None


def _leading_integer(printed: str | None) -> int | None:
    """`integer` of what `value` returned."""
    found = None if printed is None else _LEADING_INTEGER.match(printed)
    return parse_int(found.group(0)) if found else None


@lru_cache(maxsize=4096)  # a -q file prints the same few hundred labels per GPU
def label_key(label: str) -> str:
    """How the text form's labels are looked up: lower case, single spaces, and a printed "/"
    as a line break (which no label holds): a path's "/" only ever separates its sections, so
    a label "A/B" is never taken for label B in section A."""
    return " ".join(label.lower().split()).replace("/", "\n")


_NOT_SNAKE = re.compile(r"[^a-z0-9]+")


@lru_cache(maxsize=4096)  # the same labels, GPU after GPU
def snake(label: str) -> str:
    """'SRAM Uncorrectable SEC-DED' -> 'sram_uncorrectable_sec_ded'."""
    return _NOT_SNAKE.sub("_", label.lower()).strip("_")


class Source(Protocol):
    def value(self, path: str) -> str | None:
        """The value at `path`, cleaned by `value` (None for N/A and the like)."""
        ...

    def leaves(self, path: str) -> list[tuple[str, str | None]]: ...

    def has(self, path: str) -> bool: ...


class XmlSource:
    """One `<gpu>` element (or the `<nvidia_smi_log>` root)."""

    def __init__(self, element: ET.Element) -> None:
        self.element = element

    def value(self, path: str) -> str | None:
        found = self.element.find(path)
        return None if found is None or found.text is None else value(found.text)

    def leaves(self, path: str) -> list[tuple[str, str | None]]:
        found = self.element.find(path)
        if found is None:
            return []
        return [(child.tag, value(child.text)) for child in found if len(child) == 0]

    def has(self, path: str) -> bool:
        return self.element.find(path) is not None


class TextBlock:
    """One block of the text form (a log's top, or one GPU), flat: each `Label : value` under
    its path of lower-case labels ("ecc errors/volatile/sram correctable"), the first of a
    repeated path winning, and each section's value labels as printed, in order. A field is
    one dict look-up, not a walk down nested blocks."""

    __slots__ = ("labels", "value", "values")

    def __init__(self) -> None:
        # Path -> the value printed there, cleaned by `value` (None for N/A and the like).
        self.values: dict[str, str | None] = {}
        # Section path ("" for the block itself) -> its value labels as printed (spaces kept).
        self.labels: dict[str, list[str]] = {"": []}
        # Source.value as the dict's own get: read_gpu calls it for every path of every field.
        self.value: Callable[[str], str | None] = self.values.get

    @property
    def empty(self) -> bool:
        return not self.values and len(self.labels) == 1

    def leaves(self, path: str) -> list[tuple[str, str | None]]:
        labels = self.labels.get(path)
        if labels is None:
            return []
        prefix = f"{path}/" if path else ""
        values = self.values
        return [(snake(label), values[prefix + label_key(label)]) for label in labels]

    def has(self, path: str) -> bool:
        return path in self.labels or self.value(path) is not None


@dataclass(frozen=True)
class _Field:
    """`target`: dotted attribute of SmiGpu; `convert`: printed text to the record's value."""

    target: str
    convert: Callable[[str | None], Any]
    xml: tuple[str, ...]
    text: tuple[str, ...]


def _f(target: str, convert: Callable[[str | None], Any], xml: str, text: str) -> _Field:
    """A field; `|` separates alternative paths, first printed wins."""
    return _Field(target, convert, tuple(xml.split("|")), tuple(text.split("|")))


_POWER_XML = ("power_readings", "gpu_power_readings")
_POWER_TEXT = ("power readings", "gpu power readings")


def _power(target: str, convert: Callable[[str | None], Any], xml: str, text: str) -> _Field:
    """A power reading, under `power_readings` (drivers before 535) or `gpu_power_readings`."""
    return _Field(
        target,
        convert,
        tuple(f"{p}/{name}" for p in _POWER_XML for name in xml.split("|")),
        tuple(f"{p}/{name}" for p in _POWER_TEXT for name in text.split("|")),
    )


def _ecc(timescale: str) -> tuple[_Field, ...]:
    target = f"health.ecc_{timescale}."
    xml, text = f"ecc_errors/{timescale}/", f"ecc errors/{timescale}/"
    counts = (
        ("sram_correctable", "sram_correctable", "sram correctable"),
        ("sram_uncorrectable", "sram_uncorrectable", "sram uncorrectable"),
        ("sram_uncorrectable_parity", "sram_uncorrectable_parity", "sram uncorrectable parity"),
        ("sram_uncorrectable_secded", "sram_uncorrectable_secded", "sram uncorrectable sec-ded"),
        ("dram_correctable", "dram_correctable", "dram correctable"),
        ("dram_uncorrectable", "dram_uncorrectable", "dram uncorrectable"),
        ("corrected_total", "single_bit/total", "single bit/total"),
        ("uncorrected_total", "double_bit/total", "double bit/total"),
    )
    return tuple(_f(target + name, integer, xml + x, text + t) for name, x, t in counts)


_LINK = "pci/pci_gpu_link_info/"
_LINK_TEXT = "pci/gpu link info/"
_TEMP, _TEMP_TEXT = "temperature/", "temperature/"
FIELDS: tuple[_Field, ...] = (
    _f("name", value, "product_name", "product name"),
    _f("pci_bus_id", value, "pci/pci_bus_id", "pci/bus id"),
    _f("uuid", value, "uuid", "gpu uuid"),
    _f("persistence_mode", value, "persistence_mode", "persistence mode"),
    _f("ecc_mode", value, "ecc_mode/current_ecc", "ecc mode/current"),
    _f("mig_mode", value, "mig_mode/current_mig", "mig mode/current"),
    _f("compute_mode", value, "compute_mode", "compute mode"),
    _f("performance_state", value, "performance_state", "performance state"),
    _f("fan_percent", number, "fan_speed", "fan speed"),
    _f("temperature_c", number, "temperature/gpu_temp", "temperature/gpu current temp"),
    _power("power_draw_w", number, "power_draw|instant_power_draw",
           "power draw|instantaneous power draw"),
    _power("power_limit_w", number, "power_limit|current_power_limit",
           "power limit|current power limit"),
    _f("memory_used_mib", number, "fb_memory_usage/used", "fb memory usage/used"),
    _f("memory_total_mib", number, "fb_memory_usage/total", "fb memory usage/total"),
    _f("utilization_gpu_percent", number, "utilization/gpu_util", "utilization/gpu"),
    _f("pcie.gen_current", integer, _LINK + "pcie_gen/current_link_gen",
       _LINK_TEXT + "pcie generation/current"),
    _f("pcie.gen_max", integer, _LINK + "pcie_gen/max_link_gen",
       _LINK_TEXT + "pcie generation/max"),
    _f("pcie.gen_device_max", integer, _LINK + "pcie_gen/max_device_link_gen",
       _LINK_TEXT + "pcie generation/device max"),
    _f("pcie.gen_host_max", integer, _LINK + "pcie_gen/max_host_link_gen",
       _LINK_TEXT + "pcie generation/host max"),
    _f("pcie.width_current", integer, _LINK + "link_widths/current_link_width",
       _LINK_TEXT + "link width/current"),
    _f("pcie.width_max", integer, _LINK + "link_widths/max_link_width",
       _LINK_TEXT + "link width/max"),
    _f("health.ecc_mode_pending", value, "ecc_mode/pending_ecc", "ecc mode/pending"),
    _f("health.mig_mode_pending", value, "mig_mode/pending_mig", "mig mode/pending"),
    _f("health.vbios_version", value, "vbios_version", "vbios version"),
    _f("health.serial", value, "serial", "serial number"),
    _f("health.pcie_replays", integer, "pci/replay_counter", "pci/replays since reset"),
    _f("health.reset_required", value, "gpu_reset_status/reset_required",
       "gpu reset status/reset required"),
    _f("health.drain_and_reset_recommended", value,
       "gpu_reset_status/drain_and_reset_recommended",
       "gpu reset status/drain and reset recommended"),
    _f("health.recovery_action", value, "gpu_recovery_action", "gpu recovery action"),
    *_ecc("volatile"),
    *_ecc("aggregate"),
    _f("health.sram_threshold_exceeded", value, "ecc_errors/aggregate/sram_threshold_exceeded",
       "ecc errors/aggregate/sram threshold exceeded"),
    _f("health.channel_repair_pending", value, "ecc_errors/channel_repair_pending",
       "ecc errors/channel repair pending"),
    _f("health.tpc_repair_pending", value, "ecc_errors/tpc_repair_pending",
       "ecc errors/tpc repair pending"),
    _f("health.unrepairable_memory", value, "ecc_errors/unrepairable_memory",
       "ecc errors/unrepairable memory"),
    _f("health.retired_pages.single_bit", integer,
       "retired_pages/multiple_single_bit_retirement/retired_count",
       "retired pages/single bit ecc"),
    _f("health.retired_pages.double_bit", integer,
       "retired_pages/double_bit_retirement/retired_count", "retired pages/double bit ecc"),
    _f("health.retired_pages.pending", value,
       "retired_pages/pending_blacklist|retired_pages/pending_retirement",
       "retired pages/pending page blacklist|retired pages/pending"),
    _f("health.remapped_rows.correctable", integer, "remapped_rows/remapped_row_corr",
       "remapped rows/correctable error"),
    _f("health.remapped_rows.correctable_inactive", integer,
       "remapped_rows/remapped_row_corr_inactive", "remapped rows/inactive correctable error"),
    _f("health.remapped_rows.uncorrectable", integer, "remapped_rows/remapped_row_unc",
       "remapped rows/uncorrectable error"),
    _f("health.remapped_rows.uncorrectable_inactive", integer,
       "remapped_rows/remapped_row_unc_inactive", "remapped rows/inactive uncorrectable error"),
    _f("health.remapped_rows.pending", value, "remapped_rows/remapped_row_pending",
       "remapped rows/pending"),
    _f("health.remapped_rows.failure", value, "remapped_rows/remapped_row_failure",
       "remapped rows/remapping failure occurred"),
    _f("health.temperature.gpu_c", number, _TEMP + "gpu_temp", _TEMP_TEXT + "gpu current temp"),
    _f("health.temperature.memory_c", number, _TEMP + "memory_temp",
       _TEMP_TEXT + "memory current temp"),
    _f("health.temperature.shutdown_c", number, _TEMP + "gpu_temp_max_threshold",
       _TEMP_TEXT + "gpu shutdown temp"),
    _f("health.temperature.slowdown_c", number, _TEMP + "gpu_temp_slow_threshold",
       _TEMP_TEXT + "gpu slowdown temp"),
    _f("health.temperature.max_operating_c", number, _TEMP + "gpu_temp_max_gpu_threshold",
       _TEMP_TEXT + "gpu max operating temp"),
    _f("health.temperature.memory_max_operating_c", number,
       _TEMP + "gpu_temp_max_mem_threshold", _TEMP_TEXT + "memory max operating temp"),
    _f("health.temperature.target_c", number, _TEMP + "gpu_target_temperature",
       _TEMP_TEXT + "gpu target temperature"),
    _f("health.temperature.tlimit_c", number, _TEMP + "gpu_temp_tlimit",
       _TEMP_TEXT + "gpu t.limit temp"),
    _f("health.temperature.shutdown_tlimit_c", number, _TEMP + "gpu_temp_max_tlimit_threshold",
       _TEMP_TEXT + "gpu shutdown t.limit temp"),
    _f("health.temperature.slowdown_tlimit_c", number, _TEMP + "gpu_temp_slow_tlimit_threshold",
       _TEMP_TEXT + "gpu slowdown t.limit temp"),
    _f("health.temperature.max_operating_tlimit_c", number,
       _TEMP + "gpu_temp_max_gpu_tlimit_threshold", _TEMP_TEXT + "gpu max operating t.limit temp"),
    _f("health.temperature.memory_max_operating_tlimit_c", number,
       _TEMP + "gpu_temp_max_mem_tlimit_threshold",
       _TEMP_TEXT + "memory max operating t.limit temp"),
    _power("health.power.draw_w", number, "power_draw", "power draw"),
    _power("health.power.average_draw_w", number, "average_power_draw", "average power draw"),
    _power("health.power.instant_draw_w", number, "instant_power_draw",
           "instantaneous power draw"),
    _power("health.power.limit_w", number, "power_limit|current_power_limit",
           "power limit|current power limit"),
    _power("health.power.requested_limit_w", number, "requested_power_limit",
           "requested power limit"),
    _power("health.power.default_limit_w", number, "default_power_limit", "default power limit"),
    _power("health.power.enforced_limit_w", number, "enforced_power_limit",
           "enforced power limit"),
    _power("health.power.min_limit_w", number, "min_power_limit", "min power limit"),
    _power("health.power.max_limit_w", number, "max_power_limit", "max power limit"),
    _power("health.power.management", value, "power_management", "power management"),
)  # fmt: skip

# Leaves read as a whole: (target, how names are cleaned, XML paths, text paths).
_REASON_ALIASES = {
    "idle": "gpu_idle",
    "display_clock_setting": "display_clocks_setting",
    "sw_power_capping": "sw_power_cap",
    "sw_therm_slowdown": "sw_thermal_slowdown",
    "hw_therm_slowdown": "hw_thermal_slowdown",
    "hw_power_brake": "hw_power_brake_slowdown",
    "hw_power_braking": "hw_power_brake_slowdown",
}
_REASON_PREFIXES = ("clocks_event_reasons_counters_", "clocks_event_reason_",
                    "clocks_throttle_reason_")  # fmt: skip


def reason_name(name: str) -> str:
    """A clock event (throttle) reason under the XML's names: gpu_idle, sw_power_cap, ..."""
    for prefix in _REASON_PREFIXES:
        name = name.removeprefix(prefix)
    return _REASON_ALIASES.get(name, name)


def _location(kind: str) -> Callable[[str], str | None]:
    """Pre-Ampere per-location counts: `device_memory` -> `corrected.device_memory`."""
    return lambda name: None if name == "total" else f"{kind}.{name}"


_Leaves = tuple[str, Callable[[str], str | None], Callable[[str | None], Any], tuple[str, ...],
                tuple[str, ...]]  # fmt: skip
LEAVES: tuple[_Leaves, ...] = (
    ("clock_event_reasons", reason_name, value,
     ("clocks_event_reasons", "clocks_throttle_reasons"),
     ("clocks event reasons", "clocks throttle reasons")),
    ("clock_event_reason_counters_us", reason_name, number,
     ("clocks_event_reasons_counters",), ("clocks event reasons counters",)),
    ("sram_uncorrectable_sources", str, integer,
     ("ecc_errors/aggregate_uncorrectable_sram_sources",),
     ("ecc errors/aggregate uncorrectable sram sources",)),
    ("remapped_rows.histogram", lambda n: n.removeprefix("row_remapper_histogram_"), integer,
     ("remapped_rows/row_remapper_histogram",),
     ("remapped rows/bank remap availability histogram",)),
    *(
        (f"ecc_{timescale}.by_location", _location(kind), integer,
         (f"ecc_errors/{timescale}/{bits}_bit",), (f"ecc errors/{timescale}/{bits} bit",))
        for timescale in ("volatile", "aggregate")
        for kind, bits in (("corrected", "single"), ("uncorrected", "double"))
    ),
)  # fmt: skip

# (field, -q -x tag, -q label): -q -x names the clique and cluster in camelCase and the health
# fields in snake_case (<fabric><state><status><cliqueId><clusterUuid><health><summary>...;
# https://github.com/1Panel-dev/1Panel/issues/11910 and /issues/10990).
_FABRIC = (
    ("state", "fabric/state", "fabric/state"),
    ("status", "fabric/status", "fabric/status"),
    ("clique_id", "fabric/cliqueId", "fabric/cliqueid"),
    ("cluster_uuid", "fabric/clusterUuid", "fabric/clusteruuid"),
)


def attribute(record: Any, dotted: str) -> Any:
    """A dotted attribute (`health.remapped_rows`) of `record`."""
    for part in dotted.split(".") if dotted else []:
        record = getattr(record, part)
    return record


def assign(record: Any, target: str, printed: Any) -> None:
    """Set a dotted attribute (`health.power.limit_w`) of `record`."""
    parent, _, name = target.rpartition(".")
    setattr(attribute(record, parent), name, printed)


def _itself(record: Any) -> Any:
    return record


def _setter(target: str) -> tuple[Callable[[Any], Any], str]:
    """Where a dotted target (`health.power.limit_w`) is set: a getter of the record that holds
    it, and the attribute's name."""
    parent, _, name = target.rpartition(".")
    return (attrgetter(parent) if parent else _itself), name


# Each conversion as applied to what a Source's value() returned, which `value` already
# cleaned: the same result without cleaning it twice.
_AFTER_VALUE: dict[Callable[[str | None], Any], Callable[[str | None], Any]] = {
    value: _itself,
    number: _leading_number,
    integer: _leading_integer,
}
# FIELDS with their targets resolved once: read_gpu runs them for every GPU of every file.
_PLAN = tuple(
    (*_setter(spec.target), _AFTER_VALUE.get(spec.convert, spec.convert), spec.xml, spec.text)
    for spec in FIELDS
)


def read_gpu(source: Source, index: int, form: str) -> SmiGpu:
    """One GPU from `source`; `form` is "xml" or "text" (which paths to read)."""
    gpu = SmiGpu(index=index, pcie=PcieLink(), health=SmiHealth())
    xml = form == "xml"
    lookup = source.value
    for holder, name, convert, xml_paths, text_paths in _PLAN:
        printed = None
        for path in xml_paths if xml else text_paths:  # the first path with a value wins
            printed = lookup(path)
            if printed is not None:
                break
        setattr(holder(gpu), name, convert(printed))
    health = gpu.health
    assert health is not None  # made above; the records' type says it may be absent
    for target, clean, convert, xml_paths, text_paths in LEAVES:
        found: dict[str, Any] = attribute(health, target)
        for path in xml_paths if xml else text_paths:
            for name, printed in source.leaves(path):
                key = clean(name)
                if key is not None:
                    found.setdefault(key, convert(printed))
    if source.has("fabric"):
        fabric = SmiFabric()
        for name, xml_path, text_path in _FABRIC:
            setattr(fabric, name, source.value(xml_path if xml else text_path))
        fabric.health = {snake(n): v for n, v in source.leaves("fabric/health")}
        health.fabric = fabric
    if not source.has(_LINK.rstrip("/") if xml else _LINK_TEXT.rstrip("/")):
        gpu.pcie = None
    return gpu
