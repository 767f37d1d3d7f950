"""IMEX: the service that lets the GPUs of a multi-node NVLink domain (an NVL72 rack) map each
other's memory. `nvidia-imex-ctl -N` prints the domain's state, each node's daemon and the
connection between every pair of nodes; a domain is usable when it is UP, every node READY and
every connection Connected (NVIDIA IMEX guide:
https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/gettingstarted.html; Crusoe's
validation step: https://docs.crusoecloud.com/networking/nv-link/imex-setup/index.html).
Judged where the output exists: nodes without the IMEX service print none.
"""

from __future__ import annotations

from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check
from gpuval.checks.health.fabric import in_nvlink_domain
from gpuval.evidence import HostEvidence
from gpuval.records.imex import ImexDomainRun

IMEX_SOURCE = (
    "https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/gettingstarted.html "
    "(nvidia-imex-ctl -N: Domain State UP, nodes READY, C = Connected)"
)
RESTART_ACTION = (
    "check nodes_config.cfg lists every node of the domain on every node, then restart "
    "nvidia-imex on the nodes named (journalctl -u nvidia-imex says why a node is not READY)"
)
_SHOWN = 6  # connections named before "and N more"


def imex_problems(run: ImexDomainRun) -> list[Problem]:
    """What keeps the domain from working: its state, each node not READY, each connection
    that is not Connected."""
    if not run.nodes:
        return [("unjudged", "nvidia-imex-ctl listed no node of the domain", None)]
    problems: list[Problem] = []
    if (run.domain_state or "").upper() != "UP":
        problems.append(("fail", f"IMEX Domain State {run.domain_state or 'not printed'} "
                         "(UP when usable)", RESTART_ACTION))  # fmt: skip
    for node in run.nodes:
        if (node.status or "").upper() != "READY":
            problems.append(("fail", f"IMEX node #{node.index} ({node.host}) "
                             f"{node.status or 'state not printed'}", RESTART_ACTION))  # fmt: skip
    broken = [f"#{node.index} -> #{peer} {state}" for node in run.nodes
              for peer, state in sorted(node.connections.items())
              if state.upper() != "CONNECTED"]  # fmt: skip
    if broken:
        more = f" (and {len(broken) - _SHOWN} more)" if len(broken) > _SHOWN else ""
        problems.append(("fail", f"IMEX connection(s) not Connected: "
                         f"{', '.join(broken[:_SHOWN])}{more}", RESTART_ACTION))  # fmt: skip
    # Every node must show its state towards every other node: a short matrix row is no pass.
    listed = {node.index for node in run.nodes}
    missing = [f"#{node.index}" for node in run.nodes
               if not (listed - {node.index}) <= set(node.connections)]  # fmt: skip
    if missing and not broken:
        problems.append(("unjudged", f"no connection state printed towards every peer for node(s) "
                         f"{', '.join(missing)}", None))  # fmt: skip
    return problems


def imex_checks(judge: JudgeState, host: HostEvidence) -> None:
    """health.nvlink.imex: the last nvidia-imex-ctl -N output the host captured."""
    parsed = list(host.runs.of(ImexDomainRun))
    if not parsed:
        if in_nvlink_domain(host):  # a tray of an NVL72 rack: without IMEX no multi-node NVLink
            problem: Problem = ("unjudged", "no nvidia-imex-ctl -N output from a tray of a "
                                "multi-node NVLink domain: its IMEX domain is unknown",
                                "capture nvidia-imex-ctl -N (preflight) where the "
                                "nvidia-imex service runs")  # fmt: skip
            add_check(judge, host, "health.nvlink.imex", [problem], "", None,
                      reference=IMEX_SOURCE)  # fmt: skip
        return
    latest = parsed[-1]
    run = latest.record
    connections = sum(len(node.connections) for node in run.nodes)
    passed = (f"IMEX domain UP: {len(run.nodes)} node(s) READY, all {connections} connections "
              "Connected")  # fmt: skip
    add_check(judge, host, "health.nvlink.imex", imex_problems(run), passed, latest.source(),
              reference=IMEX_SOURCE)  # fmt: skip
