"""Find the bad node: pair tests (iperf3, the all-reduce benchmark, nccl-tests between two
nodes) judged against what the healthy pairs reach, and against the network itself.

Step and file names are `gpuval.plan.steps`' pair steps. For iperf3 the client x of the pair (x, y)
runs `iperf3 -c y -J` (x--y) and `iperf3 -c y -R -J` (y--x), both saved in raw/x/; the other
kinds lie in the folder of the rank-0 host. A failed, timed-out or low try is repeated up to the
configured number of tries; only try1 belongs in run.json `expected`.

Judgement (per kind; deterministic: everything sorted, medians exact):
- A pair's value is its best finished try; for iperf3 the weaker of its two directions.
- What healthy pairs reach (the reference) cannot be dragged down by bad nodes, fewer than half
  of them: a node's best pair is bounded by the node itself, so the nodes whose best pair is
  within `low_fraction` of the median of the better half of the nodes' best pairs are the strong
  ones, and the reference is the median pair between strong nodes. With 4 hosts of which 2 are
  bad, the median of all pairs is a bad pair; the median between strong nodes is the one healthy
  pair. Nor can one fast pair lift it: a staged screen's pairs run at once, and on 32 simulated
  hosts the two whose clients started last, after most others had ended, measured 3.5 and 5.2
  Gbit/s against 1.8-3.2 for the rest; against the fastest node, 15 of 16 healthy pairs read low.
- A pair is low below `low_fraction` of the reference (or when it produced no number).
- No flag without confirmation: a low pair stands on its own only with no number, below the floor
  (`floor_fraction` of the reference, or the network's fail band), or low again on a repeat of the
  same direction. A pair measured once between the floor and `low_fraction` is low but
  unconfirmed: it warns and says how to confirm (more tries, another partner).
- A node is flagged when none of its pairs is healthy (a healthy pair proves both its nodes
  healthy) and two distinct partners agree, or its one low pair stands on its own; or when most
  of its pairs are low and at least two of them cannot be put down to a flagged partner.
- A staged run's pairs are its search's confirmations and are judged by the search's own rule
  (gpuval.plan.confirmation, called by both): a node is flagged only when every partner, two or
  more, measured it low; low with some partners and not with others, or with one partner only,
  it is unconfirmed (a warning, never a pass).
- A low pair of a flagged node is explained by it (the node's check lists it, so one slow node
  among 100 hosts is one failure, not 99); a low pair between two nodes that are fine elsewhere
  is a bad link (host `cluster`) once it stands on its own. A pair without a number fails
  whatever else is known. Messages count the tries made, against run.json's
  `config.bench_pairs_max_tries` where it records how many the run was given.
- Every pair is also judged against the network: iperf3 against the TCP interface's line rate,
  nccl-tests and the NCCL all-reduce against the across-node bound of the nodes' RDMA ports. A
  uniformly slow cluster has no bad node but fails here; so does a two-host cluster, which has one
  pair and nothing to compare it with.
- A pair that passed only on a later try warns and says which try; the spread across its
  finished tries (min/median/max) is kept.

Everything is read from the evidence's pair tries (each file read once), and each step indexes
the tries once: the cost grows with the number of tries. The modules, by concern: `kinds` (the
kinds and thresholds), `tries` (each try's number or why there is none), `verdicts` (pairs and
nodes against the healthy reference), `network_bounds` (pairs against the network), `rdma_lanes`
(rails and memories) and `analysis` (all of it for one run, and the tables results.json keeps).
"""

from gpuval.checks.pairs.analysis import PairAnalysis, analyse_pairs, row_kind
from gpuval.checks.pairs.kinds import KINDS, PairKind, PairThresholds
from gpuval.checks.pairs.network_bounds import measured_on_cpus
from gpuval.checks.pairs.tries import Try
from gpuval.checks.pairs.verdicts import (
    NodeVerdict,
    PairVerdict,
    healthy_reference,
    reference_name,
)

__all__ = [
    "KINDS",
    "NodeVerdict",
    "PairAnalysis",
    "PairKind",
    "PairThresholds",
    "PairVerdict",
    "Try",
    "analyse_pairs",
    "healthy_reference",
    "measured_on_cpus",
    "reference_name",
    "row_kind",
]
