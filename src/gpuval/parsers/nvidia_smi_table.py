"""The default `nvidia-smi` table, read by its `|` separators, never by character columns:
driver eras differ in widths and published copies collapse whitespace, but every era keeps the
three `|` cells per row (GPU/name/persistence, bus id/display, ECC; then fan/temp/perf/power,
memory, util/compute; newer drivers add a MIG mode row)."""

from __future__ import annotations

import re

from gpuval.parsers.nvidia_smi_fields import number as _number
from gpuval.parsers.nvidia_smi_fields import value as _value
from gpuval.parsers.text import Line, iter_lines, parse_int
from gpuval.records.base import ParseResult
from gpuval.records.nvidia_smi import MigDevice, NvidiaSmiRun, SmiGpu, SmiProcess

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


def read_tables(text: str, result: ParseResult) -> list[NvidiaSmiRun]:
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
