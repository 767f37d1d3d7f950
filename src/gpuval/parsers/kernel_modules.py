"""`cat /proc/modules` (or `lsmod`): the kernel modules loaded, so the judge can tell whether
GPUDirect RDMA's `nvidia_peermem` (or the older `nv_peer_mem`) is there.

/proc/modules lines: `nvidia_peermem 16384 0 - Live 0xffffffffc0b7e000 (OE)`; lsmod prints a
`Module  Size  Used by` header and `nvidia_peermem  16384  0`.
"""

from __future__ import annotations

import re

from gpuval.parsers.text import iter_lines
from gpuval.records.base import ParseResult
from gpuval.records.health import KernelModulesRun

TOOLS = ("kernel-modules",)
# The use count is "-" on kernels built without module unloading (the lent H100's VM:
# "nvidia 14299136 - - Live 0xffffffffc0400000 (O)").
_PROC = re.compile(r"^(?P<name>\w+) \d+ (?:\d+|-) \S+ (?:Live|Loading|Unloading)\b")
_LSMOD = re.compile(r"^(?P<name>\w+)\s+\d+\s+\d+\b")


def detect(text: str) -> tuple[str, int] | None:
    head = text[:8192]
    if re.search(r"^\w+ \d+ (?:\d+|-) \S+ (?:Live|Loading|Unloading) 0x", head, re.M):
        return ("kernel-modules", 80)
    if re.match(r"\s*Module\s+Size\s+Used by", head):
        return ("kernel-modules", 80)
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult("kernel-modules", source)
    modules: list[str] = []
    for line in iter_lines(text):
        stripped = line.text.strip()
        if not stripped or re.match(r"Module\s+Size\s+Used by", stripped):
            continue
        match = _PROC.match(stripped) or _LSMOD.match(stripped)
        if match is None:
            result.warn(f"not a /proc/modules or lsmod line: {stripped!r}", line.number)
            continue
        modules.append(match["name"])
    if not modules:
        result.error("no module listed: /proc/modules is never empty on a running kernel")
        return result
    result.runs.append(KernelModulesRun(sorted(set(modules))))
    return result
