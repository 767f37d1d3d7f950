"""report.html: escaping, the sections a reader needs, and staying readable with many hosts.

The judged run rendered here is built in tests/report_fixtures.py.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from tests.report_fixtures import (
    realistic_results,
)

from gpuval.analysis.model import (
    Expectation,
)
from gpuval.report import write_report_files
from gpuval.report.html import json_for_script, render_report


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
