"""The NVLink fabric gate and IMEX, on published outputs.

Fabric blocks (tests/data/outputs/nvidia-smi/fabric-blocks, README there): "Insufficient
Resources" with CliqueId 0 and a zero ClusterUUID (Azure/azhpc-images#506), a 580 driver's
block stuck "In Progress" (NVIDIA/gpu-operator#2511), Completed/Success with Health Summary
Unhealthy (kubernetes-sigs/dra-driver-nvidia-gpu#626). Each sits in the real `nvidia-smi -q` of
an 8x H100 node (gpud's testdata), in place of its own Fabric block; for a GB200 node the
Product Name reads "NVIDIA GB200" and four GPUs are kept (a tray has four).

What must come out, from the sources: a GPU whose State is not Completed or Status not Success
fails (NVML: status is only meaningful once the state is complete); on an NVL72 tray CliqueId
0 or an all-zero ClusterUUID fails (Azure's gate after failing nodes kept passing) and a missing
one is unjudged; a zero ClusterUUID on an HGX H100 is normal (torchcomms#1385); Health Summary
Unhealthy fails (NVML health summary). IMEX: Domain State UP, every node READY, every cell C.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.run_folders import write_step

from gpuval.checks import judge_run
from gpuval.checks.health.imex import imex_problems
from gpuval.checks.model import Check
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.parsers import nvidia_imex, nvidia_smi
from gpuval.records.nvidia_smi import SmiFabric
from gpuval.runfolder import read_run_folder

OUTPUTS = Path(__file__).resolve().parents[1] / "data" / "outputs"
BLOCKS = OUTPUTS / "nvidia-smi" / "fabric-blocks"
H100_Q = (OUTPUTS / "nvidia-smi" / "q-gpud-535.161.08-8xH100-fabric-completed.txt").read_text()
H100_FABRIC = (
    "    Fabric\n"
    "        State                             : Completed\n"
    "        Status                            : Success\n"
)
IMEX_UP = OUTPUTS / "nvidia-imex" / "imex-ctl-N-aws-parallelcluster-p6e-gb200-18-nodes-up.txt"

INSUFFICIENT = "fabric-azhpc-images-506-insufficient-resources.txt"
IN_PROGRESS = "fabric-gpu-operator-2511-580-in-progress.txt"
UNHEALTHY = "fabric-dra-driver-626-completed-health-unhealthy.txt"


def block(name: str) -> str:
    """A published Fabric block re-indented to sit in a GPU of `-q` ("    Fabric"), without the
    command line and grep's `--` the copy carries."""
    lines = [line for line in (BLOCKS / name).read_text().splitlines()
             if line.strip() and not line.startswith("#") and line.strip() != "--"]  # fmt: skip
    shift = 4 - (len(lines[0]) - len(lines[0].lstrip()))
    return "".join(" " * shift + line + "\n" for line in lines)


def healthy_gb200_block() -> str:
    """The Unhealthy block's layout with a healthy GB200's values: clique 4026 of cluster
    9c6f5af3-... as gpud read them through NVML on a GB200 (leptonai/gpud#1106), Summary
    Healthy."""
    return (block(UNHEALTHY).replace(": 2\n", ": 4026\n")
            .replace("dc6e40c4-d722-4357-9ba6-5291dd461278", "9c6f5af3-53bf-49b5-a436-b66766c413c3")
            .replace("Unhealthy", "Healthy"))  # fmt: skip


def q_with(fabrics: list[str], name: str = "NVIDIA GB200") -> str:
    """The real 8x H100 `-q`, cut to len(fabrics) GPUs, each GPU's Fabric block replaced."""
    header, *gpus = re.split(r"(?m)^(?=GPU [0-9A-F]{8}:)", H100_Q)
    attached = "Attached GPUs                             : "
    header = header.replace(f"{attached}8", f"{attached}{len(fabrics)}")
    body = [gpu.replace(H100_FABRIC, fabric, 1).replace("NVIDIA H100 80GB HBM3", name)
            for gpu, fabric in zip(gpus, fabrics, strict=False)]  # fmt: skip
    return header + "".join(body)


