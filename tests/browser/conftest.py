"""Headless Chromium for the browser tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# The realistic hand-built run lives with the HTML unit tests; the browser test renders it too.
sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=5000",
)


@pytest.fixture(scope="session")
def chromium(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run headless Chromium on a page with extra flags; skip when it is not installed."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("chromium is not installed (tests/setup/system-packages.sh installs it)")

    def run(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
        profile = tmp_path_factory.mktemp("chromium-profile")
        command = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *flags]
        return subprocess.run(
            [*command, page.resolve().as_uri()], capture_output=True, text=True, timeout=120
        )

    return run
