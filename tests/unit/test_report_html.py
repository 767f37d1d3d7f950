"""report.html of a judged run: the verdict banner, failures first, unjudged shown as its own
status (never a pass), the sections a reader needs, escaping, and a hundred hosts.

The run is a real run folder judged by gpuval (tests/report_fixtures.py says what it holds and
which faults were injected); what each test expects follows from those faults.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from tests.report_fixtures import (
    BEST_BUSBW,
    HALF,
    HOSTS,
    IBSTAT_SKIPPED,
    LAMBDA,
    NCCL_COMMAND,
    NCCL_STEP,
    NVLINK4_PER_DIRECTION,
    PLATEAU_BUSBW,
    SLOW_COLLECTIVES,
    SLOW_NIC,
    judge,
    write_run,
)
from tests.run_folders import write_step

from gpuval.checks.model import STATUS_ORDER
from gpuval.judgement.model import RunJudgement
from gpuval.report.html import render_report
from gpuval.report.pages import json_for_script
from gpuval.report.writers import write_report_files

DEVICE = Path(__file__).parents[1] / "data" / "device" / "h100-x1-2026-11-22"
SAMPLE_A100 = Path(__file__).parents[1] / "data" / "sample-run" / "raw" / "dgx-8xa100"
HOSTILE = "<img src=x onerror=alert(1)>"  # a host name: the inventory is text too
# The statuses of this run's checks other than pass (no check of it is an error).
NOT_PASSING = {"fail", "unjudged", "warn"}


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


def section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start : page.index("</section>", start)]


def table_rows(html: str) -> list[list[str]]:
    """Body rows of the tables in `html`, each a list of its cells' inner HTML."""
    rows = []
    for body in re.findall(r"<tbody>(.*?)</tbody>", html, re.S):
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S):
            rows.append([c.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)])
    return rows


def badge(cell: str) -> str | None:
    """The status a cell's badge shows, checked against its label."""
    match = re.fullmatch(r'<span class="status status-(\w+)">(\w+)</span>', cell)
    if not match:
        return None
    assert match[1] == match[2], cell
    return match[1]


def checks_table(html: str) -> list[tuple[str, str, str, list[str]]]:
    """(status, host, check id, cells) of every row of the checks tables in `html`, as listed."""
    return [(badge(r[0]) or "", r[1], r[2], r) for r in table_rows(html)]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> RunJudgement:
    return judge(write_run(tmp_path_factory.mktemp("run")))


@pytest.fixture(scope="module")
def page(judged: RunJudgement) -> str:
    return render_report(judged)


def test_page_is_self_contained_with_plotly_once(page: str) -> None:
    collector = parse_page(page)
    assert not [a for t, a in collector.tags if t == "script" and a.get("src")]
    assert not [a for t, a in collector.tags if t == "link"]
    external = [a for _, a in collector.tags if any(v and "//" in v for k, v in a.items()
                                                     if k in ("src", "href"))]  # fmt: skip
    assert not external
    assert page.count("Plotly.newPlot") == 1
    assert sum("plotly.js v" in s for s in collector.scripts) == 1  # the library's banner


def test_every_chart_has_a_placeholder_and_the_body_expects_them(page: str) -> None:
    specs = chart_specs(page)
    ids = {a.get("id") for _, a in parse_page(page).tags}
    # one busbw chart (every host against the same peak), the one P2P matrix the published
    # partial output holds on each of 4 hosts, and the iperf3 pair matrix
    assert len(specs) == 1 + 4 + 1
    assert all(spec["id"] in ids for spec in specs)
    assert f'data-charts-expected="{len(specs)}"' in page


