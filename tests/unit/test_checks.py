"""The checks, on typed records: every verdict rule and its reason. Expected verdicts come
from the specs (catalog references) and from what the outputs themselves print."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.run_folders import write_run_json, write_step

from gpuval.checks import judge_run
from gpuval.checks.model import Check
from gpuval.checks.nccl import Sample, judged_sample
from gpuval.checks.thresholds import DEFAULTS, ThresholdsError, load_thresholds
from gpuval.evidence import build_evidence
from gpuval.records.bandwidth import NvbandwidthMatrix, NvbandwidthRun, NvbandwidthTest
from gpuval.records.base import ParseResult
from gpuval.records.nccl import (
    NcclFailedLine,
    NcclHalf,
    NcclOutOfBounds,
    NcclRow,
    NcclRun,
    NcclWarning,
)
from gpuval.records.network import IbDevice, IbPort, InfinibandRun
from gpuval.records.nvidia_smi import NvidiaSmiRun, NvLinkState, PcieLink, SmiGpu
from gpuval.records.p2p import P2PRun, PeerAccess
from gpuval.records.software import SoftwareVersionRun
from gpuval.records.topology import TopologyRun
from gpuval.runfolder import RawFile, RunFolder, Sidecar, read_run_folder

GIB = 1 << 30
MIB = 1 << 20
H100 = "NVIDIA H100 80GB HBM3"


def square(size: int, cell: str) -> list[list[str]]:
    return [["X" if i == j else cell for j in range(size)] for i in range(size)]


NV18_4 = square(4, "NV18")
NV18_8 = square(8, "NV18")


def nccl(
    busbw: dict[int, float],
    *,
    wrong: int = 0,
    nranks: int = 4,
    bounds: NcclOutOfBounds | None = None,
    collective: str | None = "all_reduce",
    hosts: list[str] | None = None,
    with_wrong: bool = True,
    **extra: Any,
) -> NcclRun:
    rows = [
        NcclRow(
            size_bytes=size,
            line=10 + i,
            out_of_place=NcclHalf(busbw_gbps=value, wrong=(wrong if size == GIB else 0)
                                  if with_wrong else None),
            in_place=NcclHalf(busbw_gbps=value, wrong=0 if with_wrong else None),
        )
        for i, (size, value) in enumerate(sorted(busbw.items()))
    ]  # fmt: skip
    run = NcclRun(
        collective=collective, nranks=nranks, complete=True, rows=rows,
        out_of_bounds=bounds if bounds is not None else NcclOutOfBounds(0, True),
        avg_busbw_gbps=sum(busbw.values()) / max(len(busbw), 1), avg_busbw_check="",
        hosts=hosts or [],
    )  # fmt: skip
    for key, value in extra.items():
        setattr(run, key, value)
    return run


def raw(host: str, name: str, tool: str | None, runs: list[Any], **sidecar: Any) -> RawFile:
    path = f"raw/{host}/{name}.txt"
    side = Sidecar(
        name=name, host=host, phase=sidecar.pop("phase", "intranode"), raw=f"{name}.txt",
        exit_code=sidecar.pop("exit_code", 0), **sidecar,
    )  # fmt: skip
    return RawFile(host, path, side, ParseResult(tool, path, list(runs)) if tool else None)


def topo(host: str, links: list[list[str]], nics: int = 0, nic_cell: str = "PHB") -> RawFile:
    gpus = [f"GPU{i}" for i in range(len(links))]
    rows: list[list[str | None]] = [[*row, *[nic_cell] * nics] for row in links]
    rows += [[nic_cell] * len(gpus) + ["X"] for _ in range(nics)]
    run = TopologyRun(devices=gpus + [f"NIC{i}" for i in range(nics)], links=rows)
    return raw(host, "nvidia-smi-topo", "nvidia-smi-topo", [run], phase="preflight")


def smi(host: str, name: str = H100, count: int = 4, **gpu: Any) -> RawFile:
    gpus = [SmiGpu(index=i, name=name, **gpu) for i in range(count)]
    run = NvidiaSmiRun(format="csv", driver_version="570.1", cuda_version="12.8", gpus=gpus)
    return raw(host, "nvidia-smi-query-gpu", "nvidia-smi-csv", [run], phase="preflight")


def ibstat(host: str, ports: list[tuple[str, str, float]]) -> RawFile:
    """ports: (device, state, rate Gb/s)."""
    devices = [
        IbDevice(name=device, ports=[IbPort(
            port=1, state=state, physical_state="LinkUp" if state == "Active" else "Disabled",
            rate_gbps=rate, link_layer="InfiniBand", line=i,
        )])
        for i, (device, state, rate) in enumerate(ports, start=1)
    ]  # fmt: skip
    return raw(host, "ibstat", "ibstat", [InfinibandRun(devices)], phase="preflight")


def judge(files: list[RawFile], meta: dict[str, Any] | None = None,
          without_folder: list[str] | None = None) -> list[Check]:  # fmt: skip
    hosts = sorted({f.host for f in files} | set(without_folder or []))
    folder = RunFolder(Path("."), meta or {}, hosts, without_folder or [], files)
    return judge_run(build_evidence(folder), DEFAULTS).checks


def find(checks: list[Check], suffix: str, host: str | None = None) -> Check:
    found = [c for c in checks if c.check_id.endswith(suffix) and host in (None, c.host)]
    assert len(found) == 1, [(c.check_id, c.host, c.status, c.reason) for c in checks]
    return found[0]


def h100_node(host: str = "n1", links: list[list[str]] = NV18_4) -> list[RawFile]:
    return [smi(host, count=len(links)), topo(host, links)]


# ------------------------------------------------------------------ correctness, completeness


def test_wrong_values_fail_naming_size_and_count() -> None:
    checks = judge([raw("n1", "ar", "nccl-tests", [nccl({GIB: 355.9}, wrong=7)]), *h100_node()])
    check = find(checks, "all_reduce.correctness")
    assert check.status == "fail"
    assert "7 wrong at 1 GiB (out-of-place)" in check.reason
    assert check.source == "raw/n1/ar.txt:10"


def test_out_of_bounds_failed_fails() -> None:
    run = nccl({GIB: 355.9}, bounds=NcclOutOfBounds(3, False))
    check = find(judge([raw("n1", "ar", "nccl-tests", [run])]), "out-of-bounds")
    assert check.status == "fail" and "3 FAILED" in check.reason


def test_missing_correctness_columns_fail_closed_but_na_with_footer_warns() -> None:
    no_evidence = nccl({GIB: 355.9}, with_wrong=False)
    no_evidence.out_of_bounds = None
    check = find(judge([raw("n1", "ar", "nccl-tests", [no_evidence])]), "correctness")
    assert check.status == "fail"
    unvalidated = nccl({GIB: 355.9}, with_wrong=False)
    check = find(judge([raw("n1", "ar", "nccl-tests", [unvalidated])]), "correctness")
    assert check.status == "warn" and "-c 1" in check.reason


def test_avg_bus_bandwidth_failed_line_fails() -> None:
    # NCCL_TESTS_MIN_BW: nccl-tests prints "# Avg bus bandwidth : 0 FAILED" and exits 7 (the
    # device recording); the exit status fails the step, the line fails the run on its own too
    run = nccl(
        {GIB: 355.9},
        avg_busbw_check="FAILED",
        failed_lines=[NcclFailedLine("# Avg bus bandwidth    : 0 FAILED", 112)],
    )
    check = find(judge([raw("n1", "ar", "nccl-tests", [run]), *h100_node()]), "failed-line")
    assert check.status == "fail" and "NCCL_TESTS_MIN_BW" in check.reason
    assert check.source == "raw/n1/ar.txt:112"


def test_bitwise_mismatch_line_fails_correctness() -> None:
    run = nccl({GIB: 355.9}, failed_lines=[NcclFailedLine("# Bitwise mismatches : 2 FAILED", 90)])
    check = find(judge([raw("n1", "ar", "nccl-tests", [run]), *h100_node()]), "failed-line")
    assert check.status == "fail" and check.category == "correctness"


@pytest.mark.parametrize(
    ("message", "status", "words"),
    [
        ("Cuda failure 'unspecified launch failure'", "fail", "fatal"),
        ("NET/IB : Got async event : port error", "fail", "cable"),
        ('Missing "iommu=pt" from kernel command line which can lead to system instability',
         "warn", "iommu=pt"),
        ("a warning nobody catalogued", "warn", "unknown"),
        ("[Service thread] Accept failed Resource temporarily unavailable", "pass", "benign"),
    ],
)  # fmt: skip
def test_nccl_warn_lines_are_read(message: str, status: str, words: str) -> None:
    run = nccl({GIB: 355.9}, nccl_warnings=[NcclWarning("n1", message, 77)])
    checks = judge([raw("n1", "ar", "nccl-tests", [run]), *h100_node()])
    warn = next(c for c in checks if ".nccl-warn-" in c.check_id)
    assert warn.status == status and words in warn.reason
    assert warn.source == "raw/n1/ar.txt:77" and "line 77" in warn.reason


# ------------------------------------------------------------------ bandwidth


def test_forty_percent_of_duplex_is_explained_as_per_direction() -> None:
    checks = judge([raw("n1", "ar", "nccl-tests", [nccl({GIB: 355.9})]), *h100_node()])
    check = find(checks, "all_reduce.busbw")
    assert check.status == "pass"
    assert check.reason.startswith(
        "355.9 GB/s = 79 % of the 450 GB/s per-direction NVLink 4 peak (40 % of the 900 GB/s "
        "duplex figure, which counts both directions)"
    )
    assert check.measured == 355.9 and check.reference == 450.0


@pytest.mark.parametrize(("busbw", "status"), [(320.0, "pass"), (270.0, "warn"), (200.0, "fail")])
def test_busbw_bands(busbw: float, status: str) -> None:
    checks = judge([raw("n1", "ar", "nccl-tests", [nccl({GIB: busbw})]), *h100_node()])
    assert find(checks, "busbw").status == status


def test_judged_on_the_plateau_floor_never_the_footer_or_the_best_size() -> None:
    # a sweep that collapses at its largest size: 339.8 at 256 MiB, 200 at 1 GiB
    run = nccl({MIB: 56.0, 256 * MIB: 339.8, GIB: 200.0})
    check = find(judge([raw("n1", "ar", "nccl-tests", [run]), *h100_node()]), "busbw")
    assert check.measured == 200.0 and check.status == "fail"
    assert "falls from 339.8 GB/s at 256 MiB to 200.0 GB/s at 1 GiB" in check.reason


def test_a_curve_still_rising_at_256_mib_is_judged_where_it_levels_off() -> None:
    chosen = judged_sample(
        [Sample(256 * MIB, 280.0, 1), Sample(512 * MIB, 340.0, 2), Sample(GIB, 352.0, 3)],
        256 * MIB,
    )
    assert chosen is not None and chosen.sample.busbw_gbps == 340.0 and chosen.note == ""


def test_short_sweep_falls_back_to_the_largest_size_with_a_note() -> None:
    run = nccl({8 * MIB: 190.0})
    check = find(judge([raw("n1", "ar", "nccl-tests", [run]), *h100_node()]), "busbw")
    assert check.status == "fail" and "sweep stops below 256 MiB" in check.reason


def test_nvls_above_peak_passes_with_caveat_and_without_nvls_warns() -> None:
    nvls = nccl({GIB: 480.0}, algorithms=["NVLS"])
    check = find(judge([raw("n1", "ar", "nccl-tests", [nvls]), *h100_node()]), "busbw")
    assert check.status == "pass"
    assert "busbw with NVLS/CollNet exceeds link bandwidth by design" in check.reason
    plain = find(judge([raw("n1", "ar", "nccl-tests", [nccl({GIB: 480.0})]), *h100_node()]),
                 "busbw")  # fmt: skip
    assert plain.status == "warn" and "above the per-direction peak" in plain.reason


def test_single_rank_is_not_a_bandwidth_verdict() -> None:
    run = raw("n1", "ar", "nccl-tests", [nccl({GIB: 0.0}, nranks=1)])
    check = find(judge([run, *h100_node()]), "busbw")  # one rank on a 4-GPU node: set up wrong
    assert check.status == "warn" and "single rank on a 4-GPU node" in check.reason
    assert check.reference is None
    alone = find(judge([run, smi("n1", count=1)]), "busbw")  # a one-GPU node: nothing to link
    assert alone.status == "pass" and "one GPU: no link to measure" in alone.reason


def test_unknown_gpu_model_is_unjudged_and_says_how_to_declare_it() -> None:
    checks = judge([raw("n1", "ar", "nccl-tests", [nccl({GIB: 355.9})]), topo("n1", NV18_4)])
    assert find(checks, "busbw").status == "unjudged"
    assert "gpuval_gpu_model" in find(checks, "busbw").reason
    links = find(checks, "gpu-links")
    assert links.status == "unjudged" and "GPU model unknown" in links.reason


def test_sendrecv_named_by_the_command_is_judged_against_the_neighbour_link() -> None:
    # a table alone reads like all_reduce; the sidecar's command says sendrecv_perf
    table_only = nccl({GIB: 120.0}, collective="all_reduce", collective_inferred=True)
    mesh = square(4, "NV6")  # HGX H100 4-GPU: NV6 = 150 GB/s between neighbours
    files = [raw("n1", "sr", "nccl-tests", [table_only],
                 command="mpirun -np 1 ./build/sendrecv_perf -b 8 -e 1G -g 4"),
             *h100_node(links=mesh)]  # fmt: skip
    check = find(judge(files), "sendrecv.busbw")
    assert check.status == "pass" and check.reference == 150.0
    all_reduce = [raw("n1", "ar", "nccl-tests", [nccl({GIB: 120.0})]), *h100_node(links=mesh)]
    check = find(judge(all_reduce), "all_reduce.busbw")  # all 18 links: 450 GB/s
    assert check.status == "fail" and check.reference == 450.0


# ------------------------------------------------------------------ declared vs detected


def test_declared_model_is_the_contract_and_a_different_gpu_fails() -> None:
    meta = {"declared": {"n1": {"gpu_model": "H100 SXM"}}}
    files = [raw("n1", "ar", "nccl-tests", [nccl({GIB: 46.0})]),
             smi("n1", "NVIDIA H100 PCIe"), topo("n1", square(4, "SYS"))]  # fmt: skip
    checks = judge(files, meta)
    model = find(checks, "hardware.gpu-model")
    assert model.status == "fail" and "declared H100 SXM" in model.reason
    assert "NVIDIA H100 PCIe" in model.reason
    assert find(checks, "all_reduce.busbw").status == "fail"  # 46 of an SXM board's 450


def test_fewer_gpus_than_declared_fail() -> None:
    meta = {"declared": {"n1": {"gpus_per_node": 8}}}
    check = find(judge(h100_node(), meta), "hardware.gpu-count")
    assert check.status == "fail" and "4 GPU(s) found where 8 are declared" in check.reason


def test_mixed_gpu_models_name_the_minority_host() -> None:
    files = [*h100_node("a"), *h100_node("b"), smi("c", "NVIDIA A100-SXM4-80GB")]
    checks = judge(files)
    minority = find(checks, "hardware.mixed-gpu-models", "c")
    assert minority.status == "fail" and "H100 SXM" in minority.reason
    assert find(checks, "hardware.mixed-gpu-models", "cluster").status == "fail"


def test_run_json_that_breaks_its_schema_is_an_error_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "raw" / "n1").mkdir(parents=True)
    (tmp_path / "run.json").write_text(json.dumps({"hosts": "x", "expected": {}}))
    folder = read_run_folder(tmp_path)
    assert folder.hosts == ["n1"] and "hosts" not in folder.meta
    checks = judge_run(build_evidence(folder), DEFAULTS).checks
    broken = [c for c in checks if c.check_id == "run-folder"]
    assert [c.status for c in broken] == ["error"] and "key hosts" in broken[0].reason


def test_run_json_without_expected_warns_that_missing_steps_go_unnoticed(tmp_path: Path) -> None:
    (tmp_path / "raw" / "n1").mkdir(parents=True)
    (tmp_path / "run.json").write_text(json.dumps({"hosts": ["n1"]}))
    problems = read_run_folder(tmp_path).diagnostics
    assert [(d.level, "cannot be noticed" in d.message) for d in problems] == [("warning", True)]


def test_a_failure_record_names_the_phase_task_and_message(tmp_path: Path) -> None:
    """The controller's record of a node that failed a phase (gpuval.plan.steps.failed) is read:
    the check says which task failed and why, not only that a step exited with 1."""
    write_run_json(tmp_path, "r", ["n1"])
    record = ("n1 unreachable in phase preflight, task 'Stop on a node that cannot be reached': "
              "ssh: connect to host 10.0.0.3 port 22: Connection refused")  # fmt: skip
    write_step(tmp_path, "n1", "failed-preflight", record + "\n", exit_code=1, tool="context",
               phase="preflight")  # fmt: skip
    judged = judge_run(build_evidence(read_run_folder(tmp_path)), DEFAULTS)
    (check,) = [c for c in judged.checks if c.check_id == "step.failed-preflight"]
    assert check.status == "fail"
    assert check.reason == f"failed phase preflight: {record}"


# ------------------------------------------------------------------ the board


@pytest.mark.parametrize(
    ("name", "links", "system"),
    [
        (H100, NV18_8, "HGX H100 8-GPU"),
        (H100, square(4, "NV6"), "HGX H100 4-GPU"),
        ("NVIDIA A100-SXM4-40GB", square(4, "NV4"), "HGX A100 4-GPU"),  # ALCF Polaris
    ],
)
def test_healthy_boards_pass_as_their_system(name: str, links: list[list[str]],
                                             system: str) -> None:  # fmt: skip
    check = find(judge([smi("n1", name, len(links)), topo("n1", links)]), "gpu-links")
    assert check.status == "pass" and system in check.reason


def test_a_pair_below_the_board_bond_fails() -> None:
    links = [row[:] for row in NV18_8]
    links[0][3] = links[3][0] = "NV12"
    check = find(judge(h100_node(links=links)), "gpu-links")
    assert check.status == "fail"
    assert "GPU0-GPU3 NV12 where the HGX H100 8-GPU has NV18" in check.reason


def test_inactive_nvlinks_on_an_nvswitch_board_fail_naming_gpu_and_links() -> None:
    gpus = [SmiGpu(index=i, name=H100, nvlinks=[NvLinkState(k, 26.562, "active")
                                                for k in range(18)]) for i in range(8)]  # fmt: skip
    gpus[5].nvlinks = [
        NvLinkState(k, None if k in (3, 7) else 26.562, "inactive" if k in (3, 7) else "active")
        for k in range(18)
    ]
    nvlink = raw("n1", "nvidia-smi-nvlink", "nvidia-smi-nvlink",
                 [NvidiaSmiRun(format="nvlink", gpus=gpus)], phase="preflight")  # fmt: skip
    check = find(judge([nvlink, *h100_node(links=NV18_8)]), "nvlink-state")
    assert check.status == "fail" and "GPU5 link(s) 3, 7 inactive" in check.reason


def test_gpus_without_a_nic_on_their_switch_are_said_not_held_against_the_node() -> None:
    far = find(judge([topo("n1", NV18_4, nics=1, nic_cell="SYS")]), "nic-locality")
    assert far.status == "pass" and "GPU0 (SYS)" in far.reason
    near = find(judge([topo("n1", NV18_4, nics=1, nic_cell="PIX")]), "nic-locality")
    assert near.status == "pass"


def test_pcie_width_is_judged_against_the_card_not_only_nvml_max() -> None:
    slot = smi("n1", pcie=PcieLink(gen_current=5, gen_max=5, width_current=8, width_max=8))
    check = find(judge([slot]), "pcie-link")
    assert check.status == "fail" and "x8 where a H100 SXM is x16" in check.reason
    assert "NVML's max is x8" in check.reason
    healthy = smi("n1", pcie=PcieLink(gen_current=1, gen_max=5, width_current=16, width_max=16))
    assert find(judge([healthy]), "pcie-link").status == "pass"


# ------------------------------------------------------------------ p2p


def p2p(values: dict[tuple[int, int], float], size: int = 4, default: float = 375.0) -> P2PRun:
    matrix: list[list[float | None]] = [
        [2500.0 if i == j else values.get((i, j), default) for j in range(size)]
        for i in range(size)
    ]
    return P2PRun(num_gpus=size, matrices={"bandwidth_unidirectional_p2p_enabled": matrix},
                  complete=True, connectivity=[[1] * size for _ in range(size)])  # fmt: skip


def test_p2p_pair_far_below_its_siblings_is_named() -> None:
    files = [raw("n1", "p2p", "p2pBandwidthLatencyTest", [p2p({(2, 1): 300.0})]), *h100_node()]
    checks = judge(files)
    pair = find(checks, "p2p.GPU2->GPU1")
    assert pair.status == "warn" and "80 % of the median 375.0 GB/s of its NV18" in pair.reason
    summary = find(checks, "p2p.unidirectional")
    assert summary.status == "warn" and summary.measured == 300.0 and "1 flagged" in summary.reason


def test_p2p_compares_only_cells_of_the_same_link_class() -> None:
    # DGX-1 V100: NV1 (25 GB/s), NV2 (50) and SYS (PCIe 3, 15.75) pairs; healthy values for each
    from tests.unit.test_catalog import DGX1

    speed = {"NV1": 22.0, "NV2": 45.0, "SYS": 12.0}
    values = {(i, j): speed[DGX1[i][j]] for i in range(8) for j in range(8) if i != j}
    files = [raw("n1", "p2p", "p2pBandwidthLatencyTest", [p2p(values, 8)]),
             smi("n1", "Tesla V100-SXM2-32GB", 8), topo("n1", DGX1)]  # fmt: skip
    checks = judge(files)
    assert find(checks, "p2p.unidirectional").status == "pass"
    assert find(checks, "gpu-links").status == "pass"


def test_p2p_no_peer_access_over_nvlink_fails() -> None:
    run = p2p({})
    run.can_access_peer = [PeerAccess(0, 3, False)]
    check = find(judge([raw("n1", "p2p", "p2pBandwidthLatencyTest", [run]), *h100_node()]),
                 "GPU0->GPU3.access")  # fmt: skip
    assert check.status == "fail" and "NV18" in check.reason


def test_one_gpu_p2p_has_no_peer_to_judge() -> None:
    run = P2PRun(num_gpus=1, matrices={"bandwidth_unidirectional_p2p_enabled": [[2871.9]]},
                 complete=True)  # fmt: skip
    check = find(judge([raw("n1", "p2p", "p2pBandwidthLatencyTest", [run])]), "unidirectional")
    assert check.status == "pass" and "one GPU" in check.reason


def test_nvbandwidth_copies_are_judged_against_pcie_and_the_pair_link() -> None:
    def test(name: str, values: list[list[float | None]], rows: list[str]) -> NvbandwidthTest:
        labels = [str(i) for i in range(len(values[0]))]
        matrix = NvbandwidthMatrix(name, "GB/s", rows, labels, values, None, None, None, 5)
        return NvbandwidthTest(name, "passed", [matrix], line=5)

    d2d: list[list[float | None]] = [[None if i == j else 370.0 for j in range(4)]
                                     for i in range(4)]  # fmt: skip
    tests = [
        test("host_to_device_memcpy_ce", [[55.1, 54.9, 20.0, 55.0]], ["0"]),
        test("device_to_device_memcpy_read_ce", d2d, ["0", "1", "2", "3"]),
        NvbandwidthTest("device_to_device_bidirectional_memcpy_read_ce", "error",
                        error="cudaErrorPeerAccessUnsupported"),
    ]  # fmt: skip
    run = NvbandwidthRun(format="text", tests=tests)
    checks = judge([raw("n1", "nvb", "nvbandwidth", [run]), *h100_node()])
    h2d = find(checks, "host_to_device_memcpy_ce")
    assert h2d.status == "fail" and h2d.reference == 63.0
    assert h2d.reason.startswith(
        "lowest GPU2: 20.0 GB/s = 32 % of the 63 GB/s per-direction PCIe 5 x16 peak"
    )
    d2d_check = find(checks, "device_to_device_memcpy_read_ce")
    assert d2d_check.status == "pass" and d2d_check.reference == 450.0
    failed = find(checks, "bidirectional_memcpy_read_ce")
    assert failed.status == "fail" and "cudaErrorPeerAccessUnsupported" in failed.reason


# ------------------------------------------------------------------ across hosts, steps


def test_mixed_versions_fail_naming_the_minority() -> None:
    def nccl_version(host: str, version: str) -> RawFile:
        run = nccl({GIB: 355.0}, nccl_version=version)
        return raw(host, "ar", "nccl-tests", [run])

    checks = judge([nccl_version("a", "2.26.2"), nccl_version("b", "2.26.2"),
                    nccl_version("c", "2.21.5")])  # fmt: skip
    assert find(checks, "consistency.nccl_version", "c").status == "fail"
    assert "2.21.5 on c" in find(checks, "consistency.nccl_version", "cluster").reason


def test_a_host_well_below_the_others_is_an_outlier_and_scopes_do_not_mix() -> None:
    files = [raw(h, "ar", "nccl-tests", [nccl({GIB: v})])
             for h, v in (("a", 355.0), ("b", 352.0), ("c", 356.0), ("d", 300.0))]  # fmt: skip
    files += [f for h in "abcd" for f in h100_node(h)]
    outlier = find(judge(files), "busbw.outlier")
    assert outlier.host == "d" and outlier.status == "warn"


@pytest.mark.parametrize(
    ("sidecar", "status", "words"),
    [
        ({"skipped": "no GPU on this host"}, "warn", "skipped: no GPU on this host"),
        ({"exit_code": None, "timed_out": True, "timeout_s": 600.0}, "fail",
         "timed out after 600 s"),
        ({"exit_code": None}, "fail", "did not finish"),
        ({"exit_code": 3}, "fail", "exited with status 3"),
    ],
)  # fmt: skip
def test_step_status_from_the_sidecar(sidecar: dict[str, Any], status: str, words: str) -> None:
    files = [raw("n1", "ar", "nccl-tests", [nccl({GIB: 355.9})]), raw("n1", "step", None, [],
                                                                       **sidecar)]  # fmt: skip
    check = find(judge(files), "step.step")
    assert check.status == status and words in check.reason


def test_missing_expected_step_and_unreachable_host_fail() -> None:
    meta = {
        "hosts": ["n1", "n2"],
        "expected": {"n1": ["nvidia-smi-topo", "nccl-all_reduce"], "n2": ["nvidia-smi-topo"]},
    }
    checks = judge([topo("n1", NV18_4)], meta, without_folder=["n2"])  # fmt: skip
    assert "'nccl-all_reduce'" in find(checks, "step.nccl-all_reduce", "n1").reason
    assert find(checks, "host.reachable", "n2").status == "fail"


def test_nothing_measured_or_inspected_is_an_error() -> None:
    version = raw(
        "n1", "nvcc-version", "nvcc-version", [SoftwareVersionRun("cuda-toolkit", "13.0")]
    )
    check = find(judge([version]), "run.evidence")
    assert check.status == "error" and "nvcc-version" in check.reason
    # a board that was inspected stands on its own, even with nothing measured
    assert not [c for c in judge(h100_node()) if c.check_id == "run.evidence"]


def test_parser_errors_fail_and_an_empty_parse_fails() -> None:
    broken = raw("n1", "ar", "nccl-tests", [nccl({GIB: 355.9})])
    assert broken.parse is not None
    broken.parse.error("row cut mid-line", 42)
    empty = raw("n1", "p2p", "p2pBandwidthLatencyTest", [])
    checks = judge([broken, empty, *h100_node()])
    errors = sorted((c.source, c.status) for c in checks if c.check_id == "parse.error")
    assert errors == [("raw/n1/ar.txt:42", "fail"), ("raw/n1/p2p.txt", "fail")]


def test_threshold_overrides(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"busbw_pass_fraction": 0.8, "large_message_min_bytes": 1024}))
    loaded = load_thresholds(path)
    assert loaded.busbw_pass_fraction == 0.8 and loaded.large_message_min_bytes == 1024
    assert loaded.busbw_fail_fraction == DEFAULTS.busbw_fail_fraction
    path.write_text('{"busbw_pass": 0.8}')
    with pytest.raises(ThresholdsError, match="unknown threshold"):
        load_thresholds(path)
    path.write_text("{")
    with pytest.raises(ThresholdsError, match="line 1"):
        load_thresholds(path)


def test_amd_smi_topology_of_an_mi300x_platform_is_judged_against_its_board() -> None:
    """amd-smi topology on 8x MI300X (AMD's changelog): XGMI between every pair, as the MI300X
    platform is built; a PCIE cell would mean a lost Infinity Fabric link."""
    from gpuval.parsers import amd_topology

    path = Path(__file__).parents[1] / "data/outputs/amd-topology"
    text = (path / "amd-smi-changelog-8xMI300X-bdf-tables.txt").read_text()
    topology = raw("n1", "amd-smi-topology", "amd-smi-topo",
                   amd_topology.parse(text, tool="amd-smi-topo").runs)  # fmt: skip
    checks = judge([topology, smi("n1", "AMD Instinct MI300X", 8)])
    links = find(checks, "gpu-links")
    assert links.status == "pass" and "AMD Instinct MI300X platform" in links.reason
    assert topology.parse is not None
    record = topology.parse.runs[0]
    record.link_types[2][5] = record.link_types[5][2] = "PCIE"
    links = find(judge([topology, smi("n1", "AMD Instinct MI300X", 8)]), "gpu-links")
    assert links.status == "fail" and "GPU2-GPU5 PCIE where" in links.reason
