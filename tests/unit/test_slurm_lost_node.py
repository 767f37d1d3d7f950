"""A node Slurm lost during a step (srun's `Node failure on NODE`): not tested in that step, and
the step's non-zero exit status no evidence against the nodes that stayed (unjudged, never a
pass). Data: tests/data/slurm/README.md (REAL and CONSTRUCTED)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.run_folders import write_run_json, write_step

from gpuval.checks import judge_run
from gpuval.checks.model import Check
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.parsers.slurm_text import lost_nodes
from gpuval.runfolder import read_run_folder

DATA = Path(__file__).parents[1] / "data" / "slurm"
NODE_FAILURE = "srun: error: Node failure on node3"
SRUN = "srun --jobid=57 --nodelist=node1,node2,node3 --nodes=3 --ntasks=3 sh -c x"


def test_srun_s_published_lines_name_the_failed_and_the_never_ready_nodes() -> None:
    said = (DATA / "srun-node-failure-not-ready.stderr").read_text()
    not_ready = "srun: error: Nodes hpcsmall-debug-ghpc-[0-2] are still not ready"
    assert lost_nodes(said) == {
        "hpcsmall-debug-ghpc-0": "srun: error: Node failure on hpcsmall-debug-ghpc-0",
        "hpcsmall-debug-ghpc-1": not_ready,
        "hpcsmall-debug-ghpc-2": not_ready,
    }


def test_the_step_node3_left_on_slurm_22_05_names_node3_only() -> None:
    said = (DATA / "srun-step-node3-set-down-22.05.txt").read_text()
    assert lost_nodes(said) == {"node3": NODE_FAILURE}


@pytest.mark.parametrize(
    "output",
    [
        "step=57.0 node=node1\n",
        "srun: error: node3: task 2: Exited with exit code 1\n",
        # A program's own words quoting srun's are not srun's line.
        f"echo '{NODE_FAILURE}'\n",
    ],
)
def test_other_output_names_no_lost_node(output: str) -> None:
    assert lost_nodes(output) == {}


def judged(run: Path, output: str, exit_code: int | None) -> dict[str, Check]:
    write_run_json(run, "r", ["node1", "node2", "node3"])
    write_step(run, "node1", "slurm-leave", output, exit_code=exit_code, command=SRUN,
               phase="internode")  # fmt: skip
    checks = judge_run(build_evidence(read_run_folder(run)), DEFAULTS).checks
    return {c.host: c for c in checks if c.check_id == "step.slurm-leave"}


def test_the_node_slurm_lost_is_not_tested_and_the_step_is_unconfirmed_for_the_others(
    tmp_path: Path,
) -> None:
    output = (DATA / "srun-step-node-failure-constructed.txt").read_text()
    steps = judged(tmp_path, output, 1)
    assert sorted(steps) == ["node1", "node3"]  # node2 has no step check: no evidence either way
    assert steps["node3"].status == "unjudged"
    assert steps["node3"].reason == (
        f"not tested in step 'slurm-leave': Slurm lost the node while the step ran ({NODE_FAILURE})"
    )
    assert steps["node1"].status == "unjudged"
    assert steps["node1"].reason == (
        f"step 'slurm-leave' exited with status 1 after Slurm lost node3 from it ({NODE_FAILURE})"
        ": unconfirmed, neither passed nor failed on it"
    )


def test_a_step_that_failed_without_slurm_losing_a_node_still_fails(tmp_path: Path) -> None:
    steps = judged(tmp_path, "step=57.0 node=node1\nsrun: error: node3: task 2: Exited with "
                   "exit code 1\n", 1)  # fmt: skip
    assert sorted(steps) == ["node1"]
    assert steps["node1"].status == "fail"
    assert steps["node1"].reason == "step 'slurm-leave' exited with status 1"


def test_a_step_that_did_not_finish_fails_whatever_its_output_says(tmp_path: Path) -> None:
    steps = judged(tmp_path, f"{NODE_FAILURE}\n", None)
    assert sorted(steps) == ["node1"] and steps["node1"].status == "fail"


def test_a_pair_try_slurm_cut_by_losing_a_node_measured_nothing(tmp_path: Path) -> None:
    # Expected before running: the try tested neither side (skipped, never a failed try), so no
    # pair check fails (link or node), and the link's reason says Slurm lost node3.
    write_run_json(tmp_path, "r", ["node1", "node2", "node3"])
    write_step(tmp_path, "node1", "pair-iperf3-r1-node1--node3-try1", f"{NODE_FAILURE}\n",
               exit_code=1, command=SRUN, phase="network", raw_ext="json")  # fmt: skip
    checks = judge_run(build_evidence(read_run_folder(tmp_path)), DEFAULTS).checks
    link = [c for c in checks if c.check_id.startswith("pairs.iperf3.link.node1--node3")]
    assert [c.status for c in link] == ["unjudged"], link
    assert f"not tested: Slurm lost node3 ({NODE_FAILURE})" in link[0].reason
    # (node2 and node3 left no folder here: their reachability checks are not this test's.)
    failing = [c.check_id for c in checks if c.status == "fail" and c.check_id.startswith("pairs")]
    assert failing == [], failing