def test_busbw_chart_draws_each_host_against_the_per_direction_peak(page: str) -> None:
    busbw = chart_specs(page)[0]
    assert [t["name"] for t in busbw["data"]] == HOSTS
    healthy, slow = busbw["data"][0], busbw["data"][HOSTS.index(SLOW_COLLECTIVES)]
    assert (healthy["x"][-1], healthy["y"][-1]) == (2**30, BEST_BUSBW)
    assert slow["y"][-1] == pytest.approx(BEST_BUSBW * HALF, abs=0.01)
    layout = busbw["layout"]
    assert layout["xaxis"]["type"] == "log"
    ticks = layout["xaxis"]["ticktext"]
    assert (ticks[0], ticks[-1]) == ("8 B", "1 GiB")  # the sweep: -b 8 -e 1G
    peak = [s for s in layout["shapes"] if s["type"] == "line"]
    band = [s for s in layout["shapes"] if s["type"] == "rect"]
    assert [s["y0"] for s in peak] == [NVLINK4_PER_DIRECTION]
    assert (band[0]["y0"], band[0]["y1"]) == (0.7 * 450, 0.9 * 450)


def test_verdict_banner_says_fail_names_the_failing_hosts_and_counts_every_status(
    judged: RunJudgement, page: str
) -> None:
    banner = re.search(r'<div class="banner banner-(\w+)" id="verdict">(.*?)</div>', page, re.S)
    assert banner and banner[1] == "fail"
    assert '<span class="verdict">FAIL</span>' in banner[2]
    # node2's NIC and node3's collectives: the two faults
    assert f"Failing or erroneous: {SLOW_NIC}, {SLOW_COLLECTIVES}." in banner[2]
    counts = {
        status: int(n)
        for n, status in re.findall(r'<b>(\d+)</b> <span class="status status-(\w+)">', banner[2])
    }
    assert list(counts) == list(STATUS_ORDER)
    judged_counts = Counter(c.status for c in judged.checks)
    assert counts == {status: judged_counts[status] for status in STATUS_ORDER}
    # the iperf3 pairs' line rate (no interface speed recorded)
    assert counts["unjudged"] == 1
    assert "1 check unjudged" in banner[2] and "never counted as a pass" in banner[2]


def test_checks_are_listed_worst_first_with_reason_and_reference(page: str) -> None:
    assert "busbw is judged at large message sizes against the per-direction (unidirectional) " \
        "peak; the sweep-average footer is not used" in page  # fmt: skip
    rows = checks_table(section(page, "checks"))
    statuses = [status for status, *_ in rows]
    assert statuses == sorted(statuses, key=STATUS_ORDER.index)
    # grouped into findings: worst status first, then those on most hosts, then by check
    assert [(host, check) for status, host, check, _ in rows if status == "fail"] == [
        (SLOW_COLLECTIVES, "nccl-tests.all_reduce.busbw"), (SLOW_NIC, "pairs.iperf3.node")
    ]  # fmt: skip
    (busbw,) = [cells for _, host, check, cells in rows
                if (host, check) == (SLOW_COLLECTIVES, "nccl-tests.all_reduce.busbw")]  # fmt: skip
    # judged where the large-message plateau starts: the 256 MiB row, at half speed
    assert float(busbw[4]) == pytest.approx(PLATEAU_BUSBW * HALF, abs=0.01)
    assert busbw[5] == "450"
    log = (LAMBDA / "nccl-all_reduce.txt").read_text().splitlines()
    line = next(i for i, text in enumerate(log, start=1) if text.startswith("268435456 "))
    assert busbw[7] == f"raw/{SLOW_COLLECTIVES}/{NCCL_STEP}.txt:{line}"
    assert "38 % of the 450 GB/s per-direction NVLink 4 peak" in busbw[3]  # 169.9 / 450


def test_unjudged_checks_are_their_own_status_and_never_listed_as_passing(page: str) -> None:
    listed = section(page, "checks")
    split = listed.index("<summary>Passing (")
    not_passing, passing = checks_table(listed[:split]), checks_table(listed[split:])
    assert {status for status, *_ in passing} == {"pass"}
    assert {status for status, *_ in not_passing} == NOT_PASSING
    unjudged = sorted((host, check) for status, host, check, _ in not_passing
                      if status == "unjudged")  # fmt: skip
    assert unjudged == [("cluster", "pairs.iperf3.line-rate")]
    css = re.search(r"\.status-unjudged \{([^}]*)\}", page)
    colours = {s: re.search(rf"--{s}: (#\w+); --{s}-bg: (#\w+);", page) for s in STATUS_ORDER}
    assert css and all(colours.values())
    unjudged_colours = colours.pop("unjudged")
    assert unjudged_colours and unjudged_colours.groups() not in [
        m.groups() for m in colours.values() if m
    ]  # a colour of its own


