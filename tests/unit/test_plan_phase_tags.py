"""The plan leaves out the phases a run's --tags and --skip-tags skip, as Ansible decides per play
(docs.ansible.com, playbooks_tags: `always` runs unless skipped by name, --skip-tags wins over
--tags, `tagged` runs every tagged play). The lent H200's run was started with
`--skip-tags install`, and its plan still counted the install and openmpi phases (48 s of 267)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval.cli import main
from gpuval.plan import duration, inputs, plan_model
from gpuval.plan.phase_tags import SKIP_TAGS, TagSelection

DEFAULTS = inputs.role_defaults(Path(__file__).resolve().parents[2] / "roles")


@pytest.mark.parametrize(
    ("run", "skip", "tags", "runs"),
    [
        ("", "", ("install",), True),
        ("", "install", ("install",), False),
        ("intranode", "", ("install",), False),
        ("intranode", "", ("always",), True),
        ("", "always", ("always",), False),
        ("install", "install", ("install",), False),
        ("tagged", "", ("build",), True),
        ("", "cleanup", ("collect", "cleanup"), False),
    ],
)
def test_a_play_runs_as_ansible_decides(
    run: str, skip: str, tags: tuple[str, ...], runs: bool
) -> None:
    selection = TagSelection.of({"ansible_run_tags": run, "ansible_skip_tags": skip})
    assert selection.play_runs(tags) is runs


def test_skipping_install_leaves_out_the_install_and_openmpi_phases_and_nothing_else() -> None:
    shape = plan_model.Shape(("node1", "node2"), 8, 0)
    whole = duration.estimate(shape, DEFAULTS, {})
    skipped = duration.estimate(shape, {**DEFAULTS, SKIP_TAGS: ["install"]}, {})
    by_name = {phase.name: phase for phase in skipped.phases}
    assert by_name["install"].total_s == by_name["openmpi"].total_s == 0
    assert by_name["install"].note == "left out by --skip-tags install"
    left_out = sum(p.total_s for p in whole.phases if p.name in ("install", "openmpi"))
    assert left_out > 0
    assert skipped.total_s == pytest.approx(whole.total_s - left_out)


def test_a_run_without_its_pairs_phase_plans_no_round_and_no_fault_time() -> None:
    shape = plan_model.Shape(tuple(f"node{n}" for n in range(16)), 8, 8)
    estimate = duration.estimate(shape, {**DEFAULTS, SKIP_TAGS: "pairs"}, {})
    assert (estimate.pair_rounds, estimate.fault_s, estimate.stage_costs) == (0, 0.0, None)


def test_gpuval_plan_takes_the_tags_of_ansible_playbook(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--nodes", "4", "--gpus-per-node", "8", "--tags", "intranode",
                 "--tags", "pairs", "--skip-tags", "pairs"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    phases = {line.split()[0]: line for line in lines if line[:1].isalpha()}
    assert "left out by --tags intranode,pairs --skip-tags pairs" in phases["pairs"]
    assert "left out" not in phases["intranode"]
    assert "left out" not in phases["start"]
