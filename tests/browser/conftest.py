"""Headless Chromium for the browser tests."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

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
    """Run headless Chromium on a page with extra flags; a missing browser is a failure."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.fail(
            "chromium is not installed: run tests/setup/system-packages.sh (make test does)"
        )

    def run(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
        profile = tmp_path_factory.mktemp("chromium-profile")
        command = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *flags]
        return subprocess.run(
            [*command, page.resolve().as_uri()], capture_output=True, text=True, timeout=120
        )

    return run