def parsed_fabrics(text: str) -> list[SmiFabric | None]:
    run = nvidia_smi.parse(text, tool="nvidia-smi-q").runs[0]
    return [gpu.health.fabric if gpu.health else None for gpu in run.gpus]


def fabric_check(tmp_path: Path, text: str) -> Check | None:
    run = tmp_path / "run"
    write_step(run, "node1", "nvidia-smi-query", text, tool="nvidia-smi-q", phase="preflight")
    checks = judge_run(build_evidence(read_run_folder(run)), DEFAULTS).checks
    return next((c for c in checks if c.check_id == "health.nvlink.fabric"), None)


def test_insufficient_resources_block_is_read_as_printed() -> None:
    fabric = parsed_fabrics(q_with([block(INSUFFICIENT)]))[0]
    assert fabric is not None
    assert (fabric.state, fabric.status) == ("Completed", "Insufficient Resources")
    assert (fabric.clique_id, fabric.cluster_uuid) == ("0", "00000000-0000-0000-0000-000000000000")


def test_driver_580_in_progress_block_has_every_health_field_na() -> None:
    fabric = parsed_fabrics(q_with([block(IN_PROGRESS)]))[0]
    assert fabric is not None
    assert (fabric.state, fabric.status, fabric.clique_id, fabric.cluster_uuid) == (
        "In Progress", None, None, None)  # fmt: skip
    assert set(fabric.health) == {
        "summary", "bandwidth", "route_recovery_in_progress", "route_unhealthy",
        "access_timeout_recovery", "incorrect_configuration", "partition_assigned",
    }  # fmt: skip
    assert not any(fabric.health.values())


def test_unhealthy_summary_block_keeps_the_clique_and_health() -> None:
    fabric = parsed_fabrics(q_with([block(UNHEALTHY)]))[0]
    assert fabric is not None
    assert (fabric.clique_id, fabric.cluster_uuid) == ("2", "dc6e40c4-d722-4357-9ba6-5291dd461278")
    assert fabric.health == {"summary": "Unhealthy", "bandwidth": "Full"}


def test_a_gb200_tray_in_its_rack_passes_naming_the_clique(tmp_path: Path) -> None:
    check = fabric_check(tmp_path, q_with([healthy_gb200_block()] * 4))
    assert check is not None and check.status == "pass", check
    assert "4 GPU(s)" in check.reason and "CliqueId 4026" in check.reason


def test_a_tray_that_left_no_imex_output_is_unjudged_on_imex(tmp_path: Path) -> None:
    """A GB200 tray's GPUs work across trays only through IMEX: no output, no pass."""
    fabric_check(tmp_path, q_with([healthy_gb200_block()] * 4))
    checks = judge_run(build_evidence(read_run_folder(tmp_path / "run")), DEFAULTS).checks
    imex_check = next(c for c in checks if c.check_id == "health.nvlink.imex")
    assert imex_check.status == "unjudged" and "no nvidia-imex-ctl -N output" in imex_check.reason


def test_insufficient_resources_fails_the_node_naming_gpu_and_fields(tmp_path: Path) -> None:
    fabrics = [healthy_gb200_block()] * 4
    fabrics[2] = block(INSUFFICIENT)
    check = fabric_check(tmp_path, q_with(fabrics))
    assert check is not None and check.status == "fail"
    for named in ("GPU2", "Insufficient Resources", "CliqueId 0", "ClusterUUID 00000000"):
        assert named in check.reason, named
    assert "GPU0" not in check.reason
    assert check.action and "nvidia-fabricmanager" in check.action


def test_a_registration_stuck_in_progress_fails(tmp_path: Path) -> None:
    fabrics = [healthy_gb200_block()] * 4
    fabrics[1] = block(IN_PROGRESS)
    check = fabric_check(tmp_path, q_with(fabrics))
    assert check is not None and check.status == "fail"
    assert "GPU1 fabric State In Progress" in check.reason


