"""The health probes' kernel log capture (gpuval.plan.health_probes.KERNEL_LOG_SCRIPT), run as the
node runs it (/bin/sh -c) with stand-ins of journalctl and dmesg first on PATH: journald's
"nothing here" outputs fall back to dmesg, whatever journalctl's exit status."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuval.plan.health_probes import KERNEL_LOG_SCRIPT

DMESG_LINE = "[    1.000000] NVRM: loading NVIDIA UNIX Open Kernel Module"
JOURNAL_LINE = "2026-11-22T19:01:01.123456+00:00 node1 kernel: Linux version 6.8.0"


def stand_in(folder: Path, name: str, body: str) -> None:
    program = folder / name
    program.write_text(f"#!/bin/sh\n{body}\n")
    program.chmod(0o755)


def capture(tmp_path: Path, journalctl: str, dmesg: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    stand_in(bin_dir, "journalctl", journalctl)
    stand_in(bin_dir, "dmesg", dmesg)
    return subprocess.run(
        ["/bin/sh", "-c", KERNEL_LOG_SCRIPT],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("journal", "status"),
    [
        ("-- No entries --", 0),  # journald without kernel messages (containers, minimal VMs)
        ("No journal files were found.", 1),
        (
            "-- Logs begin at Mon 2026-11-23 10:00:00 UTC, end at Mon 2026-11-23 11:00:00 UTC. --\n"
            "-- No entries --",
            0,
        ),
        ("", 0),
    ],
)
def test_a_journal_without_kernel_entries_falls_back_to_dmesg(
    tmp_path: Path, journal: str, status: int
) -> None:
    result = capture(tmp_path, f"printf '%s\\n' '{journal}'; exit {status}", f"echo '{DMESG_LINE}'")
    assert result.returncode == 0
    assert result.stdout == f"{DMESG_LINE}\n"


def test_a_journal_with_kernel_entries_is_the_log(tmp_path: Path) -> None:
    journal = f"echo '-- Boot 3f2a9c0e5b6d4e7f --'; echo '{JOURNAL_LINE}'"
    result = capture(tmp_path, journal, "echo dmesg ran; exit 3")
    assert result.returncode == 0
    assert result.stdout == f"-- Boot 3f2a9c0e5b6d4e7f --\n{JOURNAL_LINE}\n"


def test_dmesg_without_its_iso_form_prints_plain_and_a_refusal_says_why(tmp_path: Path) -> None:
    old_dmesg = f'[ "$1" = --time-format ] && exit 1; echo "{DMESG_LINE}"'
    result = capture(tmp_path, "echo '-- No entries --'", old_dmesg)
    assert (result.returncode, result.stdout) == (0, f"{DMESG_LINE}\n")
    refused = "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1"
    result = capture(tmp_path / "refused", "echo '-- No entries --'", refused)
    assert result.returncode == 1
    assert result.stderr == "dmesg: read kernel buffer failed: Operation not permitted\n"
