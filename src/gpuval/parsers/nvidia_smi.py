"""nvidia-smi in five forms: the default table, `-q` text, `-q -x` XML, `--query-gpu` csv (and
the `--query-remapped-rows` / `--query-retired-pages` csv) and `nvlink -s`.

`-q` text and XML are read field by field by one table (nvidia_smi_fields), health included.

The table is read by its `|` separators, never by character columns: driver eras differ in
widths and published copies collapse whitespace, but every era keeps the three `|` cells per
row (GPU/name/persistence, bus id/display, ECC; then fan/temp/perf/power, memory, util/compute;
newer drivers add a MIG mode row).
"""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuval.parsers.nvidia_smi_fields import (
    Section,
    XmlSource,
    assign,
    label_key,
    read_gpu,
    reason_name,
)
from gpuval.parsers.nvidia_smi_fields import integer as _integer
from gpuval.parsers.nvidia_smi_fields import number as _number
from gpuval.parsers.nvidia_smi_fields import value as _value
from gpuval.parsers.text import DETECT_WINDOW, Line, iter_lines, parse_int, parse_number
from gpuval.records.base import ParseResult
from gpuval.records.nvidia_smi import (
    MigDevice,
    NvidiaSmiRun,
    NvLinkState,
    PcieLink,
    RetiredPage,
    SmiGpu,
    SmiHealth,
    SmiProcess,
)

TABLE, QUERY, XML, CSV, NVLINK = (
    "nvidia-smi",
    "nvidia-smi-q",
    "nvidia-smi-xml",
    "nvidia-smi-csv",
    "nvidia-smi-nvlink",
)
TOOLS = (TABLE, QUERY, XML, CSV, NVLINK)

_QUERY_BANNER = "NVSMI LOG"
# A -q copy without its banner: a `GPU 00000000:8A:00.0` line, then an indented field.
_QUERY_GPU_BLOCK = re.compile(
    r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\s*\n\s+\S[^:\n]*: ", re.M
)


def detect(text: str) -> tuple[str, int] | None:
    head = text[:DETECT_WINDOW]
    if "<nvidia_smi_log" in head:
        return XML, 95
    if _QUERY_BANNER in head:
        return QUERY, 95
    if _QUERY_GPU_BLOCK.search(head):
        return QUERY, 85
    if "NVIDIA-SMI" in head and "Driver Version" in head:
        return TABLE, 90
    if (_NVLINK_LINK.search(head) or _NVLINK_NVML in head) and _NVLINK_GPU.search(head):
        return NVLINK, 85
    if _csv_header_line(head.splitlines()[:20]) is not None:
        return CSV, 80
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    chosen = tool or (detect(text) or (TABLE, 0))[0]
    result = ParseResult(tool=chosen, source=source)
    readers: dict[str, Callable[[str, ParseResult], list[NvidiaSmiRun]]] = {
        TABLE: _read_tables,
        QUERY: _read_queries,
        XML: _one(_read_xml),
        CSV: _one(_read_csv),
        NVLINK: _one(_read_nvlink),
    }
    result.runs.extend(readers[chosen](text, result))
    return result


def _one(
    reader: Callable[[str, ParseResult], NvidiaSmiRun | None],
) -> Callable[[str, ParseResult], list[NvidiaSmiRun]]:
    """A reader of one run as a reader of a list of runs (empty when nothing was read)."""

    def read(text: str, result: ParseResult) -> list[NvidiaSmiRun]:
        run = reader(text, result)
        return [] if run is None else [run]

    return read


# --- default table -------------------------------------------------------------------------

_SMI_VERSION = re.compile(r"NVIDIA-SMI\s+(\S+)")
_DRIVER = re.compile(r"Driver Version:\s*(\S+)")
_CUDA = re.compile(r"CUDA Version:\s*(\S+)")
_TIMESTAMP = re.compile(r"^\s*(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\s*$")
_BUS_ID = re.compile(
    r"^([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])(?:\s+(\S+))?$"
)
_GPU_FIRST = re.compile(r"^(?P<index>\d+)\s+(?P<name>.+?)\s+(?P<mode>\S+)$")
_GPU_NAME_ONLY = re.compile(r"^(?P<index>\d+)\s+(?P<name>.+?)$")
_GPU_SECOND = re.compile(r"^(\S+)\s+(\S+)\s+(\S+)\s+(.*?)\s*/\s*(.*?)$")
# Drivers before ~2014 labelled the same MiB figures "MB".
_MEMORY = re.compile(r"(\S+?)\s*Mi?B\s*/\s*(\S+?)\s*Mi?B")
_PROCESS = re.compile(
    r"^(\d+|N/A)\s+(?:(\S+)\s+(\S+)\s+)?(\d+|N/A)\s+(C\+G|M\+C|M\+G|C|G|M)\s+(.*?)\s+(\S+)$"
)
_MODE_COLUMNS = ("Persistence-M", "TCC/WDDM", "Driver-Model")
_MIG_ROW = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$")