def test_health_summary_unhealthy_fails_although_registered(tmp_path: Path) -> None:
    fabrics = [healthy_gb200_block()] * 4
    fabrics[3] = block(UNHEALTHY)
    check = fabric_check(tmp_path, q_with(fabrics))
    assert check is not None and check.status == "fail"
    assert "GPU3 fabric Health summary: Unhealthy" in check.reason


def test_a_tray_without_clique_or_cluster_fields_is_unjudged(tmp_path: Path) -> None:
    """A driver that prints State and Status only (535) cannot show the rack membership."""
    check = fabric_check(tmp_path, q_with([H100_FABRIC] * 4))
    assert check is not None and check.status == "unjudged"
    assert "GPU0 prints no CliqueId or ClusterUUID" in check.reason


def test_a_tray_gpu_without_a_fabric_state_is_unjudged(tmp_path: Path) -> None:
    na = H100_FABRIC.replace("Completed", "N/A").replace("Success", "N/A")
    check = fabric_check(tmp_path, q_with([healthy_gb200_block()] * 3 + [na]))
    assert check is not None and check.status == "unjudged"
    assert "GPU3 prints no fabric State" in check.reason


def test_the_real_hgx_h100_passes_as_before(tmp_path: Path) -> None:
    check = fabric_check(tmp_path, H100_Q)
    assert check is not None and check.status == "pass"
    assert check.reason == (
        "8 GPU(s) registered with the NVSwitch fabric (fabric manager: Completed, Success)"
    )


def test_a_zero_cluster_uuid_on_hgx_h100_is_no_finding(tmp_path: Path) -> None:
    zero = block(INSUFFICIENT).replace("Insufficient Resources", "Success")
    check = fabric_check(tmp_path, q_with([zero] * 8, name="NVIDIA H100 80GB HBM3"))
    assert check is not None and check.status == "pass", check


def test_driver_580_health_fields_each_judged(tmp_path: Path) -> None:
    """CONSTRUCTED on the 580 block's layout (gpu-operator#2511), registered in clique 4026, with
    health values NVML's fabric health mask defines: Route Unhealthy True fails, Route Recovery
    in progress True warns, an Incorrect Configuration other than None fails, a value NVML does
    not define is unjudged, Partition Assigned is shown, not judged."""
    fields = {"State": "Completed", "Status": "Success", "CliqueId": "4026",
              "ClusterUUID": "9c6f5af3-53bf-49b5-a436-b66766c413c3", "Summary": "Healthy",
              "Bandwidth": "Full", "Route Recovery in progress": "True", "Route Unhealthy": "True",
              "Access Timeout Recovery": "False", "Incorrect Configuration": "Insufficient Nvlinks",
              "Partition Assigned": "False"}  # fmt: skip
    text = block(IN_PROGRESS)
    for label, value in fields.items():
        text = re.sub(rf"(?m)^(\s+{label}\s+: ).*$", lambda m, v=value: m.group(1) + v, text)
    weird = text.replace("Bandwidth                                  : Full",
                         "Bandwidth                                  : Halved")  # fmt: skip
    check = fabric_check(tmp_path / "a", q_with([healthy_gb200_block()] * 3 + [text]))
    assert check is not None and check.status == "fail"
    for named in ("GPU3 fabric Health route unhealthy: True",
                  "GPU3 fabric Health route recovery in progress: True",
                  "GPU3 fabric Health incorrect configuration: Insufficient Nvlinks"):  # fmt: skip
        assert named in check.reason, named
    assert "partition" not in check.reason
    check = fabric_check(tmp_path / "b", q_with([healthy_gb200_block()] * 3 + [weird]))
    assert check is not None and "GPU3 fabric Health bandwidth: Halved" in check.reason


# --- IMEX ------------------------------------------------------------------------------------


