"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.e2e.shared import CUDA_TOOLKIT, NCCL_DIR, REPO, VENV_BIN


@pytest.fixture(scope="module")
def toolkits() -> list[str]:
    """Folders bound read-only into every simulated host."""
    setup = REPO / "tests" / "fixtures" / "nccl-wheel" / "setup.sh"
    subprocess.run(["bash", str(setup), NCCL_DIR], check=True, env={
        **os.environ, "PIP": str(VENV_BIN / "pip")
    })  # fmt: skip
    return [CUDA_TOOLKIT, NCCL_DIR]
