"""nccl-tests / rccl-tests and ml-engineering's all_reduce_bench: did the run finish, were the
results right, what did the output itself say failed (FAILED lines, NCCL WARN lines), which
transport carried the data, and how its large-message busbw compares with the reference."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuval.catalog import nvlink_count
from gpuval.catalog.nccl_warnings import WarningMeaning, classify
from gpuval.checks.context import JudgeState
from gpuval.checks.model import CLUSTER, Category, Check, Status
from gpuval.checks.nccl_rails import hca_checks, inventory_host
from gpuval.checks.rack_tests import (
    RDMA_TRANSPORTS,
    rack_reference,
    rack_test_owner,
    rack_transport,
)
from gpuval.checks.references import (
    Reference,
    collective_name,
    is_multinode,
    named_collective,
    nccl_reference,
    node_peak,
    run_hosts,
)
from gpuval.checks.wording import band_status, listed, peak_sentence, size_text
from gpuval.evidence import HostEvidence, Parsed
from gpuval.plan.rack_search import is_search_step
from gpuval.plan.steps import RackTest, rack_test
from gpuval.records.bandwidth import AllReduceBenchRun
from gpuval.records.nccl import NcclRun

ALGORITHM_CAVEAT = "busbw with NVLS/CollNet exceeds link bandwidth by design"
PLATEAU_FRACTION = 0.9  # rows within 10 % of the best large-message busbw are its plateau


@dataclass(frozen=True)
class Problem:
    """Something an nccl-tests output itself says went wrong."""

    aspect: str  # "complete", "correctness", "failed-line", "nccl-warn-<class>"
    status: Status
    category: Category
    reason: str
    line: int | None = None
    host: str | None = None  # the host the output names (an NCCL WARN line's prefix)


WrongRows = tuple[list[tuple[int, str, int, int | None]], int]


def _wrong_rows(run: NcclRun) -> WrongRows:
    """(size, placement, count, line) of rows with #wrong > 0, and how many values were seen."""
    table = run.rows
    halves = list(zip(table.column("wrong", "out_of_place"), table.column("wrong", "in_place"),
                      strict=True))  # fmt: skip
    seen = sum(count is not None for counts in halves for count in counts)
    wrong_at = [
        (at, placement, count)
        for at, counts in enumerate(halves)
        for placement, count in zip(("out-of-place", "in-place"), counts, strict=True)
        if count is not None and count > 0
    ]
    if not wrong_at:
        return [], seen
    sizes, lines = table.column("size_bytes"), table.column("line")
    return [(sizes[at], placement, count, lines[at]) for at, placement, count in wrong_at], seen


FAILED_MEANINGS = (
    ("Avg bus bandwidth", "bandwidth",
     "the average busbw is below the minimum the run was given (NCCL_TESTS_MIN_BW)"),
    ("Bitwise mismatches", "correctness",
     "results differ bit for bit between runs (the -B check): non-deterministic or corrupted"),
)  # fmt: skip


def _failed_lines(run: NcclRun) -> list[Problem]:
    """Every line where nccl-tests printed FAILED fails the run: a non-zero `Out of bounds
    values`, the average busbw check (`# Avg bus bandwidth : 0 FAILED` with NCCL_TESTS_MIN_BW,
    which also exits non-zero), bitwise mismatches, and whatever a later version adds."""
    found = []
    bounds = run.out_of_bounds
    if bounds is not None and not bounds.ok:
        found.append(Problem(
            "out-of-bounds", "fail", "correctness",
            f"Out of bounds values: {bounds.count} FAILED: results outside the valid range",
        ))  # fmt: skip
    for failed in run.failed_lines:
        if "Out of bounds" in failed.text and bounds is not None and not bounds.ok:
            continue  # said above, with its count
        category: Category = "correctness"
        meaning = "the test's own check failed"
        for marker, kind, text in FAILED_MEANINGS:
            if marker in failed.text:
                category, meaning = kind, text  # type: ignore[assignment]
        found.append(Problem(
            "failed-line", "fail", category,
            f"nccl-tests printed '{failed.text.strip()}' (line {failed.line}): {meaning}",
            failed.line,
        ))  # fmt: skip
    return found


