"""The checks: parsed runs and host facts in, judgements (Check) and the peaks they used out.

Every bandwidth is judged against the per-direction (unidirectional) theoretical peak from the
hardware catalog, because that is what busbw and p2p cells measure. Missing evidence is never a
pass: an unfinished step, a missing output, an unreachable host or a run without correctness
columns fails; a run folder without any measurement is an error.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuval.analysis.model import CLUSTER, Check, Expectation, HostFacts, RawFile, Status, worst
from gpuval.analysis.pairs import is_pair_file, pair_step, step_name, without_superseded_tries
from gpuval.analysis.thresholds import Thresholds
from gpuval.catalog import (
    GpuModel,
    Peak,
    collective_peak,
    identify_gpu,
    internode_peak,
    pair_peak,
    pcie_peak,
)
from gpuval.catalog.catalog import nvlink_count
from gpuval.normalise import (
    BENCH_TOOLS,
    IB_TOOLS,
    MEASURING_TOOLS,
    NCCL_TOOLS,
    NVBANDWIDTH_TOOLS,
    P2P_TOOLS,
    SMI_TOOLS,
    TOPO_TOOLS,
    ToolRun,
    as_dict,
    as_list,
    number,
    tool_runs,
)
from gpuval.records.base import Diagnostic
from gpuval.runfolder import RunFolder

RDMA_TRANSPORTS = ("NET/IB", "NET/OFI", "NET/GDR")  # NET/OFI: AWS EFA through the OFI plugin
ALGORITHM_CAVEAT = "busbw with NVLS/CollNet exceeds link bandwidth by design"
MAX_LISTED = 3  # examples named in one reason line


@dataclass
class Judge:
    """Checks and the expectations (peaks) they were judged against, for one run folder."""

    folder: RunFolder
    facts: dict[str, HostFacts]
    thresholds: Thresholds
    checks: list[Check] = field(default_factory=list)
    expectations: dict[tuple[str, str], Expectation] = field(default_factory=dict)

    def add(self, check: Check) -> None:
        self.checks.append(check)

    def expect(self, host: str, subject: str, peak: Peak) -> None:
        self.expectations.setdefault(
            (host, subject),
            Expectation(
                host, subject, peak.per_direction_gbps, peak.duplex_gbps, peak.basis, peak.source
            ),
        )

    def model(self, host: str) -> GpuModel | None:
        facts = self.facts.get(host)
        return identify_gpu(facts.gpu_model) if facts else None


# ------------------------------------------------------------------ wording


def size_text(size: float) -> str:
    """1073741824 -> '1 GiB'; sizes that are not whole binary units stay in bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


def percent(fraction: float) -> str:
    return f"{fraction * 100:.0f} %"


def peak_sentence(value: float, peak: Peak) -> str:
    """'355.9 GB/s = 79 % of the 450 GB/s per-direction NVLink 4 peak (40 % of the 900 GB/s
    duplex figure, which counts both directions)'."""
    return (
        f"{value:.1f} GB/s = {percent(value / peak.per_direction_gbps)} of the "
        f"{peak.per_direction_gbps:g} GB/s per-direction {peak.link} peak "
        f"({percent(value / peak.duplex_gbps)} of the {peak.duplex_gbps:g} GB/s duplex figure, "
        "which counts both directions)"
    )


def band_status(fraction: float, pass_fraction: float, fail_fraction: float) -> Status:
    if fraction >= pass_fraction:
        return "pass"
    return "warn" if fraction >= fail_fraction else "fail"


# ------------------------------------------------------------------ run folder and steps


def _located(diagnostic: Diagnostic) -> str | None:
    if diagnostic.source and diagnostic.line:
        return f"{diagnostic.source}:{diagnostic.line}"
    return diagnostic.source


def _host_of(source: str | None) -> str:
    parts = (source or "").split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "raw" else CLUSTER


def folder_checks(judge: Judge) -> None:
    """Run-folder problems (bad sidecars, missing raw files, files without sidecar)."""
    for diagnostic in judge.folder.diagnostics:
        judge.add(Check(
            check_id="run-folder", host=_host_of(diagnostic.source), category="completeness",
            status="fail" if diagnostic.level == "error" else "warn",
            reason=diagnostic.message, source=_located(diagnostic),
        ))  # fmt: skip
    for host in judge.folder.unreachable:
        steps = judge.folder.expected_steps(host)
        missing = f"; none of its {len(steps)} expected step(s) ran" if steps else ""
        judge.add(Check(
            check_id="host.reachable", host=host, category="completeness", status="fail",
            reason=f"host listed in run.json has no raw/{host}/ folder: unreachable or never "
            f"run{missing}", source="run.json",
        ))  # fmt: skip


def _step_problem(raw: RawFile) -> tuple[Status, str] | None:
    problem = raw.sidecar.problem() if raw.sidecar else None
    if raw.sidecar is None or problem is None:
        return None
    step, (kind, detail) = f"step {raw.sidecar.name!r}", problem
    if kind == "skipped":
        # Skipped on purpose (e.g. no GPU): not a hardware failure, but no evidence either.
        return "warn", f"{step} skipped: {detail} (no evidence from it)"
    if kind == "timed_out":
        return "fail", f"{step} timed out{detail}"
    if kind == "unfinished":
        return "fail", f"{step} did not finish: no exit status recorded ({detail})"
    return "fail", f"{step} exited with status {detail}"


