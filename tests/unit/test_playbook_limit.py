"""The end-to-end tests' playbook runner kills a run that outlives its limit and fails the test,
keeping what the run printed, instead of holding make test until CI's own limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.e2e.runs import run_playbook


def test_a_run_past_its_limit_is_killed_and_fails_with_its_log(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("node1 ansible_host=192.0.2.1\n")
    # ansible-playbook alone takes longer than this to start.
    with pytest.raises(AssertionError) as failed:
        run_playbook("benchmark.yml", inventory, tmp_path / "reports", "hung", {}, limit_s=0.2)
    log = tmp_path / "reports" / "hung.ansible.log"
    assert str(failed.value) == f"benchmark.yml still running after 0.2 s, killed: {log}"
    assert log.is_file()
