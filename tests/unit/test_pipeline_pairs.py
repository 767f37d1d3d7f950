"""`gpuval report` on run folders of iperf3 pair tests (find the bad node), end to end: run.json
with expected steps, raw files named by the pair convention, every output file judged."""

from __future__ import annotations

import html
import json
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from tests.run_folders import iperf3_pair_steps, write_iperf3_try, write_run_json

from gpuval.cli import main
from gpuval.plan.host_order import circle_rounds
from gpuval.schemas.validation import validate

HOSTS = ["node1", "node2", "node3", "node4"]

Rate = Callable[[str, str], float | None]  # (sender, receiver) -> Gbit/s; None: refused


def healthy(src: str, dst: str) -> float:
    """~15 Gbit/s over the simulated bridge (shared/notes/test-environment.md), a little
    different for every direction as real pairs are."""
    return 14.5 + (int(src[-1]) * 3 + int(dst[-1])) % 7 / 10


def throttled(src: str, dst: str) -> float:
    """tc tbf on node3's link: ~1 Gbit/s both ways."""
    return 0.9 + int(src[-1]) / 100 if "node3" in (src, dst) else healthy(src, dst)


EVIDENCE = (
    "iperf3 TCP: none of its pairs is healthy: node3: its pairs 0.91 (node1), 0.92 (node2), "
    "0.93 (node4) Gbit/s vs 14.5 Gbit/s that healthy pairs reach (6 %)"
)


# No sysfs-net step: the TCP interface's speed is unknown, so the pairs cannot be compared with
# the line rate. Unjudged, never a pass: gpuval report exits 3.
LINE_RATE_UNKNOWN = ("unjudged", "pairs.iperf3.line-rate", "cluster")
EXIT_UNJUDGED = 3


def pair_run(run: Path, rate: Rate, unreachable: str | None = None) -> Path:
    expected: dict[str, list[str]] = {host: [] for host in HOSTS}
    for client, src, dst, name in iperf3_pair_steps(HOSTS):
        expected[client].append(name)
        if client == unreachable:
            continue
        gbps = None if unreachable in (src, dst) else rate(src, dst)
        server = dst if src == client else src
        write_iperf3_try(run, client, name, server, gbps, reverse=src != client)
    write_run_json(run, "pairs", HOSTS, expected=expected)
    return run


def report(run: Path, *options: str) -> int:
    return main(["report", str(run), "--quiet", *options])