def step_checks(judge: Judge) -> None:
    """Each step's sidecar: skipped, timed out, unfinished or non-zero exit status. Pair steps
    are judged by the pair analysis, all tries of a pair together (a pair that never produced
    a number fails there)."""
    for raw in judge.folder.files:
        if is_pair_file(raw):
            continue
        problem = _step_problem(raw)
        if problem and raw.sidecar:
            judge.add(Check(
                check_id=f"step.{raw.sidecar.name}", host=raw.host, category="completeness",
                status=problem[0], reason=problem[1], source=raw.path,
                measured=raw.sidecar.exit_code, reference=0,
            ))  # fmt: skip


def expected_step_checks(judge: Judge) -> None:
    """Every step run.json expects on a reachable host must have left a sidecar or output
    (expected pair steps are accounted for by the pair analysis)."""
    for host in judge.folder.hosts:
        if host in judge.folder.unreachable:
            continue
        present = {step_name(raw) for raw in judge.folder.files if raw.host == host}
        for step in judge.folder.expected_steps(host):
            if step not in present and pair_step(step) is None:
                judge.add(Check(
                    check_id=f"step.{step}", host=host, category="completeness", status="fail",
                    reason=f"expected step {step!r} left no output and no sidecar in "
                    f"raw/{host}/ (not run, or its output was lost)", source="run.json",
                ))  # fmt: skip


def parse_checks(judge: Judge) -> None:
    """Parser errors fail (numbers could not be read); parser warnings warn, one line per file."""
    for raw in judge.folder.files:
        if raw.parse is None or is_pair_file(raw):  # a pair try's errors are its pair's reason
            continue
        if not raw.parse.runs and not raw.parse.errors:
            judge.add(Check(
                check_id="parse.error", host=raw.host, category="completeness", status="fail",
                reason=f"read as {raw.parse.tool} output, but it holds no run", source=raw.path,
            ))  # fmt: skip
        problems: tuple[tuple[str, list[Diagnostic], Status], ...] = (
            ("error", raw.parse.errors, "fail"),
            ("warning", raw.parse.warnings, "warn"),
        )
        for level, found, status in problems:
            if not found:
                continue
            first = found[0]
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            judge.add(Check(
                check_id=f"parse.{level}", host=raw.host, category="completeness",
                status=status, reason=f"{raw.parse.tool} output: {first.message}{more}",
                measured=len(found), source=_located(first) or raw.path,
            ))  # fmt: skip


# ------------------------------------------------------------------ topology


@dataclass(frozen=True)
class Topology:
    """The GPU part of one `nvidia-smi topo -m` run: names, cells, and NIC cells per GPU."""

    gpus: list[str]
    links: list[list[str]]  # square, GPU x GPU
    nic_cells: dict[str, list[str]]  # GPU name -> cells to each NIC
    source: str


def _cell(links: list[list[str]], row: int, col: int) -> str:
    """A topo cell; short rows (NIC rows are often cut) read as empty."""
    return links[row][col] if col < len(links[row]) else ""


def topology(judge: Judge, host: str) -> Topology | None:
    files = [f for f in judge.folder.files if f.host == host]
    for run in tool_runs(files, TOPO_TOOLS):
        devices = [str(d) for d in as_list(run.data.get("devices"))]
        links = [
            ["" if c is None else str(c) for c in as_list(row)]
            for row in as_list(run.data.get("links"))
        ]
        gpu_index = [i for i, d in enumerate(devices) if d.startswith("GPU")]
        nic_index = [i for i, d in enumerate(devices) if not d.startswith("GPU")]
        if not gpu_index or any(len(links) <= i for i in gpu_index):
            continue

        return Topology(
            gpus=[devices[i] for i in gpu_index],
            links=[[_cell(links, r, c) for c in gpu_index] for r in gpu_index],
            nic_cells={devices[r]: [_cell(links, r, c) for c in nic_index] for r in gpu_index},
            source=run.source(),
        )
    return None


def _topology_problems(topo: Topology, model: GpuModel) -> list[tuple[Status, str]]:
    problems: list[tuple[Status, str]] = []
    if not model.nvlink_links or model.nvlink_optional:
        return problems
    count = len(topo.gpus)
    for i in range(count):
        for j in range(i + 1, count):
            cell = topo.links[i][j]
            links = nvlink_count(cell)
            pair = f"{topo.gpus[i]}-{topo.gpus[j]}"
            if links is None:
                problems.append(
                    ("fail", f"{pair} through {cell or '?'} where an {model.model} has NVLink")
                )
            elif model.nvswitch and links < model.nvlink_links:
                problems.append(
                    (
                        "fail",
                        f"{pair} {cell} where an {model.model} has "
                        f"{model.nvlink_links} links (NV{model.nvlink_links})",
                    )
                )
    if not model.nvswitch:
        for name, row in zip(topo.gpus, topo.links, strict=True):
            total = sum(nvlink_count(c) or 0 for c in row)
            if total < model.nvlink_links:
                problems.append(
                    (
                        "warn",
                        f"{name} uses {total} of the {model.nvlink_links} "
                        f"NVLinks of an {model.model}",
                    )
                )
    return problems


def _nic_locality(topo: Topology) -> tuple[Status, str] | None:
    """GPUs without a NIC on their own PCIe switch (PIX/PXB) send RDMA traffic through the CPU."""
    if not any(topo.nic_cells.values()):
        return None
    order = ["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"]
    far = []
    for gpu, cells in topo.nic_cells.items():
        if not any(c in ("PIX", "PXB") for c in cells):
            nearest = min(cells, key=lambda c: order.index(c) if c in order else len(order))
            far.append(f"{gpu} ({nearest})")
    if not far:
        return "pass", "every GPU has a NIC on its PCIe switch (PIX/PXB)"
    return "warn", (
        f"{len(far)} of {len(topo.gpus)} GPU(s) have no NIC on their PCIe switch: "
        f"{', '.join(far[:4])}{' ...' if len(far) > 4 else ''}; GPUDirect RDMA "
        "traffic crosses the host bridge"
    )


