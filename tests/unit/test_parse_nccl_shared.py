"""A log of many runs (a job that loops nccl-tests, a capture appended to) prints the same header
and device lines run after run: the parser keeps equal ones as one object, and a run's empty
lists and mappings cost it nothing, so that parsing a log costs about twice its size in memory
(make bench: 2.10x for 20 MB of real outputs, 2.67x before). Sharing is safe because a parsed run
is never changed; each run still reads as its own."""

from __future__ import annotations

from pathlib import Path

from gpuval.parsers import nccl_tests
from gpuval.records.nccl import NO_MAPPING, NcclRun

REAL = Path(__file__).resolve().parents[1] / "data" / "outputs" / "nccl-tests"
A100 = "nccl-issue1812-a100-collective-starting-socket.txt"  # 4 ranks
RTX4090 = "nccl-issue1530-rtx4090-tree-0x-pci.txt"  # 8 ranks


def runs_of(*names: str) -> list[NcclRun]:
    text = "".join((REAL / name).read_text(encoding="utf-8") for name in names)
    runs = nccl_tests.parse(text, source="test").runs
    assert all(isinstance(run, NcclRun) for run in runs)
    return runs  # type: ignore[return-value]


def test_equal_runs_share_their_header_and_device_lines() -> None:
    alone = runs_of(A100)[0]
    first, again, other, third = runs_of(A100, A100, RTX4090, A100)
    assert first.header == alone.header and first.header
    assert first.header is again.header is third.header
    assert first.devices == alone.devices and first.devices
    assert first.devices is again.devices is third.devices
    assert other.header is not first.header and other.devices is not first.devices


def test_what_a_run_does_not_say_is_shared_and_empty() -> None:
    (run,) = runs_of("nccl-issue123-2017-bytes-N-op-root-ms.txt")
    assert run.transports == run.channel_transports == run.algorithms == ()
    assert run.nccl_versions_by_host is NO_MAPPING and run.ib_hcas_by_host is NO_MAPPING
    assert NO_MAPPING == {}
