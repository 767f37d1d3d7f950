"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import pytest

from tests.e2e.doubles import setup_toolkits


@pytest.fixture(scope="module")
def toolkits() -> list[str]:
    """Folders bound read-only into every simulated host."""
    return setup_toolkits()