def topology_checks(judge: Judge, host: str) -> None:
    topo = topology(judge, host)
    if topo is None:
        return
    model = judge.model(host)
    cells = Counter(
        topo.links[i][j] for i in range(len(topo.gpus)) for j in range(len(topo.gpus)) if i != j
    )
    summary = ", ".join(f"{cell} x{n // 2}" for cell, n in sorted(cells.items()))
    problems = _topology_problems(topo, model) if model else []
    if problems:
        status = worst([p[0] for p in problems])
        shown = "; ".join(p[1] for p in problems[:MAX_LISTED])
        more = f" (and {len(problems) - MAX_LISTED} more)" if len(problems) > MAX_LISTED else ""
        reason = f"{shown}{more}"
    else:
        status = "pass"
        known = (
            f"as expected for {model.model}"
            if model
            else "GPU model unknown, link counts not judged"
        )
        reason = f"{len(topo.gpus)} GPU(s), pairs: {summary or 'none'}; {known}"
    judge.add(
        Check(
            check_id="topology.gpu-links",
            host=host,
            category="topology",
            status=status,
            reason=reason,
            measured=summary,
            source=topo.source,
            reference=f"NV{model.nvlink_links}" if model and model.nvlink_links else None,
        )
    )
    locality = _nic_locality(topo)
    if locality:
        judge.add(
            Check(
                check_id="topology.nic-locality",
                host=host,
                category="topology",
                status=locality[0],
                reason=locality[1],
                source=topo.source,
            )
        )


def _pcie_problems(
    gpus: list[dict[str, object]], model: GpuModel | None
) -> list[tuple[Status, str]]:
    problems: list[tuple[Status, str]] = []
    for position, gpu in enumerate(gpus):
        pcie = as_dict(gpu.get("pcie"))
        name = f"GPU{gpu.get('index') if gpu.get('index') is not None else position}"
        width, width_max = number(pcie.get("width_current")), number(pcie.get("width_max"))
        gen_max = number(pcie.get("gen_max"))
        if width is not None and width_max is not None and width < width_max:
            problems.append(("fail", f"{name} PCIe link trained at x{width:g} of x{width_max:g}"))
        if model and gen_max is not None and gen_max < model.pcie_gen:
            problems.append(
                (
                    "warn",
                    f"{name} PCIe link can reach only gen {gen_max:g} where an "
                    f"{model.model} is gen {model.pcie_gen} (slot or BIOS)",
                )
            )
    return problems


def pcie_checks(judge: Judge, host: str) -> None:
    """Link width below its maximum is a degraded link; a lower current *generation* is not
    judged, because GPUs drop the PCIe generation at idle to save power."""
    files = [f for f in judge.folder.files if f.host == host]
    for run in tool_runs(files, SMI_TOOLS):
        gpus = [as_dict(g) for g in as_list(run.data.get("gpus")) if as_dict(g).get("pcie")]
        if not gpus:
            continue
        problems = _pcie_problems(gpus, judge.model(host))
        reason = "; ".join(p[1] for p in problems[:MAX_LISTED]) or (
            f"{len(gpus)} GPU(s) at their maximum PCIe width (the current generation is not "
            "judged: it drops at idle)"
        )
        judge.add(
            Check(
                check_id="topology.pcie-link",
                host=host,
                category="topology",
                status=worst([p[0] for p in problems]) if problems else "pass",
                reason=reason,
                source=run.source(),
            )
        )


# ------------------------------------------------------------------ expectations


def intranode_peak(judge: Judge, host: str, nranks: int | None) -> Peak | None:
    """The node's collective peak over its first `nranks` GPUs (topo), or the model's full
    NVSwitch figure when there is no topo output."""
    model = judge.model(host)
    topo = topology(judge, host)
    if topo is not None:
        count = nranks if nranks and nranks <= len(topo.gpus) else len(topo.gpus)
        return collective_peak([row[:count] for row in topo.links[:count]], model)
    if model and model.nvswitch:
        return collective_peak(
            [["X", f"NV{model.nvlink_links}"], [f"NV{model.nvlink_links}", "X"]], model
        )
    return None


def active_nic_rates(judge: Judge, host: str) -> list[tuple[float, str | None]]:
    """(rate in Gb/s, link layer) of the active ports ibstat/ibv_devinfo saw on `host`."""
    rates = []
    files = [f for f in judge.folder.files if f.host == host]
    for run in tool_runs(files, IB_TOOLS):
        for device in as_list(run.data.get("devices")):
            for port in as_list(as_dict(device).get("ports")):
                port = as_dict(port)
                rate = number(port.get("rate_gbps"))
                layer = port.get("link_layer")
                if rate and "active" in str(port.get("state", "")).lower():
                    rates.append((rate, layer if isinstance(layer, str) else None))
    return rates


def rdma_nics_seen(judge: Judge, hosts: Iterable[str]) -> bool:
    for host in hosts:
        topo = topology(judge, host)
        if active_nic_rates(judge, host) or (topo and any(topo.nic_cells.values())):
            return True
    return False


# ------------------------------------------------------------------ bandwidth


@dataclass(frozen=True)
class Sample:
    size_bytes: float
    busbw_gbps: float
    line: int | None


