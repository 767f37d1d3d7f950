"""report.html: escaping, the sections a reader needs, and staying readable with many hosts.

`realistic_results` builds a judged run by hand from the published 4x H100 outputs in
shared/samples (lambda-4xH100-*); test_summary, test_junit and the browser test reuse it.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
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
from gpuval.records.base import Diagnostic, ParseResult
from gpuval.report import write_report_files
from gpuval.report.html import json_for_script, render_report

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


class _Collector(HTMLParser):
    """Tags, script bodies and visible text of a page, to test structure rather than strings."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def parse_page(page: str) -> _Collector:
    collector = _Collector()
    collector.feed(page)
    return collector


def chart_specs(page: str) -> list[dict[str, Any]]:
    match = re.search(r'<script type="application/json" id="gpuval-charts">(.*?)</script>', page,
                      re.S)  # fmt: skip
    assert match
    specs: list[dict[str, Any]] = json.loads(match.group(1))
    return specs


def test_page_is_self_contained_with_plotly_once() -> None:
    page = render_report(realistic_results())
    collector = parse_page(page)
    assert not [a for t, a in collector.tags if t == "script" and a.get("src")]
    assert not [a for t, a in collector.tags if t == "link"]
    external = [a for _, a in collector.tags if any(v and "//" in v for k, v in a.items()
                                                     if k in ("src", "href"))]  # fmt: skip
    assert not external
    assert page.count("Plotly.newPlot") == 1
    assert sum("plotly.js v" in s for s in collector.scripts) == 1  # the library's banner


def test_every_chart_has_a_placeholder_and_the_body_expects_them() -> None:
    page = render_report(realistic_results())
    specs = chart_specs(page)
    ids = {a.get("id") for _, a in parse_page(page).tags}
    # one busbw chart plus three p2p heatmaps on each of 4 hosts
    assert len(specs) == 1 + 4 * 3
    assert all(spec["id"] in ids for spec in specs)
    assert f'data-charts-expected="{len(specs)}"' in page


def test_busbw_chart_draws_each_host_against_the_per_direction_peak() -> None:
    busbw = chart_specs(render_report(realistic_results()))[0]
    assert [t["name"] for t in busbw["data"]] == ["node1", "node2", "node3", "node4"]
    assert busbw["data"][0]["y"][-1] == 355.89 and busbw["data"][0]["x"][-1] == 2**30
    layout = busbw["layout"]
    assert layout["xaxis"]["type"] == "log"
    assert "1 GiB" in layout["xaxis"]["ticktext"] and "1 MiB" in layout["xaxis"]["ticktext"]
    peak = [s for s in layout["shapes"] if s["type"] == "line"]
    band = [s for s in layout["shapes"] if s["type"] == "rect"]
    assert [s["y0"] for s in peak] == [450.0]
    assert (band[0]["y0"], band[0]["y1"]) == (0.7 * 450, 0.9 * 450)


def test_checks_are_listed_worst_first_with_reason_and_reference() -> None:
    page = render_report(realistic_results())
    assert "busbw is judged at large message sizes against the per-direction (unidirectional) " \
        "peak; the sweep-average footer is not used" in page  # fmt: skip
    statuses = re.findall(r'<td><span class="status status-(\w+)">', page)
    order = {"error": 0, "fail": 1, "warn": 2, "pass": 3}
    check_statuses = statuses[: 4 * 4 + 1]
    assert check_statuses == sorted(check_statuses, key=order.__getitem__)
    assert check_statuses[0] == "fail"
    assert "213.53 GB/s at 1 GiB is 47% of the 450 GB/s" in page
    assert "raw/node3/nccl-all_reduce.txt:52" in page


def test_degraded_host_is_an_outlier_in_the_comparison_table() -> None:
    page = render_report(realistic_results())
    outliers = re.findall(r'<td class="num outlier">([\d.]+)</td>', page)
    assert outliers == ["213.53", "254.4"]  # busbw and min p2p of node3


def test_provenance_shows_versions_commands_and_diagnostics() -> None:
    page = render_report(realistic_results())
    for text in ("570.148.08", "2.26.2+cuda12.8", "Open MPI 4.1.4", "2.14.1",
                 "all_reduce_perf -b 1M -e 1G -f 2 -g 4", "NCCL_DEBUG=INFO", "all 4 hosts",
                 "exit 0 &times;4", "raw/node1/nccl-all_reduce.txt:41",
                 "row truncated mid-line", "raw file without sidecar", "NIC0 = "):  # fmt: skip
        assert text in page, text
    assert page.count('<table class="topo">') == 1  # four identical topologies, shown once
    assert 'class="link-nv">NV18</td>' in page and 'class="link-phb">PHB</td>' in page
    assert '<td class="mono">0-103</td>' in page  # CPU affinity of the GPU rows


def test_text_from_logs_and_inventory_is_escaped() -> None:
    hostile = "<script>alert(1)</script>"
    results = realistic_results(hosts=[hostile, "node2"], degraded=(hostile,),
                                reason_extra=" </script><img src=x onerror=alert(2)>")  # fmt: skip
    page = render_report(results)
    assert hostile not in page
    assert "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in page  # the chart legend's JSON
    names = [t["name"] for spec in chart_specs(page) for t in spec["data"] if "name" in t]
    assert hostile in names  # the JSON still decodes to the real name


def test_json_for_script_cannot_close_the_element() -> None:
    text = json_for_script({"a": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(str(text)) == {"a": "</script><!-- & \u2028"}


def test_hundred_hosts_stay_readable() -> None:
    hosts = [f"gpu{i:03d}" for i in range(100)]
    page = render_report(realistic_results(hosts=hosts, degraded=("gpu042", "gpu077")))
    specs = chart_specs(page)
    busbw = specs[0]
    names = [t.get("name") for t in busbw["data"]]
    assert "median of 100 runs" in names
    assert names[-2:] == ["gpu042", "gpu077"]  # the outlying runs drawn on their own
    assert "gpu000" not in names  # a healthy host is not singled out
    assert len(specs) == 1 + 8 * 3  # heatmaps for the 8 worst hosts only
    heatmap_hosts = re.findall(r"<h3>(gpu\d+) <span", page)
    assert heatmap_hosts[:2] == ["gpu042", "gpu077"]
    assert "Shown for the 8 hosts with the worst results out of 100" in page
    assert page.count('<table class="topo">') == 1 and "all 100 hosts" in page
    # failing, warning and outlying hosts in the open table; 89 healthy ones folded away
    assert "89 more hosts, passing with no outlier" in page


def test_write_report_files_writes_all_three(tmp_path: Path) -> None:
    write_report_files(realistic_results(), tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "junit.xml", "report.html", "summary.json"
    ]  # fmt: skip


def test_hosts_judged_against_different_peaks_get_a_chart_each() -> None:
    results = realistic_results()
    results.expectations[0] = Expectation("node1", "intranode-collective", 300.0, 600.0, "NVLink 3")
    specs = chart_specs(render_report(results))
    busbw = [s for s in specs if s["data"][0]["type"] == "scatter"]
    assert [[t["name"] for t in s["data"]] for s in busbw] == [
        ["node1"],
        ["node2", "node3", "node4"],
    ]
    assert [[sh["y0"] for sh in s["layout"]["shapes"] if sh["type"] == "line"] for s in busbw] == [
        [300.0], [450.0]
    ]  # fmt: skip
