"""NVLink: link states (nvidia-smi nvlink -s) and the NVLink error counters over the run (the
fabric registration is fabric.py's)."""

from __future__ import annotations

from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check, missing_probe
from gpuval.checks.model import Check, Status, rank
from gpuval.checks.wording import listed
from gpuval.evidence import HostEvidence
from gpuval.evidence.model import GpuNvlinks
from gpuval.records.health import (
    NvlinkErrorsRun,
)

# Systems whose board wires every NVLink of every GPU (a link down is lost bandwidth).
WIRED_FABRICS = ("nvswitch", "mesh", "cube-mesh")
DARK_ACTION = (
    "reset {gpus} and restart nvidia-fabricmanager; if no link comes up, check the NVLink "
    "connections (bridge, baseboard) or RMA the GPU"
)

# NVLink counters (NVML's nvmlNvLinkErrorCounter_t): replay = the data link retransmitted,
# recovery = the link retrained, CRC = a flow-control unit or data arrived corrupted.
NVLINK_COUNTER_SOURCE = (
    "https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html "
    "(nvmlNvLinkErrorCounter_t); https://docs.nvidia.com/deploy/nvidia-smi/index.html (nvlink -e)"
)
# BusbwChoice counter kinds, by a word of the printed name ("Data CRC Errors", "Lane 3 CRC Errors"),
# with what to do when one grows. Other names are kept in the record and not judged.
NVLINK_ERRORS = {
    "crc": "reseat or replace the NVLink bridge or board of {gpu}; RMA {gpu} if errors recur",
    "recovery": "reseat or replace the NVLink bridge or board of {gpu}; RMA {gpu} if the link "
    "keeps retraining",
    "replay": "a marginal NVLink: reseat the NVLink bridge or board of {gpu}; RMA {gpu} if "
    "replays keep growing",
}


def _active(gpu: GpuNvlinks) -> bool:
    return any(link.state == "active" for link in gpu.links)


def _have_none(dark: list[str]) -> str:
    """'GPU2 has no active NVLink', 'GPU0, GPU1 have no active NVLink'."""
    more = f" (and {len(dark) - 8} more)" if len(dark) > 8 else ""
    return f"{', '.join(dark[:8])}{more} {'has' if len(dark) == 1 else 'have'} no active NVLink"


def _dark_verdict(host: HostEvidence, dark: list[str], lit: int) -> tuple[Status, str]:
    """GPUs with no active NVLink ("all links are inActive", or every link <inactive>): a fault
    where the node shows it has NVLink (siblings with active links) or its model's catalog
    entry puts NVLink on every board; fine where the model has none or only by bridge."""
    model = host.model
    gpus = max(len(host.nvlinks), host.gpu_count or 0, host.declared.gpus_per_node or 0)
    none = _have_none(dark)
    if lit:
        siblings = f"{none} while {lit} other GPU(s) of the node show NVLinks"
        if model and model.nvlink_optional and gpus % 2 and len(dark) == 1:
            # Bridges join pairs: the odd card out may have no partner by design.
            return "warn", (f"{siblings} (a {model.model} joins a peer only through a bridge, "
                            "and this node has an odd number of cards)")  # fmt: skip
        return "fail", siblings
    if model is None:
        return "unjudged", (f"{none} and the GPU model is unknown: whether the board has NVLink "
                            "cannot be said (declare gpu_model)")  # fmt: skip
    if model.nvlink_generation is None:
        return "pass", f"{none}: the {model.model} has no NVLink ({model.source})"
    if model.nvlink_optional:
        return "pass", (f"{none}: the {model.model} reaches a peer over NVLink only through an "
                        "optional bridge, and no GPU of this node shows one")  # fmt: skip
    if gpus <= 1:
        return "pass", f"{none}: it is the node's only GPU, with no NVLink peer on the node"
    return "fail", (f"{none} where the {model.model}'s board wires all {model.nvlink_links} of "
                    "its links (catalog)")  # fmt: skip