def collective_name(run: ToolRun) -> str:
    """The collective as printed, else from the sidecar's command (`all_reduce_perf ...`):
    reformatted outputs lose the `# Collective test starting` line."""
    printed = run.data.get("collective")
    if isinstance(printed, str) and printed:
        return printed
    command = run.file.sidecar.command if run.file.sidecar else None
    match = re.search(r"\b([a-z_]+?)_perf\b", command or "")
    return match.group(1) if match else "unknown"


def large_message(samples: list[Sample], min_bytes: int) -> tuple[Sample, bool] | None:
    """The highest busbw at sizes >= min_bytes (not the average footer, which depends on the
    sweep); when the sweep stops earlier, the largest size, flagged as a fallback."""
    if not samples:
        return None
    large = [s for s in samples if s.size_bytes >= min_bytes]
    if large:
        return max(large, key=lambda s: s.busbw_gbps), False
    biggest = max(s.size_bytes for s in samples)
    return max((s for s in samples if s.size_bytes == biggest), key=lambda s: s.busbw_gbps), True


def _algorithm_seen(run: ToolRun) -> bool:
    words = [str(a) for a in as_list(run.data.get("algorithms"))]
    if run.file.sidecar:
        words.append(run.file.sidecar.env.get("NCCL_ALGO", ""))
    return any("nvls" in w.lower() or "collnet" in w.lower() for w in words)


def bandwidth_check(
    judge: Judge,
    run: ToolRun,
    samples: list[Sample],
    subject: str,
    peak: Peak | None,
    why_no_peak: str,
) -> None:
    check_id = f"{run.tool}.{collective_name(run)}.busbw"
    chosen = large_message(samples, judge.thresholds.large_message_min_bytes)
    if chosen is None:
        judge.add(
            Check(
                check_id=check_id,
                host=run.host,
                category="bandwidth",
                status="fail",
                reason="no bandwidth rows to judge",
                source=run.source(),
            )
        )
        return
    sample, fell_back = chosen
    half = "out-of-place busbw" if run.tool in NCCL_TOOLS else "busbw"
    at = f"{half} at {size_text(sample.size_bytes)}"
    note = (
        f"; the sweep stops below {size_text(judge.thresholds.large_message_min_bytes)}, so "
        "the largest size was used and may understate the link"
        if fell_back
        else ""
    )
    base = Check(
        check_id=check_id,
        host=run.host,
        category="bandwidth",
        status="warn",
        reason="",
        measured=sample.busbw_gbps,
        unit="GB/s",
        source=run.source(sample.line),
    )
    if peak is None:
        base.reason = f"{sample.busbw_gbps:.1f} GB/s {at}; no reference peak: {why_no_peak}{note}"
        judge.add(base)
        return
    judge.expect(run.host, subject, peak)
    fraction = sample.busbw_gbps / peak.per_direction_gbps
    status = band_status(
        fraction, judge.thresholds.busbw_pass_fraction, judge.thresholds.busbw_fail_fraction
    )
    caveat = ""
    if _algorithm_seen(run):
        caveat = f"; NVLS/CollNet in use: {ALGORITHM_CAVEAT}"
        if fraction > judge.thresholds.nvls_max_over_peak:
            status, caveat = "warn", f"{caveat}, but not by this much: check the reference"
    elif fraction > 1:
        status = "warn"
        caveat = (
            "; above the per-direction peak without NVLS/CollNet seen in the output: the "
            "reference may be wrong (check the GPU model), or NCCL used NVLS "
            "(run with NCCL_DEBUG=INFO to see the algorithm)"
        )
    base.status = status
    base.reference = peak.per_direction_gbps
    base.reason = f"{peak_sentence(sample.busbw_gbps, peak)}; {at}{caveat}{note}"
    judge.add(base)


def _run_hosts(run: ToolRun) -> list[str]:
    hosts = {str(h) for h in as_list(run.data.get("hosts")) if h}
    hosts |= {
        str(as_dict(d).get("host"))
        for d in as_list(run.data.get("devices"))
        if as_dict(d).get("host")
    }
    return sorted(hosts)


def is_multinode(run: ToolRun) -> bool:
    phase = run.file.sidecar.phase if run.file.sidecar else ""
    return phase == "internode" or len(_run_hosts(run)) > 1


def collective_expectation(judge: Judge, run: ToolRun) -> tuple[Peak | None, str, str]:
    """(peak, subject, why there is none) for a collective run on this host."""
    nranks = run.data.get("nranks")
    nranks = nranks if isinstance(nranks, int) else None
    if is_multinode(run):
        facts = judge.facts.get(run.host)
        per_node = facts.gpu_count if facts and facts.gpu_count else None
        rates = active_nic_rates(judge, run.host)
        peak = internode_peak(rates, per_node or 1) if per_node else None
        return (
            peak,
            "internode-collective",
            ("NIC rates or GPUs per node unknown (add ibstat and nvidia-smi preflight steps)"),
        )
    why = (
        "GPU model unknown: no nvidia-smi output or GPU name; declare it in run.json "
        f"config.hardware.{run.host}.gpu_model"
    )
    if judge.model(run.host) is not None:
        why = "no topology output to derive the node's links from"
    return intranode_peak(judge, run.host, nranks), "intranode-collective", why


def nccl_samples(run: ToolRun) -> list[Sample]:
    samples = []
    for row in as_list(run.data.get("rows")):
        row = as_dict(row)
        size = number(row.get("size_bytes"))
        busbw = number(as_dict(row.get("out_of_place")).get("busbw_gbps"))
        if size is not None and busbw is not None:
            line = row.get("line")
            samples.append(Sample(size, busbw, line if isinstance(line, int) else None))
    return samples


