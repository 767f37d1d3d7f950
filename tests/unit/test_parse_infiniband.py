"""ibstat / ibv_devinfo parser: real published blocks, indentation variants, cut copies."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval import cli
from gpuval.parsers import infiniband
from gpuval.records.base import ParseResult
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs" / "infiniband"
REAL_FILES = sorted(p for p in DATA.iterdir() if p.name != "README.md")


def parse(text: str, tool: str | None = None) -> ParseResult:
    result = infiniband.parse(text, source="test.txt", tool=tool)
    validate(result.to_dict(), "parse-result")
    return result


def parse_file(name: str) -> ParseResult:
    return parse((DATA / name).read_text())


def ports(result: ParseResult) -> list[tuple[object, ...]]:
    return [
        (d.name, p.port, p.state, p.physical_state, p.rate_gbps, p.link_layer, p.base_lid)
        for d in result.runs[0].devices
        for p in d.ports
    ]


def test_ibstat_roce_adapters_with_space_indentation() -> None:
    result = parse_file("l2fwd-nv-issue6-ibstat-2xCX6-ethernet.txt")
    assert result.tool == "ibstat" and not result.warnings and not result.errors
    devices = result.runs[0].devices
    assert [(d.name, d.ca_type, d.firmware, d.node_guid) for d in devices] == [
        ("mlx5_0", "MT4125", "22.32.2004", "0x0c42a103001dd12a"),
        ("mlx5_1", "MT4125", "22.32.2004", "0x0c42a103001dd12b"),
    ]
    assert ports(result) == [
        ("mlx5_0", 1, "Active", "LinkUp", 100.0, "Ethernet", 0),
        ("mlx5_1", 1, "Active", "LinkUp", 100.0, "Ethernet", 0),
    ]
    assert devices[0].ports[0].attributes["Port GUID"] == "0x0e42a1fffe1dd12a"


def test_ibstat_tabs_debug_noise_and_a_port_cut_short() -> None:
    result = parse_file("rdma-core-pr847-ibstat-mlx4-tabs-ibwarn-truncated.txt")
    assert ports(result) == [
        ("mlx4_0", 1, "Down", "Disabled", 10.0, "InfiniBand", 38),
        ("mlx4_0", 2, "Active", "LinkUp", 56.0, None, None),
    ]
    assert result.runs[0].devices[0].ports[0].sm_lid == 13
    assert [w.line for w in result.warnings] == [23]


def test_ibpanic_is_an_error_with_its_line() -> None:
    result = parse_file("gpud-pr752-ibstat-redacted-ibpanic.txt")
    assert ports(result) == [("mlx5_7", 1, "Active", "LinkUp", 200.0, "InfiniBand", 13305)]
    assert [e.line for e in result.errors] == [20]


def test_ibv_devinfo_ports_and_cut_copies() -> None:
    result = parse_file("deepep-issue55-ibv_devinfo-infiniband-excerpt.txt")
    assert result.tool == "ibv_devinfo"
    mlx5_3, mlx5_4 = result.runs[0].devices
    (port,) = mlx5_3.ports
    assert (port.state, port.state_code, port.base_lid, port.sm_lid, port.active_mtu) == (
        "PORT_ACTIVE",
        4,
        1690,
        1,
        "4096",
    )
    assert (mlx5_3.firmware, mlx5_3.attributes["vendor_part_id"]) == ("28.37.1700", "4126")
    assert mlx5_4.ports == []
    # data before the first hca_id, and an adapter without ports, are both reported
    assert [w.line for w in result.warnings] == [1, 28]


def test_ibv_devinfo_roce_port_down() -> None:
    result = parse_file("deepep-issue60-ibv_devinfo-roce-port-down-excerpt.txt")
    port = result.runs[0].devices[0].ports[0]
    assert (port.state, port.state_code, port.link_layer) == ("PORT_DOWN", 1, "Ethernet")
    assert [w.line for w in result.warnings] == [20]  # mlx5_13 says 1 port, none printed


VERBOSE = """hca_id:\tmlx5_0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t20.31.1014
\tphys_port_cnt:\t\t\t1
\tdevice_cap_flags:\t\t0xed721c36
\t\t\t\t\tBAD_PKEY_CNTR
\t\t\t\t\tBAD_QKEY_CNTR
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t4096 (5)
\t\t\tsm_lid:\t\t\t1
\t\t\tport_lid:\t\t12
\t\t\tport_lmc:\t\t0x00
\t\t\tlink_layer:\t\tInfiniBand
\t\t\tactive_width:\t\t4X (2)
\t\t\tactive_speed:\t\t50.0 Gbps (64)
\t\t\tphys_state:\t\tLINK_UP (5)
"""  # SYNTHETIC, in rdma-core's ibv_devinfo -v layout (tabs, flag continuation lines)


def test_ibv_devinfo_verbose_rate_from_width_and_speed() -> None:
    result = parse(VERBOSE)
    device = result.runs[0].devices[0]
    (port,) = device.ports
    assert (port.active_width, port.active_speed, port.rate_gbps) == ("4X", "50.0 Gbps", 200.0)
    assert port.physical_state == "LINK_UP"
    assert device.attributes["device_cap_flags"] == "0xed721c36 BAD_PKEY_CNTR BAD_QKEY_CNTR"
    assert not result.warnings


def test_ibstat_copy_with_indentation_collapsed() -> None:
    text = (DATA / "l2fwd-nv-issue6-ibstat-2xCX6-ethernet.txt").read_text()
    flat = "\n".join(line.strip() for line in text.splitlines())
    assert ports(parse(flat)) == ports(parse(text))


@pytest.mark.parametrize("text", ["", "No IB devices found\n", "CA 'x\n\x00", "hca_id:\n"])
def test_bad_input_never_raises(text: str) -> None:
    result = parse(text)
    assert result.errors


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_real_files_detected_and_parsed_through_cli(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = "ibv_devinfo" if "ibv_devinfo" in path.name else "ibstat"
    assert infiniband.detect(path.read_text()) == (tool, 90)
    assert cli.main(["parse", str(path)]) == 0
    assert f'"tool": "{tool}"' in capsys.readouterr().out
