"""The run folder itself: run.json, sidecars, missing steps, unreadable outputs, unreachable
hosts, and whether anything was measured at all. Missing evidence is never a pass."""

from __future__ import annotations

from gpuval import parsers
from gpuval.checks.context import JudgeState
from gpuval.checks.model import CLUSTER, Check, Status
from gpuval.evidence import RUN_JSON, ParsedFile
from gpuval.plan.rack_search import is_search_step
from gpuval.plan.steps import failed_phase, pair_step
from gpuval.records.bandwidth import AllReduceBenchRun, NvbandwidthRun
from gpuval.records.base import Diagnostic
from gpuval.records.collective_bench import CollectiveBenchRun
from gpuval.records.nccl import NcclRun
from gpuval.records.network import Iperf3Run
from gpuval.records.p2p import P2PRun


def located(diagnostic: Diagnostic) -> str | None:
    if diagnostic.source and diagnostic.line:
        return f"{diagnostic.source}:{diagnostic.line}"
    return diagnostic.source


def _host_of(source: str | None) -> str:
    parts = (source or "").split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "raw" else CLUSTER


def _diagnostic_status(diagnostic: Diagnostic) -> Status:
    if diagnostic.level != "error":
        return "warn"
    # run.json is the contract the run is judged against: when it is broken, nothing can be
    # judged with confidence
    return "error" if diagnostic.source == RUN_JSON else "fail"


def folder_checks(judge: JudgeState) -> None:
    """Run-folder problems (run.json, bad sidecars, missing raw files, files without sidecar,
    paths refused), a run.json that cannot say which hosts were expected, and hosts listed in
    run.json that left nothing."""
    folder = judge.evidence.folder
    for diagnostic in folder.diagnostics:
        judge.add(Check(
            check_id="run-folder", host=_host_of(diagnostic.source), category="completeness",
            status=_diagnostic_status(diagnostic), reason=diagnostic.message,
            source=located(diagnostic),
        ))  # fmt: skip
    for refused in folder.refused:
        judge.add(Check(
            check_id="run-folder.refused", host=_host_of(refused.source), category="completeness",
            status="error", reason=f"{refused.message}; not read (a node is judged on the files "
            "of its own folder only), so the run cannot be judged", source=refused.source,
        ))  # fmt: skip
    if "hosts" not in folder.meta:
        judge.add(Check(
            check_id="run.hosts", host=CLUSTER, category="completeness", status="unjudged",
            reason="run.json does not list the run's hosts (no run.json, or none usable): a host "
            "that left nothing cannot be noticed, so the run is at best unjudged", source=RUN_JSON,
        ))  # fmt: skip
    for host in judge.evidence.unreachable:
        steps = folder.expected_steps(host)
        missing = f"; none of its {len(steps)} expected step(s) ran" if steps else ""
        judge.add(Check(
            check_id="host.reachable", host=host, category="completeness", status="fail",
            reason=f"host listed in run.json has no raw/{host}/ folder: unreachable or never "
            f"run{missing}", source=RUN_JSON,
        ))  # fmt: skip


def _step_problem(file: ParsedFile) -> tuple[Status, str] | None:
    if file.ended is None:
        return None
    if file.failure_record is not None:
        return "fail", f"failed phase {failed_phase(file.step)}: {file.failure_record}"
    if (
        file.ended[0] == "exit_status"
        and file.tool
        and file.runs
        and (file.exit_code in parsers.normal_exit_codes(file.tool))
    ):
        return None  # e.g. grep's 2 for sysfs files without a value: the output is whole
    step, (kind, detail) = f"step {file.step!r}", file.ended
    if kind == "skipped":
        # Skipped on purpose (e.g. no GPU): not a hardware failure, but no evidence either.
        return "warn", f"{step} skipped: {detail} (no evidence from it)"
    if kind == "timed_out":
        return "fail", f"{step} timed out{detail}"
    if kind == "unfinished":
        return "fail", f"{step} did not finish: no exit status recorded ({detail})"
    if lost := file.lost_nodes:
        # Slurm ended the step because a node left it: no evidence against the nodes that
        # stayed, and none for them either.
        said = "; ".join(dict.fromkeys(lost.values()))
        return "unjudged", (
            f"{step} exited with status {detail} after Slurm lost {', '.join(lost)} from it "
            f"({said}): unconfirmed, neither passed nor failed on it"
        )
    return "fail", f"{step} exited with status {detail}"


def _retried_preflights(judge: JudgeState) -> set[str]:
    """First tries of the MPI preflight that ran once more (the preflight's checks judge both
    together: gpuval.checks.mpi_preflight) and an earlier start's retries."""
    return {path for tries in judge.evidence.mpi_preflights for path in tries.not_step_checked}


