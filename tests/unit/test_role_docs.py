"""The roles' variable tables are generated from their argument specs (tests/role_docs.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests import role_docs

ROLES = role_docs.ROLES_DIR


def test_every_role_readme_table_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert role_docs.main(["--check"]) == 0, capsys.readouterr().err


def test_a_stale_table_fails_the_check_and_names_its_role(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(ROLES / "nccl", tmp_path / "nccl")
    readme = tmp_path / "nccl" / "README.md"
    readme.write_text(readme.read_text().replace("| `nccl_install` | bool | `true` |", "| x |"))

    assert role_docs.main(["--check", "--roles-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "role nccl" in err
    assert "python -m tests.role_docs" in err


def test_a_readme_without_markers_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(ROLES / "report", tmp_path / "report")
    readme = tmp_path / "report" / "README.md"
    readme.write_text(readme.read_text().replace(role_docs.END, ""))

    assert role_docs.main(["--check", "--roles-dir", str(tmp_path)]) == 1
    assert "role report" in capsys.readouterr().err


def test_regenerating_repairs_a_stale_table(tmp_path: Path) -> None:
    shutil.copytree(ROLES / "nccl", tmp_path / "nccl")
    readme = tmp_path / "nccl" / "README.md"
    original = readme.read_text()
    readme.write_text(original.replace("NCCL package release", "stale words"))

    assert role_docs.main(["--roles-dir", str(tmp_path)]) == 0
    assert readme.read_text() == original


def test_the_generator_is_deterministic() -> None:
    """Two processes with different hash seeds write the same tables, byte for byte."""
    program = (
        "from tests import role_docs\n"
        "for role in role_docs.role_dirs(role_docs.ROLES_DIR):\n"
        "    print(role_docs.render_block(role))\n"
    )
    root = ROLES.parent
    outputs = [
        subprocess.run(
            [sys.executable, "-c", program],
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    ]
    assert outputs[0] == outputs[1]
    assert outputs[0].count("| Variable | Type | Default | Required | Description |") >= len(
        role_docs.role_dirs(ROLES)
    )


def test_every_option_of_every_entry_point_has_a_row() -> None:
    for role_dir in role_docs.role_dirs(ROLES):
        specs = yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text())
        block = role_docs.render_block(role_dir)
        for entry, spec in specs["argument_specs"].items():
            assert f"Entry point `{entry}`" in block, (role_dir.name, entry)
            for name in spec.get("options", {}):
                assert f"| `{name}` |" in block, (role_dir.name, name)