def nccl_correctness(judge: Judge, run: ToolRun) -> None:
    collective = collective_name(run)
    check_id = f"{run.tool}.{collective}.correctness"
    wrong: list[tuple[float, str, float, int | None]] = []
    seen = 0
    for row in as_list(run.data.get("rows")):
        row = as_dict(row)
        for placement in ("out_of_place", "in_place"):
            value = number(as_dict(row.get(placement)).get("wrong"))
            if value is None:
                continue
            seen += 1
            if value > 0:
                line = row.get("line")
                wrong.append(
                    (
                        number(row.get("size_bytes")) or 0,
                        placement.replace("_", "-"),
                        value,
                        line if isinstance(line, int) else None,
                    )
                )
    bounds = as_dict(run.data.get("out_of_bounds"))
    if wrong:
        named = ", ".join(f"{v:g} wrong at {size_text(s)} ({p})" for s, p, v, _ in wrong[:4])
        more = f" and {len(wrong) - 4} more row(s)" if len(wrong) > 4 else ""
        judge.add(
            Check(
                check_id=check_id,
                host=run.host,
                category="correctness",
                status="fail",
                reason=f"#wrong is not zero: {named}{more}; results were corrupted",
                measured=sum(w[2] for w in wrong),
                reference=0,
                source=run.source(wrong[0][3]),
            )
        )
    if bounds and bounds.get("ok") is False:
        judge.add(
            Check(
                check_id=f"{check_id}.out-of-bounds",
                host=run.host,
                category="correctness",
                status="fail",
                measured=bounds.get("count"),
                reference=0,
                source=run.source(),
                reason=f"Out of bounds values: {bounds.get('count')} FAILED",
            )
        )
    if wrong or bounds.get("ok") is False:
        return
    if seen == 0 and not bounds:
        judge.add(
            Check(
                check_id=check_id,
                host=run.host,
                category="correctness",
                status="fail",
                source=run.source(),
                reason="correctness not shown: no #wrong values and "
                "no 'Out of bounds values' line (columns removed, -c 0, or cut output); "
                "a validation suite cannot assume the results were right",
            )
        )
    elif seen == 0:
        judge.add(
            Check(
                check_id=check_id,
                host=run.host,
                category="correctness",
                status="warn",
                source=run.source(),
                reason="results not validated: #wrong is N/A in every row (run with -c 1)",
            )
        )
    else:
        judge.add(
            Check(
                check_id=check_id,
                host=run.host,
                category="correctness",
                status="pass",
                measured=0,
                reference=0,
                source=run.source(),
                reason=f"#wrong 0 in {seen} measurement(s)"
                + (", out of bounds 0 OK" if bounds else ""),
            )
        )


def nccl_completeness(judge: Judge, run: ToolRun) -> None:
    collective = collective_name(run)
    check_id = f"{run.tool}.{collective}.complete"
    failures = as_list(run.data.get("failures"))
    rows = as_list(run.data.get("rows"))
    if failures:
        first = failures[0]
        text = as_dict(first).get("message") or first
        where = as_dict(first).get("host")
        text = f"{where}: {text}" if where else text
        line = as_dict(first).get("log_line")
        judge.add(
            Check(
                check_id=check_id,
                host=run.host,
                category="completeness",
                status="fail",
                reason=f"test failure: {str(text).strip()}",
                source=run.source(line if isinstance(line, int) else None),
            )
        )
    elif not rows:
        judge.add(
            Check(
                check_id=check_id,
                host=run.host,
                category="completeness",
                status="fail",
                reason="no data rows: the test never measured",
                source=run.source(),
            )
        )
    elif run.data.get("complete") is not True:
        judge.add(
            Check(
                check_id=check_id,
                host=run.host,
                category="completeness",
                status="fail",
                source=run.source(),
                reason=f"did not complete: {len(rows)} row(s) but no closing "
                "'# Avg bus bandwidth' footer (killed, truncated or reformatted)",
            )
        )
    else:
        judge.add(
            Check(
                check_id=check_id,
                host=run.host,
                category="completeness",
                status="pass",
                measured=len(rows),
                source=run.source(),
                reason=f"completed: {len(rows)} sizes",
            )
        )


def _transport_verdict(judge: Judge, run: ToolRun, transports: str) -> tuple[Status, str] | None:
    lowered = transports.lower()
    if not is_multinode(run):
        topo = topology(judge, run.host)
        has_nvlink = topo is not None and any(nvlink_count(c) for row in topo.links for c in row)
        if has_nvlink and "shm" in lowered and "p2p" not in lowered:
            return "warn", (
                "NCCL moved data through shared host memory (SHM) between GPUs that "
                "have NVLink: peer-to-peer is disabled (NCCL_P2P_DISABLE, IOMMU/ACS)"
            )
        return None
    if any(t.lower() in lowered for t in RDMA_TRANSPORTS):
        return "pass", "inter-node traffic over RDMA (NET/IB)"
    if "net/socket" not in lowered:
        return "warn", "inter-node transport not visible: run with NCCL_DEBUG=INFO"
    # NCCL prints its own host names; the inventory names are what the run folder knows
    hosts = (set(_run_hosts(run)) & set(judge.folder.hosts)) | {run.host}
    if rdma_nics_seen(judge, sorted(hosts)):
        return "fail", (
            "NET/Socket (TCP) used across nodes although RDMA NICs exist: no "
            "GPUDirect RDMA (check NCCL_IB_DISABLE, NCCL_NET, the IB plugin)"
        )
    return "warn", "NET/Socket (TCP) used across nodes: no GPUDirect RDMA"


