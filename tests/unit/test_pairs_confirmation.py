"""No flag without confirmation: a pair measured once a little low (below low_fraction of what
the healthy pairs reach, above the floor) warns as unconfirmed and says how to confirm; a repeat
that agrees, a second partner that agrees, or a reading below the floor fails. The messages count
the tries made, against the configured number only where run.json records it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.unit.test_pairs import (
    HEALTHY,
    HOSTS,
    bad,
    by_id,
    cluster,
    iperf3_file,
    judged_with_line_rate,
)

from gpuval.checks.model import CLUSTER
from gpuval.checks.pairs import PairAnalysis, analyse_pairs
from gpuval.evidence import pair_evidence
from gpuval.runfolder import RawFile, RunFolder

LINK = "pairs.iperf3.link.node1--node2"
# 70 % of the ~14.8 Gbit/s the healthy pairs reach: low (below 80 %), above the floor (50 %)
A_LITTLE_LOW = 10.4


def judged(files: list[RawFile], max_tries: int | None = None) -> PairAnalysis:
    """The pair analysis, with run.json's `config.bench_pairs_max_tries` where given."""
    config = {} if max_tries is None else {"bench_pairs_max_tries": max_tries}
    hosts = sorted({f.host for f in files})
    folder = RunFolder(Path("."), {"expected": {}, "config": config}, hosts, [], files)
    return analyse_pairs(pair_evidence(folder))


def one_direction_low(value: float) -> Callable[[str, str], float]:
    return lambda a, b: value if (a, b) == ("node1", "node2") else HEALTHY[a, b]


def test_one_try_a_little_low_warns_unconfirmed_and_says_how_to_confirm() -> None:
    analysis = judged(cluster(one_direction_low(A_LITTLE_LOW)), max_tries=1)
    assert bad(analysis.checks) == [("warn", LINK, CLUSTER)]
    reason = by_id(analysis.checks)[LINK, CLUSTER].reason
    assert "node1--node2: low, unconfirmed" in reason
    assert "run again with more tries (bench_pairs_max_tries) or against another partner" in reason
    assert "1 of 1 configured try made" in reason
    assert "up to" not in reason
    # the try itself stays low: the controller repeats it while the budget allows
    assert [t.attempt for t in analysis.tries if t.low] == [1]


def test_one_try_far_below_the_floor_fails_on_its_own() -> None:
    analysis = judged(cluster(one_direction_low(2.1)), max_tries=1)  # 14 %: below half
    assert bad(analysis.checks) == [("fail", LINK, CLUSTER)]
    reason = by_id(analysis.checks)[LINK, CLUSTER].reason
    assert "bad link" in reason and "below the 50 % floor" in reason
    assert "1 of 1 configured try made" in reason


def test_two_tries_both_low_confirm_the_bad_link() -> None:
    files = cluster(one_direction_low(A_LITTLE_LOW))
    files.append(iperf3_file("node1", "node2", 10.6, round_number=1, attempt=2))
    analysis = judged(files, max_tries=3)
    assert bad(analysis.checks) == [("fail", LINK, CLUSTER)]
    reason = by_id(analysis.checks)[LINK, CLUSTER].reason
    assert "bad link" in reason and "low again on a repeat" in reason
    assert "node1->node2 no passing try, 2 of 3 configured tries made" in reason


def test_without_a_recorded_configuration_the_message_counts_the_tries_made() -> None:
    analysis = judged(cluster(one_direction_low(A_LITTLE_LOW)))
    reason = by_id(analysis.checks)[LINK, CLUSTER].reason
    assert "node1->node2 no passing try, 1 try made (try 1: low, 10.4)" in reason
    assert "up to" not in reason and "configured" not in reason


def test_low_with_one_partner_and_fine_with_another_flags_no_node() -> None:
    checks = judged(cluster(one_direction_low(A_LITTLE_LOW)), max_tries=1).checks
    for node in ("node1", "node2"):
        assert by_id(checks)["pairs.iperf3.node", node].status == "pass"


def test_two_distinct_partners_measuring_a_node_low_once_each_flag_it() -> None:
    hosts = HOSTS[:3]
    checks = judged(cluster(lambda a, b: 10.2 if "node3" in (a, b) else 14.8, hosts), 1).checks
    assert by_id(checks)["pairs.iperf3.node", "node3"].status == "fail"
    assert [c.host for c in checks if c.status == "fail"] == ["node3"]


def single_partner_rounds(low_pair_tries: list[float]) -> list[RawFile]:
    """Each node measured with one partner only: node1--node2 at the values given (one try
    each), node3--node4 healthy."""
    files = [iperf3_file("node3", "node4", 14.8), iperf3_file("node4", "node3", 14.7)]
    files.append(iperf3_file("node2", "node1", 14.6))
    for attempt, value in enumerate(low_pair_tries, start=1):
        files.append(iperf3_file("node1", "node2", value, attempt=attempt))
    return files


def test_a_single_partner_measured_once_low_flags_neither_node_but_warns() -> None:
    checks = judged(single_partner_rounds([A_LITTLE_LOW]), max_tries=1).checks
    assert [c for c in checks if c.status == "fail"] == []
    for node in ("node1", "node2"):
        check = by_id(checks)["pairs.iperf3.node", node]
        assert check.status == "warn"
        assert "unconfirmed" in check.reason and "another partner" in check.reason


def test_a_single_partner_repeated_low_flags_its_nodes() -> None:
    checks = judged(single_partner_rounds([A_LITTLE_LOW, 10.1]), max_tries=2).checks
    failing = sorted(c.host for c in checks if c.status == "fail")
    assert failing == ["node1", "node2"]  # one partner each: the pair cannot say which


def test_one_try_below_the_line_rates_fail_band_fails_on_its_own() -> None:
    """Healthy pairs at 4 Gbit/s on 10 GbE; node1->node2 at 2.4: 60 % of them (above the floor)
    but 24 % of the line rate, under the 25 % fail band: no noise, a fail on one try."""
    value = {("node1", "node2"): 2.4}
    files = cluster(lambda a, b: value.get((a, b), 4.0))
    checks = judged_with_line_rate(files, HOSTS, 10000)
    link = by_id(checks)[LINK, CLUSTER]
    assert link.status == "fail" and "below the network's fail band" in link.reason
