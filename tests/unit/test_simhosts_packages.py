"""The simulated hosts' shared package cache: what one host downloaded, the next one starts
with (a link, no second copy), and nothing but packages is shared."""

from __future__ import annotations

from pathlib import Path

from tests.simhosts.image import share_packages


def test_packages_missing_from_the_target_are_linked_into_it(tmp_path: Path) -> None:
    source, target = tmp_path / "host-archive", tmp_path / "shared"
    source.mkdir()
    for name in ("openmpi-bin_4.1.4-3+b1_amd64.deb", "iperf3_3.12-1+deb12u1_amd64.deb", "lock"):
        (source / name).write_text(name)
    (source / "partial").mkdir()
    (source / "partial" / "half.deb").write_text("half")
    target.mkdir()
    (target / "iperf3_3.12-1+deb12u1_amd64.deb").write_text("already shared")

    assert share_packages(source, target) == 1
    assert sorted(p.name for p in target.iterdir()) == [
        "iperf3_3.12-1+deb12u1_amd64.deb", "openmpi-bin_4.1.4-3+b1_amd64.deb",
    ]  # fmt: skip
    shared = target / "openmpi-bin_4.1.4-3+b1_amd64.deb"
    assert shared.stat().st_ino == (source / shared.name).stat().st_ino
    assert (target / "iperf3_3.12-1+deb12u1_amd64.deb").read_text() == "already shared"
    assert share_packages(source, target) == 0


def test_a_cache_not_yet_made_shares_nothing(tmp_path: Path) -> None:
    assert share_packages(tmp_path / "none", tmp_path / "host-archive") == 0
    assert not (tmp_path / "host-archive").exists()