def nvlink_state_checks(judge: JudgeState, host: HostEvidence) -> None:
    """`nvidia-smi nvlink -s`: an inactive link on a board whose system wires every link is a
    lost NVLink (a GPU, a baseboard trace or an NVSwitch), whatever the bandwidth still shows;
    a GPU with no active link at all is judged by `_dark_verdict`."""
    if not host.nvlinks:
        return
    system, model = host.system, host.model
    source = host.nvlinks[0].source
    dark = [gpu.gpu for gpu in host.nvlinks if not _active(gpu)]
    lit = [gpu for gpu in host.nvlinks if _active(gpu)]
    inactive = [
        f"{gpu.gpu} link(s) {', '.join(str(link.link) for link in down)} inactive"
        for gpu in lit
        if (down := [link for link in gpu.links if link.state != "active"])
    ]
    problems: list[Problem] = []
    action = DARK_ACTION.format(gpus=", ".join(dark))
    if system is not None and system.fabric in WIRED_FABRICS and model is not None:
        short = [f"{gpu.gpu} lists {len(gpu.links)} links" for gpu in lit
                 if len(gpu.links) < model.nvlink_links]  # fmt: skip
        board = f"where a {system.name} wires all {model.nvlink_links} links of each {model.model}"
        if dark:
            problems.append(("fail", f"{_have_none(dark)} {board}", action))
        if inactive or short:
            problems.append(("fail", f"{listed(inactive + short)} {board}: lost NVLink "
                             "bandwidth", None))  # fmt: skip
        passed = f"all {model.nvlink_links} NVLinks of each of {len(lit)} GPU(s) active"
        reference: str | None = f"{model.nvlink_links} active links per GPU"
    else:
        if dark:
            status, text = _dark_verdict(host, dark, len(lit))
            problems.append((status, text, action if status in ("fail", "warn") else None))
        if inactive:
            problems.append(("warn", f"{listed(inactive)} (this system need not wire every "
                             "link)", None))  # fmt: skip
        passed = f"{len(host.nvlinks)} GPU(s): no inactive NVLink listed"
        reference = None
    problems.sort(key=lambda p: rank(p[0]))  # the worst named first; a pass says why
    status = problems[0][0] if problems else "pass"
    judge.add(Check(
        check_id="topology.nvlink-state", host=host.name, category="topology", status=status,
        source=source, reference=reference,
        reason="; ".join(p[1] for p in problems) if problems else passed,
        action="; ".join(dict.fromkeys(p[2] for p in problems if p[2] and p[0] == status))
        or None,
    ))  # fmt: skip


def _nvlink_counts(run: NvlinkErrorsRun) -> dict[tuple[str, int, str], int | None]:
    return {(f"GPU{gpu.index}", link.link, name): value for gpu in run.gpus
            for link in gpu.links for name, value in link.counters.items()}  # fmt: skip


def _nvlink_kind(name: str) -> str | None:
    return next((kind for kind in NVLINK_ERRORS if kind in name.lower()), None)


def nvlink_error_checks(judge: JudgeState, host: HostEvidence) -> None:
    """`nvidia-smi nvlink -e` before and after the benchmarks: a replay, recovery or CRC counter
    that grew is a link that corrupted traffic during the run."""
    captures = host.health.nvlink_errors
    parsed = captures.latest
    if parsed is None:
        what = "NVLink error counters (nvidia-smi nvlink -e)"
        missing_probe(judge, host, "health.nvlink.errors", what, "health-nvlink-errors")
        return
    if not parsed.record.gpus:
        # nvlink -e prints nothing where no GPU has NVLink peers (a lent single H100 did so):
        # no counter applies. Whether links should be there is the topology checks' to say;
        # only links that nvlink -s lists and nvlink -e does not leave counters unread.
        listed = sum(len(gpu.links) for gpu in host.nvlinks)
        if listed:
            judge.add(Check(
                check_id="health.nvlink.errors", host=host.name, category="health",
                status="unjudged", source=parsed.source(), reference=NVLINK_COUNTER_SOURCE,
                reason=f"nvidia-smi nvlink -e listed no NVLink where nvlink -s lists {listed}: "
                "their error counters were not read",
            ))  # fmt: skip
        return
    paired = captures.before is not None and captures.after is not None
    first = _nvlink_counts(captures.before.record) if captures.before and paired else {}
    problems: list[Problem] = []
    judged = 0
    for (gpu, link, name), value in _nvlink_counts(parsed.record).items():
        kind = _nvlink_kind(name)
        if kind is None or value is None:
            continue
        judged += 1
        start = first.get((gpu, link, name))
        action = NVLINK_ERRORS[kind].format(gpu=gpu)
        if start is not None and value > start:
            problems.append(("fail", f"{gpu} link {link} {name} {start} -> {value} during the run",
                             action))  # fmt: skip
        elif start is not None and value < start:
            problems.append(("unjudged", f"{gpu} link {link} {name} fell {start} -> {value}: "
                             "the counters were reset during the run", None))  # fmt: skip
        elif start is None and value:
            problems.append(("warn", f"{gpu} link {link} {name} {value} since the counters were "
                             "cleared (no capture before the run to compare)", action))  # fmt: skip
    if not judged:
        problems.append(("unjudged", "no replay, recovery or CRC counter with a value (N/A or "
                         "other names only)", None))  # fmt: skip
    links = len({(gpu, link) for gpu, link, _ in _nvlink_counts(parsed.record)})
    counted = f"{links} NVLink(s), {judged} replay/recovery/CRC counter(s)"
    passed = (
        f"{counted}: none grew during the run"
        if paired
        else f"{counted}, all zero (one capture only)"
    )
    add_check(judge, host, "health.nvlink.errors", problems, passed, parsed.source(),
              reference=NVLINK_COUNTER_SOURCE)  # fmt: skip
