"""The rails of a run across nodes: which host's NCCL found fewer HCA ports than the others.

NCCL_DEBUG=INFO prints, per process, the HCA ports its IB transport found active (`NET/IB :
Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ...`); a port that is down, or an HCA the driver lost, is
absent. Within one run every host of the same design lists the same ports, so a host that lacks
a port more than half of the other hosts list has lost a rail, and the run's busbw says whether
it cost the run:

- busbw below its reference (fail or warn): the host fails, named with the missing HCA(s);
- busbw at its reference, or not judged: a warning on the host (fewer rails than its peers is
  still worth a look), never a pass about the rail;
- a host listing other ports than its peers, as many of them: a warning.

A run where fewer than two hosts listed HCAs, or a host that listed none, is not judged here.
NCCL prints hostnames: an inventory host of that name (or short name) is the subject; otherwise,
for the rack tests gpuval places (gpuval.plan.steps.rack_test_hosts) and starts with mpirun,
whose ranks fill host by host in the order given (gpuval.plan.mpirun), the host at the rank
block's position. A host neither names stays with the run's owner, named in the reason.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from gpuval.checks.context import JudgeState
from gpuval.checks.model import Check, Status
from gpuval.evidence import Parsed
from gpuval.plan.steps import RackTest, rack_test_hosts
from gpuval.records.nccl import NcclRun

ACTIVE_ONLY_SOURCE = (
    "NCCL lists only ports in state ACTIVE: "
    "https://github.com/NVIDIA/nccl/blob/master/src/transport/net_ib/init.cc (ncclIbInitDevices)"
)
MPI_LAUNCHERS = frozenset({"mpirun", "mpiexec", "orterun", "prterun"})
ACTION = (
    "run ibstat on it (the port should be State: Active, Physical state: LinkUp), check the "
    "missing HCA's cable and switch port, and that NCCL_IB_HCA names the same HCAs on every node"
)


def inventory_host(judge: JudgeState, name: str | None) -> str | None:
    """The inventory host an output names (NCCL prints hostnames; an inventory name that is the
    hostname or its short form matches); None when none is."""
    short = (name or "").split(".", 1)[0].lower()
    if not short:
        return None
    return next((h for h in judge.evidence.hosts if h.split(".", 1)[0].lower() == short), None)


def _ranks_host_by_host(run: NcclRun) -> list[str]:
    """The run's hosts in the order of their ranks, when each host holds one block of ranks
    (as mpirun fills them host by host); [] when the device lines show anything else."""
    order: list[str] = []
    for _, host in sorted((d.rank, d.host) for d in run.devices if d.host):
        if not order or order[-1] != host:
            if host in order:
                return []
            order.append(host)
    return order


def _placed_hosts(judge: JudgeState, parsed: Parsed[NcclRun], test: RackTest | None) -> list[str]:
    """The inventory hosts of a rack test's run in the order gpuval started its ranks; [] when
    that order is unknown (not a rack test, not started by mpirun, or by srun, which fills
    ranks in Slurm's order)."""
    command = parsed.file.command or parsed.record.command or ""
    launchers = {PurePosixPath(word).name for word in command.split()}
    if test is None or "srun" in launchers or not launchers & MPI_LAUNCHERS:
        return []
    listed = [str(h) for h in judge.evidence.folder.meta.get("hosts", [])]
    racks = {
        name: host.declared.nvl_domain
        for name, host in judge.evidence.hosts.items()
        if host.declared.nvl_domain
    }
    return rack_test_hosts(listed, racks)[test].get(parsed.host, [])


def _subjects(judge: JudgeState, parsed: Parsed[NcclRun], test: RackTest | None) -> dict[str, str]:
    """NCCL's host names -> inventory hosts, by name, else by the rank blocks' placement."""
    run = parsed.record
    named = {nccl: inventory_host(judge, nccl) for nccl in run.ib_hcas_by_host}
    found = {nccl: host for nccl, host in named.items() if host is not None}
    if len(found) < len(named):
        ranked, placed = _ranks_host_by_host(run), _placed_hosts(judge, parsed, test)
        if ranked and len(ranked) == len(placed):
            for nccl, host in zip(ranked, placed, strict=True):
                if nccl in named and nccl not in found and host not in found.values():
                    found[nccl] = host
    return found


def _hca_text(hca: str) -> str:
    """`mlx5_2:1` -> `mlx5_2`, the name people use; another port is said (`mlx5_2 port 2`)."""
    device, _, port = hca.rpartition(":")
    return device if port == "1" else f"{device} port {port}"


def _expected_ports(peers: list[list[str]]) -> list[str]:
    """The ports more than half of a host's peers list, in the order they print them: two hosts
    that lost the same rail among four still leave it expected of each."""
    counts: dict[str, int] = {}
    for ports in peers:
        for port in ports:
            counts[port] = counts.get(port, 0) + 1
    return [port for port, count in counts.items() if count > len(peers) / 2]


def _busbw_check(judge: JudgeState, check_id: str) -> Check | None:
    return next((c for c in reversed(judge.checks) if c.check_id == check_id), None)


def _verdict(fewer: bool, busbw: Check | None, what: str) -> tuple[Status, str]:
    if not fewer:
        return "warn", "it lists as many ports, other ones: check that every node is cabled alike"
    if busbw is not None and busbw.status in ("fail", "warn") and busbw.reference is not None:
        return "fail", (
            f"{what}'s busbw, {busbw.measured} GB/s against its {busbw.reference:g} GB/s "
            "reference, is low, and a rail lost on this host is its likely cause"
        )
    if busbw is not None and busbw.status == "pass":
        return "warn", (
            f"{what}'s busbw met its reference all the same, but fewer rails than its peers is "
            "worth a look"
        )
    return "warn", f"{what}'s busbw was not judged, so what the lost rail cost is unknown"


def hca_checks(
    judge: JudgeState, parsed: Parsed[NcclRun], prefix: str, owner: str, test: RackTest | None
) -> None:
    """Each host of a run across nodes whose NCCL lacks HCA ports most other hosts of the run
    list: a fail when it has fewer and the run's busbw is low, else a warning."""
    lists = parsed.record.ib_hcas_by_host
    if len(lists) < 2:
        return
    subjects = _subjects(judge, parsed, test)
    busbw = _busbw_check(judge, f"{prefix}.busbw")
    what = {"across-racks": "the network-only test", "rack": "the rack test"}.get(
        test or "", "the run"
    )
    for nccl_host, hcas in lists.items():
        peers = [other for name, other in lists.items() if name != nccl_host]
        expected = _expected_ports(peers)
        missing = [hca for hca in expected if hca not in hcas]
        if not missing:
            continue
        status, impact = _verdict(len(hcas) < len(expected), busbw, what)
        subject = subjects.get(nccl_host, owner)
        called = nccl_host if subject == nccl_host else f"{subject} (NCCL's host {nccl_host})"
        gone = ", ".join(_hca_text(hca) for hca in missing)
        who = "the" if all(hca in other for other in peers for hca in missing) else "most"
        judge.add(Check(
            check_id=f"{prefix}.ib-hcas", host=subject, category="network", status=status,
            measured=len(hcas), reference=len(expected), source=parsed.source(),
            reason=f"{gone} missing from NCCL's NET/IB list on {called}, which {who} other "
            f"hosts have: it lists {len(hcas)} HCA port(s) ({', '.join(hcas)}), they list "
            f"{len(expected)}; {impact} [{ACTIVE_ONLY_SOURCE}]",
            action=f"on {subject}: {ACTION}",
        ))  # fmt: skip