def _cells(text: str) -> list[str] | None:
    """The `|`-separated cells of a table row, or None when the line is not one."""
    stripped = text.strip()
    if not stripped.startswith("|") or set(stripped) <= set("|=-+ "):
        return None
    return [cell.strip() for cell in stripped.strip("|").split("|")]


class _Table:
    def __init__(self, result: ParseResult) -> None:
        self.result = result
        self.runs: list[NvidiaSmiRun] = []
        self.start_run()

    def start_run(self) -> None:
        """A new table: `nvidia-smi -l` and concatenated captures print one after another."""
        self.run = NvidiaSmiRun(format="table")
        self.runs.append(self.run)
        self.section = "gpus"
        self.gpu: SmiGpu | None = None
        self.gpu_row = 0
        self.has_mig_row = False
        # The oldest tables print no persistence (or Windows driver-model) column after the name.
        self.has_mode_column = True

    def feed(self, line: Line) -> None:
        text = line.text
        timestamp = _TIMESTAMP.match(text)
        if (timestamp or "NVIDIA-SMI" in text) and self.run.gpus:
            self.start_run()
        if "NVIDIA-SMI" in text:
            self.read_banner(text)
            return
        if timestamp:
            self.run.timestamp = timestamp.group(1)
            return
        if "Processes:" in text:
            self.section = "processes"
            return
        if "MIG devices:" in text:
            self.section = "mig"
            return
        if "MIG M." in text:
            self.has_mig_row = True
        if "GPU  Name" in text or "GPU Name" in text:
            self.has_mode_column = any(m in text for m in _MODE_COLUMNS)
        cells = _cells(text)
        if cells is None:
            self.gpu = None
            return
        if self.section == "gpus":
            self.read_gpu_row(line, cells)
        elif self.section == "mig":
            self.read_mig_row(cells)
        elif self.section == "processes":
            self.read_process_row(line, cells)

    def read_banner(self, text: str) -> None:
        for pattern, name in ((_DRIVER, "driver_version"), (_CUDA, "cuda_version")):
            found = pattern.search(text)
            if found:
                setattr(self.run, name, _value(found.group(1)))
        if self.run.driver_version is None:
            version = _SMI_VERSION.search(text)
            self.run.driver_version = version.group(1) if version else None

    def read_gpu_row(self, line: Line, cells: list[str]) -> None:
        if len(cells) < 3:
            return
        first = (_GPU_FIRST if self.has_mode_column else _GPU_NAME_ONLY).match(cells[0])
        bus = _BUS_ID.match(cells[1])
        if first and bus:
            self.gpu = SmiGpu(
                index=int(first["index"]),
                name=first["name"],
                persistence_mode=_value(first.groupdict().get("mode")),
                pci_bus_id=bus.group(1),
                ecc_volatile_uncorrected=_value(cells[2]),
            )
            self.run.gpus.append(self.gpu)
            self.gpu_row = 1
            return
        if self.gpu is None:
            return
        self.gpu_row += 1
        if self.gpu_row == 2:
            self.read_second_row(line, self.gpu, cells)
        elif self.gpu_row == 3 and self.has_mig_row and not cells[0] and not cells[1]:
            self.gpu.mig_mode = _value(cells[2])

    def read_second_row(self, line: Line, gpu: SmiGpu, cells: list[str]) -> None:
        second = _GPU_SECOND.match(cells[0])
        memory = _MEMORY.search(cells[1])
        if second is None or memory is None:
            self.result.warn(
                f"GPU {gpu.index}: unreadable fan/temp/power or memory row", line.number
            )
            return
        fan, temperature, perf, draw, cap = second.groups()
        gpu.fan_percent = _number(fan)
        gpu.temperature_c = _number(temperature)
        gpu.performance_state = _value(perf)
        gpu.power_draw_w = _number(draw)
        gpu.power_limit_w = _number(cap)
        gpu.memory_used_mib = _number(memory.group(1))
        gpu.memory_total_mib = _number(memory.group(2))
        util, _, compute = cells[2].partition(" ")
        gpu.utilization_gpu_percent = _number(util)
        gpu.compute_mode = _value(compute)

    def read_mig_row(self, cells: list[str]) -> None:
        ids = _MIG_ROW.match(cells[0]) if len(cells) >= 2 else None
        if ids is None:
            return
        gpu, gi, ci, dev = (int(v) for v in ids.groups())
        memory = _MEMORY.search(cells[1])
        used, total = (memory.group(1), memory.group(2)) if memory else (None, None)
        self.run.mig_devices.append(MigDevice(gpu, gi, ci, dev, _number(used), _number(total)))

    def read_process_row(self, line: Line, cells: list[str]) -> None:
        content = " ".join(cells).strip()
        if not content or not content[0].isdigit():
            return
        row = _PROCESS.match(content)
        if row is None:
            self.result.warn(f"unreadable process row {content!r}", line.number)
            return
        gpu, gi, ci, pid, kind, name, memory = row.groups()
        self.run.processes.append(
            SmiProcess(
                gpu=parse_int(gpu),
                pid=parse_int(pid),
                type=kind,
                name=name,
                memory_mib=_number(memory),
                gi=_value(gi),
                ci=_value(ci),
            )
        )