def _warn_problems(run: NcclRun, across_nodes: bool) -> list[Problem]:
    """NCCL WARN lines, one problem per class (and, across nodes, per host that printed them):
    fatal ones fail, config and unknown ones warn, benign ones are noted (pass)."""
    found: dict[tuple[str, str | None], list[tuple[str, int, WarningMeaning]]] = {}
    for warning in run.nccl_warnings:
        meaning = classify(warning.message, across_nodes)
        where = f"{warning.host}: " if warning.host else ""
        key = (meaning.kind, warning.host if across_nodes else None)
        found.setdefault(key, []).append((f"{where}{warning.message}", warning.log_line, meaning))
    statuses: dict[str, Status] = {"fatal": "fail", "config": "warn", "unknown": "warn",
                                   "benign": "pass"}  # fmt: skip
    order = ("fatal", "config", "unknown", "benign")
    problems = []
    for (kind, host), lines in sorted(found.items(), key=lambda kv: (order.index(kv[0][0]),
                                                                    kv[0][1] or "")):  # fmt: skip
        meaning = lines[0][2]
        shown = listed([f"'{text}' (line {line})" for text, line, _ in lines], 2)
        problems.append(Problem(
            f"nccl-warn-{kind}", statuses[kind], "correctness" if kind == "fatal" else "transport",
            f"{len(lines)} {kind} NCCL WARN line(s): {shown}; {meaning.meaning}; "
            f"do: {meaning.action} [{meaning.source}]", lines[0][1], host,
        ))  # fmt: skip
    return problems


def nccl_problems(run: NcclRun, across_nodes: bool = False) -> list[Problem]:
    """Everything an nccl-tests run's own output says is wrong, most serious first. The one
    correctness rule for nccl-tests, shared by the per-run checks and the pair analysis."""
    return _problems(run, across_nodes, _wrong_rows(run))


def _problems(run: NcclRun, across_nodes: bool, wrong_rows: WrongRows) -> list[Problem]:
    problems: list[Problem] = []
    if run.failures:
        first = run.failures[0]
        where = f"{first.host}: " if first.host else ""
        problems.append(Problem(
            "complete", "fail", "completeness", f"test failure: {where}{first.message.strip()}",
            first.log_line,
        ))  # fmt: skip
    elif not run.rows:
        problems.append(Problem("complete", "fail", "completeness",
                                "no data rows: the test never measured"))  # fmt: skip
    elif not run.complete:
        problems.append(Problem(
            "complete", "fail", "completeness",
            f"did not complete: {len(run.rows)} row(s) but no closing '# Avg bus bandwidth' "
            "footer (killed, truncated or reformatted)",
        ))  # fmt: skip
    wrong, seen = wrong_rows
    if wrong:
        named = ", ".join(f"{count:g} wrong at {size_text(size)} ({p})"
                          for size, p, count, _ in wrong[:4])  # fmt: skip
        more = f" and {len(wrong) - 4} more row(s)" if len(wrong) > 4 else ""
        problems.append(Problem(
            "correctness", "fail", "correctness",
            f"#wrong is not zero: {named}{more}; results were corrupted", wrong[0][3],
        ))  # fmt: skip
    elif run.rows and seen == 0 and run.out_of_bounds is None:
        problems.append(Problem(
            "correctness", "fail", "correctness",
            "correctness not shown: no #wrong values and no 'Out of bounds values' line "
            "(columns removed, -c 0, or cut output); a validation suite cannot assume the "
            "results were right",
        ))  # fmt: skip
    elif run.rows and seen == 0:
        problems.append(Problem("correctness", "warn", "correctness",
                                "results not validated: #wrong is N/A in every row (run with "
                                "-c 1)"))  # fmt: skip
    return problems + _failed_lines(run) + _warn_problems(run, across_nodes)


def _scope(collective: str, multinode: bool, test: RackTest | None = None) -> str:
    if test is not None:
        return f"{collective}.{test}"
    return f"{collective}.internode" if multinode else collective


def _named_host(judge: JudgeState, name: str | None, owner: str) -> str:
    """The inventory host an output names (NCCL prints hostnames; an inventory name that is the
    hostname or its short form matches), else the check's owner."""
    return inventory_host(judge, name) or owner


