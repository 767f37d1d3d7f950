"""`nvidia-imex-ctl -N` (text) and `nvidia-imex-ctl -N -j` (JSON): the IMEX domain's state, each
node's daemon state and the connection matrix between the nodes.

Text (NVIDIA IMEX guide, "The nvidia-imex-ctl"; published output in the AWS ParallelCluster
P6e-GB200 tutorial): a legend, a timestamp, `Node #<i> - <ip> - <STATE> [- Version: <v>]` lines,
a ` Nodes From\\To  0   1 ...` matrix of one-letter states (C Connected, N Never connected, I
Invalid, R Recovering, D Disconnected, A Authenticating, !V! version and !M! node map mismatch)
and `Domain State: UP`. JSON: {"nodes": {"<i>": {"status", "host", "version", "connections":
{"<j>": {"host", "status": "CONNECTED", ...}}}}, "status": "UP"}, as NVIDIA's validation
scripts read it (no complete published copy found; the layout is theirs).
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpuval.parsers.text import iter_lines
from gpuval.records.base import ParseResult
from gpuval.records.imex import ImexDomainRun, ImexNode

TOOLS = ("nvidia-imex-ctl",)
TOOL = TOOLS[0]

# The text form's one-letter connection states, as the legend names them.
CONNECTION_STATES = {
    "C": "CONNECTED",
    "N": "NEVER_CONNECTED",
    "I": "INVALID",
    "R": "RECOVERING",
    "D": "DISCONNECTED",
    "A": "AUTHENTICATING",
    "!V!": "VERSION_MISMATCH",
    "!M!": "NODE_MAP_MISMATCH",
}
_NODE = re.compile(
    r"^Node #(?P<index>\d+)\s+-\s+(?P<host>\S+)\s+-\s+(?P<status>[A-Z_]+)"
    r"(?:\s+-\s+Version:\s*(?P<version>\S+))?\s*$"
)
_MATRIX_HEADER = re.compile(r"^\s*Nodes From\\To\s+(?P<peers>[\d\s]+)$")
_MATRIX_ROW = re.compile(r"^\s*(?P<index>\d+)\s+(?P<cells>(?:(?:[A-Z]|![A-Z]!)\s*)+)$")
_DOMAIN = re.compile(r"^Domain State:\s*(?P<state>\S+)\s*$")


def detect(text: str) -> tuple[str, int] | None:
    head = text[:8192]
    if "Domain State:" in head or ("Nodes From\\To" in head and "Node #" in head):
        return (TOOL, 90)
    if '"connections"' in head and '"nodes"' in head and head.lstrip().startswith("{"):
        return (TOOL, 80)
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult(TOOL, source)
    run = _read_json(text, result) if text.lstrip().startswith("{") else _read_text(text, result)
    if run is not None:
        result.runs.append(run)
    return result


def _read_text(text: str, result: ParseResult) -> ImexDomainRun | None:
    run = ImexDomainRun(form="text")
    nodes: dict[int, ImexNode] = {}
    peers: list[int] | None = None
    for line in iter_lines(text):
        stripped = line.text.rstrip()
        if match := _NODE.match(stripped):
            index = int(match["index"])
            nodes[index] = ImexNode(index, match["host"], match["status"], match["version"])
        elif match := _MATRIX_HEADER.match(stripped):
            peers = [int(p) for p in match["peers"].split()]
        elif peers is not None and (match := _MATRIX_ROW.match(stripped)):
            cells = match["cells"].split()
            node = nodes.setdefault(int(match["index"]), ImexNode(int(match["index"])))
            if len(cells) != len(peers):
                result.warn(f"matrix row of node {node.index} has {len(cells)} cells for "
                            f"{len(peers)} peers", line.number)  # fmt: skip
            for peer, cell in zip(peers, cells, strict=False):
                node.connections[peer] = CONNECTION_STATES.get(cell, cell)
        elif match := _DOMAIN.match(stripped):
            run.domain_state = match["state"]
    run.nodes = [nodes[i] for i in sorted(nodes)]
    if not run.nodes and run.domain_state is None:
        result.error("no `Node #` line, connection matrix or `Domain State:` line: not the "
                     "output of nvidia-imex-ctl -N")  # fmt: skip
        return None
    return run


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int, float)) and str(value) else None


def _read_json(text: str, result: ParseResult) -> ImexDomainRun | None:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        result.error(f"not JSON ({error.msg} at line {error.lineno}): expected the output of "
                     "nvidia-imex-ctl -N -j", error.lineno)  # fmt: skip
        return None
    raw_nodes = document.get("nodes") if isinstance(document, dict) else None
    if not isinstance(raw_nodes, dict):
        result.error('no "nodes" object: not the output of nvidia-imex-ctl -N -j')
        return None
    run = ImexDomainRun(domain_state=_text(document.get("status")), form="json")
    for key, entry in raw_nodes.items():
        if not (str(key).isdigit() and isinstance(entry, dict)):
            result.warn(f"node entry {key!r} is not an indexed object: skipped")
            continue
        node = ImexNode(int(key), _text(entry.get("host")), _text(entry.get("status")),
                        _text(entry.get("version")))  # fmt: skip
        connections = entry.get("connections")
        for peer, link in connections.items() if isinstance(connections, dict) else ():
            state = _text(link.get("status")) if isinstance(link, dict) else None
            if str(peer).isdigit() and state is not None:
                node.connections[int(peer)] = state
        run.nodes.append(node)
    run.nodes.sort(key=lambda n: n.index)
    return run
