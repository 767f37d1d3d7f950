"""`gpuval report` on run folders of iperf3 pair tests (find the bad node), end to end: run.json
with expected steps, raw files named by the pair convention, every output file judged."""

from __future__ import annotations

import copy
import html
import json
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpuval.cli import main
from gpuval.schedule import circle_rounds
from gpuval.schema import validate

OUTPUTS = Path(__file__).parents[1] / "data" / "outputs" / "iperf3"
# A real iperf 3.9 TCP client run (-J); each pair file is this document at another rate.
TEMPLATE: dict[str, Any] = json.loads((OUTPUTS / "openwisp-iperf3.9-tcp-client.json").read_text())
REFUSED = (OUTPUTS / "openwisp-iperf3.7-connect-refused.json").read_text()
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
    "iperf3 TCP: 3 of its 3 pairs low: node3: its pairs 0.91 (node1), 0.92 (node2), "
    "0.93 (node4) Gbit/s vs cluster median 14.5 Gbit/s (6 %)"
)


def _scaled(node: Any, factor: float) -> None:
    """Every bits_per_second and bytes of the document times `factor` (intervals and totals)."""
    if isinstance(node, list):
        for item in node:
            _scaled(item, factor)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "bits_per_second":
                node[key] = value * factor
            elif key == "bytes" and isinstance(value, int):
                node[key] = round(value * factor)
            else:
                _scaled(value, factor)


def iperf3_json(server: str, gbps: float | None, reverse: bool) -> str:
    if gbps is None:
        return REFUSED
    document = copy.deepcopy(TEMPLATE)
    _scaled(document, gbps * 1e9 / TEMPLATE["end"]["sum_received"]["bits_per_second"])
    document["start"]["connecting_to"]["host"] = server
    document["start"]["test_start"]["reverse"] = int(reverse)
    return json.dumps(document, indent=2)


def write_step(run: Path, host: str, name: str, text: str, exit_code: int) -> None:
    folder = run / "raw" / host
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(text)
    sidecar = {
        "schema_version": 1, "name": name, "host": host, "phase": "network",
        "raw": f"{name}.json", "command": "iperf3 -J -t 10 -c peer", "tool": "iperf3",
        "cwd": None, "env": {}, "exit_code": exit_code, "timed_out": False, "timeout_s": 60,
        "started_at": None, "ended_at": None, "duration_s": 10.2, "skipped": None,
    }  # fmt: skip
    (folder / f"{name}.meta.json").write_text(json.dumps(sidecar))


def pair_steps(hosts: list[str]) -> Iterator[tuple[str, str, str, str]]:
    """(client, sender, receiver, step name) of every first try: the client (first host of
    the pair) runs `iperf3 -c peer -J` and `iperf3 -c peer -R -J`, both saved in its folder."""
    for number, pairs in enumerate(circle_rounds(hosts), start=1):
        for a, b in pairs:
            for src, dst in ((a, b), (b, a)):
                yield a, src, dst, f"pair-iperf3-r{number}-{src}--{dst}-try1"


def pair_run(run: Path, rate: Rate, unreachable: str | None = None) -> Path:
    expected: dict[str, list[str]] = {host: [] for host in HOSTS}
    for client, src, dst, name in pair_steps(HOSTS):
        expected[client].append(name)
        if client == unreachable:
            continue
        gbps = None if unreachable in (src, dst) else rate(src, dst)
        server = dst if src == client else src
        write_step(run, client, name, iperf3_json(server, gbps, src != client), 0 if gbps else 1)
    meta = {"run_id": "pairs", "started_at": None, "hosts": HOSTS, "expected": expected,
            "config": {}}  # fmt: skip
    (run / "run.json").write_text(json.dumps(meta))
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
    assert report(run) == 0
    assert not_passing(run) == []
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
    assert not_passing(run) == [("fail", "pairs.iperf3.node", "node3")]
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
    assert '14.5<br><span class="muted">cluster median</span>' in page  # checks table


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
    write_step(run, "node2", "pair-iperf3-r2-node2--node4-try1", REFUSED, 1)  # try 1 refused
    write_step(run, "node2", "pair-iperf3-r2-node2--node4-try2",
               iperf3_json("node4", 14.7, False), 0)  # fmt: skip
    assert report(run) == 0
    assert not_passing(run) == [("warn", "pairs.iperf3.link.node2--node4", "cluster")]
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
    lenient.write_text('{"pair_low_fraction": 0.05, "pair_max_tries": 2}')
    assert report(run, "--thresholds", str(lenient)) == 0  # ~1 of ~15 Gbit/s is 6 %


def test_two_reports_of_one_run_are_identical_but_for_the_time(tmp_path: Path) -> None:
    first = pair_run(tmp_path / "a", throttled)
    write_step(first, "node1", "pair-iperf3-r1-node1--node4-try2",
               iperf3_json("node4", 14.9, False), 0)  # fmt: skip
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
