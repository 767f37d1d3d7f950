"""Acceptance profiles: the shipped ones fit their hardware, a bad one is an error naming the
file, the line, the key and what it expects, and a run without one gets the profile that fits
what the nodes showed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from tests.run_folders import write_run_json

from gpuval.catalog import find_system, identify_gpu
from gpuval.checks.pairs.analysis import configured_tries
from gpuval.checks.thresholds import DEFAULTS, Thresholds, ThresholdsError, load_thresholds
from gpuval.cli import main
from gpuval.evidence import build_evidence
from gpuval.plan.steps import PAIRS_MODES, RunPlan
from gpuval.profile import (
    NodeShape,
    ProfileError,
    load_profile,
    parse_profile,
    profile_for,
    shipped_names,
)
from gpuval.runfolder import read_run_folder
from gpuval.schemas.validation import validator

GOOD = """\
name: lab
description: a lab cluster
phases: [intranode, pairs]
intranode:
  collectives: [all_reduce]
  p2p: false
pairs:
  kinds: [iperf3]
  iperf3_seconds: 5
message_sizes: {min_bytes: "1M", max_bytes: "8G", step_factor: 2}
repeats: {iterations: 10, warmup: 2, pair_max_tries: 2}
thresholds:
  busbw_pass_fraction: 0.75
