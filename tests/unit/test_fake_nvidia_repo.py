"""The fake NVIDIA apt repository the cuda/nccl role tests install from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parents[1] / "fixtures" / "fake_nvidia_repo" / "build.py"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fake-repo")
    subprocess.run([sys.executable, str(BUILD), str(out)], check=True, capture_output=True)
    return out / "repo"


def package_versions(repo: Path) -> list[tuple[str, str]]:
    stanzas = (repo / "Packages").read_text().split("\n\n")
    fields = [dict(line.split(": ", 1) for line in s.splitlines() if ": " in line) for s in stanzas]
    return sorted((f["Package"], f["Version"]) for f in fields)


def test_repository_has_the_nvidia_package_names_and_a_newer_nccl(repo: Path) -> None:
    assert package_versions(repo) == [
        ("cuda-drivers", "570.124.06-1"),
        ("cuda-toolkit-12-8", "12.8.1-1"),
        ("libnccl-dev", "2.26.2-1+cuda12.8"),
        ("libnccl-dev", "2.27.3-1+cuda12.9"),
        ("libnccl2", "2.26.2-1+cuda12.8"),
        ("libnccl2", "2.27.3-1+cuda12.9"),
    ]
    assert "Recommends: cuda-drivers" in (repo / "Packages").read_text()


def test_release_is_signed_by_the_exported_key(repo: Path, tmp_path: Path) -> None:
    keyring = tmp_path / "key.gpg"
    subprocess.run(
        ["gpg", "--batch", "--yes", "--dearmor", "-o", str(keyring), str(repo / "key.asc")],
        check=True,
    )
    for args in (["InRelease"], ["Release.gpg", "Release"]):
        verified = subprocess.run(
            ["gpgv", "--keyring", str(keyring), *(str(repo / a) for a in args)],
            capture_output=True,
            check=False,
        )
        assert verified.returncode == 0, verified.stderr


def test_packages_index_matches_the_debs(repo: Path) -> None:
    text = (repo / "Packages").read_text()
    for deb in repo.glob("*.deb"):
        assert f"Filename: ./{deb.name}\nSize: {deb.stat().st_size}\n" in text