def test_host_table_shows_each_host_status_worst_first_with_unjudged_counted(
    page: str,
) -> None:
    hosts = section(page, "hosts")
    assert "Checks (error / fail / unjudged / warn / pass)" in hosts
    rows = [r for r in table_rows(hosts) if badge(r[1])]
    statuses = {r[0]: badge(r[1]) for r in rows}
    # node1 and node4 measured well; ibstat was skipped there (not installed) and their P2P
    # output is the published partial one
    assert statuses == {"node2": "fail", "node3": "fail", "node1": "warn", "node4": "warn"}
    assert [r[0] for r in rows] == ["node2", "node3", "node1", "node4"]
    unjudged_counts = {r[0]: int(r[2].split(" / ")[2]) for r in rows}
    assert unjudged_counts == dict.fromkeys(HOSTS, 0)


def test_a_run_with_nothing_failed_but_something_unjudged_is_unjudged(tmp_path: Path) -> None:
    page = render_report(judge(write_run(tmp_path, slow_collectives=(), slow_nic=None)))
    assert '<div class="banner banner-unjudged" id="verdict">' in page
    assert '<span class="verdict">UNJUDGED</span>' in page
    assert "No check failed, but not everything measured could be judged." in page
    assert '<span class="status status-unjudged">unjudged</span>' in section(page, "checks")


def test_degraded_host_is_an_outlier_in_the_comparison_table(page: str) -> None:
    outliers = re.findall(r'<td class="num outlier">([\d.]+)</td>', section(page, "hosts"))
    # node3's busbw (its best large-message row, halved); its P2P is like every other host's
    assert [float(v) for v in outliers] == [pytest.approx(PLATEAU_BUSBW * HALF, abs=0.01)]


