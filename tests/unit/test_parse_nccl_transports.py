"""Which transport a run used, from the NCCL_DEBUG=INFO lines published by GB200 users
(tests/data/outputs/nccl-tests/README.md): multi-node NVLink, the network, or neither said."""

from __future__ import annotations

from pathlib import Path

from gpuval.parsers import nccl_debug, nccl_tests
from gpuval.records.nccl import NcclRun

REAL = Path(__file__).resolve().parents[1] / "data" / "outputs" / "nccl-tests"


def run_of(*names: str) -> NcclRun:
    text = "".join((REAL / name).read_text(encoding="utf-8") for name in names)
    (run,) = nccl_tests.parse(text, source="test").runs
    assert isinstance(run, NcclRun)
    return run


def test_mnnvl_on_gb200_is_said_and_its_channels_are_p2p_mnnvl() -> None:
    run = run_of("nccl-issue2303-gb200-mnnvl-enable-1.txt")
    assert run.mnnvl is True
    assert run.channel_transports == ("P2P/MNNVL",)


def test_network_plugin_loaded_is_no_channel_over_the_network() -> None:
    """`Using network IB` is printed on the MNNVL tray: a transport NCCL offers, not one the
    channels took."""
    run = run_of("nccl-issue2303-gb200-mnnvl-enable-1.txt")
    assert "NET/IB" in run.transports
    assert not any(t.startswith("NET/") for t in run.channel_transports)


def test_mnnvl_off_is_said_and_its_channels_are_p2p_cumem() -> None:
    run = run_of("nccl-issue2303-gb200-mnnvl-enable-0.txt")
    assert run.mnnvl is False
    assert run.channel_transports == ("P2P/CUMEM",)


def test_mnnvl_busid_line_alone_says_nothing() -> None:
    """Every GPU prints `MNNVL busId ... fabric UUID ...`, H100s too: no MNNVL verdict."""
    text = (REAL / "nccl-issue2303-gb200-mnnvl-enable-0.txt").read_text(encoding="utf-8")
    facts = nccl_debug.DebugFacts()
    for number, line in enumerate(text.splitlines(), start=1):
        if "busId" in line:
            nccl_debug.feed(facts, line, number)
    nccl_debug.digest(facts)
    assert facts.mnnvl is None and not facts.channel_transports


def test_net_ib_channels_are_channel_transports() -> None:
    run = run_of("nccl-issue1357-h100-ibext-gdrdma-channels.txt")
    assert run.mnnvl is None
    assert run.channel_transports == ("NET/IBext/GDRDMA", "P2P/CUMEM")


def test_rack_table_with_mnnvl_lines_keeps_both() -> None:
    run = run_of(
        "nccl-issue2303-gb200-mnnvl-enable-1.txt", "coreweave-pr43-gb200-nvl72-single-rack.txt"
    )
    assert run.mnnvl is True and run.complete
    assert run.rows[-1].size_bytes == 8589934592
