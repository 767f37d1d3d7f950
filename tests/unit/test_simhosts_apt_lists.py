"""The simulated hosts' shared apt lists: a host starts with the lists of the image's sources as
the last host that updated them left them (their time included), one host's whole set, never a
repository a test served."""

from __future__ import annotations

import os
from pathlib import Path

from tests.simhosts.apt_lists import APT_LISTS, keep_lists, list_prefixes, seed_lists

DEBIAN = "deb.debian.org_debian_dists_bookworm_InRelease"
PACKAGES = "deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages"
SECURITY = "deb.debian.org_debian-security_dists_bookworm-security_InRelease"
FAKE_NVIDIA = "10.213.3.1:8080_repo_._InRelease"


def image(tmp_path: Path) -> Path:
    root = tmp_path / "bookworm-0123456789ab"
    (root / "etc/apt").mkdir(parents=True)
    (root / "etc/apt/sources.list").write_text(
        "deb http://deb.debian.org/debian bookworm main\n"
        "deb http://deb.debian.org/debian bookworm-updates main\n"
        "deb http://deb.debian.org/debian-security bookworm-security main\n"
    )
    return root


def updated_host(where: Path, files: dict[str, str], stamp: int) -> Path:
    lists = where / APT_LISTS
    (lists / "partial").mkdir(parents=True)
    for name, text in files.items():
        (lists / name).write_text(text)
    os.utime(lists, (stamp, stamp))
    return where


def test_prefixes_are_apts_names_of_the_image_sources(tmp_path: Path) -> None:
    assert list_prefixes(image(tmp_path)) == (
        "deb.debian.org_debian_", "deb.debian.org_debian-security_"
    )  # fmt: skip


def test_a_host_starts_with_the_lists_another_host_updated_and_their_time(tmp_path: Path) -> None:
    base = image(tmp_path)
    first = updated_host(
        tmp_path / "first",
        {DEBIAN: "release", PACKAGES: "packages", SECURITY: "security", FAKE_NVIDIA: "served",
         "lock": ""},
        stamp=1_700_000_000,
    )  # fmt: skip
    assert keep_lists(base, first)
    fresh = tmp_path / "fresh"
    assert seed_lists(base, fresh) == 3
    lists = fresh / APT_LISTS
    assert sorted(p.name for p in lists.iterdir()) == sorted([DEBIAN, PACKAGES, SECURITY])
    assert (lists / PACKAGES).read_text() == "packages"
    assert (lists / PACKAGES).stat().st_ino == (first / APT_LISTS / PACKAGES).stat().st_ino
    assert lists.stat().st_mtime == 1_700_000_000


def test_only_lists_updated_later_and_completely_are_shared(tmp_path: Path) -> None:
    base = image(tmp_path)
    assert keep_lists(base, updated_host(tmp_path / "a", {DEBIAN: "new"}, stamp=1_700_000_100))
    assert not keep_lists(base, updated_host(tmp_path / "b", {DEBIAN: "old"}, stamp=1_700_000_000))
    cut_short = updated_host(tmp_path / "c", {DEBIAN: "newest"}, stamp=1_700_000_200)
    (cut_short / APT_LISTS / "partial" / PACKAGES).write_text("half")
    assert not keep_lists(base, cut_short)
    assert seed_lists(base, tmp_path / "fresh") == 1
    assert (tmp_path / "fresh" / APT_LISTS / DEBIAN).read_text() == "new"


def test_a_host_that_kept_the_shared_lists_shares_nothing(tmp_path: Path) -> None:
    base = image(tmp_path)
    assert keep_lists(base, updated_host(tmp_path / "a", {DEBIAN: "release"}, stamp=1_700_000_000))
    host = tmp_path / "host"
    seed_lists(base, host)
    os.utime(host / APT_LISTS, (1_700_000_500, 1_700_000_500))  # apt's lock file was made
    assert not keep_lists(base, host)


def test_no_shared_lists_yet_seeds_nothing(tmp_path: Path) -> None:
    assert seed_lists(image(tmp_path), tmp_path / "host") == 0
    assert not (tmp_path / "host").exists()
