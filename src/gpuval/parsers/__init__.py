"""Parsers: one module per tool, each a pure function from text to a `ParseResult`.

Every module listed in `PARSER_MODULES` exposes:
- `TOOLS`: the tool names it produces (the `tool` field, also accepted by `--tool`);
- `detect(text) -> tuple[str, int] | None`: the tool it recognises in `text` and a confidence
  from 1 to 100, or None; it must be cheap on 100 MB inputs (substring tests, not full parses);
- `parse(text, source=None, tool=None) -> ParseResult`: never raises on bad input; what it
  cannot read becomes a warning or error naming `source` and the line.
"""

from __future__ import annotations

import importlib
from functools import cache
from pathlib import Path
from types import ModuleType

from gpuval.records.base import ParseResult

PARSER_MODULES = (
    "nccl_tests",
    "p2p_bandwidth",
    "nvidia_smi_topo",
    "nvidia_smi",
    "nvidia_smi_nvlink_errors",
    "amd_topology",
    "all_reduce_bench",
    "nvbandwidth",
    "infiniband",
    "iperf3",
    "perftest",
    "gpuval_bench",
    "software_versions",
    "sysfs_net",
    "kernel_log",
    "sysfs_infiniband",
    "sysfs_pci",
    "lspci",
    "kernel_modules",
    "dcgm_diag",
)


@cache
def parser_modules() -> tuple[ModuleType, ...]:
    return tuple(importlib.import_module(f"{__name__}.{name}") for name in PARSER_MODULES)


def known_tools() -> list[str]:
    return sorted(tool for module in parser_modules() for tool in module.TOOLS)


def detect(text: str) -> str | None:
    """The tool whose output `text` is, by the most confident detector; None if nobody knows it."""
    best: tuple[int, str] | None = None
    for module in parser_modules():
        found = module.detect(text)
        if found is not None and (best is None or found[1] > best[0]):
            best = (found[1], found[0])
    return best[1] if best else None


def module_for(tool: str) -> ModuleType:
    for module in parser_modules():
        if tool in module.TOOLS:
            return module
    raise KeyError(f"unknown tool {tool!r}; known: {', '.join(known_tools())}")


def normal_exit_codes(tool: str) -> frozenset[int]:
    """The exit statuses with which `tool`'s output is still whole (a module's
    NORMAL_EXIT_CODES, else only 0)."""
    codes: frozenset[int] = getattr(module_for(tool), "NORMAL_EXIT_CODES", frozenset({0}))
    return codes


def parse_text(text: str, source: str | None = None, tool: str | None = None) -> ParseResult | None:
    """Parse `text` as `tool`, or as whatever tool it is detected to be; None when unrecognised."""
    tool = tool or detect(text)
    if tool is None:
        return None
    result: ParseResult = module_for(tool).parse(text, source=source, tool=tool)
    return result


def read_text(path: Path) -> str:
    """A file's text; undecodable bytes become U+FFFD rather than an exception."""
    return path.read_text(encoding="utf-8", errors="replace")


def parse_file(path: Path, tool: str | None = None) -> ParseResult | None:
    return parse_text(read_text(path), source=str(path), tool=tool)
