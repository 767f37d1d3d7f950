"""The board: does the node's `nvidia-smi topo -m` show the links its system is built with, are
its NVLinks active, is every GPU's PCIe link as wide as the card's spec, and does each GPU have
a NIC on its own PCIe switch."""

from __future__ import annotations

from collections import Counter

from gpuval.catalog import link_problems
from gpuval.checks.context import JudgeState
from gpuval.checks.health.nvlink import nvlink_state_checks
from gpuval.checks.model import Check, Status, worst
from gpuval.checks.wording import listed
from gpuval.evidence import HostEvidence, Topology

NIC_ORDER = ["PIX", "PXB", "PHB", "NODE", "SYS", "SOC"]


def _pair_summary(topo: Topology) -> str:
    size = len(topo.gpus)
    cells = Counter(topo.links[i][j] for i in range(size) for j in range(size) if i != j)
    return ", ".join(f"{cell} x{n // 2}" for cell, n in sorted(cells.items()))


def link_checks(judge: JudgeState, host: HostEvidence) -> None:
    """The node's GPU links against its system's: unjudged when the GPU model or the system is
    unknown (a topology nobody can compare is never a pass)."""
    topo = host.topology
    if topo is None:
        return
    summary = _pair_summary(topo)
    model, system = host.model, host.system
    check = Check(
        check_id="topology.gpu-links",
        host=host.name,
        category="topology",
        status="pass",
        reason="",
        measured=summary,
        source=topo.source,
    )
    if model is None:
        check.status = "unjudged"
        check.reason = (
            f"{len(topo.gpus)} GPU(s), pairs: {summary or 'none'}; GPU model unknown, so the "
            "links cannot be compared with a board (declare gpu_model)"
        )
    elif system is None:
        check.status = "unjudged"
        check.reason = (
            f"{len(topo.gpus)} {model.model} GPU(s), pairs: {summary or 'none'}; no catalog "
            "system has this GPU count and model (declare the system)"
        )
    else:
        problems = link_problems(system, topo.links, model)
        check.reference = system.name
        if problems:
            check.status = "fail"
            check.reason = f"{listed([p.what for p in problems])} ({system.source})"
        else:
            check.reason = (
                f"{len(topo.gpus)} {model.model} GPU(s), pairs: {summary or 'none'}: as built "
                f"on a {system.name}"
            )
    judge.add(check)
    locality = _nic_locality(topo)
    if locality:
        judge.add(Check(
            check_id="topology.nic-locality", host=host.name, category="topology",
            status=locality[0], reason=locality[1], source=topo.source,
        ))  # fmt: skip


def _nic_locality(topo: Topology) -> tuple[Status, str] | None:
    """GPUs without a NIC on their own PCIe switch (PIX/PXB) send RDMA traffic through the CPU.
    That is how many boards are built (ALCF Polaris: two NICs on the CPUs' root ports for four
    GPUs), so it is said, not held against the node: the across-node busbw judges its effect."""
    if not any(topo.nic_cells.values()):
        return None
    far = []
    for gpu, cells in topo.nic_cells.items():
        if not any(c in ("PIX", "PXB") for c in cells):
            nearest = min(cells, key=lambda c: NIC_ORDER.index(c) if c in NIC_ORDER else 9)
            far.append(f"{gpu} ({nearest})")
    if not far:
        return "pass", "every GPU has a NIC on its PCIe switch (PIX/PXB)"
    return "pass", (
        f"{len(far)} of {len(topo.gpus)} GPU(s) have no NIC on their PCIe switch: "
        f"{', '.join(far[:4])}{' ...' if len(far) > 4 else ''}; GPUDirect RDMA traffic crosses "
        "the host bridge"
    )


def pcie_checks(judge: JudgeState, host: HostEvidence) -> None:
    """Each GPU's PCIe width against the card's spec (x16), not only against NVML's maximum,
    which reflects the slot: a card in an x8-wired slot reports max x8. A lower maximum
    generation than the card's is a slot or BIOS limit; the current generation is not judged,
    because GPUs drop it at idle."""
    if not host.pcie:
        return
    model = host.model
    problems: list[tuple[Status, str]] = []
    for gpu in host.pcie:
        link = gpu.link
        width, width_max = link.width_current, link.width_max
        if model and width is not None and width < model.pcie_width:
            slot = (
                f" (NVML's max is x{width_max}: the slot or riser)"
                if (width_max is not None and width_max < model.pcie_width)
                else ""
            )
            problems.append(("fail", f"{gpu.gpu} PCIe link at x{width} where a {model.model} "
                                     f"is x{model.pcie_width}{slot}"))  # fmt: skip
        elif width is not None and width_max is not None and width < width_max:
            problems.append(("fail", f"{gpu.gpu} PCIe link trained at x{width} of x{width_max}"))
        if model and link.gen_max is not None and link.gen_max < model.pcie_gen:
            problems.append(("warn", f"{gpu.gpu} PCIe link can reach only gen {link.gen_max} "
                                     f"where a {model.model} is gen {model.pcie_gen} (slot or "
                                     "BIOS)"))  # fmt: skip
    spec = f" of the x{model.pcie_width} a {model.model} has" if model else ""
    judge.add(Check(
        check_id="topology.pcie-link", host=host.name, category="topology",
        status=worst([p[0] for p in problems]) if problems else "pass",
        reason=listed([p[1] for p in problems]) or (
            f"{len(host.pcie)} GPU(s) at full PCIe width{spec} (the current generation is not "
            "judged: it drops at idle)"
        ),
        source=host.pcie[0].source,
    ))  # fmt: skip


def topology_checks(judge: JudgeState) -> None:
    for host in judge.evidence.hosts.values():
        link_checks(judge, host)
        nvlink_state_checks(judge, host)
        pcie_checks(judge, host)