def transport_check(judge: Judge, run: ToolRun) -> None:
    """Multi-node: RDMA, not TCP sockets, when RDMA NICs exist. Single node: not SHM over
    NVLink-connected GPUs."""
    transports = " ".join(str(t) for t in as_list(run.data.get("transports")))
    verdict = _transport_verdict(judge, run, transports)
    if verdict is None:
        return
    judge.add(
        Check(
            check_id=f"{run.tool}.{collective_name(run)}.transport",
            host=run.host,
            category="transport",
            status=verdict[0],
            reason=verdict[1],
            measured=transports or None,
            source=run.source(),
        )
    )


def nccl_version_check(judge: Judge, run: ToolRun) -> None:
    by_host = {str(k): str(v) for k, v in as_dict(run.data.get("nccl_versions_by_host")).items()}
    if len(set(by_host.values())) > 1:
        listed = ", ".join(f"{h}: {v}" for h, v in sorted(by_host.items()))
        judge.add(
            Check(
                check_id=f"{run.tool}.nccl-version",
                host=run.host,
                category="consistency",
                status="fail",
                source=run.source(),
                reason=f"mixed NCCL versions in one job ({listed}): jobs hang or fail",
            )
        )


def nccl_checks(judge: Judge, run: ToolRun) -> None:
    nccl_completeness(judge, run)
    nccl_correctness(judge, run)
    transport_check(judge, run)
    nccl_version_check(judge, run)
    if run.data.get("nranks") == 1:
        judge.add(
            Check(
                check_id=f"{run.tool}.{collective_name(run)}.busbw",
                host=run.host,
                category="bandwidth",
                status="warn",
                source=run.source(),
                reason="single rank: busbw is 0 by definition (no "
                "communication), so this is not a bandwidth verdict; run one rank per "
                "GPU (-g N or -np N)",
            )
        )
        return
    peak, subject, why = collective_expectation(judge, run)
    bandwidth_check(judge, run, nccl_samples(run), subject, peak, why)


def bench_checks(judge: Judge, run: ToolRun) -> None:
    """ml-engineering all_reduce_bench: busbw rows, judged like nccl-tests (no correctness)."""
    samples = []
    for row in as_list(run.data.get("rows")):
        row = as_dict(row)
        size, busbw = number(row.get("size_bytes")), number(row.get("busbw_gbps"))
        if size is not None and busbw is not None:
            line = row.get("line")
            samples.append(Sample(size, busbw, line if isinstance(line, int) else None))
    if run.data.get("complete") is False:
        judge.add(
            Check(
                check_id=f"{run.tool}.complete",
                host=run.host,
                category="completeness",
                status="fail",
                source=run.source(),
                reason="did not complete: the output stops before its end",
            )
        )
    peak, subject, why = collective_expectation(judge, run)
    bandwidth_check(judge, run, samples, subject, peak, why)


# ------------------------------------------------------------------ p2p


P2P_MATRIX = "bandwidth_unidirectional_p2p_enabled"


@dataclass(frozen=True)
class PairVerdict:
    src: int
    dst: int
    value: float
    status: Status
    why: str


def _pair_verdict(
    judge: Judge, src: int, dst: int, value: float, median: float, peak: Peak | None
) -> PairVerdict:
    t = judge.thresholds
    sibling = value / median if median else 1.0
    status = band_status(sibling, t.p2p_sibling_warn_fraction, t.p2p_sibling_fail_fraction)
    why = [f"{percent(sibling)} of the median {median:.1f} GB/s of its siblings"]
    if peak is not None:
        status = worst(
            [
                status,
                band_status(
                    value / peak.per_direction_gbps, t.p2p_pass_fraction, t.p2p_fail_fraction
                ),
            ]
        )
        why.insert(0, peak_sentence(value, peak))
    return PairVerdict(src, dst, value, status, f"GPU{src}->GPU{dst}: " + "; ".join(why))


def p2p_checks(judge: Judge, run: ToolRun) -> None:
    matrix = as_list(as_dict(run.data.get("matrices")).get(P2P_MATRIX))
    for failure in as_list(run.data.get("failures"))[:MAX_LISTED]:
        judge.add(
            Check(
                check_id="p2p.failure",
                host=run.host,
                category="p2p",
                status="fail",
                reason=f"p2pBandwidthLatencyTest reported: {failure}",
                source=run.source(),
            )
        )
    if run.data.get("complete") is not True:
        judge.add(
            Check(
                check_id="p2p.complete",
                host=run.host,
                category="completeness",
                status="warn",
                source=run.source(),
                reason="output ends before the closing NOTE line (partial or cut "
                "output): judged on the matrices present",
            )
        )
    cells = {
        (i, j): number(v)
        for i, row in enumerate(matrix)
        for j, v in enumerate(as_list(row))
        if i != j
    }
    values = [v for v in cells.values() if v is not None]
    if not values:
        judge.add(
            Check(
                check_id="p2p.unidirectional",
                host=run.host,
                category="p2p",
                status="fail",
                source=run.source(),
                reason="no Unidirectional P2P=Enabled bandwidth values to judge",
            )
        )
        return
    median = statistics.median(values)
    model, topo = judge.model(run.host), topology(judge, run.host)
    verdicts = []
    for (i, j), value in sorted(cells.items()):
        cell = _topo_cell(topo, i, j)
        peak = pair_peak(cell, model) if cell else None
        if peak:
            judge.expect(run.host, f"p2p {cell}", peak)
        if value is not None:
            verdicts.append(_pair_verdict(judge, i, j, value, median, peak))
    _connectivity_checks(judge, run, topo)
    flagged = [v for v in verdicts if v.status != "pass"]
    for verdict in flagged:
        judge.add(
            Check(
                check_id=f"p2p.GPU{verdict.src}->GPU{verdict.dst}",
                host=run.host,
                category="p2p",
                status=verdict.status,
                reason=verdict.why,
                measured=verdict.value,
                reference=round(median, 2),
                unit="GB/s",
                source=run.source(),
            )
        )
    lowest = min(verdicts, key=lambda v: v.value)
    missing = sum(v is None for v in cells.values())
    judge.add(Check(
        check_id="p2p.unidirectional", host=run.host, category="p2p",
        status=worst([v.status for v in verdicts] + (["warn"] if missing else [])),
        measured=lowest.value, unit="GB/s", source=run.source(),
        reference=_pair_reference(judge, run.host, lowest),
        reason=f"{len(verdicts)} pair(s), lowest {lowest.why}; {len(flagged)} flagged"
        + (f"; {missing} cell(s) missing" if missing else ""),
    ))  # fmt: skip