def step_checks(judge: JudgeState) -> None:
    """Each step's sidecar: skipped, timed out, unfinished or non-zero exit status (a pair try's
    ending is its pair's reason: the pair analysis judges all tries of a pair together; a rack
    search group's is the search's, which names the tray; a retried preflight's, its retry's).
    A node that Slurm says the step lost is not tested in it."""
    folder = judge.evidence.folder
    retried = _retried_preflights(judge)
    for file in judge.evidence.files:
        if file.is_pair_try or is_search_step(file.step) or file.path in retried:
            continue
        problem = _step_problem(file)
        if problem and file.ended:
            judge.add(Check(
                check_id=f"step.{file.step}", host=file.host, category="completeness",
                status=problem[0], reason=problem[1], source=file.path, measured=file.exit_code,
                reference=None if file.ended[0] == "skipped" else 0,
            ))  # fmt: skip
        for node, said in file.lost_nodes.items():
            if node != file.host and node in folder.hosts:
                judge.add(Check(
                    check_id=f"step.{file.step}", host=node, category="completeness",
                    status="unjudged", reason=f"not tested in step {file.step!r}: Slurm lost "
                    f"the node while the step ran ({said})", source=file.path,
                ))  # fmt: skip


def expected_step_checks(judge: JudgeState) -> None:
    """Every step run.json expects on a reachable host must have left a sidecar or output
    (expected pair steps are accounted for by the pair analysis)."""
    folder = judge.evidence.folder
    # The steps each host left, in one pass: a set per host built from every file was quadratic
    # (15 s of a thousand nodes' report).
    present_by_host: dict[str, set[str]] = {}
    for file in judge.evidence.files:
        present_by_host.setdefault(file.host, set()).add(file.step)
    for host in folder.hosts:
        if host in judge.evidence.unreachable:
            continue
        present = present_by_host.get(host, set())
        for step in folder.expected_steps(host):
            if step not in present and pair_step(step) is None:
                judge.add(Check(
                    check_id=f"step.{step}", host=host, category="completeness", status="fail",
                    reason=f"expected step {step!r} left no output and no sidecar in "
                    f"raw/{host}/ (not run, or its output was lost)", source=RUN_JSON,
                ))  # fmt: skip


def parse_checks(judge: JudgeState) -> None:
    """Parser errors fail (numbers could not be read); parser warnings warn, one line per file."""
    retried = _retried_preflights(judge)
    for file in judge.evidence.files:
        # A pair try's errors are its pair's reason, a rack search group's the search's, a
        # retried preflight's its retry's.
        skipped = file.tool is None or file.is_pair_try or is_search_step(file.step)
        if skipped or file.path in retried:
            continue
        if not file.runs and not file.errors:
            judge.add(Check(
                check_id="parse.error", host=file.host, category="completeness", status="fail",
                reason=f"read as {file.tool} output, but it holds no run", source=file.path,
            ))  # fmt: skip
        problems: tuple[tuple[str, tuple[Diagnostic, ...], Status], ...] = (
            ("error", file.errors, "fail"),
            ("warning", file.warnings, "warn"),
        )
        for level, found, status in problems:
            if not found:
                continue
            first = found[0]
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            judge.add(Check(
                check_id=f"parse.{level}", host=file.host, category="completeness",
                status=status, reason=f"{file.tool} output: {first.message}{more}",
                measured=len(found), source=located(first) or file.path,
            ))  # fmt: skip


def _measured(file: ParsedFile) -> bool:
    for run in file.runs:
        if isinstance(run, (NcclRun, AllReduceBenchRun, CollectiveBenchRun)) and run.rows:
            return True
        if isinstance(run, P2PRun) and run.matrices:
            return True
        if isinstance(run, NvbandwidthRun) and run.tests:
            return True
        if isinstance(run, Iperf3Run) and (run.intervals or run.complete):
            return True
    return False


INSPECTED = ("topology", "hardware", "network")


def evidence_check(judge: JudgeState) -> None:
    """A run with nothing measured and no hardware judged (a board, a GPU count, a port) is an
    error, never a pass. A preflight-only run that judged its board stands on that."""
    files = judge.evidence.files
    inspected = any(c.category in INSPECTED and c.status != "error" for c in judge.checks)
    if not inspected and not any(_measured(file) for file in files):
        read = sorted({f.tool for f in files if f.tool is not None})
        judge.add(Check(
            check_id="run.evidence", host=CLUSTER, category="completeness", status="error",
            reason="nothing was measured and no hardware judged: no benchmark output and no "
            f"judgeable hardware description was recognised (read: {', '.join(read) or 'nothing'}"
            "); no evidence is never a pass",
        ))  # fmt: skip
