"""A judged run built by hand from the published 4x H100 outputs (the sample run's lambda-4xh100
files): the report, summary and junit tests and the browser test render it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from gpuval.analysis.model import (
    CLUSTER,
    Check,
    Expectation,
    HostFacts,
    RawFile,
    RunResults,
    Sidecar,
    Status,
    worst,
)
from gpuval.analysis.pairs import analyse_pairs
from gpuval.parsers import iperf3
from gpuval.records.base import Diagnostic, ParseResult
from gpuval.schedule import circle_rounds

# lambda-4xH100-all_reduce_perf-nccl-debug.txt: (size, out-of-place busbw) from 1 MiB up.
H100_ALL_REDUCE = [
    (1048576, 56.05), (2097152, 98.15), (4194304, 139.65), (8388608, 193.03),
    (16777216, 241.03), (33554432, 287.78), (67108864, 308.21), (134217728, 327.51),
    (268435456, 339.81), (536870912, 347.88), (1073741824, 355.89),
]  # fmt: skip
# 8xH100-p2pBandwidthLatencyTest-partial.txt, the top-left 4x4 block.
H100_P2P = [
    [2494.51, 364.13, 375.99, 378.03],
    [375.18, 2533.95, 376.08, 374.98],
    [363.43, 393.28, 2532.67, 376.35],
    [369.90, 375.92, 393.63, 2525.38],
]
LAMBDA_TOPO = {
    "matrix": "topology",
    "devices": ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0"],
    "links": [
        ["X", "NV18", "NV18", "NV18", "PHB"],
        ["NV18", "X", "NV18", "NV18", "PHB"],
        ["NV18", "NV18", "X", "NV18", "PHB"],
        ["NV18", "NV18", "NV18", "X", "PHB"],
        ["PHB", "PHB", "PHB", "PHB", "X"],
    ],
    "cpu_affinity": {"GPU0": "0-103", "GPU1": "0-103", "GPU2": "0-103", "GPU3": "0-103"},
    "numa_affinity": {"GPU0": "0", "GPU1": "0", "GPU2": "0", "GPU3": "0"},
    "nic_legend": {"NIC0": "mlx5_0"},
}
NVLINK4 = "NVLink 4 x 18 links (NV18) = 450 GB/s per direction"


def nccl_run(scale: float = 1.0, collective: str = "all_reduce") -> dict[str, Any]:
    rows = []
    for size, busbw in H100_ALL_REDUCE:
        half = {"time_us": 1.0, "algbw_gbps": busbw / 1.5, "busbw_gbps": round(busbw * scale, 2),
                "wrong": 0}  # fmt: skip
        rows.append({"size_bytes": size, "count": size // 4, "dtype": "float", "redop": "sum",
                     "root": -1, "out_of_place": half, "in_place": dict(half)})  # fmt: skip
    return {"collective": collective, "nranks": 4, "complete": True, "rows": rows,
            "avg_busbw_gbps": 98.414, "out_of_bounds": 0, "nccl_version": "2.26.2+cuda12.8",
            "devices": [], "failures": []}  # fmt: skip


def p2p_run(scale: float = 1.0) -> dict[str, Any]:
    unidirectional = [[round(v * scale, 2) if i != j else v for j, v in enumerate(row)]
                      for i, row in enumerate(H100_P2P)]  # fmt: skip
    latency = [[None if i == j else 2.1 + 0.01 * (i + j) for j in range(4)] for i in range(4)]
    return {
        "num_gpus": 4,
        "devices": [],
        "matrices": {
            "bandwidth_unidirectional_p2p_enabled": unidirectional,
            "bandwidth_bidirectional_p2p_enabled": [
                [v * 1.9 for v in row] for row in unidirectional
            ],
            "latency_gpu_p2p_enabled": latency,
        },
    }


def raw_file(host: str, name: str, tool: str, run: dict[str, Any], phase: str = "intranode",
             command: str = "", env: dict[str, str] | None = None) -> RawFile:  # fmt: skip
    path = f"raw/{host}/{name}.txt"
    sidecar = Sidecar(name=name, host=host, phase=phase, raw=f"{name}.txt", command=command,
                      tool=tool, env=env or {}, exit_code=0, duration_s=12.5)  # fmt: skip
    return RawFile(host=host, path=path, sidecar=sidecar,
                   parse=ParseResult(tool=tool, source=path, runs=[run]))  # fmt: skip


def host_checks(host: str, busbw: float, reason_extra: str = "") -> list[Check]:
    status: Status = "pass" if busbw >= 0.7 * 450 else "fail"
    return [
        Check(
            "nccl-tests.all_reduce.busbw",
            host,
            "bandwidth",
            status,
            f"all_reduce busbw {busbw} GB/s at 1 GiB is {busbw / 450:.0%} of the 450 GB/s "
            f"per-direction NVLink 4 peak{reason_extra}",
            busbw,
            315.0,
            "GB/s",
            f"raw/{host}/nccl-all_reduce.txt:52",
        ),
        Check(
            "nccl-tests.all_reduce.correctness",
            host,
            "correctness",
            "pass",
            "0 wrong results, out of bounds values: 0",
            0,
            0,
            None,
            f"raw/{host}/nccl-all_reduce.txt:53",
        ),
        Check(
            "p2p.unidirectional.min",
            host,
            "p2p",
            "warn" if host.endswith("2") else "pass",
            "lowest GPU pair 363.43 GB/s is 81% of 450 GB/s",
            363.43,
            450.0,
            "GB/s",
            f"raw/{host}/p2p.txt",
        ),
        Check(
            "topology.nvlink", host, "topology", "pass", "every GPU pair is NV18", "NV18", "NV18"
        ),
    ]


def realistic_results(hosts: list[str] | None = None, degraded: tuple[str, ...] = ("node3",),
                      reason_extra: str = "") -> RunResults:  # fmt: skip
    """A judged run of 4x H100 hosts; `degraded` hosts run at 60 % busbw and 70 % p2p."""
    hosts = hosts or ["node1", "node2", "node3", "node4"]
    files, checks, expectations = [], [], []
    for host in hosts:
        scale = 0.6 if host in degraded else 1.0
        files += [
            raw_file(
                host,
                "nccl-all_reduce",
                "nccl-tests",
                nccl_run(scale),
                command="all_reduce_perf -b 1M -e 1G -f 2 -g 4",
                env={"NCCL_DEBUG": "INFO"},
            ),
            raw_file(
                host,
                "p2p",
                "p2pBandwidthLatencyTest",
                p2p_run(0.7 if scale < 1 else 1.0),
                command="./p2pBandwidthLatencyTest",
            ),
            raw_file(
                host,
                "topo",
                "nvidia-smi-topo",
                LAMBDA_TOPO,
                phase="preflight",
                command="nvidia-smi topo -m",
            ),
        ]
        checks += host_checks(host, round(355.89 * scale, 2), reason_extra)
        expectations.append(Expectation(host, "intranode-collective", 450.0, 900.0, NVLINK4))
    checks.append(Check("consistency.nccl_version", CLUSTER, "consistency", "pass",
                        "every host runs NCCL 2.26.2"))  # fmt: skip
    files[0].parse.warnings.append(  # type: ignore[union-attr]
        Diagnostic("warning", "row truncated mid-line; kept the columns read", files[0].path, 41)
    )
    facts = [HostFacts(h, gpu_model="NVIDIA H100 80GB HBM3", gpu_count=4,
                       driver_version="570.148.08", cuda_version="12.8",
                       nccl_version="2.26.2+cuda12.8", mpi_version="Open MPI 4.1.4",
                       nccl_tests_version="2.14.1") for h in hosts]  # fmt: skip
    return RunResults(
        run_id="20261121-0600-sample", generated_at="2026-11-21T06:00:00Z", gpuval_version="0.1.0",
        verdict=worst([c.status for c in checks]), hosts=facts, files=files, checks=checks,
        expectations=expectations,
        diagnostics=[Diagnostic("warning", "raw file without sidecar", "raw/node4/extra.txt")],
        meta={"run_id": "20261121-0600-sample", "started_at": "2026-11-21T05:40:00Z"},
    )  # fmt: skip


def iperf3_document(gbps: float) -> str:
    """The end totals of an iperf3 -J client run at `gbps` (what the pair analysis reads)."""
    bits = gbps * 1e9
    total = {"start": 0, "end": 10, "seconds": 10, "bytes": int(bits * 10 / 8),
             "bits_per_second": bits}  # fmt: skip
    return json.dumps({
        "start": {"version": "iperf 3.12", "test_start": {"protocol": "TCP", "num_streams": 1}},
        "intervals": [], "end": {"sum_sent": total, "sum_received": total},
    })  # fmt: skip


def with_pair_tests(results: RunResults, slow: str | None) -> RunResults:
    """`results` with iperf3 pair tests between all its hosts, judged: ~15 Gbit/s, and ~1
    Gbit/s on every pair of `slow`. The raw files stay out of `files` (the step table would
    list each of them)."""
    hosts = [h.name for h in results.hosts]
    files = []
    for number, pairs in enumerate(circle_rounds(hosts), start=1):
        for a, b in pairs:
            for src, dst in ((a, b), (b, a)):
                name = f"pair-iperf3-r{number}-{src}--{dst}-try1"
                gbps = 0.95 if slow in (src, dst) else 14.5 + len(src + dst) % 5 / 10
                path = f"raw/{a}/{name}.json"
                sidecar = Sidecar(name=name, host=a, phase="network", raw=f"{name}.json",
                                  tool="iperf3", exit_code=0)  # fmt: skip
                files.append(RawFile(a, path, sidecar, iperf3.parse(iperf3_document(gbps), path)))
    analysis = analyse_pairs(files)
    checks = results.checks + analysis.checks
    return replace(
        results, checks=checks, verdict=worst([c.status for c in checks]), pairs=analysis.to_dict()
    )
