"""Thresholds are finite, fractions from 0 to 1, and ordered (a reading fails below the lower
bound, warns below the upper one), wherever they come from: a profile, a run folder's recorded
profile.json or `--thresholds FILE`; a bad one is an error naming the file and the key."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.sample_runs import sample_copy

from gpuval.checks.thresholds import Thresholds, ThresholdsError, load_thresholds
from gpuval.cli import main
from gpuval.profile import ProfileError, parse_profile

PROFILE = """\
name: lab
description: a lab cluster
phases: [intranode]
thresholds:
  {key}: {value}
"""
FRACTIONS = [f.name for f in dataclasses.fields(Thresholds) if f.name.endswith("_fraction")]


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("busbw_pass_fraction", ".nan", "nan is not allowed: a threshold is a finite number"),
        ("nvls_max_over_peak", ".inf", "inf is not allowed: a threshold is a finite number"),
        ("xid_window_hours", "-.inf", "-inf is not allowed"),
        ("p2p_pass_fraction", "-0.1", "-0.1 is less than the minimum of 0"),
        ("burn_pass_fraction", "1.5", "1.5 is greater than the maximum of 1"),
        (
            "p2p_sibling_fail_fraction", "0.9",
            "must not exceed p2p_sibling_warn_fraction (0.9 > 0.85): below "
            "p2p_sibling_fail_fraction a reading fails, below p2p_sibling_warn_fraction it warns",
        ),
        ("pair_line_rate_warn_fraction", "0.2", "must not be below pair_line_rate_fail_fraction"),
    ],
)  # fmt: skip
def test_profile_check_refuses_a_bad_threshold_naming_the_key(
    tmp_path: Path, key: str, value: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "lab.yaml"
    profile.write_text(PROFILE.format(key=key, value=value))
    assert main(["profile", "check", str(profile)]) == 2
    err = capsys.readouterr().err
    assert f"{profile}:5: key thresholds.{key}: " in err
    assert problem in err
    assert "Traceback" not in err


def test_a_bound_of_a_baseline_rule_is_finite(tmp_path: Path) -> None:
    text = PROFILE.format(key="busbw_pass_fraction", value="0.7") + (
        "baseline:\n  rules: [{rule: value, figures: [busbw.*], warn_below: .nan}]\n"
    )
    with pytest.raises(ProfileError, match=r"key baseline.rules\[0\].warn_below: nan is not"):
        parse_profile(text, "lab.yaml")


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return sample_copy(tmp_path, "run-1", "2026-11-01T02:00:00Z", hosts=["lambda-4xh100"])


def test_a_thresholds_file_is_held_to_the_same_rules(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    override = run.parent / "strict.json"
    override.write_text('{"busbw_pass_fraction": NaN}')
    assert main(["report", str(run), "--thresholds", str(override)]) == 2
    err = capsys.readouterr().err
    assert f"{override}: key busbw_pass_fraction: nan is not allowed: a threshold is a " in err
    assert not (run / "results.json").exists()
    override.write_text('{"burn_fail_fraction": 0.9}')
    assert main(["report", str(run), "--thresholds", str(override)]) == 2
    assert f"{override}: key burn_fail_fraction: must not exceed burn_pass_fraction" in (
        capsys.readouterr().err
    )


def test_a_recorded_profile_is_held_to_the_same_rules(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = yaml.safe_load(PROFILE.format(key="p2p_sibling_fail_fraction", value="0.9"))
    (run / "profile.json").write_text(json.dumps({"name": "lab", "profile": document}))
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'profile.json'}:1: key thresholds.p2p_sibling_fail_fraction: must not" in err
    assert "Traceback" not in err


def _acceptable(thresholds: Thresholds) -> None:
    """What every threshold the judge gets satisfies."""
    from gpuval.checks.thresholds import ORDERED_BANDS

    for field in dataclasses.fields(thresholds):
        value = getattr(thresholds, field.name)
        for number in value if isinstance(value, tuple) else (value,):
            assert math.isfinite(number), field.name
    for name in FRACTIONS:
        assert 0 <= getattr(thresholds, name) <= 1, name
    for lower, upper in ORDERED_BANDS:
        assert getattr(thresholds, lower) <= getattr(thresholds, upper), lower


VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0, max_value=1),
    st.integers(min_value=-5, max_value=20),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.lists(st.integers(min_value=-2, max_value=100), max_size=3),
)
DOCUMENTS = st.dictionaries(
    st.sampled_from([f.name for f in dataclasses.fields(Thresholds)] + ["busbw_pas_fraction"]),
    VALUES,
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(DOCUMENTS)
def test_a_profile_threshold_document_is_accepted_only_when_the_judge_can_use_it(
    thresholds: dict[str, Any],
) -> None:
    document = {"name": "lab", "description": "d", "phases": ["intranode"]}
    text = yaml.safe_dump({**document, "thresholds": thresholds})
    try:
        profile = parse_profile(text, "lab.yaml")
    except ProfileError as problem:
        assert str(problem).startswith("lab.yaml")
        return
    _acceptable(profile.thresholds)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(DOCUMENTS)
def test_a_thresholds_file_is_accepted_only_when_the_judge_can_use_it(
    tmp_path: Path, thresholds: dict[str, Any]
) -> None:
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps(thresholds))
    try:
        loaded = load_thresholds(path)
    except ThresholdsError as problem:
        assert str(problem).startswith(str(path))
        return
    _acceptable(loaded)