def results(run: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((run / "results.json").read_text())
    return document


def not_passing(run: Path) -> list[tuple[str, str, str]]:
    return sorted(
        (c["status"], c["check_id"], c["host"])
        for c in results(run)["checks"]
        if c["status"] != "pass"
    )


def test_healthy_pairs_pass_with_every_pair_in_n_minus_1_rounds(tmp_path: Path) -> None:
    run = pair_run(tmp_path, healthy)
    assert report(run) == EXIT_UNJUDGED
    assert not_passing(run) == [LINE_RATE_UNKNOWN]
    tries = results(run)["pairs"]["tries"]
    assert len(tries) == 12 and {t["outcome"] for t in tries} == {"ok"}
    assert {(t["a"], t["b"]) for t in tries} == {(a, b) for r in circle_rounds(HOSTS) for a, b in r}
    assert {t["round"] for t in tries} == {1, 2, 3}  # N-1 rounds of disjoint pairs
    nodes = results(run)["pairs"]["nodes"]
    assert [(n["node"], n["flagged"], n["pairs"]) for n in nodes] == [(h, False, 3) for h in HOSTS]
    table = pd.read_csv(run / "measurements.csv")
    pairs = table[table.metric == "pair_iperf3"]
    assert len(pairs) == 12 and set(pairs["try"]) == {1} and set(pairs.unit) == {"Gbit/s"}
    one = pairs[(pairs.host_a == "node2") & (pairs.host_b == "node1")]
    assert one.value.round(6).tolist() == [healthy("node2", "node1")]


def test_a_throttled_host_and_only_it_is_flagged_everywhere(tmp_path: Path) -> None:
    run = pair_run(tmp_path, throttled)
    assert report(run) == 1
    # node3's low pairs are judged in node3's check (listed there), not one warning each
    assert not_passing(run) == [("fail", "pairs.iperf3.node", "node3"), LINE_RATE_UNKNOWN]
    flagged = [n["node"] for n in results(run)["pairs"]["nodes"] if n["flagged"]]
    assert flagged == ["node3"]
    (node3,) = [c for c in results(run)["checks"] if c["check_id"] == "pairs.iperf3.node"
                and c["host"] == "node3"]  # fmt: skip
    assert node3["reason"] == EVIDENCE and node3["reference"] == 14.5
    summary = json.loads((run / "summary.json").read_text())
    validate(summary, "summary")
    assert summary["pairs"]["flagged_nodes"] == ["node3"]
    assert summary["pairs"]["flagged_links"] == []  # node3's low pairs are explained by node3
    assert [(n["node"], n["flagged"]) for n in summary["pairs"]["nodes"]] == [
        (h, h == "node3") for h in HOSTS
    ]
    assert {h["name"]: h["status"] for h in summary["hosts"]}["node3"] == "fail"
    assert junit_failures(run) == {"node3": ["pairs.iperf3.node"]}
    page = (run / "report.html").read_text()
    pairs = page[page.index('<section id="pairs">') : page.index('<section id="bandwidth">')]
    assert html.escape(EVIDENCE) in pairs
    rows = re.findall(r"<tr>\s*<td class=\"nowrap\">(node\d)</td>\s*<td>(.*?)</td>", pairs)
    assert [(node, "flagged" in verdict) for node, verdict in rows] == [
        ("node3", True), ("node1", False), ("node2", False), ("node4", False),
    ]  # fmt: skip
    assert '14.5<br><span class="muted">healthy pairs</span>' in page  # checks table


def junit_failures(run: Path) -> dict[str, list[str]]:
    """Test suite (host) -> names of its failed test cases."""
    root = ET.parse(run / "junit.xml").getroot()
    found = {
        suite.get("name", ""): [case.get("name", "") for case in suite.iter("testcase")
                                if case.find("failure") is not None]
        for suite in root.iter("testsuite")
    }  # fmt: skip
    return {suite: names for suite, names in found.items() if names}


def test_a_pair_that_passed_on_its_second_try_warns_and_does_not_fail(tmp_path: Path) -> None:
    run = pair_run(tmp_path, healthy)
    write_iperf3_try(run, "node2", "pair-iperf3-r2-node2--node4-try1", "node4", None,
                     reverse=False)  # fmt: skip
    write_iperf3_try(run, "node2", "pair-iperf3-r2-node2--node4-try2", "node4", 14.7,
                     reverse=False)  # fmt: skip
    assert report(run) == EXIT_UNJUDGED
    assert not_passing(run) == [LINE_RATE_UNKNOWN, ("warn", "pairs.iperf3.link.node2--node4",
                                                     "cluster")]  # fmt: skip
    (link,) = [c for c in results(run)["checks"] if c["status"] == "warn"]
    assert "node2->node4 passed on try 2 (try 1: " in link["reason"]
    assert "unable to connect to server: Connection refused" in link["reason"]
    page = (run / "report.html").read_text()
    assert "<h4>Repeated (1)</h4>" in page and "node2 &rarr; node4" in page


@pytest.mark.parametrize("lost", ["node1", "node4"])
def test_an_unreachable_host_fails_its_pairs_and_no_other_host(tmp_path: Path, lost: str) -> None:
    """node1 is the client of all its pairs (nothing on disk, only run.json's expected steps);
    node4 is the server of all its pairs (the clients' iperf3 could not connect)."""
    run = pair_run(tmp_path, healthy, unreachable=lost)
    assert report(run) == 1
    failing = {(c["check_id"], c["host"]) for c in results(run)["checks"] if c["status"] == "fail"}
    others = [h for h in HOSTS if h != lost]
    links = {f"pairs.iperf3.link.{'--'.join(sorted((lost, h)))}" for h in others}
    assert failing == {("pairs.iperf3.node", lost), *((link, "cluster") for link in links)} | (
        {("host.reachable", lost)}
    )
    for check in results(run)["checks"]:
        if check["host"] in others:
            assert check["status"] == "pass", check
    nodes = {n["node"]: n for n in results(run)["pairs"]["nodes"]}
    assert nodes[lost]["flagged"] and nodes[lost]["low_pairs"] == 3
    assert [h for h in others if nodes[h]["flagged"] or nodes[h]["low_pairs"] != 1] == []


def test_thresholds_file_sets_the_pair_low_fraction(tmp_path: Path) -> None:
    run = pair_run(tmp_path / "run", throttled)
    lenient = tmp_path / "t.json"
    lenient.write_text('{"pair_low_fraction": 0.05}')
    # ~1 of ~15 Gbit/s is 6 %: no pair fails, the line rate stays unknown
    assert report(run, "--thresholds", str(lenient)) == EXIT_UNJUDGED


def test_two_reports_of_one_run_are_identical_but_for_the_time(tmp_path: Path) -> None:
    first = pair_run(tmp_path / "a", throttled)
    write_iperf3_try(first, "node1", "pair-iperf3-r1-node1--node4-try2", "node4", 14.9,
                     reverse=False)  # fmt: skip
    second = tmp_path / "b"
    shutil.copytree(first, second)
    assert report(first) == report(second) == 1
    documents = [results(first), results(second)]
    times = [document.pop("generated_at") for document in documents]
    assert documents[0] == documents[1]
    assert (first / "measurements.csv").read_bytes() == (second / "measurements.csv").read_bytes()
    pages = [(run / "report.html").read_text().replace(time, "")
             for run, time in zip((first, second), times, strict=True)]  # fmt: skip
    assert pages[0] == pages[1]