def _record_problems(judge: JudgeState, parsed: Parsed[NcclRun], prefix: str, owner: str,
                     across_nodes: bool) -> None:  # fmt: skip
    run = parsed.record
    wrong_rows = _wrong_rows(run)  # read once: the problems and the passing check's count
    problems = _problems(run, across_nodes, wrong_rows)
    for problem in problems:
        judge.add(Check(
            check_id=f"{prefix}.{problem.aspect}", host=_named_host(judge, problem.host, owner),
            category=problem.category, status=problem.status, reason=problem.reason,
            source=parsed.source(problem.line),
        ))  # fmt: skip
    aspects = {p.aspect for p in problems}
    if "complete" not in aspects:
        judge.add(Check(
            check_id=f"{prefix}.complete", host=owner, category="completeness",
            status="pass", measured=len(run.rows), source=parsed.source(),
            reason=f"completed: {len(run.rows)} sizes",
        ))  # fmt: skip
    if "correctness" not in aspects and "out-of-bounds" not in aspects:
        _, seen = wrong_rows
        judge.add(Check(
            check_id=f"{prefix}.correctness", host=owner, category="correctness",
            status="pass", measured=0, reference=0, source=parsed.source(),
            reason=f"#wrong 0 in {seen} measurement(s)"
            + (", out of bounds 0 OK" if run.out_of_bounds else ""),
        ))  # fmt: skip


# ------------------------------------------------------------------ bandwidth


@dataclass(frozen=True)
class Sample:
    size_bytes: float
    busbw_gbps: float
    line: int | None


@dataclass(frozen=True)
class BusbwChoice:
    """The busbw a run is judged on, and what a reader needs to know about how it was chosen."""

    sample: Sample
    note: str


def judged_sample(samples: list[Sample], min_bytes: int) -> BusbwChoice | None:
    """The floor of the large-message plateau: rows >= min_bytes from the first one within 10 %
    of the best on, lowest of them. A curve still rising at min_bytes is judged from where it
    levels off; one that collapses at its largest sizes is judged on the collapse, never on its
    best size. A sweep that stops below min_bytes is judged on its largest size, flagged."""
    if not samples:
        return None
    large = sorted((s for s in samples if s.size_bytes >= min_bytes), key=lambda s: s.size_bytes)
    if not large:
        biggest = max(s.size_bytes for s in samples)
        sample = max((s for s in samples if s.size_bytes == biggest), key=lambda s: s.busbw_gbps)
        return BusbwChoice(sample, (
            f"; the sweep stops below {size_text(min_bytes)}, so the largest size was used and "
            "may understate the link"
        ))  # fmt: skip
    best = max(large, key=lambda s: s.busbw_gbps)
    start = next(s for s in large if s.busbw_gbps >= PLATEAU_FRACTION * best.busbw_gbps)
    floor = min((s for s in large if s.size_bytes >= start.size_bytes),
                key=lambda s: s.busbw_gbps)  # fmt: skip
    note = ""
    if floor.busbw_gbps < PLATEAU_FRACTION * best.busbw_gbps:
        note = (
            f"; busbw falls from {best.busbw_gbps:.1f} GB/s at {size_text(best.size_bytes)} to "
            f"{floor.busbw_gbps:.1f} GB/s at {size_text(floor.size_bytes)}: judged on the fall"
        )
    return BusbwChoice(floor, note)


def _algorithm_seen(algorithms: Sequence[str], env: dict[str, str]) -> bool:
    words = [*algorithms, env.get("NCCL_ALGO", "")]
    return any("nvls" in w.lower() or "collnet" in w.lower() for w in words)