def test_provenance_shows_versions_commands_and_diagnostics(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    # copied into the run folder by hand: no sidecar, and no parser reads a kernel log
    shutil.copy(DEVICE / "dmesg.txt", run / "raw" / "node4" / "dmesg.txt")
    page = render_report(judge(run))
    provenance = section(page, "provenance")
    for text in ("570.148.08", "12.8", "2.26.2", "H100 SXM", NCCL_COMMAND, "NCCL_DEBUG=INFO",
                 "all 4 hosts", "exit 0 &times;4",
                 f"skipped: {IBSTAT_SKIPPED} &times;4"):  # fmt: skip
        assert text in provenance, text
    diagnostics = section(page, "diagnostics")
    assert "raw/node4/dmesg.txt" in diagnostics and "without a sidecar" in diagnostics
    topology = section(page, "topology")
    assert topology.count('<table class="topo">') == 1  # four identical topologies, shown once
    assert 'class="link-nv">NV18</td>' in topology and 'class="link-phb">PHB</td>' in topology
    assert '<td class="mono">0-103</td>' in topology  # CPU affinity of the GPU rows
    assert 'NIC0 = <span class="mono">mlx5_0</span>' in topology


def test_text_from_logs_and_inventory_is_escaped(tmp_path: Path) -> None:
    run = write_run(tmp_path, hosts=["node1", HOSTILE], slow_collectives=(HOSTILE,))
    log = run / "raw" / "node1" / f"{NCCL_STEP}.txt"
    log.write_text(log.read_text().replace(
        "NCCL INFO NCCL version", "NCCL WARN </script><img src=y onerror=alert(2)>\n"
        "192-222-52-239:16629:16629 [0] NCCL INFO NCCL version", 1,
    ))  # fmt: skip
    write_step(run, "node1", "echo", "</script>\n", command="echo '</script><b>bold</b>'")
    page = render_report(judge(run))
    assert HOSTILE not in page and "<img src=y" not in page and "<b>bold</b>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;/script&gt;&lt;img src=y onerror=alert(2)&gt;" in page  # the WARN line, quoted
    assert "\\u003cimg src=x onerror=alert(1)\\u003e" in page  # the chart legend's JSON
    names = [t["name"] for spec in chart_specs(page) for t in spec["data"] if "name" in t]
    # entities, which Plotly shows as the characters of the real name, never as markup
    assert HOSTILE.replace("<", "&lt;").replace(">", "&gt;") in names


def test_json_for_script_cannot_close_the_element() -> None:
    text = json_for_script({"a": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(str(text)) == {"a": "</script><!-- & \u2028"}


def test_hundred_hosts_stay_readable(tmp_path: Path) -> None:
    hosts = [f"gpu{i:03d}" for i in range(100)]
    run = write_run(tmp_path, hosts=hosts, slow_collectives=("gpu042", "gpu077"), pairs=False)
    page = render_report(judge(run))
    specs = chart_specs(page)
    busbw = specs[0]
    names = [t.get("name") for t in busbw["data"]]
    assert "median of 100 runs" in names
    assert names[-2:] == ["gpu042", "gpu077"]  # the outlying runs drawn on their own
    assert "gpu000" not in names  # a healthy host is not singled out
    assert len(specs) == 1 + 8  # P2P heatmaps for the 8 worst hosts only
    heatmap_hosts = re.findall(r"<h3>(gpu\d+) <span", page)
    assert heatmap_hosts[:2] == ["gpu042", "gpu077"]
    assert "Shown for the 8 hosts with the worst results out of 100" in page
    assert page.count('<table class="topo">') == 1 and "all 100 hosts" in page
    rows = [r for r in table_rows(section(page, "hosts")) if badge(r[1])]
    # failing hosts first; every other host warns (ibstat skipped, partial P2P output)
    assert [r[0] for r in rows[:2]] == ["gpu042", "gpu077"]
    assert len(rows) == 100 and {badge(r[1]) for r in rows[2:]} == {"warn"}
    assert "min of 100 hosts" in page


def test_write_report_files_writes_all_three(judged: RunJudgement, tmp_path: Path) -> None:
    write_report_files(judged, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "junit.xml", "report.html", "summary.json"
    ]  # fmt: skip


def test_hosts_judged_against_different_peaks_get_a_chart_each(tmp_path: Path) -> None:
    """A mixed cluster: the sample run's 8x A100 (NVLink 3: 12 links x 25 GB/s = 300 GB/s per
    direction) beside two 4x H100 nodes (450 GB/s)."""
    run = write_run(tmp_path, hosts=["node1", "node2"], slow_collectives=())
    shutil.copytree(SAMPLE_A100, run / "raw" / "dgx-8xa100")
    meta = json.loads((run / "run.json").read_text())
    meta["hosts"].append("dgx-8xa100")
    meta["declared"]["dgx-8xa100"] = {"gpu_model": "A100 SXM"}
    (run / "run.json").write_text(json.dumps(meta))
    specs = chart_specs(render_report(judge(run)))
    drawn = sorted(
        ([t["name"] for t in s["data"]], [sh["y0"] for sh in s["layout"]["shapes"]
                                          if sh["type"] == "line"])
        for s in specs if s["data"][0]["type"] == "scatter"
    )  # fmt: skip
    assert drawn == [(["dgx-8xa100"], [300.0]), (["node1", "node2"], [450.0])]


def test_provenance_shows_what_a_cloud_run_cost(judged: RunJudgement) -> None:
    """Teardown writes run.json's `cloud` section (gpuval.cloud.provision.record_cost); the
    report rendered after it says what the run cost, next to the plan."""
    cloud = {
        "provider": "lambda", "instance_type": "gpu_8x_h100_sxm5", "region": "us-east-1",
        "count": 2, "cost": {"currency": "USD", "total_usd": 23.92, "planned_usd": 47.84,
                             "method": "per started minute from launch to termination"},
    }  # fmt: skip
    with_cost = dataclasses.replace(judged, meta={**judged.meta, "cloud": cloud})
    provenance = section(render_report(with_cost), "provenance")
    assert "lambda: 2 x gpu_8x_h100_sxm5 in us-east-1" in provenance
    assert "23.92 USD (planned 47.84)" in provenance
    assert "What the run cost" not in section(render_report(judged), "provenance")
