"""Time the pair analysis (find the bad node) where it must stay linear in the number of tries.

    python -m tests.bench.pair_analysis

Two generated run folders, held in memory as parsed records (no text is parsed per try):
- 128 hosts, all pairs: 8,128 pairs x 3 kinds (iperf3 both ways, nccl-tests, ib_write_bw on
  rail 0 with host memory), the circle schedule's 127 rounds;
- 1,024 hosts, staged: the screening round and the confirmation rounds `gpuval.plan.pair_rounds`
  plans from its outcomes, the same 3 kinds.
Both have slow nodes (a low pair is tried again up to the suite's max tries) and a bad link.
Each host has the preflight outputs the network references read (interface speed, ibstat).
Printed: seconds (wall and CPU) to build the evidence (every file read once), to analyse the
pairs and to write their tables. Target: analysis < 10 s each on the 2-core development machine.
Exit status 1 only when the analysis flags other nodes than the slow ones.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gpuval.checks.pairs import PairThresholds, analyse_pairs
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.parsers import infiniband, iperf3, nccl_tests, perftest, sysfs_net
from gpuval.plan.group_testing import GroupSearch
from gpuval.plan.host_order import Pair, Rounds, circle_rounds, ordered_pair
from gpuval.plan.steps import RdmaLane, RunPlan, expected_steps, pair_step_name
from gpuval.records.base import ParseResult
from gpuval.records.nccl import NcclHalf, NcclRow, NcclRun
from gpuval.records.network import Iperf3Run, IperfSum, PerftestRun
from gpuval.runfolder import RawFile, RunFolder, Sidecar

TARGET_S = 10.0
DATA = Path(__file__).resolve().parents[1] / "data/verdicts/pairs-nccl-4hosts-node3-slow"
LANE = RdmaLane(0, "host")
IPERF3_GBIT = 92.0  # healthy TCP on a 100 Gb/s interface
RDMA_GBIT = 370.0  # healthy NDR rail, host memory
DECLARED = {"gpu_model": "H100 SXM", "gpus_per_node": 8, "nic_count": 8, "nic_rate_gbit": 400}
Speed = Callable[[str, str], float]  # (a, b) -> share of the healthy rate


def _sidecar(host: str, name: str, tool: str, phase: str) -> Sidecar:
    return Sidecar(name=name, host=host, phase=phase, raw=f"{name}.txt", tool=tool, exit_code=0)


class Templates:
    """One parsed output per tool; every try is a copy with its own numbers and hosts."""

    def __init__(self) -> None:
        self.ibstat = infiniband.parse((DATA / "raw/node1/ibstat.txt").read_text(), tool="ibstat")
        self.sysfs = sysfs_net.parse(
            "/sys/class/net/eth0/speed:100000\n/sys/class/net/eth0/operstate:up\n"
        )
        nccl_text = (DATA / "raw/node1/pair-nccl-r1-node1--node4-try1.txt").read_text()
        self.nccl: NcclRun = nccl_tests.parse(nccl_text).runs[0]
        self.nccl_best = max(
            h.busbw_gbps for r in self.nccl.rows for h in (r.out_of_place, r.in_place)
            if h is not None and h.busbw_gbps is not None
        )  # fmt: skip
        self.iperf3: Iperf3Run = iperf3.parse(_IPERF3_TEXT).runs[0]
        self.rdma: PerftestRun = perftest.parse(_RDMA_TEXT).runs[0]

    def iperf3_run(self, gbit: float) -> Iperf3Run:
        received = IperfSum(bytes=1, bits_per_second=gbit * 1e9, seconds=5)
        return dataclasses.replace(self.iperf3, received=received, sent=received)

    def nccl_run(self, a: str, b: str, share: float) -> NcclRun:
        def half(h: NcclHalf | None) -> NcclHalf | None:
            busbw = h.busbw_gbps * share if h and h.busbw_gbps is not None else None
            return dataclasses.replace(h, busbw_gbps=busbw) if h else None

        rows = [
            NcclRow(r.size_bytes, r.count, r.dtype, r.redop, r.root, half(r.out_of_place),
                    half(r.in_place), r.timestamp, r.line)
            for r in self.nccl.rows
        ]  # fmt: skip
        devices = [
            dataclasses.replace(d, host=a if d.host == "node1" else b) for d in self.nccl.devices
        ]
        return dataclasses.replace(self.nccl, rows=rows, devices=devices, hosts=[a, b])

    def rdma_run(self, gbit: float) -> PerftestRun:
        rows = [dataclasses.replace(r, average_gbit=gbit) for r in self.rdma.rows]
        return dataclasses.replace(self.rdma, rows=rows)


_IPERF3_TEXT = """{"start": {"version": "iperf 3.12", "connecting_to": {"host": "10.0.0.2",
"port": 5201}, "test_start": {"protocol": "TCP", "num_streams": 1, "duration": 5, "reverse": 0}},
"intervals": [], "end": {"sum_sent": {"start": 0, "end": 5, "seconds": 5, "bytes": 1,
"bits_per_second": 1e9, "retransmits": 0}, "sum_received": {"start": 0, "end": 5, "seconds": 5,
"bytes": 1, "bits_per_second": 1e9}}}"""
_RDMA_TEXT = (
    "                    RDMA_Write BW Test\n"
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
    " 65536      100000           0.00               370.00             0.700000\n"
)


def _pair_files(
    made: Templates, number: int, pair: Pair, share: float, attempt: int
) -> Iterator[RawFile]:
    """One try of one pair, every kind: the files its first host keeps."""
    a, b = pair
    for src, dst in ((a, b), (b, a)):
        name = pair_step_name("iperf3", number, src, dst, attempt)
        run = made.iperf3_run(IPERF3_GBIT * share)
        yield RawFile(a, f"raw/{a}/{name}.json", _sidecar(a, name, "iperf3", "network"),
                      ParseResult("iperf3", runs=[run]))  # fmt: skip
    name = pair_step_name("nccl", number, a, b, attempt)
    yield RawFile(a, f"raw/{a}/{name}.txt", _sidecar(a, name, "nccl-tests", "internode"),
                  ParseResult("nccl-tests", runs=[made.nccl_run(a, b, share)]))  # fmt: skip
    name = pair_step_name("rdma", number, a, b, attempt, LANE)
    yield RawFile(a, f"raw/{a}/{name}.txt", _sidecar(a, name, "ib_write_bw", "network"),
                  ParseResult("ib_write_bw", runs=[made.rdma_run(RDMA_GBIT * share)]))  # fmt: skip


def _round_files(made: Templates, rounds: Rounds, first: int, speed: Speed) -> list[RawFile]:
    """Every try of the rounds, numbered from `first`: a low pair is tried again up to the
    suite's max tries (a slow node stays slow)."""
    files: list[RawFile] = []
    for number, pairs in enumerate(rounds, start=first):
        for pair in pairs:
            share = speed(*pair)
            tries = 1 if share >= DEFAULTS.pair_low_fraction else RunPlan().pairs_max_tries
            for attempt in range(1, tries + 1):
                files += _pair_files(made, number, pair, share, attempt)
    return files