def bandwidth_check(
    judge: JudgeState,
    parsed: Parsed[NcclRun] | Parsed[AllReduceBenchRun],
    check_id: str,
    samples: list[Sample],
    reference: Reference,
    algorithms: Sequence[str],
    owner: str,
) -> None:
    judged = judged_sample(samples, judge.thresholds.large_message_min_bytes)
    if judged is None:
        judge.add(Check(
            check_id=check_id, host=owner, category="bandwidth", status="fail",
            reason="no bandwidth rows to judge", source=parsed.source(),
        ))  # fmt: skip
        return
    sample = judged.sample
    half = "out-of-place busbw" if isinstance(parsed.record, NcclRun) else "busbw"
    at = f"{half} at {size_text(sample.size_bytes)}"
    check = Check(
        check_id=check_id,
        host=owner,
        category="bandwidth",
        status="unjudged",
        reason="",
        measured=sample.busbw_gbps,
        unit="GB/s",
        source=parsed.source(sample.line),
    )
    peak = reference.peak
    if peak is None:
        check.reason = (
            f"{sample.busbw_gbps:.1f} GB/s {at}; unjudged, no reference: {reference.why_none}"
            f"{judged.note}"
        )
        judge.add(check)
        return
    # A rack's checks name the rack; its reference stays the cluster's, where the busbw series
    # of the run's host finds it.
    judge.expect(owner if owner in judge.evidence.hosts else CLUSTER, reference.subject, peak)
    fraction = sample.busbw_gbps / peak.per_direction_gbps
    t = judge.thresholds
    status = band_status(fraction, t.busbw_pass_fraction, t.busbw_fail_fraction)
    env = parsed.file.env
    caveat = ""
    if _algorithm_seen(algorithms, env):
        caveat = f"; NVLS/CollNet in use: {ALGORITHM_CAVEAT}"
        if fraction > t.nvls_max_over_peak:
            status, caveat = "warn", f"{caveat}, but not by this much: check the reference"
    elif fraction > 1:
        status = "warn"
        caveat = (
            "; above the per-direction peak without NVLS/CollNet seen in the output: the "
            "reference may be wrong (check the GPU model and system), or NCCL used NVLS "
            "(run with NCCL_DEBUG=INFO to see the algorithm)"
        )
    check.status = status
    check.reference = round(peak.per_direction_gbps, 2)
    basis = f"; {peak.basis}" if reference.subject.startswith("internode") else ""
    check.reason = f"{peak_sentence(sample.busbw_gbps, peak)}; {at}{caveat}{judged.note}{basis}"
    judge.add(check)


def nccl_samples(run: NcclRun) -> list[Sample]:
    table = run.rows
    columns = zip(table.column("size_bytes"), table.column("busbw_gbps", "out_of_place"),
                  table.column("line"), strict=True)  # fmt: skip
    return [Sample(size, busbw, line) for size, busbw, line in columns if busbw is not None]


# ------------------------------------------------------------------ transport


def _transport_verdict(
    judge: JudgeState, host: HostEvidence, run: NcclRun, multinode: bool
) -> tuple[Status, str] | None:
    transports = " ".join(run.transports).lower()
    if not multinode:
        topo = host.topology
        has_nvlink = topo is not None and any(nvlink_count(c) for row in topo.links for c in row)
        if has_nvlink and "shm" in transports and "p2p" not in transports:
            return "warn", (
                "NCCL moved data through shared host memory (SHM) between GPUs that have "
                "NVLink: peer-to-peer is disabled (NCCL_P2P_DISABLE, IOMMU/ACS)"
            )
        return None
    if any(t.lower() in transports for t in RDMA_TRANSPORTS):
        return "pass", "inter-node traffic over RDMA (NET/IB)"
    if "net/socket" not in transports:
        return None  # not printed (NCCL_DEBUG below INFO): the busbw is judged all the same
    hosts = judge.evidence.hosts.values()
    active = any(h.active_rails() for h in hosts)
    if active or any(h.declared.ib_hcas for h in hosts):
        why = "RDMA ports are active" if active else "the inventory declares RDMA HCAs"
        return "fail", (
            f"NET/Socket (TCP) used across nodes although {why}: no GPUDirect "
            "RDMA (check NCCL_IB_DISABLE, NCCL_NET, NCCL_IB_HCA, the IB plugin)"
        )
    return "warn", "NET/Socket (TCP) used across nodes: no GPUDirect RDMA"


def _version_mix(run: NcclRun) -> str | None:
    by_host = run.nccl_versions_by_host
    if len(set(by_host.values())) > 1:
        return ", ".join(f"{h}: {v}" for h, v in sorted(by_host.items()))
    return None


def _single_rank(judge: JudgeState, host: HostEvidence, parsed: Parsed[NcclRun], check_id: str,
                 owner: str) -> None:  # fmt: skip
    """One rank moves no data between GPUs: busbw is 0 by definition. On a one-GPU node that
    is all there is (its correctness was judged); on a larger node the run was set up wrong."""
    if host.gpu_count == 1:
        status: Status = "pass"
        reason = "one GPU: no link to measure (busbw is 0 by definition); correctness judged"
    else:
        status = "warn"
        gpus = f"a {host.gpu_count}-GPU node" if host.gpu_count else "this node"
        reason = (
            f"single rank on {gpus}: busbw is 0 by definition, so this is no bandwidth verdict; "
            "run one rank per GPU (-g N or -np N)"
        )
    judge.add(Check(check_id=check_id, host=owner, category="bandwidth", status=status,
                    reason=reason, source=parsed.source()))  # fmt: skip