def imex(text: str) -> list[tuple[str, str]]:
    result = nvidia_imex.parse(text)
    assert not result.errors
    return [(status, what) for status, what, _ in imex_problems(result.runs[0])]


def test_an_18_node_gb200_domain_up_has_no_problem() -> None:
    text = IMEX_UP.read_text()
    run = nvidia_imex.parse(text).runs[0]
    assert run.domain_state == "UP" and len(run.nodes) == 18
    assert run.nodes[10].host == "172.31.54.95" and run.nodes[10].version == "570.172"
    assert all(set(n.connections.values()) == {"CONNECTED"} for n in run.nodes)
    assert imex(text) == []


def test_a_node_whose_daemon_is_down_fails_naming_it() -> None:
    """DERIVED from the real 18-node output: node #5 UNAVAILABLE, its row and column N (never
    connected), the domain DEGRADED."""
    lines = IMEX_UP.read_text().splitlines(keepends=True)
    out = []
    for line in lines:
        if line.startswith("Node #5 "):
            line = line.replace("READY      ", "UNAVAILABLE")
        elif re.match(r"^\s+\d+\s+C", line):
            cells = line.split()
            cells = ["N" if cells[0] == "5" or i == 6 else c for i, c in enumerate(cells)]
            cells = [c if i or cells[0] != "5" else "5" for i, c in enumerate(cells)]
            line = f"{cells[0]:>8}        " + "   ".join(cells[1:]) + "\n"
        out.append(line.replace("Domain State: UP", "Domain State: DEGRADED"))
    found = imex("".join(out))
    assert ("fail", "IMEX Domain State DEGRADED (UP when usable)") in found
    assert ("fail", "IMEX node #5 (172.31.50.44) UNAVAILABLE") in found
    assert any("#0 -> #5 NEVER_CONNECTED" in what for _, what in found)


def imex_json(status: str, nodes: dict[str, tuple[str, dict[str, str]]]) -> str:
    """CONSTRUCTED in the -N -j layout NVIDIA's validation scripts read."""
    return json.dumps({
        "nodes": {key: {"status": state, "host": f"10.0.0.{int(key) + 1}", "version": "580.95.05",
                        "connections": {peer: {"host": f"10.0.0.{int(peer) + 1}", "status": link}
                                        for peer, link in links.items()}}
                  for key, (state, links) in nodes.items()},
        "timestamp": "9/4/2026 00:37:39.905", "status": status,
    })  # fmt: skip


def test_json_domain_up_and_connected_has_no_problem() -> None:
    links = {"0": "CONNECTED", "1": "CONNECTED"}
    text = imex_json("UP", {"0": ("READY", links), "1": ("READY", links)})
    assert nvidia_imex.detect(text) == ("nvidia-imex-ctl", 80)
    assert imex(text) == []


def test_a_node_with_a_state_towards_some_peers_only_is_unjudged() -> None:
    both = {"0": "CONNECTED", "1": "CONNECTED", "2": "CONNECTED"}
    text = imex_json("UP", {"0": ("READY", both), "1": ("READY", both),
                            "2": ("READY", {"2": "CONNECTED", "0": "CONNECTED"})})  # fmt: skip
    assert [status for status, _ in imex(text)] == ["unjudged"]


def test_json_domain_down_with_a_peer_unavailable_fails() -> None:
    text = imex_json("DOWN", {"0": ("READY", {"0": "CONNECTED", "1": "INVALID"}),
                              "1": ("UNAVAILABLE", {"0": "INVALID", "1": "INVALID"})})  # fmt: skip
    found = imex(text)
    assert ("fail", "IMEX Domain State DOWN (UP when usable)") in found
    assert ("fail", "IMEX node #1 (10.0.0.2) UNAVAILABLE") in found


@pytest.mark.parametrize("text", ["", "Domain State\n", '{"nodes": []}'])
def test_what_is_not_imex_output_is_an_error(text: str) -> None:
    assert nvidia_imex.parse(text).errors
