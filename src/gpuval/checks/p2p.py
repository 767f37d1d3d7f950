"""GPU to GPU inside a node: p2pBandwidthLatencyTest's unidirectional matrix and nvbandwidth's
copies, each cell against the peak of the link its system puts between the pair, and against
the cells of the same link class only (an NV1 pair is never compared with an NV2 pair)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpuval.catalog import Peak, nvlink_count, pair_peak, pcie_peak
from gpuval.catalog.systems import expected_links, system_matrix
from gpuval.checks.context import JudgeState
from gpuval.checks.model import Check, Status, worst
from gpuval.checks.wording import band_status, peak_sentence, percent
from gpuval.evidence import HostEvidence, Parsed
from gpuval.records.bandwidth import NvbandwidthRun
from gpuval.records.p2p import P2PRun

P2P_MATRIX = "bandwidth_unidirectional_p2p_enabled"


def _expected_cell(host: HostEvidence, src: int, dst: int, size: int) -> str | None:
    """The link the board puts between two GPUs: the system's where it fixes one (even with
    no topo output), else what topo shows."""
    topo = host.topology
    if host.system is not None:
        fixed = (expected_links(host.system, topo.links) if topo
                 else system_matrix(host.system, size))  # fmt: skip
        if fixed is not None and src < len(fixed) and dst < len(fixed):
            return fixed[src][dst]
    return topo.cell(src, dst) if topo else None


def _no_peer_access(run: P2PRun) -> set[tuple[int, int]]:
    """Pairs the test could not reach as peers (connectivity 0, CANNOT Access Peer): their
    copies are staged through host memory."""
    staged = {
        (i, j)
        for i, row in enumerate(run.connectivity or [])
        for j, value in enumerate(row)
        if i != j and value == 0
    }
    return staged | {(a.src, a.dst) for a in run.can_access_peer if not a.ok}


def _link_class(host: HostEvidence, src: int, dst: int, size: int,
                staged: set[tuple[int, int]]) -> str:  # fmt: skip
    """What the pair goes through, for sibling comparisons: the topo cell, else the system's
    link, else whether the pair had peer access at all."""
    topo = host.topology
    cell = (topo.cell(src, dst) if topo else None) or _expected_cell(host, src, dst, size)
    if cell:
        return cell
    return "no peer access" if (src, dst) in staged else "peer access"


@dataclass(frozen=True)
class CellVerdict:
    src: int
    dst: int
    value: float
    status: Status
    why: str
    peak: Peak | None


def _cell_verdict(judge: JudgeState, host: HostEvidence, cell: tuple[int, int], value: float,
                  siblings: float, link: str, staged: bool, size: int) -> CellVerdict:  # fmt: skip
    """A cell against its siblings of the same link class and against its link's peak. A copy
    staged through host memory (no peer access, no NVLink) pays the staging, so only a fall
    below the fail band of its PCIe peak is judged there."""
    t = judge.thresholds
    src, dst = cell
    ratio = value / siblings if siblings else 1.0
    status = band_status(ratio, t.p2p_sibling_warn_fraction, t.p2p_sibling_fail_fraction)
    why = [f"{percent(ratio)} of the median {siblings:.1f} GB/s of its {link} siblings"]
    expected = _expected_cell(host, src, dst, size)
    peak = pair_peak(expected, host.model) if expected and host.model else None
    if peak is not None:
        fraction = value / peak.per_direction_gbps
        through_host = staged and nvlink_count(expected or "") is None
        pass_fraction = t.p2p_fail_fraction if through_host else t.p2p_pass_fraction
        status = worst([status, band_status(fraction, pass_fraction, t.p2p_fail_fraction)])
        staging = " (no peer access: staged through host memory)" if through_host else ""
        why.insert(0, peak_sentence(value, peak) + staging)
    return CellVerdict(src, dst, value, status, f"GPU{src}->GPU{dst}: " + "; ".join(why), peak)


def _failures(judge: JudgeState, parsed: Parsed[P2PRun]) -> None:
    for failure in parsed.record.failures[:3]:
        judge.add(Check(
            check_id="p2p.failure", host=parsed.host, category="p2p", status="fail",
            reason=f"p2pBandwidthLatencyTest reported: {failure}", source=parsed.source(),
        ))  # fmt: skip
    if not parsed.record.complete:
        judge.add(Check(
            check_id="p2p.complete", host=parsed.host, category="completeness", status="warn",
            source=parsed.source(), reason="output ends before the closing NOTE line (partial "
            "or cut output): judged on the matrices present",
        ))  # fmt: skip


def _connectivity(judge: JudgeState, host: HostEvidence, parsed: Parsed[P2PRun], size: int) -> None:
    """No peer access where the board has NVLink: P2P over NVLink is broken."""
    for i, j in sorted(_no_peer_access(parsed.record)):
        cell = _expected_cell(host, i, j, size)
        if cell and nvlink_count(cell):
            judge.add(Check(
                check_id=f"p2p.GPU{i}->GPU{j}.access", host=host.name, category="p2p",
                status="fail", source=parsed.source(),
                reason=f"GPU{i} cannot access GPU{j} as a peer although the board joins them "
                f"with {cell}: P2P over NVLink is broken",
            ))  # fmt: skip


def p2p_checks(judge: JudgeState, host: HostEvidence, parsed: Parsed[P2PRun]) -> None:
    _failures(judge, parsed)
    matrix = parsed.record.matrices.get(P2P_MATRIX, [])
    cells = {(i, j): value for i, row in enumerate(matrix) for j, value in enumerate(row) if i != j}
    size = parsed.record.num_gpus or len(matrix)
    if not cells and size == 1:
        alone = host.gpu_count in (None, 1)
        judge.add(Check(
            check_id="p2p.unidirectional", host=host.name, category="p2p",
            status="pass" if alone else "warn", source=parsed.source(),
            reason="one GPU: no peer to measure" if alone else
            f"the test saw one GPU of {host.gpu_count}: no pair measured (CUDA_VISIBLE_DEVICES?)",
        ))  # fmt: skip
        return
    measured = {k: v for k, v in cells.items() if v is not None}
    if not measured:
        judge.add(Check(
            check_id="p2p.unidirectional", host=host.name, category="p2p", status="fail",
            source=parsed.source(),
            reason="no Unidirectional P2P=Enabled bandwidth values to judge",
        ))  # fmt: skip
        return
    staged = _no_peer_access(parsed.record)
    links = {cell: _link_class(host, *cell, size, staged) for cell in measured}
    by_class: dict[str, list[float]] = {}
    for cell, value in measured.items():
        by_class.setdefault(links[cell], []).append(value)
    medians = {link: statistics.median(values) for link, values in by_class.items()}
    verdicts = [
        _cell_verdict(judge, host, cell, value, medians[links[cell]], links[cell],
                      cell in staged, size)
        for cell, value in sorted(measured.items())
    ]  # fmt: skip
    for verdict in verdicts:
        if verdict.peak:
            judge.expect(host.name, f"p2p {verdict.peak.link}", verdict.peak)
    _connectivity(judge, host, parsed, size)
    flagged = [v for v in verdicts if v.status != "pass"]
    for verdict in flagged:
        judge.add(Check(
            check_id=f"p2p.GPU{verdict.src}->GPU{verdict.dst}", host=host.name, category="p2p",
            status=verdict.status, reason=verdict.why, measured=verdict.value,
            reference=round(verdict.peak.per_direction_gbps, 2) if verdict.peak else None,
            unit="GB/s", source=parsed.source(),
        ))  # fmt: skip
    lowest = min(verdicts, key=lambda v: v.value)
    missing = len(cells) - len(measured)
    unjudged = any(v.peak is None for v in verdicts)
    status = worst([v.status for v in verdicts] + (["warn"] if missing else [])
                   + (["unjudged"] if unjudged else []))  # fmt: skip
    no_peak = (
        "; some pairs have no link peak (GPU model, system or topology unknown): compared with "
        "their siblings only"
        if unjudged
        else ""
    )
    judge.add(Check(
        check_id="p2p.unidirectional", host=host.name, category="p2p", status=status,
        measured=lowest.value, unit="GB/s", source=parsed.source(),
        reference=round(lowest.peak.per_direction_gbps, 2) if lowest.peak else None,
        reason=f"{len(verdicts)} pair(s), lowest {lowest.why}; {len(flagged)} flagged"
        + (f"; {missing} cell(s) missing" if missing else "") + no_peak,
    ))  # fmt: skip


NVBANDWIDTH_HOST_TESTS = frozenset({
    "host_to_device_memcpy_ce", "device_to_host_memcpy_ce",
    "host_to_device_memcpy_sm", "device_to_host_memcpy_sm",
})  # fmt: skip
NVBANDWIDTH_PEER_TESTS = frozenset({
    "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce",
    "device_to_device_memcpy_read_sm", "device_to_device_memcpy_write_sm",
})  # fmt: skip


def _label_index(label: str) -> int | None:
    text = label.strip()
    return int(text) if text.isdigit() else None


def _nvbandwidth_cells(host: HostEvidence, name: str, run: NvbandwidthRun,
                       test_index: int) -> list[tuple[float, Peak | None, str]]:  # fmt: skip
    """(value, its per-direction peak, which cell) for every measured cell of one test."""
    model = host.model
    cells = []
    for matrix in run.tests[test_index].matrices:
        for r, values in enumerate(matrix.values):
            for c, value in enumerate(values):
                src = _label_index(matrix.row_labels[r]) if r < len(matrix.row_labels) else None
                dst = (_label_index(matrix.column_labels[c])
                       if c < len(matrix.column_labels) else None)  # fmt: skip
                if value is None or src is None or dst is None:
                    continue
                if name in NVBANDWIDTH_HOST_TESTS:
                    gpu = dst if name.startswith("host_to_device") else src
                    peak = pcie_peak(model.pcie_gen, model.pcie_width) if model else None
                    cells.append((value, peak, f"GPU{gpu}"))
                else:
                    cell = _expected_cell(host, src, dst, len(run.devices) or 0)
                    peak = pair_peak(cell, model) if cell and model else None
                    cells.append((value, peak, f"GPU{src}-GPU{dst}"))
    return cells


def nvbandwidth_checks(
    judge: JudgeState, host: HostEvidence, parsed: Parsed[NvbandwidthRun]
) -> None:
    """Host<->device copies against the card's PCIe peak, device<->device against the pair's
    link; failed or waived tests are named."""
    for index, test in enumerate(parsed.record.tests):
        name = test.name or "unnamed test"
        check_id = f"nvbandwidth.{name}"
        if test.status in ("error", "not_found", "incomplete"):
            judge.add(Check(
                check_id=check_id, host=host.name, category="completeness", status="fail",
                source=parsed.source(test.line),
                reason=f"{name} {test.status}: {test.error or 'no result'}",
            ))  # fmt: skip
            continue
        if test.status == "waived":
            if (host.gpu_count or 1) > 1:  # with one GPU, peer tests are waived by design
                judge.add(Check(
                    check_id=check_id, host=host.name, category="completeness", status="warn",
                    source=parsed.source(test.line),
                    reason=f"{name} waived on a node of {host.gpu_count} GPUs: not measured",
                ))  # fmt: skip
            continue
        if name not in NVBANDWIDTH_HOST_TESTS | NVBANDWIDTH_PEER_TESTS:
            continue
        cells = _nvbandwidth_cells(host, name, parsed.record, index)
        if not cells:
            continue
        value, peak, where = min(cells, key=lambda c: c[0])
        check = Check(
            check_id=check_id,
            host=host.name,
            category="bandwidth",
            status="unjudged",
            reason=f"lowest {where} {value:.1f} GB/s; unjudged: no reference peak (GPU model "
            "or topology unknown)",
            measured=value,
            unit="GB/s",
            source=parsed.source(test.line),
        )
        if peak is not None:
            judge.expect(host.name, f"nvbandwidth {peak.link}", peak)
            t = judge.thresholds
            check.status = band_status(value / peak.per_direction_gbps, t.p2p_pass_fraction,
                                       t.p2p_fail_fraction)  # fmt: skip
            check.reference = peak.per_direction_gbps
            check.reason = f"lowest {where}: {peak_sentence(value, peak)}"
        judge.add(check)


def gpu_pair_checks(judge: JudgeState) -> None:
    for host in judge.evidence.hosts.values():
        for p2p in host.p2p:
            p2p_checks(judge, host, p2p)
        for nvb in host.nvbandwidth:
            nvbandwidth_checks(judge, host, nvb)
