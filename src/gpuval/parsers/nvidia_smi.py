"""nvidia-smi in five forms: the default table, `-q` text, `-q -x` XML, `--query-gpu` csv (and
the `--query-remapped-rows` / `--query-retired-pages` csv) and `nvlink -s`.

`-q` text and XML are read field by field by one table (nvidia_smi_fields), health included,
here; the default table (nvidia_smi_table) and the csv (nvidia_smi_csv) have readers of their own.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass

from gpuval.parsers.nvidia_smi_csv import csv_header_line, read_csv
from gpuval.parsers.nvidia_smi_fields import TextBlock, XmlSource, label_key, read_gpu
from gpuval.parsers.nvidia_smi_fields import integer as _integer
from gpuval.parsers.nvidia_smi_fields import value as _value
from gpuval.parsers.nvidia_smi_table import read_tables
from gpuval.parsers.text import DETECT_WINDOW, Line, clean_lines, iter_lines, parse_number
from gpuval.records.base import ParseResult
from gpuval.records.nvidia_smi import NvidiaSmiRun, NvLinkState, SmiGpu

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
    if csv_header_line(head.splitlines()[:20]) is not None:
        return CSV, 80
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    chosen = tool or (detect(text) or (TABLE, 0))[0]
    result = ParseResult(tool=chosen, source=source)
    readers: dict[str, Callable[[str, ParseResult], list[NvidiaSmiRun]]] = {
        TABLE: read_tables,
        QUERY: _read_queries,
        XML: _one(_read_xml),
        CSV: _one(read_csv),
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


# How many distinct lines _query_logs remembers: a file of 8 H100s prints ~300, while a large
# file that is no -q output (read as one on request) must not cost a tuple for each line.
_REMEMBERED_LINES = 8192


@dataclass
class _QueryLog:
    """One `==NVSMI LOG==` document: its top-level values and one block per `GPU BUS` header."""

    top: TextBlock
    gpus: list[tuple[str, TextBlock, int]]  # bus id, block, line of its header
    line: int


def _query_logs(text: str) -> list[_QueryLog]:
    """The text form's tree, nested by indentation (tabs count as four spaces).

    One pass with a few operations a line (a file prints ~230 lines per GPU): most lines are
    printed alike for every GPU, so a line read once is remembered; the innermost open section
    is kept in locals, the stack only walked where a line closes sections."""
    logs: list[_QueryLog] = []
    block = TextBlock()  # where lines go: the latest log's top, or its latest GPU block
    values = block.values
    # Open sections, innermost last: (indent of its header, path prefix, its value labels).
    stack: list[tuple[int, str, list[str]]] = []
    # The innermost open section, or the block itself (indent -1: nothing closes it).
    depth, prefix, labels = -1, "", block.labels[""]
    # Field and section lines read: line -> (indent, label key, ":" or "", value, label).
    seen: dict[str, tuple[int, str, str, str | None, str]] = {}
    tabs = "\t" in text
    for number, line in enumerate(clean_lines(text), start=1):
        parsed = seen.get(line)
        if parsed is None:
            raw = (line.expandtabs(4) if tabs and "\t" in line else line).rstrip()
            body = raw.lstrip()
            if not body or (body[0] == "=" and not body.strip("=")):  # blank, or a `====` rule
                continue
            banner = _QUERY_BANNER in body
            if banner or not logs:
                logs.append(_QueryLog(TextBlock(), [], number))
                block, stack = logs[-1].top, []
                values = block.values
                depth, prefix, labels = -1, "", block.labels[""]
                if banner:
                    continue
            indent = len(raw) - len(body)
            header = _GPU_HEADER.match(body) if indent == 0 else None
            if header:
                block = TextBlock()
                values = block.values
                logs[-1].gpus.append((header.group(1), block, number))
                # Below the header even at indent 0: copies that lost their indentation keep
                # the GPU's own fields.
                stack = [(-1, "", block.labels[""])]
                depth, prefix, labels = stack[-1]
                continue
            label, colon, printed = body.partition(":")
            parsed = (indent, label_key(label), colon, _value(printed), label)
            if len(seen) < _REMEMBERED_LINES:
                seen[line] = parsed
        indent, key, colon, cleaned, label = parsed
        if indent <= depth:
            while stack and stack[-1][0] >= indent:
                stack.pop()
            depth, prefix, labels = stack[-1] if stack else (-1, "", block.labels[""])
        path = prefix + key
        if not colon:
            stack.append((indent, path + "/", block.labels.setdefault(path, [])))
            depth, prefix, labels = stack[-1]
        elif path not in values:
            values[path] = cleaned
            labels.append(label)
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
            if block.empty:
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