def _read_tables(text: str, result: ParseResult) -> list[NvidiaSmiRun]:
    table = _Table(result)
    for line in iter_lines(text):
        table.feed(line)
    runs = [run for run in table.runs if run.gpus or run.driver_version is not None]
    if not runs:
        result.error("no nvidia-smi table found (no NVIDIA-SMI banner and no GPU row)")
    for run in runs:
        if not run.gpus:
            result.warn("an nvidia-smi table lists no GPU")
    return runs


# --- -q -x XML -----------------------------------------------------------------------------


def _xml_text(element: ET.Element, path: str) -> str | None:
    found = element.find(path)
    return None if found is None or found.text is None else _value(found.text)


def _xml_gpu(index: int, element: ET.Element) -> SmiGpu:
    gpu = read_gpu(XmlSource(element), index, "xml")
    gpu.pci_bus_id = gpu.pci_bus_id or _value(element.get("id"))
    return gpu


def _read_xml(text: str, result: ParseResult) -> NvidiaSmiRun | None:
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start",))
    root: ET.Element | None = None
    try:
        # A broken document still yields the events before the break; the tree built so far
        # keeps every element already read, so a truncated file gives its complete fields.
        parser.feed(text)
        for event in parser.read_events():
            element = event[-1] if isinstance(event, tuple) else None
            if root is None and isinstance(element, ET.Element):
                root = element
        parser.close()
    except ET.ParseError as problem:
        line = problem.position[0] if problem.position else None
        result.error(f"XML ends or breaks early ({problem}); read what came before", line)
    if root is None or root.tag != "nvidia_smi_log":
        result.error("no <nvidia_smi_log> document found")
        return None
    run = NvidiaSmiRun(
        format="xml",
        timestamp=_xml_text(root, "timestamp"),
        driver_version=_xml_text(root, "driver_version"),
        cuda_version=_xml_text(root, "cuda_version"),
        attached_gpus=_integer(_xml_text(root, "attached_gpus")),
        gpus=[_xml_gpu(i, gpu) for i, gpu in enumerate(root.findall("gpu"))],
    )
    if run.attached_gpus is not None and run.attached_gpus != len(run.gpus):
        result.warn(f"attached_gpus is {run.attached_gpus} but {len(run.gpus)} <gpu> found")
    return run


# --- -q text ------------------------------------------------------------------------------

_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


@dataclass
class _QueryLog:
    """One `==NVSMI LOG==` document: its top-level values and one section per `GPU BUS` block."""

    top: Section
    gpus: list[tuple[str, Section, int]]  # bus id, block, line of its header
    line: int


def _query_logs(text: str) -> list[_QueryLog]:
    """The text form's tree, nested by indentation (tabs count as four spaces)."""
    logs: list[_QueryLog] = []
    stack: list[tuple[int, Section]] = []
    for line in iter_lines(text):
        raw = line.text.expandtabs(4).rstrip()
        body = raw.strip()
        if not body or set(body) <= {"="}:
            continue
        if _QUERY_BANNER in body or not logs:
            logs.append(_QueryLog(Section(), [], line.number))
            stack = []
            if _QUERY_BANNER in body:
                continue
        indent = len(raw) - len(body)
        header = _GPU_HEADER.match(body) if indent == 0 else None
        if header:
            block = Section()
            logs[-1].gpus.append((header.group(1), block, line.number))
            # Below the header even at indent 0: copies that lost their indentation keep
            # the GPU's own fields.
            stack = [(-1, block)]
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else logs[-1].top
        label, colon, printed = body.partition(":")
        if colon:
            if label_key(label) not in parent.values:
                parent.values[label_key(label)] = printed.strip()
                parent.labels.append(label.strip())
        else:
            stack.append((indent, parent.sections.setdefault(label_key(body), Section())))
    return logs


