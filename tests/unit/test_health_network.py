"""RDMA ports on real published outputs: the RoCE transport counters (hw_counters) over the run,
port counters that were not printed, and nodes with two adapter models.

Expected verdicts were written from the sources before gpuval judged them:
- hw_counters: NVIDIA's "Understanding mlx5 Linux counters and status parameters"
  (https://enterprise-support.nvidia.com/s/article/understanding-mlx5-linux-counters-and-status-parameters):
  local_ack_timeout_err, packet_seq_err, implied_nak_seq_err, out_of_sequence count retries and
  lost packets the QP recovered from; np_cnp_sent / np_ecn_marked_roce_packets / rp_cnp_handled
  count congestion notifications, which the switches' ECN marking starts (the fabric, not the NIC);
- a retry or loss rate of 0.1 % of the packets fails: Go-Back-N RoCE throughput falls to nearly
  zero at 1 % loss (https://doi.org/10.1109/ICCCN.2019.8846946); any smaller growth warns;
- a port is "trained down" only against ports of its own adapter model (ibstat `CA type`), and a
  port outside the rails (the declared gpuval_ib_hcas, else the model with the most ports) is
  reported, never failed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuval.checks import judge_run
from gpuval.checks.model import Check
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.parsers import sysfs_infiniband
from gpuval.runfolder import read_run_folder

OUTPUTS = Path(__file__).resolve().parents[1] / "data" / "outputs"
BYTEPS = (OUTPUTS / "sysfs-infiniband" / "byteps-issue179-mlx5-hw-counters-cut.txt").read_text()
MOONCAKE = OUTPUTS / "infiniband" / "mooncake-issue1999-ibstat-cx7-roce-and-cx6dx-excerpt.txt"
I40IW = (OUTPUTS / "sysfs-infiniband" / "node-exporter-966-i40iw-no-pma-cut.txt").read_text()
PMA = "/sys/class/infiniband/mlx5_0/ports/1/counters/{name}:{value}\n"
HW = "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/{name}:{value}\n"


class Run:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.declared: dict[str, dict[str, Any]] = {}

    def step(self, host: str, name: str, text: str, tool: str, phase: str = "health") -> None:
        folder = self.root / "raw" / host
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.txt").write_text(text)
        (folder / f"{name}.meta.json").write_text(json.dumps({
            "schema_version": 1, "name": name, "host": host, "phase": phase,
            "raw": f"{name}.txt", "command": name, "exit_code": 0, "tool": tool,
        }))  # fmt: skip

    def checks(self) -> list[Check]:
        hosts = sorted(p.name for p in (self.root / "raw").iterdir())
        document = {"run_id": "t", "started_at": None, "hosts": hosts, "config": {},
                    "declared": self.declared}  # fmt: skip
        (self.root / "run.json").write_text(json.dumps(document))
        return judge_run(build_evidence(read_run_folder(self.root)), DEFAULTS).checks

    def check(self, check_id: str, host: str = "node1") -> Check:
        found = [c for c in self.checks() if c.check_id == check_id and c.host == host]
        assert len(found) == 1, [(c.check_id, c.host) for c in self.checks()]
        return found[0]

    def counters(self, before: str, after: str) -> None:
        self.step("node1", "health-ib-sysfs", before, "sysfs-infiniband")
        self.step("node1", "health-ib-sysfs-after", after, "sysfs-infiniband")


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path / "run")


def hw_listing(sent: int, received: int, **grown: int) -> str:
    """byteps issue 179's real hw_counters lines (its cut last line dropped), DERIVED with the
    counters in `grown` raised by that much, and CONSTRUCTED packet counters (the IBA PortCounters
    names mlx5 prints, as in SYNTHETIC-mlx5-ndr-saturated-counters.txt)."""
    lines = []
    for line in BYTEPS.splitlines()[:-1]:
        name, value = line.rsplit("/", 1)[1].split(":")
        lines.append(HW.format(name=name, value=int(value) + grown.get(name, 0)))
    lines.append(PMA.format(name="port_xmit_packets", value=sent))
    lines.append(PMA.format(name="port_rcv_packets", value=received))
    return "".join(lines)


def cx6dx_active_at_100() -> str:
    """DERIVED: the ConnectX-6 Dx port of Mooncake issue 1999 Active at 100 Gb/s, as the two
    real ConnectX-6 Dx ports of l2fwd-nv issue 6 are."""
    text = MOONCAKE.read_text().replace("State: Down", "State: Active")
    return text.replace(
        "Physical state: Disabled", "Physical state: LinkUp\n                Rate: 100"
    )


# ------------------------------------------------------------------ the parser


def test_hw_counters_are_read_in_the_same_shape_as_the_port_counters() -> None:
    result = sysfs_infiniband.parse(BYTEPS)
    port = result.runs[0].devices[0].ports[0]
    assert port.hw_counters == {
        "duplicate_request": 0, "implied_nak_seq_err": 0, "lifespan": 12,
        "local_ack_timeout_err": 2705, "np_cnp_sent": 1333, "np_ecn_marked_roce_packets": 0,
    }  # fmt: skip
    assert port.counters == {}
    assert [w.message for w in result.warnings] == [
        "not a /sys/class/infiniband/<device>/...:<value> line: '/sys/class/infiniban'"
    ]


# ------------------------------------------------------------------ item 7: transport errors


def test_ack_timeouts_at_half_a_percent_of_the_packets_sent_fail(run: Run) -> None:
    run.counters(hw_listing(1_000, 9_000), hw_listing(1_001_000, 9_000,
                                                      local_ack_timeout_err=5_000))  # fmt: skip
    check = run.check("health.network.transport")
    assert check.status == "fail"
    assert "mlx5_0 port 1 local_ack_timeout_err 2705 -> 7705 during the run" in check.reason
    assert "0.5 % of 1000000 packets sent" in check.reason
    assert check.action and "mlx5_0 port 1" in check.action


def test_a_few_sequence_errors_warn(run: Run) -> None:
    run.counters(
        hw_listing(1_000, 9_000),
        hw_listing(1_001_000, 1_009_000, out_of_sequence=0, implied_nak_seq_err=3),
    )
    check = run.check("health.network.transport")
    assert check.status == "warn"
    assert "implied_nak_seq_err 0 -> 3 during the run" in check.reason


def test_growth_without_packet_counters_warns_with_no_rate(run: Run) -> None:
    before = BYTEPS.rsplit("\n", 1)[0] + "\n"
    after = before.replace("local_ack_timeout_err:2705", "local_ack_timeout_err:99705")
    run.counters(before, after)
    check = run.check("health.network.transport")
    assert check.status == "warn"
    assert "no packet counters: rate unknown" in check.reason


def test_transport_counters_that_did_not_grow_pass_naming_what_was_read(run: Run) -> None:
    run.counters(hw_listing(1_000, 9_000), hw_listing(2_000_000, 2_000_000))
    check = run.check("health.network.transport")
    assert check.status == "pass"
    assert "local_ack_timeout_err" in check.reason and "implied_nak_seq_err" in check.reason
    assert "1 port" in check.reason


def test_congestion_marks_warn_as_the_fabrics_never_the_nodes(run: Run) -> None:
    run.counters(hw_listing(1_000, 9_000),
                 hw_listing(2_000_000, 2_000_000, np_cnp_sent=90_000,
                            np_ecn_marked_roce_packets=400_000))  # fmt: skip
    fabric = run.check("health.network.congestion", "cluster")
    assert fabric.status == "warn"
    assert "fabric" in fabric.reason and "node1 mlx5_0 port 1" in fabric.reason
    assert "np_cnp_sent 1333 -> 91333" in fabric.reason
    assert run.check("health.network.transport").status == "pass"
    assert all(c.status != "fail" for c in run.checks() if c.host == "node1")


def test_no_hw_counters_captured_is_no_transport_check(run: Run) -> None:
    listing = PMA.format(name="link_downed", value=0) + PMA.format(name="symbol_error", value=0)
    run.counters(listing, listing)
    assert not [c for c in run.checks() if c.check_id == "health.network.transport"]
    assert "hw_counters" in run.check("health.network.counters").reason


# ------------------------------------------------------------------ item 9: absent counters


def test_a_port_without_pma_counters_is_unjudged_naming_what_is_missing(run: Run) -> None:
    run.counters(I40IW, I40IW)
    check = run.check("health.network.counters")
    assert check.status == "unjudged"
    assert "i40iw0 port 1" in check.reason and "link_downed" in check.reason
    assert "no error counter grew" not in check.reason


def test_a_pass_names_the_counters_it_read(run: Run) -> None:
    listing = "".join(PMA.format(name=n, value=0) for n in
                      ("link_downed", "symbol_error", "port_rcv_errors"))  # fmt: skip
    run.counters(listing, listing)
    check = run.check("health.network.counters")
    assert check.status == "pass"
    assert "link_downed, symbol_error, port_rcv_errors" in check.reason
    assert "not printed" in check.reason  # the other judged counters were not listed


# ------------------------------------------------------------------ item 8: two adapter models


def test_a_roce_node_with_a_second_adapter_model_is_not_failed_for_it(run: Run) -> None:
    """Mooncake issue 1999: two ConnectX-7 (MT4129) RoCE ports at 200 and a ConnectX-6 Dx
    (MT4125) port Down; nothing declared. The CX-7s are the rails (the model with the most
    ports); the CX-6 Dx port is reported, not failed."""
    run.step("node1", "ibstat", MOONCAKE.read_text(), "ibstat", "preflight")
    check = run.check("network.rdma-ports")
    assert check.status == "pass"
    assert "2 of 2 RDMA port(s) active at 200 Gb/s" in check.reason
    assert "mlx5_10 port 1 (MT4125) Down" in check.reason


def test_a_slower_port_of_another_model_is_not_trained_down(run: Run) -> None:
    """The ConnectX-6 Dx port at 100 Gb/s beside ConnectX-7 rails at 200."""
    text = cx6dx_active_at_100()
    run.step("node1", "ibstat", text, "ibstat", "preflight")
    check = run.check("network.rdma-ports")
    assert check.status == "pass" and "trained down" not in check.reason
    assert "mlx5_10 port 1 (MT4125) Active at 100 Gb/s" in check.reason


def test_a_port_slower_than_its_own_models_siblings_still_fails(run: Run) -> None:
    text = MOONCAKE.read_text().replace("Rate: 200", "Rate: 100", 1)
    run.step("node1", "ibstat", text, "ibstat", "preflight")
    check = run.check("network.rdma-ports")
    assert check.status == "fail"
    assert "mlx5_0 port 1 at 100 Gb/s where its MT4129 siblings' rate is 200" in check.reason


def test_a_down_port_whose_model_was_not_printed_is_still_judged_as_a_rail(run: Run) -> None:
    """Mooncake issue 1999 with the Down ConnectX-6 Dx's `CA type` line cut: nothing shows it is
    not a rail, so its Down state fails the node (fail closed)."""
    text = MOONCAKE.read_text()
    block = text.index("mlx5_10")
    cut = text[:block] + text[block:].replace("CA type: MT4125", "", 1)
    assert "MT4125" not in cut
    run.step("node1", "ibstat", cut, "ibstat", "preflight")
    check = run.check("network.rdma-ports")
    assert check.status == "fail"
    assert "mlx5_10" in check.reason


def test_ports_outside_the_declared_rails_are_reported_and_declared_rails_judged(
    run: Run,
) -> None:
    text = cx6dx_active_at_100()
    run.step("node1", "ibstat", text, "ibstat", "preflight")
    run.declared = {"node1": {"ib_hcas": ["mlx5_0", "mlx5_1"], "nic_rate_gbit": 200}}
    check = run.check("network.rdma-ports")
    assert check.status == "pass"
    assert "outside the declared rails" in check.reason and "mlx5_10" in check.reason
    run.declared = {"node1": {"ib_hcas": ["mlx5_0", "mlx5_10"], "nic_rate_gbit": 200}}
    check = run.check("network.rdma-ports")
    assert check.status == "fail"
    assert "mlx5_10 port 1 at 100 Gb/s where declared is 200" in check.reason