def _collective_guessed(judge: JudgeState, parsed: Parsed[NcclRun], prefix: str, owner: str,
                        collective: str) -> None:  # fmt: skip
    if named_collective(parsed.record, parsed.file)[1]:
        judge.add(Check(
            check_id=f"{prefix}.collective", host=owner, category="completeness", status="warn",
            source=parsed.source(parsed.record.start_line),
            reason=f"the output does not name its collective and neither does the step's "
            f"command: judged as {collective}, guessed from the table (sendrecv and broadcast "
            "print tables of the same shape)",
        ))  # fmt: skip


def nccl_checks(judge: JudgeState, host: HostEvidence, parsed: Parsed[NcclRun]) -> None:
    """One nccl-tests run. A run across nodes belongs to the cluster, not to the host whose
    folder holds its file; what its output pins on one host (a WARN line) is that host's."""
    run = parsed.record
    collective = collective_name(run, parsed.file)
    multinode = is_multinode(parsed.file, run_hosts(run))
    test = rack_test(parsed.file.step)
    owner = rack_test_owner(test, host.declared.nvl_domain, CLUSTER if multinode else parsed.host)
    prefix = f"{parsed.tool}.{_scope(collective, multinode, test)}"
    _record_problems(judge, parsed, prefix, owner, multinode)
    _collective_guessed(judge, parsed, prefix, owner, collective)
    if test is not None:
        transport: tuple[Status, str] | None = rack_transport(test, run, host.declared.nvl_domain)
    else:
        transport = _transport_verdict(judge, host, run, multinode)
    if transport:
        judge.add(Check(
            check_id=f"{prefix}.transport", host=owner, category="transport",
            status=transport[0], reason=transport[1],
            measured=" ".join(run.channel_transports if test else run.transports) or None,
            source=parsed.source(),
        ))  # fmt: skip
    if mixed := _version_mix(run):
        judge.add(Check(
            check_id=f"{parsed.tool}.nccl-version", host=owner, category="consistency",
            status="fail", source=parsed.source(),
            reason=f"mixed NCCL versions in one job ({mixed}): jobs hang or fail",
        ))  # fmt: skip
    if run.nranks == 1:
        _single_rank(judge, host, parsed, f"{prefix}.busbw", owner)
        return
    cluster = len(judge.evidence.folder.hosts)
    if test is not None:
        reference = rack_reference(test, host, parsed, collective, cluster)
    else:
        reference = nccl_reference(host, parsed, collective, cluster)
    bandwidth_check(judge, parsed, f"{prefix}.busbw", nccl_samples(run), reference,
                    run.algorithms, owner)  # fmt: skip
    if multinode:
        hca_checks(judge, parsed, prefix, owner, test)


def all_reduce_bench_checks(judge: JudgeState, host: HostEvidence,
                            parsed: Parsed[AllReduceBenchRun]) -> None:  # fmt: skip
    """ml-engineering all_reduce_bench: busbw rows, judged like nccl-tests (it prints no
    correctness column)."""
    run = parsed.record
    if not run.complete:
        judge.add(Check(
            check_id=f"{parsed.tool}.complete", host=parsed.host, category="completeness",
            status="fail", source=parsed.source(),
            reason="did not complete: the output stops before its end",
        ))  # fmt: skip
    samples = [Sample(r.size_bytes, r.busbw_gbps, r.line) for r in run.rows
               if r.busbw_gbps is not None]  # fmt: skip
    reference = node_peak(host, run.collective or "all_reduce", run.nranks)
    bandwidth_check(judge, parsed, f"{parsed.tool}.busbw", samples, reference, [], parsed.host)


def collective_checks(judge: JudgeState) -> None:
    for host in judge.evidence.hosts.values():
        for parsed in host.nccl:
            # Pair tries are judged by the pair analysis, a rack search's groups by the search.
            if not parsed.file.is_pair_try and not is_search_step(parsed.file.step):
                nccl_checks(judge, host, parsed)
        for bench in host.all_reduce_bench:
            all_reduce_bench_checks(judge, host, bench)


def worst_problem(problems: list[Problem]) -> Problem | None:
    failing = [p for p in problems if p.status == "fail"]
    return failing[0] if failing else None