def _read_queries(text: str, result: ParseResult) -> list[NvidiaSmiRun]:
    runs: list[NvidiaSmiRun] = []
    for log in _query_logs(text):
        run = NvidiaSmiRun(
            format="query",
            timestamp=log.top.value("timestamp"),
            driver_version=log.top.value("driver version"),
            cuda_version=log.top.value("cuda version"),
            attached_gpus=_integer(log.top.value("attached gpus")),
        )
        for index, (bus_id, block, number) in enumerate(log.gpus):
            if not block.values and not block.sections:
                result.warn(f"GPU {bus_id} printed no fields", number)
            gpu = read_gpu(block, index, "text")
            gpu.pci_bus_id = gpu.pci_bus_id or bus_id
            run.gpus.append(gpu)
        if run.attached_gpus is not None and run.attached_gpus != len(run.gpus):
            result.warn(
                f"Attached GPUs is {run.attached_gpus} but {len(run.gpus)} GPU blocks found",
                log.line,
            )
        if run.gpus or run.driver_version is not None:
            runs.append(run)
    if not runs:
        result.error("no `nvidia-smi -q` document found (no NVSMI LOG banner, no GPU block)")
    return runs


# --- --query-gpu csv -----------------------------------------------------------------------

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


def _csv_header_line(lines: list[str]) -> int | None:
    """Index of the header row among `lines`: every cell a query name, one of them known."""
    for position, text in enumerate(lines):
        cells = [c.strip() for c in _split_csv(text)]
        if len(cells) < 1 or not all(_COLUMN_NAME.match(c) for c in cells):
            continue
        names = {c.split(" [")[0] for c in cells}
        if names & (set(_CSV_GPU_FIELDS) | set(_CSV_PCIE_FIELDS) | {"driver_version"}):
            return position
    return None


def _read_csv(text: str, result: ParseResult) -> NvidiaSmiRun | None:
    lines = list(iter_lines(text))
    header_at = _csv_header_line([line.text for line in lines])
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


# --- nvlink -s -----------------------------------------------------------------------------

_NVLINK_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]*)\))?\s*$", re.MULTILINE)
_NVLINK_LINK = re.compile(r"^\s*Link (\d+): (.*?)\s*$", re.MULTILINE)
_SPEED = re.compile(r"^([\d.]+)\s*GB/s$")
_NVLINK_NVML = "NVML: Unable to retrieve NVLink information"


def _read_nvlink(text: str, result: ParseResult) -> NvidiaSmiRun | None:
    run = NvidiaSmiRun(format="nvlink")
    if not text.strip():
        # What nvidia-smi prints where no GPU has NVLink (none fitted, or a single PCIe GPU).
        result.warn("nvlink -s printed nothing: no GPU reports an NVLink")
        return run
    gpu: SmiGpu | None = None
    for line in iter_lines(text):
        header = _NVLINK_GPU.match(line.text)
        link = _NVLINK_LINK.match(line.text)
        if header:
            index, name, uuid = header.groups()
            gpu = SmiGpu(index=int(index), name=name, uuid=uuid, nvlinks=[])
            run.gpus.append(gpu)
        elif link and gpu is not None and gpu.nvlinks is not None:
            gpu.nvlinks.append(_link_state(line, int(link.group(1)), link.group(2), result))
        elif link:
            result.warn("link line before any `GPU N:` line; ignored", line.number)
        elif gpu is not None and line.text.strip().startswith("NVML:"):
            # "NVML: Unable to retrieve NVLink information as all links are inActive"
            gpu.nvlink_message = line.text.strip().removeprefix("NVML:").strip()
        elif line.text.strip().startswith(".."):
            result.warn("lines elided ('...') here: the GPU list may be incomplete", line.number)
    if not run.gpus:
        result.error("no `GPU N: NAME` line found")
        return None
    return run


def _link_state(line: Line, number: int, printed: str, result: ParseResult) -> NvLinkState:
    speed = _SPEED.match(printed)
    if speed:
        return NvLinkState(number, parse_number(speed.group(1)), "active")
    if printed.strip("<>").lower() == "inactive":
        return NvLinkState(number, None, "inactive")
    result.warn(f"link {number}: unrecognised state {printed!r} kept as printed", line.number)
    return NvLinkState(number, None, printed)
