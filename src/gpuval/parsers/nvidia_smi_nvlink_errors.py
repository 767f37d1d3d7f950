"""`nvidia-smi nvlink -e`: each NVLink's error counters, per GPU.

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
    \t Link 0: Replay Errors: 0
    \t Link 0: Recovery Errors: 0
    \t Link 0: CRC Errors: 0

The counter names differ across drivers and GPU generations (older drivers print "Data CRC
Errors" and "Flit CRC Errors", newer ones per-lane CRC lines or further counters), and a value
may be `N/A`: every `Link N: <name>: <value>` line is kept under its name as printed, unknown
names included. Where no GPU has an NVLink nvidia-smi prints nothing and exits 0 (recorded on a
lent single H100, tests/data/device/h100-x1-probes-2026-11-23): that is a run without GPUs, not
an error.
"""

from __future__ import annotations

import re

from gpuval.parsers.text import iter_lines, parse_int
from gpuval.records.base import ParseResult
from gpuval.records.health import NvlinkErrorsRun, NvlinkGpuErrors, NvlinkLinkCounters

TOOLS = ("nvidia-smi-nvlink-errors",)
_GPU = re.compile(r"^GPU (?P<index>\d+): (?P<name>.*?)(?: \(UUID: (?P<uuid>[^)]*)\))?\s*$")
_COUNTER = re.compile(r"^Link (?P<link>\d+): (?P<name>[^:]*?)\s*:\s*(?P<value>\S+)\s*$")
_NOT_AVAILABLE = ("N/A", "[N/A]")


def detect(text: str) -> tuple[str, int] | None:
    head = text[:65536]
    # Above nvlink -s (85), whose `Link N: <state>` pattern these lines also match.
    if re.search(r"^\s*Link \d+: [\w ]*Errors\s*:", head, re.M) and re.search(
        r"^GPU \d+: ", head, re.M
    ):
        return ("nvidia-smi-nvlink-errors", 90)
    return None


def _counter(match: re.Match[str], line: int, result: ParseResult) -> int | None:
    value = match["value"]
    if value in _NOT_AVAILABLE:
        return None
    count = parse_int(value)
    if count is None:
        result.warn(f"link {match['link']} {match['name']}: not a count: {value!r}", line)
    return count


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult("nvidia-smi-nvlink-errors", source)
    run = NvlinkErrorsRun()
    result.runs.append(run)
    if not text.strip():
        result.warn("nvlink -e printed nothing: no GPU reports an NVLink")
        return result
    gpu: NvlinkGpuErrors | None = None
    for line in iter_lines(text):
        stripped = line.text.strip()
        if not stripped:
            continue
        if header := _GPU.match(stripped):
            gpu = NvlinkGpuErrors(int(header["index"]), header["name"], header["uuid"],
                                  line=line.number)  # fmt: skip
            run.gpus.append(gpu)
        elif (counter := _COUNTER.match(stripped)) and gpu is not None:
            number = int(counter["link"])
            link = next((k for k in gpu.links if k.link == number), None)
            if link is None:
                link = NvlinkLinkCounters(number, line=line.number)
                gpu.links.append(link)
            link.counters[counter["name"]] = _counter(counter, line.number, result)
        elif counter:
            result.warn("link line before any `GPU N:` line; ignored", line.number)
        else:
            result.warn(f"not a `GPU N:` or `Link N: <counter>: <count>` line: {stripped!r}",
                        line.number)  # fmt: skip
    if not run.gpus:
        result.runs.clear()
        result.error("no `GPU N: NAME` line found in a non-empty output")
    return result