"""


def test_the_shipped_profiles_are_the_five_of_the_issue_and_name_catalog_hardware() -> None:
    assert shipped_names() == [
        "a100-sxm-8x", "h100-sxm-4x-lambda", "h100-sxm-8x", "h200-sxm-8x", "pcie",
    ]  # fmt: skip
    for name in shipped_names():
        profile = load_profile(name)
        hardware = profile.hardware
        if hardware.gpu_model:
            assert identify_gpu(hardware.gpu_model) is not None
        if hardware.system:
            assert find_system(hardware.system) is not None
        assert profile.phases == ("intranode", "internode", "pairs")


def test_the_shipped_profiles_leave_the_pair_mode_to_the_node_count() -> None:
    # A shipped profile means the default: all pairs up to 8 nodes, group testing above;
    # forcing all-pairs would cost N-1 rounds at a thousand nodes.
    for name in shipped_names():
        assert load_profile(name).ansible_vars()["bench_pairs_mode"] == "auto"


def test_a_profile_may_ask_for_any_pair_mode_the_role_knows() -> None:
    for mode in PAIRS_MODES:
        profile = parse_profile(
            GOOD.replace("  iperf3_seconds: 5\n", f"  mode: {mode}\n"), "lab.yaml"
        )
        assert profile.ansible_vars()["bench_pairs_mode"] == mode


def test_the_schema_knows_every_threshold_of_the_judge() -> None:
    schema = validator("profile").schema["properties"]["thresholds"]["properties"]
    assert set(schema) == {f.name for f in dataclasses.fields(Thresholds)}


def test_a_profile_becomes_role_variables_and_thresholds() -> None:
    profile = parse_profile(GOOD, "lab.yaml")
    assert profile.ansible_vars() == {
        "bench_intranode_collectives": ["all_reduce"],
        "bench_intranode_p2p": False,
        # internode is not among the phases: nothing of it runs or is expected
        "bench_internode_collectives": [],
        "bench_pairs_iperf3": True,
        "bench_pairs_allreduce": "false",
        "bench_pairs_nccl": "false",
        "bench_pairs_iperf3_seconds": 5,
        "bench_intranode_min_bytes": "1M",
        "bench_intranode_max_bytes": "8G",
        "bench_intranode_step_factor": 2,
        "bench_intranode_iters": 10,
        "bench_intranode_warmup_iters": 2,
        "bench_internode_min_bytes": "1M",
        "bench_internode_max_bytes": "8G",
        "bench_internode_step_factor": 2,
        "bench_internode_iters": 10,
        "bench_internode_warmup_iters": 2,
        "bench_pairs_nccl_min_bytes": "1M",
        "bench_pairs_nccl_max_bytes": "8G",
        "bench_pairs_max_tries": 2,
    }
    assert profile.thresholds == dataclasses.replace(DEFAULTS, busbw_pass_fraction=0.75)


def test_a_profiles_pair_tries_reach_the_judge_through_run_json(tmp_path: Path) -> None:
    """The tries a pair measurement gets are a fact of the run, not a threshold: the profile
    sets bench_pairs_max_tries, the plan writes it into run.json's config, the judge reads it
    there (a profile given to a later report cannot say what an earlier run was given)."""
    variables = parse_profile(GOOD, "lab.yaml").ansible_vars()
    config = RunPlan.from_variables(variables).to_variables()
    write_run_json(tmp_path, "r", ["n1"], config=config)
    (tmp_path / "raw" / "n1").mkdir(parents=True)
    assert configured_tries(build_evidence(read_run_folder(tmp_path))) == 2


def test_a_thresholds_file_naming_pair_max_tries_says_where_the_tries_are_set(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"pair_max_tries": 2}')
    with pytest.raises(ThresholdsError, match=r"repeats\.pair_max_tries") as raised:
        load_thresholds(path)
    assert str(path) in str(raised.value) and "bench_pairs_max_tries" in str(raised.value)


def test_the_h100_board_profile_warns_below_azures_gate() -> None:
    rules = load_profile("h100-sxm-8x").rules
    gate = [r for r in rules if r.rule == "value"]
    assert len(gate) == 1
    assert gate[0].warn_below == 460 and gate[0].fail_below is None
    assert gate[0].status(455.0) == "warn" and gate[0].status(470.0) == "pass"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            GOOD.replace("  busbw_pass_fraction: 0.75", "  busbw_pas_fraction: 0.75"),
            "lab.yaml:13: key thresholds.busbw_pas_fraction: unknown key; known keys here: "
            "burn_fail_fraction, burn_pass_fraction,",
        ),
        (
            GOOD.replace("0.75", "1.5"),
            "lab.yaml:13: key thresholds.busbw_pass_fraction: 1.5 is not allowed: 1.5 is "
            "greater than the maximum of 1; expects a fraction from 0 to 1",
        ),
        (
            GOOD.replace("iperf3_seconds: 5", "iperf3_seconds: fast"),
            "lab.yaml:9: key pairs.iperf3_seconds: 'fast' is not allowed: 'fast' is not of type "
            "'integer'; expects seconds per iperf3 direction, 1 to 600",
        ),
        (
            GOOD.replace("phases: [intranode, pairs]", "phases: [intranode, burn]"),
            "lab.yaml:3: key phases[1]: 'burn' is not allowed",
        ),
        (
            GOOD.replace("phases: [intranode, pairs]\n", ""),
            "lab.yaml:1: key <top level>: missing key 'phases' (the measuring phases to run",
        ),
        (
            GOOD.replace('max_bytes: "8G"', 'max_bytes: "8GB"'),
            "lab.yaml:10: key message_sizes.max_bytes: '8GB' is not allowed",
        ),
        (
            GOOD.replace('min_bytes: "1M"', 'min_bytes: "16G"'),
            "lab.yaml:10: key message_sizes.min_bytes: must not exceed max_bytes",
        ),
        (
            GOOD + "baseline:\n  rules:\n    - {rule: variance, figures: [busbw.*]}\n",
            "lab.yaml:16: key baseline.rules[0]: needs at least one of warn_below, fail_below, "
            "warn_above, fail_above",
        ),
        (
            GOOD + "hardware: {gpu_model: H100 SMX}\n",
            "lab.yaml:14: key hardware.gpu_model: 'H100 SMX' is not a catalog GPU model",
        ),
        (GOOD + "  p2p_fail_fraction: 0.9\n", "key thresholds.p2p_fail_fraction: must not exceed"),
        ("name: lab\n  description: [\n", "lab.yaml:2: not valid YAML"),
        ("- a\n- b\n", "lab.yaml: a profile is a YAML mapping"),
    ],
)
def test_a_bad_profile_names_the_file_line_key_and_what_is_expected(
    text: str, message: str
) -> None:
    with pytest.raises(ProfileError) as raised:
        parse_profile(text, "lab.yaml")
    assert message in str(raised.value)


def test_an_unknown_profile_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ProfileError, match=r"no profile 'h100'.*h100-sxm-8x"):
        load_profile("h100")


def test_the_profile_command_checks_a_file_and_says_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(GOOD.replace("kinds: [iperf3]", "kinds: [iperf]"))
    assert main(["profile", "check", str(good)]) == 0
    assert main(["profile", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:8: key pairs.kinds[0]: 'iperf' is not allowed" in err
    assert "Traceback" not in err
    assert main(["profile", "show", "pcie"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ansible_vars"]["bench_intranode_max_bytes"] == "1G"


@pytest.mark.parametrize(
    ("shape", "chosen"),
    [
        (NodeShape("H100 SXM", 8, "nvlink"), "h100-sxm-8x"),
        (NodeShape("H100 SXM", 4, "nvlink"), "h100-sxm-4x-lambda"),
        (NodeShape("A100 SXM", 8, "nvlink"), "a100-sxm-8x"),
        (NodeShape("H200 SXM", 8, "nvlink"), "h200-sxm-8x"),
        (NodeShape("L40S", 8, "pcie"), "pcie"),
        (NodeShape("H100 PCIe", 2, "pcie"), "pcie"),
        # nothing shipped fits: derived from what the topology showed, default thresholds
        (NodeShape("B200", 8, "nvlink"), "derived-8x-b200-nvlink"),
        (NodeShape("A100 SXM", 4, "nvlink"), "derived-4x-a100-sxm-nvlink"),
        (NodeShape(None, None, None), "derived-no-gpu"),
    ],
)
def test_a_run_without_profile_gets_the_one_that_fits_its_hardware(
    shape: NodeShape, chosen: str
) -> None:
    profile = profile_for([shape, shape])
    assert profile.name == chosen
    if chosen.startswith("derived"):
        assert profile.thresholds == DEFAULTS
        assert "derived" in profile.origin
