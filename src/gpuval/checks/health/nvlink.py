"""NVLink: NVSwitch fabric registration and the NVLink error counters over the run."""

from __future__ import annotations

from gpuval.checks.context import JudgeState
from gpuval.checks.health.common import Problem, add_check, health_gpus, missing_probe
from gpuval.checks.model import Check
from gpuval.evidence import HostEvidence
from gpuval.records.health import (
    NvlinkErrorsRun,
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


def nvlink_fabric_checks(judge: JudgeState, host: HostEvidence) -> None:
    parsed = host.health.smi.latest
    if parsed is None:
        return
    problems: list[Problem] = []
    registered = 0
    for name, gpu in health_gpus(parsed):
        fabric = gpu.health.fabric if gpu.health else None
        if fabric is None or fabric.state is None:
            continue
        if fabric.state.lower() != "completed" or (fabric.status or "").lower() != "success":
            problems.append(
                (
                    "fail",
                    f"{name} fabric state {fabric.state}, status "
                    f"{fabric.status}: not registered with the NVSwitch fabric",
                    "start (or restart) nvidia-fabricmanager, then reset the GPUs",
                )
            )
        else:
            registered += 1
    if registered or problems:
        add_check(
            judge,
            host,
            "health.nvlink.fabric",
            problems,
            f"{registered} GPU(s) registered with "
            "the NVSwitch fabric (fabric manager: Completed, Success)",
            parsed.source(),
        )


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
