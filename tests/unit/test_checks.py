"""The checks, on hand-built records: every verdict rule and its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuval.analysis.checks import Sample, judge_run, large_message
from gpuval.analysis.model import Check, HostFacts, RawFile, Sidecar
from gpuval.analysis.thresholds import DEFAULTS, ThresholdsError, load_thresholds
from gpuval.records.base import ParseResult
from gpuval.runfolder import RunFolder

GIB = 1 << 30
NV18_4 = [["X" if i == j else "NV18" for j in range(4)] for i in range(4)]


def nccl_run(
    busbw: dict[int, float],
    wrong: int = 0,
    nranks: int = 4,
    bounds: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    rows = [
        {
            "size_bytes": size,
            "line": 10 + i,
            "out_of_place": {"busbw_gbps": value, "wrong": wrong if size == GIB else 0},
            "in_place": {"busbw_gbps": value, "wrong": 0},
        }
        for i, (size, value) in enumerate(sorted(busbw.items()))
    ]
    return {
        "collective": "all_reduce",
        "nranks": nranks,
        "complete": True,
        "rows": rows,
        "out_of_bounds": bounds if bounds is not None else {"count": 0, "ok": True},
        "failures": [],
        **extra,
    }


def raw(
    host: str, name: str, tool: str | None, runs: list[dict[str, Any]], **sidecar: Any
) -> RawFile:
    path = f"raw/{host}/{name}.txt"
    side = Sidecar(
        name=name,
        host=host,
        phase=sidecar.pop("phase", "intranode"),
        raw=f"{name}.txt",
        exit_code=sidecar.pop("exit_code", 0),
        **sidecar,
    )
    parse = ParseResult(tool, path, list(runs)) if tool else None
    return RawFile(host, path, side, parse)


def topo(host: str, links: list[list[str]], nics: int = 0, nic_cell: str = "PHB") -> RawFile:
    gpus = [f"GPU{i}" for i in range(len(links))]
    names = gpus + [f"NIC{i}" for i in range(nics)]
    rows = [row + [nic_cell] * nics for row in links]
    rows += [[nic_cell] * len(gpus) + ["X"] for _ in range(nics)]
    return raw(
        host,
        "nvidia-smi-topo",
        "nvidia-smi-topo",
        [{"devices": names, "links": rows}],
        phase="preflight",
    )


def judge(
    files: list[RawFile],
    facts: list[HostFacts] | None = None,
    meta: dict[str, Any] | None = None,
    unreachable: list[str] | None = None,
) -> list[Check]:
    hosts = sorted({f.host for f in files} | set(unreachable or []))
    folder = RunFolder(Path("."), meta or {}, hosts, unreachable or [], files)
    facts = facts or [HostFacts(h, gpu_model="H100 SXM", gpu_count=4) for h in hosts]
    checks, _ = judge_run(folder, facts, DEFAULTS)
    return checks


def find(checks: list[Check], suffix: str, host: str | None = None) -> Check:
    found = [c for c in checks if c.check_id.endswith(suffix) and host in (None, c.host)]
    assert len(found) == 1, [(c.check_id, c.reason) for c in checks]
    return found[0]


def test_wrong_values_fail_naming_size_and_count() -> None:
    checks = judge(
        [raw("n1", "ar", "nccl-tests", [nccl_run({GIB: 355.9}, wrong=7)]), topo("n1", NV18_4)]
    )
    check = find(checks, "all_reduce.correctness")
    assert check.status == "fail"
    assert "7 wrong at 1 GiB (out-of-place)" in check.reason
    assert check.source == "raw/n1/ar.txt:10"


def test_out_of_bounds_failed_fails() -> None:
    run = nccl_run({GIB: 355.9}, bounds={"count": 3, "ok": False})
    check = find(judge([raw("n1", "ar", "nccl-tests", [run])]), "out-of-bounds")
    assert check.status == "fail" and "3 FAILED" in check.reason


def test_missing_correctness_columns_fail_closed_but_na_with_footer_warns() -> None:
    no_evidence = nccl_run({GIB: 355.9}, bounds={})
    for row in no_evidence["rows"]:
        row["out_of_place"]["wrong"] = row["in_place"]["wrong"] = None
    assert (
        find(judge([raw("n1", "ar", "nccl-tests", [no_evidence])]), "correctness").status == "fail"
    )
    unvalidated = {**no_evidence, "out_of_bounds": {"count": 0, "ok": True}}
    check = find(judge([raw("n1", "ar", "nccl-tests", [unvalidated])]), "correctness")
    assert check.status == "warn" and "-c 1" in check.reason


def test_forty_percent_of_duplex_is_explained_as_per_direction() -> None:
    checks = judge(
        [
            raw("n1", "ar", "nccl-tests", [nccl_run({GIB // 2: 347.9, GIB: 355.9})]),
            topo("n1", NV18_4),
        ]
    )
    check = find(checks, "all_reduce.busbw")
    assert check.status == "pass"
    assert check.reason.startswith(
        "355.9 GB/s = 79 % of the 450 GB/s per-direction NVLink 4 peak (40 % of the 900 GB/s "
        "duplex figure, which counts both directions)"
    )
    assert check.measured == 355.9 and check.reference == 450.0


@pytest.mark.parametrize(("busbw", "status"), [(320.0, "pass"), (270.0, "warn"), (200.0, "fail")])
def test_busbw_bands(busbw: float, status: str) -> None:
    checks = judge([raw("n1", "ar", "nccl-tests", [nccl_run({GIB: busbw})]), topo("n1", NV18_4)])
    assert find(checks, "busbw").status == status


def test_judges_the_large_message_maximum_not_the_footer_average() -> None:
    run = nccl_run({1 << 20: 56.0, 256 << 20: 339.8, GIB: 300.0}, avg_busbw_gbps=98.4)
    check = find(judge([raw("n1", "ar", "nccl-tests", [run]), topo("n1", NV18_4)]), "busbw")
    assert check.measured == 339.8 and "at 256 MiB" in check.reason


def test_short_sweep_falls_back_to_the_largest_size_with_a_note() -> None:
    chosen = large_message([Sample(1 << 20, 50.0, 1), Sample(8 << 20, 190.0, 2)], 256 << 20)
    assert chosen == (Sample(8 << 20, 190.0, 2), True)
    check = find(
        judge([raw("n1", "ar", "nccl-tests", [nccl_run({8 << 20: 190.0})]), topo("n1", NV18_4)]),
        "busbw",
    )
    assert check.status == "fail" and "sweep stops below 256 MiB" in check.reason


def test_nvls_above_peak_passes_with_caveat_and_without_nvls_warns() -> None:
    nvls = nccl_run({GIB: 480.0}, algorithms=["NVLS"])
    check = find(judge([raw("n1", "ar", "nccl-tests", [nvls]), topo("n1", NV18_4)]), "busbw")
    assert check.status == "pass"
    assert "busbw with NVLS/CollNet exceeds link bandwidth by design" in check.reason
    plain = find(
        judge([raw("n1", "ar", "nccl-tests", [nccl_run({GIB: 480.0})]), topo("n1", NV18_4)]),
        "busbw",
    )
    assert plain.status == "warn" and "above the per-direction peak" in plain.reason


def test_single_rank_is_not_a_bandwidth_verdict() -> None:
    check = find(judge([raw("n1", "ar", "nccl-tests", [nccl_run({GIB: 0.0}, nranks=1)])]), "busbw")
    assert check.status == "warn" and "single rank" in check.reason
    assert check.reference is None


def test_unknown_gpu_model_gives_no_reference_and_says_how_to_declare_it() -> None:
    checks = judge(
        [raw("n1", "ar", "nccl-tests", [nccl_run({GIB: 355.9})])], facts=[HostFacts("n1")]
    )
    check = find(checks, "busbw")
    assert check.status == "warn" and "config.hardware.n1.gpu_model" in check.reason


def p2p_run(values: dict[tuple[int, int], float], size: int = 4) -> dict[str, Any]:
    matrix = [
        [2500.0 if i == j else values.get((i, j), 375.0) for j in range(size)] for i in range(size)
    ]
    return {
        "matrices": {"bandwidth_unidirectional_p2p_enabled": matrix},
        "complete": True,
        "connectivity": [[1] * size for _ in range(size)],
        "failures": [],
    }


def test_p2p_pair_far_below_its_siblings_is_named() -> None:
    checks = judge(
        [
            raw("n1", "p2p", "p2pBandwidthLatencyTest", [p2p_run({(2, 1): 300.0})]),
            topo("n1", NV18_4),
        ]
    )
    pair = find(checks, "p2p.GPU2->GPU1")
    assert pair.status == "warn" and "80 % of the median 375.0 GB/s" in pair.reason
    summary = find(checks, "p2p.unidirectional")
    assert summary.status == "warn" and summary.measured == 300.0 and "1 flagged" in summary.reason


def test_p2p_healthy_matrix_passes_against_the_pair_peak() -> None:
    checks = judge([raw("n1", "p2p", "p2pBandwidthLatencyTest", [p2p_run({})]), topo("n1", NV18_4)])
    summary = find(checks, "p2p.unidirectional")
    assert summary.status == "pass" and summary.reference == 450.0


def test_p2p_no_peer_access_over_nvlink_fails() -> None:
    run = p2p_run({})
    run["connectivity"][0][3] = 0
    check = find(
        judge([raw("n1", "p2p", "p2pBandwidthLatencyTest", [run]), topo("n1", NV18_4)]),
        "GPU0->GPU3.access",
    )
    assert check.status == "fail" and "NV18" in check.reason


def test_fewer_nvlinks_than_the_model_has_fails() -> None:
    links = [row[:] for row in NV18_4]
    links[0][3] = links[3][0] = "NV12"
    check = find(judge([topo("n1", links)]), "gpu-links")
    assert check.status == "fail"
    assert "GPU0-GPU3 NV12 where an H100 SXM has 18 links" in check.reason


def test_gpus_without_a_nic_on_their_switch_warn() -> None:
    far = find(judge([topo("n1", NV18_4, nics=1, nic_cell="SYS")]), "nic-locality")
    assert far.status == "warn" and "GPU0 (SYS)" in far.reason
    near = find(judge([topo("n1", NV18_4, nics=1, nic_cell="PIX")]), "nic-locality")
    assert near.status == "pass"


def test_pcie_width_below_maximum_fails() -> None:
    gpus = [
        {
            "index": 0,
            "pcie": {"gen_current": 1, "gen_max": 5, "width_current": 16, "width_max": 16},
        },
        {"index": 1, "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 8, "width_max": 16}},
    ]
    smi = raw("n1", "smi", "nvidia-smi-xml", [{"gpus": gpus}], phase="preflight")
    check = find(judge([smi]), "pcie-link")
    assert check.status == "fail" and "GPU1 PCIe link trained at x8 of x16" in check.reason


def test_socket_transport_across_nodes_with_rdma_nics_fails() -> None:
    run = nccl_run({GIB: 40.0}, transports=["NET/Socket"], hosts=["n1", "n2"])
    ib = raw(
        "n1",
        "ibstat",
        "ibstat",
        [
            {
                "devices": [
                    {
                        "name": "mlx5_0",
                        "ports": [
                            {
                                "port": 1,
                                "state": "Active",
                                "rate_gbps": 400,
                                "link_layer": "InfiniBand",
                            }
                        ],
                    }
                ]
            }
        ],
    )
    checks = judge([raw("n1", "ar", "nccl-tests", [run], phase="internode"), ib])
    assert find(checks, "transport").status == "fail"
    bandwidth = find(checks, "busbw")  # 4 GPUs share one NDR port: 12.5 GB/s per GPU
    assert bandwidth.reference == 12.5 and bandwidth.status == "warn"


def test_mixed_versions_fail() -> None:
    facts = [
        HostFacts("a", nccl_version="2.26.2"),
        HostFacts("b", nccl_version="2.21.5"),
        HostFacts("c", driver_version="570.1"),
        HostFacts("d", driver_version="570.1"),
    ]
    checks = judge([raw(h.name, "t", "nvidia-smi-topo", []) for h in facts], facts=facts)
    nccl = find(checks, "consistency.nccl_version")
    assert nccl.status == "fail" and "2.21.5 on b" in nccl.reason
    assert find(checks, "consistency.driver_version").status == "pass"


def test_a_host_well_below_the_others_is_an_outlier() -> None:
    files = [
        raw(h, "ar", "nccl-tests", [nccl_run({GIB: v})])
        for h, v in (("a", 355.0), ("b", 352.0), ("c", 356.0), ("d", 300.0))
    ]
    files += [topo(h, NV18_4) for h in "abcd"]
    outlier = find(judge(files), "busbw.outlier")
    assert outlier.host == "d" and outlier.status == "warn"


@pytest.mark.parametrize(
    ("sidecar", "status", "words"),
    [
        ({"skipped": "no GPU on this host"}, "warn", "skipped: no GPU on this host"),
        (
            {"exit_code": None, "timed_out": True, "timeout_s": 600.0},
            "fail",
            "timed out after 600 s",
        ),
        ({"exit_code": None}, "fail", "did not finish"),
        ({"exit_code": 3}, "fail", "exited with status 3"),
    ],
)
def test_step_status_from_the_sidecar(sidecar: dict[str, Any], status: str, words: str) -> None:
    files = [
        raw("n1", "ar", "nccl-tests", [nccl_run({GIB: 355.9})]),
        topo("n1", NV18_4),
        raw("n1", "step", None, [], **sidecar),
    ]
    check = find(judge(files), "step.step")
    assert check.status == status and words in check.reason


def test_missing_expected_step_and_unreachable_host_fail() -> None:
    meta = {
        "hosts": ["n1", "n2"],
        "expected": {"n1": ["nvidia-smi-topo", "nccl-all_reduce"], "n2": ["nvidia-smi-topo"]},
    }
    checks = judge([topo("n1", NV18_4)], meta=meta, unreachable=["n2"])
    assert "'nccl-all_reduce'" in find(checks, "step.nccl-all_reduce", "n1").reason
    assert find(checks, "host.reachable", "n2").status == "fail"


def test_nothing_measured_is_an_error() -> None:
    check = find(judge([topo("n1", NV18_4)]), "run.evidence")
    assert check.status == "error" and "nvidia-smi-topo" in check.reason


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


def nvbandwidth_test(
    name: str,
    values: list[list[float | None]],
    status: str = "passed",
    rows: list[str] | None = None,
) -> dict[str, Any]:
    labels = [str(i) for i in range(len(values[0]))]
    matrix = {
        "description": name,
        "unit": "GB/s",
        "row_labels": rows or labels,
        "column_labels": labels,
        "values": values,
    }
    return {"name": name, "status": status, "matrices": [matrix], "line": 5}


def test_nvbandwidth_copies_are_judged_against_pcie_and_the_pair_link() -> None:
    tests = [
        nvbandwidth_test("host_to_device_memcpy_ce", [[55.1, 54.9, 20.0, 55.0]], rows=["0"]),
        nvbandwidth_test(
            "device_to_device_memcpy_read_ce",
            [[None if i == j else 370.0 for j in range(4)] for i in range(4)],
        ),
        {
            "name": "device_to_device_bidirectional_memcpy_read_ce",
            "status": "error",
            "error": "cudaErrorPeerAccessUnsupported",
            "matrices": [],
        },
        {"name": None, "status": "waived", "matrices": []},
    ]
    checks = judge([raw("n1", "nvb", "nvbandwidth", [{"tests": tests}]), topo("n1", NV18_4)])
    h2d = find(checks, "host_to_device_memcpy_ce")
    assert h2d.status == "fail" and h2d.reference == 63.0
    assert h2d.reason.startswith(
        "lowest GPU2: 20.0 GB/s = 32 % of the 63 GB/s per-direction PCIe 5 x16 peak"
    )
    d2d = find(checks, "device_to_device_memcpy_read_ce")
    assert d2d.status == "pass" and d2d.reference == 450.0
    failed = find(checks, "bidirectional_memcpy_read_ce")
    assert failed.status == "fail" and "cudaErrorPeerAccessUnsupported" in failed.reason
    assert find(checks, "unnamed test").status == "warn"


def test_shm_between_nvlinked_gpus_warns() -> None:
    run = nccl_run({GIB: 100.0}, transports=["SHM/direct", "NET/Socket"])
    check = find(judge([raw("n1", "ar", "nccl-tests", [run]), topo("n1", NV18_4)]), "transport")
    assert check.status == "warn" and "peer-to-peer is disabled" in check.reason
    healthy = nccl_run({GIB: 355.0}, transports=["P2P/direct", "NET/Socket"])
    checks = judge([raw("n1", "ar", "nccl-tests", [healthy]), topo("n1", NV18_4)])
    assert not [c for c in checks if c.check_id.endswith("transport")]


def test_rdma_nics_of_other_inventory_hosts_count() -> None:
    run = nccl_run({GIB: 40.0}, transports=["NET/Socket"], hosts=["n1", "n2"])
    checks = judge(
        [raw("n1", "ar", "nccl-tests", [run], phase="internode"), topo("n2", NV18_4, nics=1)]
    )
    assert find(checks, "transport", "n1").status == "fail"


def test_parser_errors_fail_and_an_empty_parse_fails() -> None:
    broken = raw("n1", "ar", "nccl-tests", [nccl_run({GIB: 355.9})])
    assert broken.parse is not None
    broken.parse.error("row cut mid-line", 42)
    empty = raw("n1", "p2p", "p2pBandwidthLatencyTest", [])
    checks = judge([broken, empty, topo("n1", NV18_4)])
    errors = sorted((c.source, c.status) for c in checks if c.check_id == "parse.error")
    assert errors == [("raw/n1/ar.txt:42", "fail"), ("raw/n1/p2p.txt", "fail")]
