"""`gpuval report RUN_DIR` end to end through the CLI: exit codes, messages, results.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpuval.checks.model import STATUS_ORDER
from gpuval.cli import main
from gpuval.schemas.validation import validate

SAMPLE = Path(__file__).parents[1] / "data" / "sample-run"
LAMBDA = SAMPLE / "raw" / "lambda-4xh100"
ROW_1GIB = "1073741824 268435456 float sum -1 4525.6 237.26 355.89 0 4557.5 235.60 353.40 0"


def step(run: Path, host: str, name: str, text: str, tool: str | None, **fields: Any) -> None:
    folder = run / "raw" / host
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.txt").write_text(text)
    sidecar = {
        "schema_version": 1, "name": name, "host": host, "phase": "intranode",
        "raw": f"{name}.txt", "command": name, "tool": tool, "cwd": None, "env": {},
        "exit_code": 0, "timed_out": False, "timeout_s": None, "started_at": None,
        "ended_at": None, "duration_s": None, "skipped": None, **fields,
    }  # fmt: skip
    (folder / f"{name}.meta.json").write_text(json.dumps(sidecar))


def lambda_run(run: Path, nccl_text: str | None = None, **meta: Any) -> Path:
    """A one-host run built from the Lambda 4x H100 outputs; `nccl_text` replaces its log."""
    nccl = nccl_text or (LAMBDA / "nccl-all_reduce.txt").read_text()
    step(run, "h1", "nvidia-smi", (LAMBDA / "nvidia-smi.txt").read_text(), "nvidia-smi")
    step(
        run,
        "h1",
        "nvidia-smi-topo",
        (LAMBDA / "nvidia-smi-topo.txt").read_text(),
        "nvidia-smi-topo",
    )
    step(run, "h1", "nccl-all_reduce", nccl, "nccl-tests")
    hosts = meta.pop("hosts", ["h1"])
    expected = meta.pop("expected", {"h1": ["nvidia-smi", "nvidia-smi-topo", "nccl-all_reduce"]})
    (run / "run.json").write_text(
        json.dumps(
            {"run_id": "t", "started_at": None, "hosts": hosts, "expected": expected, "config": {}}
        )
    )
    return run


def results(run: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((run / "results.json").read_text())
    return document


def checks_by_id(run: Path) -> dict[str, dict[str, Any]]:
    return {c["check_id"]: c for c in results(run)["checks"]}


def test_healthy_run_passes_and_explains_the_duplex_figure(tmp_path: Path) -> None:
    run = lambda_run(tmp_path)
    assert main(["report", str(run), "--quiet"]) == 0
    busbw = checks_by_id(run)["nccl-tests.all_reduce.busbw"]
    assert busbw["status"] == "pass"
    # judged on the floor of the large-message plateau: from 256 MiB (339.81, within 10 % of the
    # best 355.89 at 1 GiB) on, its lowest row is 339.81 GB/s = 76 % of 450 (38 % of 900)
    assert (
        "339.8 GB/s = 76 % of the 450 GB/s per-direction NVLink 4 peak (38 % of the 900 GB/s "
        "duplex" in busbw["reason"]
    )
    # the NIC behind the host bridge is said, not held against the node
    assert results(run)["verdict"] == "pass"
    for name in ("results.json", "measurements.csv", "report.html", "summary.json", "junit.xml"):
        assert (run / name).is_file(), name


def test_wrong_results_fail(tmp_path: Path) -> None:
    text = (LAMBDA / "nccl-all_reduce.txt").read_text()
    assert ROW_1GIB in text
    run = lambda_run(tmp_path, text.replace(ROW_1GIB, ROW_1GIB.replace("355.89 0", "355.89 12")))
    assert main(["report", str(run), "--quiet"]) == 1
    check = checks_by_id(run)["nccl-tests.all_reduce.correctness"]
    assert check["status"] == "fail" and "12 wrong at 1 GiB (out-of-place)" in check["reason"]


def test_missing_expected_step_fails(tmp_path: Path) -> None:
    run = lambda_run(tmp_path, expected={"h1": ["nvidia-smi", "nccl-all_reduce", "p2p"]})
    assert main(["report", str(run), "--quiet"]) == 1
    assert checks_by_id(run)["step.p2p"]["status"] == "fail"


def test_unreachable_host_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = lambda_run(tmp_path, hosts=["h1", "h2"])
    assert main(["report", str(run)]) == 1
    assert checks_by_id(run)["host.reachable"]["host"] == "h2"
    assert "FAIL h2 host.reachable" in capsys.readouterr().err


def test_unfinished_step_fails(tmp_path: Path) -> None:
    run = lambda_run(tmp_path)
    step(
        run,
        "h1",
        "nccl-all_gather",
        "",
        "nccl-tests",
        exit_code=None,
        timed_out=True,
        timeout_s=900,
    )
    assert main(["report", str(run), "--quiet"]) == 1
    assert "timed out after 900 s" in checks_by_id(run)["step.nccl-all_gather"]["reason"]


def test_garbage_run_folder_is_an_error_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "raw" / "h1").mkdir(parents=True)
    (tmp_path / "raw" / "h1" / "junk.bin").write_bytes(b"\x00\xff garbage \x89PNG")
    (tmp_path / "raw" / "h1" / "junk.meta.json").write_text("{not json")
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "nothing was measured" in err and "Traceback" not in err
    assert results(tmp_path)["verdict"] == "error"


@pytest.mark.parametrize("layout", ["missing", "no-raw"])
def test_not_a_run_folder_exits_2_saying_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str
) -> None:
    target = tmp_path / "run"
    if layout == "no-raw":
        target.mkdir()
    assert main(["report", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuval report: ") and "raw/" in err and "Traceback" not in err


def test_bad_thresholds_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = lambda_run(tmp_path / "run")
    bad = tmp_path / "t.json"
    bad.write_text('{"busbw_pass_fraction": "high"}')
    assert main(["report", str(run), "--thresholds", str(bad)]) == 2
    assert (
        f"{bad}: key busbw_pass_fraction: 'high' is not allowed: 'high' is not of type 'number'"
        in capsys.readouterr().err
    )


def test_thresholds_file_changes_the_verdict(tmp_path: Path) -> None:
    run = lambda_run(tmp_path / "run")
    strict = tmp_path / "t.json"
    strict.write_text('{"busbw_pass_fraction": 0.9, "busbw_fail_fraction": 0.85}')
    assert main(["report", str(run), "--quiet", "--thresholds", str(strict)]) == 1


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    out = tmp_path_factory.mktemp("sample")
    return main(["report", str(SAMPLE), "--out", str(out), "--quiet"]), out


def test_sample_run_verdict_is_what_its_readme_says(sample_report: tuple[int, Path]) -> None:
    code, out = sample_report
    readme = (SAMPLE / "README.md").read_text()
    assert "## Expected verdict: FAIL (exit status 1)" in readme
    assert code == 1 and results(out)["verdict"] == "fail"
    failing = sorted(
        (c["host"], c["check_id"]) for c in results(out)["checks"] if c["status"] == "fail"
    )
    assert failing == [
        ("dgx-8xa100", "nccl-tests.all_reduce.complete"),
        ("dgx-8xa100", "nccl-tests.all_reduce.correctness"),
    ]
    worst = {h: c["status"] for h, c in _host_status(results(out)).items()}
    # GPUs of unknown model cannot be judged: unjudged, never a pass; a declared model no output
    # names is confirmed when the links are exactly its board's (NV18 x28: HGX H100 8-GPU)
    assert worst == {
        "dgx-8xa100": "fail",
        "dgx-8xh100": "warn",
        "dual-gpu-nvlink": "unjudged",
        "dual-gpu-pcie": "unjudged",
        "lambda-4xh100": "pass",
    }
    reasons = {(c["host"], c["check_id"]): c["reason"] for c in results(out)["checks"]}
    # each judged on the floor of its large-message plateau (rows within 10 % of the best)
    assert reasons[("lambda-4xh100", "nccl-tests.all_reduce.busbw")].startswith("339.8 GB/s = 76 %")
    assert reasons[("dgx-8xa100", "nccl-tests.all_reduce.busbw")].startswith("222.7 GB/s = 74 %")


def _host_status(document: dict[str, Any]) -> dict[str, dict[str, str]]:
    hosts: dict[str, dict[str, str]] = {}
    for check in document["checks"]:
        current = hosts.setdefault(check["host"], {"status": "pass"})
        if STATUS_ORDER.index(check["status"]) < STATUS_ORDER.index(current["status"]):
            current["status"] = check["status"]
    hosts.pop("cluster", None)
    return hosts


def test_results_json_validates_against_its_schema(sample_report: tuple[int, Path]) -> None:
    validate(results(sample_report[1]), "results")


def test_same_raw_folder_gives_the_same_results(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    shutil.copytree(SAMPLE, first)
    shutil.copytree(SAMPLE, second)
    main(["report", str(first), "--quiet"])
    main(["report", str(second), "--quiet"])
    documents = [results(first), results(second)]
    for document in documents:
        document.pop("generated_at")
    assert documents[0] == documents[1]
    assert (first / "measurements.csv").read_bytes() == (second / "measurements.csv").read_bytes()


def test_host_facts_and_measurements_of_the_sample(sample_report: tuple[int, Path]) -> None:
    out = sample_report[1]
    hosts = {h["name"]: h for h in results(out)["hosts"]}
    lam = hosts["lambda-4xh100"]
    assert (lam["gpu_model"], lam["gpu_count"], lam["gpu_name"]) == (
        "H100 SXM",
        4,
        "NVIDIA H100 80GB HBM3",
    )
    assert (lam["driver_version"], lam["cuda_version"], lam["nccl_version"]) == (
        "570.148.08",
        "12.8",
        "2.26.2",
    )
    assert (hosts["dgx-8xa100"]["gpu_model"], hosts["dgx-8xa100"]["gpu_count"]) == ("A100 SXM", 8)
    assert hosts["dual-gpu-pcie"]["gpu_model"] is None
    table = pd.read_csv(out / "measurements.csv")
    nccl = table[(table.host == "lambda-4xh100") & (table.tool == "nccl-tests")]
    assert len(nccl) == 56 and set(nccl.placement) == {"out_of_place", "in_place"}
    top = nccl[(nccl.size_bytes == 1 << 30) & (nccl.placement == "out_of_place")]
    assert top.busbw_gbps.tolist() == [355.89] and top.wrong.tolist() == [0]
    cells = table[
        (table.host == "dgx-8xh100") & (table.metric == "bandwidth_unidirectional_p2p_enabled")
    ]
    assert len(cells) == 64
    assert cells[(cells.src == 2) & (cells.dst == 0)].value.tolist() == [363.43]


def test_run_folder_without_run_json_still_gets_every_report_file(tmp_path: Path) -> None:
    """Raw outputs copied by hand (no playbook, so no run.json) are a run folder too."""
    run = tmp_path / "run"
    shutil.copytree(SAMPLE / "raw", run / "raw")
    assert main(["report", str(run), "--quiet"]) == 1
    for name in ("results.json", "measurements.csv", "report.html", "summary.json", "junit.xml"):
        assert (run / name).is_file(), name


VERSIONS = Path(__file__).parents[1] / "data" / "outputs" / "software-versions"


def test_preflight_probes_fill_host_facts_and_context_files_stay_quiet(tmp_path: Path) -> None:
    run = lambda_run(tmp_path / "run")
    for name, tool in (
        ("nvcc-version", "nvcc-version"),
        ("mpirun-version", "mpirun-version"),
        ("os-release", "os-release"),
    ):
        source = next(VERSIONS.glob(f"{name.split('-')[0]}*"))
        step(run, "h1", name, source.read_text(), tool, phase="preflight")
    step(run, "h1", "lspci-nvidia", "0000:06:00.0 0302: 10de:2330 (rev a1)\n", "context")
    assert main(["report", str(run), "--quiet"]) == 0
    document = results(run)
    (host,) = document["hosts"]
    assert (host["mpi_version"], host["cuda_toolkit_version"]) == ("Open MPI 4.1.4", "13.0.88")
    assert host["nccl_version"] == "2.26.2"  # the benchmark's own NCCL_DEBUG line comes first
    assert not [d for d in document["diagnostics"] if "lspci-nvidia" in str(d["source"])]


def test_mixed_mpi_versions_across_hosts_fail(tmp_path: Path) -> None:
    run = lambda_run(tmp_path / "run", hosts=["h1", "h2"], expected={"h1": [], "h2": []})
    step(run, "h1", "mpirun-version", "mpirun (Open MPI) 4.1.4\n", "mpirun-version")
    step(run, "h2", "mpirun-version", "mpirun (Open MPI) 5.0.3\n", "mpirun-version")
    assert main(["report", str(run), "--quiet"]) == 1
    check = checks_by_id(run)["consistency.mpi_version"]
    assert check["status"] == "fail"
    assert check["reason"] == (
        "mixed MPI versions across hosts: Open MPI 4.1.4 on h1; Open MPI 5.0.3 on h2"
    )


# ------------------------------------ without run.json, nothing says which hosts were expected


def test_a_missing_host_cannot_hide_by_a_missing_run_json(tmp_path: Path) -> None:
    listed = lambda_run(tmp_path / "listed", hosts=["h1", "h2"])  # h2 left nothing
    assert main(["report", str(listed), "--quiet"]) == 1
    assert checks_by_id(listed)["host.reachable"]["host"] == "h2"
    unlisted = tmp_path / "unlisted"
    shutil.copytree(listed / "raw", unlisted / "raw")
    assert main(["report", str(unlisted), "--quiet"]) == 3
    assert results(unlisted)["verdict"] == "unjudged"  # never warn, never a pass
    assert checks_by_id(unlisted)["run.hosts"]["status"] == "unjudged"


def test_a_healthy_folder_without_run_json_is_at_best_unjudged(tmp_path: Path) -> None:
    run = lambda_run(tmp_path)
    assert main(["report", str(run), "--quiet"]) == 0
    (run / "run.json").unlink()
    assert main(["report", str(run), "--quiet"]) == 3
    assert results(run)["verdict"] == "unjudged"
    statuses = {c["status"] for c in results(run)["checks"] if c["check_id"] != "run.hosts"}
    assert statuses == {"pass"}  # everything measured passed: only the contract is missing


# ---------------------------------------------------------- exit status: unjudged is no pass

VERDICTS = Path(__file__).parents[1] / "data" / "verdicts"
CASE_OF_VERDICT = {
    "pass": "pairs-iperf3-2hosts-healthy",
    "warn": "run-json-without-expected",
    "unjudged": "topology-unknown-gpu-model",
    "fail": "nccl-out-of-bounds-failed",
    "error": "run-json-hosts-not-a-list",
}
# --fail-on (None: the default) -> the exit status of each verdict
EXIT_STATUS = {
    None: {"pass": 0, "warn": 0, "unjudged": 3, "fail": 1, "error": 2},
    "unjudged": {"pass": 0, "warn": 0, "unjudged": 3, "fail": 1, "error": 2},
    "fail": {"pass": 0, "warn": 0, "unjudged": 0, "fail": 1, "error": 2},
    "warn": {"pass": 0, "warn": 1, "unjudged": 3, "fail": 1, "error": 2},
}


@pytest.mark.parametrize("fail_on", list(EXIT_STATUS))
@pytest.mark.parametrize("verdict", list(CASE_OF_VERDICT))
def test_exit_status_of_each_verdict(tmp_path: Path, verdict: str, fail_on: str | None) -> None:
    option = ["--fail-on", fail_on] if fail_on else []
    case = VERDICTS / CASE_OF_VERDICT[verdict]
    code = main(["report", str(case), "--quiet", "--out", str(tmp_path / "out"), *option])
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["verdict"] == verdict
    assert code == EXIT_STATUS[fail_on][verdict]
