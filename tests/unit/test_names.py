"""Names that become file and folder names (run ids, baseline names, shipped profile names)
follow one slug rule; anything else is refused with the rule before anything is written."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import jinja2
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from tests.sample_runs import sample_copy

from gpuval.cli import main
from gpuval.profile import ProfileError, load_profile
from gpuval.schemas.validation import validator

REPO = Path(__file__).resolve().parents[2]
RULE = "1 to 100 letters, digits, '.', '_' or '-', the first a letter or digit"


def _files(root: Path) -> set[Path]:
    return {path for path in root.rglob("*")}


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A judged run in area/reports/, so '../../x' from baselines/ lands in area/."""
    reports = tmp_path_factory.mktemp("area") / "reports"
    run = sample_copy(reports, "run-1", "2026-11-01T02:00:00Z", hosts=["lambda-4xh100"])
    assert main(["report", str(run), "--quiet"]) == 0  # PASS: that host alone is healthy
    return reports


@pytest.mark.parametrize("name", ["../../x", "", "a/b", ".hidden", "x\n", "x" * 101])
def test_a_baseline_name_that_is_no_slug_is_refused_with_the_rule(
    judged: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    area = judged.parent
    before = _files(area)
    with pytest.raises(SystemExit) as stopped:
        main(["baseline", "create", "run-1", "--name", name, "--reports", str(judged)])
    assert stopped.value.code == 2
    assert f"argument --name: baseline name {name!r} is not allowed: use {RULE}" in (
        capsys.readouterr().err
    )
    assert _files(area) == before
    assert not (area.parent / "x.json").exists()


def test_the_baseline_list_ignores_files_that_are_no_baselines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    (baselines / ".json").write_text("{}")  # what `--name ''` used to write
    (baselines / "folder.json").mkdir()
    assert main(["baseline", "list", "--reports", str(tmp_path)]) == 0
    assert f"no baselines in {baselines}" in capsys.readouterr().out


def test_a_baseline_to_judge_against_is_a_slug_too(
    judged: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["report", str(judged / "run-1"), "--baseline", "../run-1/results"])
    assert stopped.value.code == 2
    assert "argument --baseline: baseline name '../run-1/results' is not allowed" in (
        capsys.readouterr().err
    )


def test_a_run_id_that_is_no_slug_is_refused_before_anything_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_playbook(*args: object, **kwargs: object) -> None:
        raise AssertionError("the playbook must not start")

    monkeypatch.setattr("gpuval.run.launch._play", no_playbook)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu_nodes]\nnode1\n")
    reports = tmp_path / "reports"
    before = _files(tmp_path)
    argv = ["run", "-i", str(inventory), "--profile", "pcie", "--reports", str(reports)]
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--run-id", "../x"])
    assert stopped.value.code == 2
    assert f"argument --run-id: run id '../x' is not allowed: use {RULE}" in (
        capsys.readouterr().err
    )
    assert _files(tmp_path) == before


def test_a_shipped_profile_name_cannot_reach_outside_the_shipped_profiles() -> None:
    with pytest.raises(ProfileError, match=r"no profile '\.\./shipped/pcie'"):
        load_profile("../shipped/pcie")


def _role_accepts() -> Callable[[str], bool]:
    """The run_context role's assertion on the run id, evaluated as Ansible's `match` test does
    (re.match)."""
    tasks = yaml.safe_load((REPO / "roles/run_context/tasks/main.yml").read_text())
    asserted = next(t for t in tasks if t["name"] == "Check the run id is usable as a folder name")
    condition = asserted["ansible.builtin.assert"]["that"][0]
    environment = jinja2.Environment()
    environment.tests["match"] = lambda value, pattern: re.match(pattern, value) is not None
    expression = environment.compile_expression(condition)
    return lambda run_id: bool(expression(run_context_effective_id=run_id))


ROLE_ACCEPTS = _role_accepts()


@given(st.one_of(st.text(max_size=120), st.sampled_from(["run-1", "run-1\n", "a" * 101])))
def test_the_role_accepts_the_run_ids_gpuval_run_accepts(run_id: str) -> None:
    from gpuval.files.slugs import is_slug

    assert ROLE_ACCEPTS(run_id) == is_slug(run_id)


def test_the_schemas_name_baselines_by_the_same_rule() -> None:
    from gpuval.files.slugs import SLUG_PATTERN

    # JSON Schema has no \Z; its $ is the end of the text in the schema's own (ECMA) dialect
    as_schema = SLUG_PATTERN.replace(r"\Z", "$")
    assert validator("baseline").schema["properties"]["name"]["pattern"] == as_schema
    profile = validator("profile").schema["properties"]["baseline"]["properties"]["name"]
    assert profile["pattern"] == as_schema


@given(st.text(max_size=120))
def test_a_slug_never_leaves_its_folder_and_anything_else_is_refused_with_the_rule(
    text: str,
) -> None:
    from gpuval.files.slugs import is_slug, slug

    if is_slug(text):
        assert slug(text, "name") == text
        assert 1 <= len(text) <= 100 and not text.startswith(".")
        assert "/" not in text and "\\" not in text and "\n" not in text and "\0" not in text
        folder = Path("/reports")
        assert (folder / text).resolve().parent == folder
        assert re.fullmatch(r"[A-Za-z0-9._-]+", text)
    else:
        with pytest.raises(ValueError, match=re.escape(RULE)):
            slug(text, "name")


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", fullmatch=True))
def test_every_name_of_the_rule_is_a_slug(text: str) -> None:
    from gpuval.files.slugs import is_slug

    assert is_slug(text)