def _pair_reference(judge: Judge, host: str, verdict: PairVerdict) -> float | None:
    cell = _topo_cell(topology(judge, host), verdict.src, verdict.dst)
    peak = pair_peak(cell, judge.model(host)) if cell else None
    return peak.per_direction_gbps if peak else None


def _topo_cell(topo: Topology | None, src: int, dst: int) -> str | None:
    if topo is None:
        return None
    index = {name: i for i, name in enumerate(topo.gpus)}
    a, b = index.get(f"GPU{src}"), index.get(f"GPU{dst}")
    return topo.links[a][b] if a is not None and b is not None else None


def _connectivity_checks(judge: Judge, run: ToolRun, topo: Topology | None) -> None:
    """Connectivity 0 (or CANNOT Access Peer) where topo shows NVLink: peer access is broken."""
    broken = set()
    for i, row in enumerate(as_list(run.data.get("connectivity"))):
        for j, value in enumerate(as_list(row)):
            if i != j and value == 0:
                broken.add((i, j))
    for access in as_list(run.data.get("can_access_peer")):
        access = as_dict(access)
        if access.get("ok") is False:
            broken.add((int(access.get("src", -1)), int(access.get("dst", -1))))
    for i, j in sorted(broken):
        cell = _topo_cell(topo, i, j)
        if cell and nvlink_count(cell):
            judge.add(
                Check(
                    check_id=f"p2p.GPU{i}->GPU{j}.access",
                    host=run.host,
                    category="p2p",
                    status="fail",
                    source=run.source(),
                    reason=f"GPU{i} cannot access GPU{j} as a peer although topo shows "
                    f"{cell}: P2P over NVLink is broken",
                )
            )


NVBANDWIDTH_HOST_TESTS = frozenset({
    "host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
    "host_to_device_memcpy_sm", "device_to_host_memcpy_sm",
})  # fmt: skip
NVBANDWIDTH_PEER_TESTS = frozenset({
    "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce",
    "device_to_device_memcpy_read_sm", "device_to_device_memcpy_write_sm",
})  # fmt: skip


def _label_index(label: object) -> int | None:
    text = str(label).strip()
    return int(text) if text.isdigit() else None


def _nvbandwidth_cells(
    judge: Judge, host: str, name: str, matrix: dict[str, object]
) -> list[tuple[float, Peak | None, str]]:
    """(value, its per-direction peak, which cell) for every measured cell of one matrix."""
    model, topo = judge.model(host), topology(judge, host)
    rows, columns = as_list(matrix.get("row_labels")), as_list(matrix.get("column_labels"))
    cells = []
    for r, values in enumerate(as_list(matrix.get("values"))):
        for c, value in enumerate(as_list(values)):
            measured = number(value)
            src = _label_index(rows[r]) if r < len(rows) else None
            dst = _label_index(columns[c]) if c < len(columns) else None
            if measured is None or src is None or dst is None:
                continue
            if name in NVBANDWIDTH_HOST_TESTS:
                peak = pcie_peak(model.pcie_gen) if model else None
                gpu = dst if name.startswith("host_to_device") else src
                cells.append((measured, peak, f"GPU{gpu}"))
            else:
                cell = _topo_cell(topo, src, dst)
                peak = pair_peak(cell, model) if cell else None
                cells.append((measured, peak, f"GPU{src}-GPU{dst}"))
    return cells


