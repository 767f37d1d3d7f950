"""Parsers: one module per tool, each a pure function from text to a `ParseResult`.

Every module listed in `PARSER_MODULES` exposes:
- `TOOLS`: the tool names it produces (the `tool` field, also accepted by `--tool`);
- `detect(text) -> tuple[str, int] | None`: the tool it recognises in `text` and a confidence
  from 1 to 100, or None; it must be cheap on 100 MB inputs (substring tests, not full parses);
- `parse(text, source=None, tool=None) -> ParseResult`: never raises on bad input; what it
  cannot read becomes a warning or error naming `source` and the line;
- optionally `parse_path(path, source, tool) -> ParseResult`: the same result, the file read a
  block at a time (outputs that may be large: parse_file uses it).
"""

from __future__ import annotations

import gc
import importlib
import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import BinaryIO, TextIO

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
    "nvidia_imex",
)

_log = logging.getLogger(__name__)


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
    with no_cycle_collection():
        result: ParseResult = module_for(tool).parse(text, source=source, tool=tool)
    return result


@contextmanager
def no_cycle_collection() -> Iterator[None]:
    """The parsers (and the judge over their records) make up to millions of small records that
    hold no cycles: the cycle collector would walk them again and again as they grow (a third
    of the time of a 20 MB nccl-tests log) to find nothing. Reference counting still frees
    everything else; nested uses leave it as the outer one set it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# A file whose head is mostly bytes that are no UTF-8 is no tool's text output (a core dump, a
# binary written where its log was meant to go). Decoding all of it would cost 2 to 4 times its
# size (one U+FFFD makes a string 2 bytes a character, one 4-byte sequence 4) to find nothing.
_HEAD_BYTES = 1 << 16
_BINARY_SHARE = 0.1


def read_text(path: Path) -> str:
    """A file's text; undecodable bytes become U+FFFD rather than an exception. A file larger
    than 64 KiB whose first 64 KiB are over a tenth undecodable reads as empty (logged): binary.
    """
    with path.open("rb") as stream:
        if _binary(stream, path):
            return ""
        data = stream.read()
    # The bytes and the text side by side: twice the file at most, for ASCII text.
    text = data.decode("utf-8", errors="replace")
    del data
    # Universal newlines, as a file opened in text mode reads.
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


@contextmanager
def open_text(path: Path) -> Iterator[TextIO]:
    """The text read_text reads, as a stream: read a part at a time, it is never whole."""
    with path.open("rb") as stream:
        if _binary(stream, path):
            yield io.StringIO()
            return
        with io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=None) as text:
            yield text


def _binary(stream: BinaryIO, path: Path) -> bool:
    """Whether the file `stream` reads is binary (logged), the stream left at its start."""
    head = stream.read(_HEAD_BYTES)
    stream.seek(0)
    if len(head) == _HEAD_BYTES and _undecodable_share(head) > _BINARY_SHARE:
        size = path.stat().st_size
        _log.warning("%s: %d bytes of binary content, not text: read as empty", path, size)
        return True
    return False


def _undecodable_share(head: bytes) -> float:
    """The share of `head`'s bytes that decode to U+FFFD (genuine U+FFFD characters aside)."""
    replaced = head.decode("utf-8", errors="replace").count("\ufffd")
    return (replaced - head.count("\ufffd".encode())) / len(head)


def parse_file(
    path: Path, tool: str | None = None, source: str | None = None
) -> ParseResult | None:
    """parse_text of the file's text (`source`: the path, unless named), read a block at a time
    where the tool's module can (its parse_path): a large file's text is never whole beside
    what it says. Raises OSError when the file cannot be read."""
    source = source if source is not None else str(path)
    if tool is None:
        text = read_text(path)
        tool = detect(text)
        if tool is None:
            return None
        if not hasattr(module_for(tool), "parse_path"):
            return parse_text(text, source, tool)
        del text  # read again, a block at a time
    parse_path = getattr(module_for(tool), "parse_path", None)
    if parse_path is None:
        return parse_text(read_text(path), source, tool)
    with no_cycle_collection():
        result: ParseResult = parse_path(path, source=source, tool=tool)
    return result