def _host_files(made: Templates, hosts: list[str]) -> list[RawFile]:
    return [
        RawFile(host, f"raw/{host}/{name}.txt", _sidecar(host, name, tool, "preflight"), parsed)
        for host in hosts
        for name, tool, parsed in (
            ("sysfs-net", "sysfs-net", made.sysfs),
            ("ibstat", "ibstat", made.ibstat),
        )
    ]


def _speed(slow: set[str], bad_link: Pair) -> Speed:
    def share(a: str, b: str) -> float:
        if slow & {a, b}:
            return 0.4
        return 0.5 if ordered_pair(a, b) == bad_link else 1.0

    return share


def _folder(hosts: list[str], files: list[RawFile], expected: dict[str, list[str]]) -> RunFolder:
    meta = {"hosts": hosts, "expected": expected, "declared": dict.fromkeys(hosts, DECLARED)}
    return RunFolder(Path("."), meta, hosts, [], files)


def all_pairs_folder(made: Templates, count: int = 128) -> tuple[RunFolder, set[str]]:
    """The run folder, and its slow nodes."""
    hosts = [f"gpu-{i:04d}" for i in range(1, count + 1)]
    slow = set(hosts[6::70])
    speed = _speed(slow, (hosts[3], hosts[5]))
    files = _host_files(made, hosts) + _round_files(made, circle_rounds(hosts), 1, speed)
    plan = RunPlan(pairs_allreduce="false", pairs_nccl="required")
    return _folder(hosts, files, expected_steps(hosts, plan, phases=["pairs"])), slow


def staged_folder(made: Templates, count: int = 1024) -> tuple[RunFolder, set[str]]:
    """The run folder, and its slow nodes."""
    hosts = [f"gpu-{i:04d}" for i in range(1, count + 1)]
    slow = set(hosts[7::97])  # 11 slow nodes among 1,024
    search = GroupSearch.start(hosts, by_pairs=True)  # the screen by pairs, then confirmation
    screen: list[list[Pair]] = [[(a, b) for a, b in search.groups()]]
    speed = _speed(slow, next(p for p in screen[0] if not slow & set(p)))
    outcomes = {pair: speed(*pair) >= DEFAULTS.pair_low_fraction for r in screen for pair in r}
    confirm = search.record_groups(dict(outcomes)).pairs()
    files = _host_files(made, hosts) + _round_files(made, screen, 1, speed)
    files += _round_files(made, confirm, len(screen) + 1, speed)
    return _folder(hosts, files, {}), slow  # staged mode knows no pair in advance


def _timed(name: str, folder: RunFolder, slow: set[str]) -> bool:
    """Seconds of wall clock and of CPU (the machine is shared: CPU time is the steadier);
    whether exactly the slow nodes were flagged."""
    clocks = (time.perf_counter, time.process_time)
    started = [clock() for clock in clocks]
    evidence = build_evidence(folder)
    built = [clock() - start for clock, start in zip(clocks, started, strict=True)]
    started = [clock() for clock in clocks]
    analysis = analyse_pairs(evidence, PairThresholds.from_thresholds(DEFAULTS))
    analysed = [clock() - start for clock, start in zip(clocks, started, strict=True)]
    started = [clock() for clock in clocks]
    analysis.to_dict()
    tabled = [clock() - start for clock, start in zip(clocks, started, strict=True)]
    flagged = sorted({c.host for c in analysis.checks if c.check_id.endswith(".node")
                      and c.status == "fail"})  # fmt: skip
    print(
        f"{name}: {len(analysis.tries)} tries, {len(analysis.pairs)} pair verdicts, "
        f"flagged {', '.join(flagged)}\n"
        f"  evidence {built[0]:.2f} s ({built[1]:.2f} s CPU), "
        f"pair analysis {analysed[0]:.2f} s ({analysed[1]:.2f} s CPU; target {TARGET_S:g} s), "
        f"tables {tabled[0]:.2f} s ({tabled[1]:.2f} s CPU)"
    )
    return set(flagged) == slow


def main() -> int:
    made = Templates()
    right = [
        _timed("128 hosts, all pairs", *all_pairs_folder(made)),
        _timed("1,024 hosts, staged", *staged_folder(made)),
    ]
    if not all(right):
        print("wrong verdict: the flagged nodes are not the slow ones")
    return 0 if all(right) else 1


if __name__ == "__main__":
    raise SystemExit(main())