def nvbandwidth_checks(judge: Judge, run: ToolRun) -> None:
    """Host<->device copies against the GPU's PCIe x16 peak, device<->device against the pair's
    link; failed or waived tests are named."""
    for test in as_list(run.data.get("tests")):
        test = as_dict(test)
        name, status = str(test.get("name") or "unnamed test"), test.get("status")
        check_id = f"nvbandwidth.{name}"
        line = test.get("line") if isinstance(test.get("line"), int) else None
        if status in ("error", "not_found", "incomplete"):
            judge.add(
                Check(
                    check_id=check_id,
                    host=run.host,
                    category="completeness",
                    status="fail",
                    source=run.source(line),
                    reason=f"{name} {status}: {test.get('error') or 'no result'}",
                )
            )
            continue
        if status == "waived":
            judge.add(
                Check(
                    check_id=check_id,
                    host=run.host,
                    category="completeness",
                    status="warn",
                    source=run.source(line),
                    reason=f"{name} waived: not measured on this system",
                )
            )
            continue
        if name not in NVBANDWIDTH_HOST_TESTS | NVBANDWIDTH_PEER_TESTS:
            continue
        cells = [
            c
            for m in as_list(test.get("matrices"))
            for c in _nvbandwidth_cells(judge, run.host, name, as_dict(m))
        ]
        if not cells:
            continue
        value, peak, where = min(cells, key=lambda c: c[0])
        base = Check(
            check_id=check_id,
            host=run.host,
            category="bandwidth",
            status="warn",
            reason="",
            measured=value,
            unit="GB/s",
            source=run.source(line),
        )
        if peak is None:
            base.reason = (
                f"lowest {where} {value:.1f} GB/s; no reference peak (GPU model or "
                "topology unknown)"
            )
        else:
            judge.expect(run.host, f"nvbandwidth {peak.link}", peak)
            base.status = band_status(
                value / peak.per_direction_gbps,
                judge.thresholds.p2p_pass_fraction,
                judge.thresholds.p2p_fail_fraction,
            )
            base.reference = peak.per_direction_gbps
            base.reason = f"lowest {where}: {peak_sentence(value, peak)}"
        judge.add(base)


# ------------------------------------------------------------------ across hosts


def consistency_checks(judge: Judge) -> None:
    """Mixed driver / CUDA / NCCL / MPI versions across hosts: mixed NCCL versions hang
    collectives, and mpirun needs the same MPI on every host."""
    for attribute, label in (
        ("nccl_version", "NCCL"),
        ("driver_version", "driver"),
        ("cuda_version", "CUDA"),
        ("mpi_version", "MPI"),
    ):
        seen: dict[str, list[str]] = {}
        for facts in judge.facts.values():
            value = getattr(facts, attribute)
            if value:
                seen.setdefault(value, []).append(facts.name)
        if len(seen) > 1:
            listed = "; ".join(f"{v} on {', '.join(sorted(h))}" for v, h in sorted(seen.items()))
            judge.add(
                Check(
                    check_id=f"consistency.{attribute}",
                    host=CLUSTER,
                    category="consistency",
                    status="fail",
                    reason=f"mixed {label} versions across hosts: {listed}",
                )
            )
        elif len(seen) == 1 and len(next(iter(seen.values()))) > 1:
            ((value, hosts),) = seen.items()
            judge.add(
                Check(
                    check_id=f"consistency.{attribute}",
                    host=CLUSTER,
                    category="consistency",
                    status="pass",
                    measured=value,
                    reason=f"{label} {value} on all {len(hosts)} host(s) that report it",
                )
            )


def outlier_checks(judge: Judge) -> None:
    """A host whose bandwidth lies well below the median of the same check on other hosts."""
    groups: dict[str, list[Check]] = {}
    for check in judge.checks:
        if (
            check.category in ("bandwidth", "p2p")
            and isinstance(check.measured, float)
            and check.check_id.endswith((".busbw", ".unidirectional"))
        ):
            groups.setdefault(check.check_id, []).append(check)
    t = judge.thresholds
    for check_id, checks in sorted(groups.items()):
        if len({c.host for c in checks}) < t.host_outlier_min_hosts:
            continue
        median = statistics.median(float(c.measured or 0) for c in checks)
        for check in checks:
            value = float(check.measured or 0)
            if median and value < t.host_outlier_fraction * median:
                judge.add(
                    Check(
                        check_id=f"{check_id}.outlier",
                        host=check.host,
                        category="bandwidth",
                        status="warn",
                        measured=value,
                        reference=round(median, 2),
                        unit="GB/s",
                        source=check.source,
                        reason=f"{value:.1f} GB/s is {percent(value / median)} of the "
                        f"median {median:.1f} GB/s of {len(checks)} hosts",
                    )
                )


def evidence_check(judge: Judge) -> None:
    """No measurement at all is an error, never a pass."""
    measured = [
        r
        for r in tool_runs(judge.folder.files, MEASURING_TOOLS)
        if as_list(r.data.get("rows"))
        or as_dict(r.data.get("matrices"))
        or as_list(r.data.get("tests"))
        or r.data.get("intervals")
    ]
    if not measured:
        read = sorted({f.parse.tool for f in judge.folder.files if f.parse})
        judge.add(
            Check(
                check_id="run.evidence",
                host=CLUSTER,
                category="completeness",
                status="error",
                reason="nothing was measured: no benchmark output was "
                f"recognised (read: {', '.join(read) or 'nothing'}); no evidence is "
                "never a pass",
            )
        )


def judge_run(
    folder: RunFolder, facts: list[HostFacts], thresholds: Thresholds
) -> tuple[list[Check], list[Expectation]]:
    """All checks of a run folder, in a deterministic order, and the peaks they used."""
    judge = Judge(folder, {f.name: f for f in facts}, thresholds)
    folder_checks(judge)
    step_checks(judge)
    expected_step_checks(judge)
    parse_checks(judge)
    for host in folder.hosts:
        topology_checks(judge, host)
        pcie_checks(judge, host)
    for run in tool_runs(without_superseded_tries(folder.files), NCCL_TOOLS):
        nccl_checks(judge, run)
    for run in tool_runs(folder.files, BENCH_TOOLS):
        bench_checks(judge, run)
    for run in tool_runs(folder.files, P2P_TOOLS):
        p2p_checks(judge, run)
    for run in tool_runs(folder.files, NVBANDWIDTH_TOOLS):
        nvbandwidth_checks(judge, run)
    consistency_checks(judge)
    outlier_checks(judge)
    evidence_check(judge)
    return judge.checks, list(judge.expectations.values())
