"""What the controller plugins ask of gpuval: preflight facts from real probe outputs, the
cross-host version rule, the capture module's name, the report and the pair judgement."""

from __future__ import annotations

import dataclasses
import json
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpuval import plugin_api
from gpuval.parsers import PARSER_MODULES
from gpuval.plan import steps

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "tests" / "data" / "device" / "h100-x1-2026-11-22"


def probe(name: str, output: str, rc: int | None = 0, **more: object) -> dict[str, object]:
    return {"name": name, "rc": rc, "output": output, "skipped_reason": None, **more}


def test_facts_of_a_real_h100_node() -> None:
    """Recorded on a lent 1x H100 SXM (driver 580.159.04, CUDA 13.0, compute capability 9.0)."""
    results = [
        probe("nvidia-smi-query-gpu", (H100 / "nvidia-smi-query-gpu.csv").read_text()),
        probe("nvidia-smi", (H100 / "nvidia-smi.txt").read_text()),
        probe("nvcc-version", (H100 / "nvcc-version.txt").read_text()),
        probe("lspci-nvidia", "0000:00:06.0 0302: 10de:2330 (rev a1)\n"),
        probe("mpirun-version", "mpirun (Open MPI) 4.1.4\n\nReport bugs to ...\n"),
    ]
    facts = plugin_api.preflight_facts(results, 120)
    assert facts == {
        "preflight_has_gpu": True,
        "preflight_gpu_count": 1,
        "preflight_gpu_names": ["NVIDIA H100 80GB HBM3"],
        "preflight_compute_capabilities": ["9.0"],
        "preflight_nvcc_gencode": "-gencode=arch=compute_90,code=sm_90",
        "preflight_driver_version": "580.159.04",
        "preflight_cuda_version": "13.0",
        "preflight_nccl_version": None,
        "preflight_mpi_version": "Open MPI 4.1.4",
        "preflight_smi_error": None,
        "preflight_pci_gpu_count": 1,
        "preflight_rdma_hcas": [],
    }
    assert plugin_api.host_problems(facts, expected_gpus=1) == []
    assert plugin_api.host_problems(facts, expected_gpus=8) == [
        "expected 8 GPUs, nvidia-smi lists 1"
    ]


def test_a_node_without_gpu_has_no_problem_but_a_lost_gpu_is_one() -> None:
    skipped = {"name": "nvidia-smi-query-gpu", "rc": None, "skipped_reason": "not found"}
    facts = plugin_api.preflight_facts([skipped], 120)
    assert facts["preflight_has_gpu"] is False and facts["preflight_gpu_count"] == 0
    assert plugin_api.host_problems(facts, 0) == []
    lost = probe(
        "nvidia-smi-query-gpu",
        "Unable to determine the device handle for GPU0000:41:00.0: Unknown Error\n",
        rc=15,
    )
    pci = probe("lspci-nvidia", "0000:41:00.0 0302: 10de:2330\n0000:42:00.0 0302: 10de:2330\n")
    facts = plugin_api.preflight_facts([lost, pci], 120)
    problems = plugin_api.host_problems(facts, 0)
    assert problems[0].startswith("nvidia-smi failed (exit 15): Unable to determine the device")
    assert problems[1].startswith("2 NVIDIA GPUs on the PCI bus but nvidia-smi lists 0")
    timed_out = probe("nvidia-smi-query-gpu", "", rc=None, timed_out=True)
    assert plugin_api.preflight_facts([timed_out], 30)["preflight_smi_error"] == (
        "nvidia-smi timed out after 30 s"
    )


def test_rdma_hcas_are_the_infiniband_adapters_else_every_roce_one_in_natural_order() -> None:
    infiniband = REPO / "tests" / "data" / "outputs" / "infiniband"
    roce = (infiniband / "l2fwd-nv-issue6-ibstat-2xCX6-ethernet.txt").read_text()
    facts = plugin_api.preflight_facts([probe("ibstat", roce)], 1)
    assert facts["preflight_rdma_hcas"] == ["mlx5_0", "mlx5_1"]
    devinfo = (infiniband / "deepep-issue55-ibv_devinfo-infiniband-excerpt.txt").read_text()
    facts = plugin_api.preflight_facts([probe("ibstat", ""), probe("ibv_devinfo", devinfo)], 1)
    # The excerpt ends before mlx5_4's ports: an adapter without a port is no rail.
    assert facts["preflight_rdma_hcas"] == ["mlx5_3"]


def test_mixed_versions_across_hosts() -> None:
    facts = {
        "a": {"preflight_driver_version": "570.148.08", "preflight_nccl_version": "2.26.2"},
        "b": {"preflight_driver_version": "570.148.08", "preflight_nccl_version": "2.27.3"},
        "c": {"preflight_driver_version": None, "preflight_nccl_version": "2.26.2"},
    }
    assert plugin_api.version_problems(facts) == [
        "mixed NCCL versions across hosts (NCCL hangs or fails between versions): "
        '{"a": "2.26.2", "b": "2.27.3", "c": "2.26.2"}'
    ]


def test_probes_follow_the_registry_and_the_nccl_script_reads_headers(tmp_path: Path) -> None:
    probes = plugin_api.preflight_probes("/cuda", "/nccl", ["/usr/local/cuda/bin"], ["/h.h"])
    assert [p["name"] for p in probes] == list(steps.PREFLIGHT_STEPS)
    nvcc = next(p for p in probes if p["name"] == "nvcc-version")
    assert nvcc["search"] == ["/cuda/bin/nvcc", "/usr/local/cuda/bin/nvcc"]
    header = tmp_path / "nccl.h"
    header.write_text("#define NCCL_MAJOR 2\n#define NCCL_MINOR 26\n#define NCCL_PATCH 2\n")
    script = plugin_api.nccl_version_script([str(header)])
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=True)
    facts = plugin_api.preflight_facts([probe("nccl-version", out.stdout)], 1)
    assert facts["preflight_nccl_version"] == "2.26.2"


def test_capture_module_name_follows_the_action() -> None:
    assert plugin_api.capture_module("gpuval_mpirun") == "gpuval_capture"
    assert plugin_api.capture_module("ansible.legacy.gpuval_mpirun") == "gpuval_capture"
    assert plugin_api.capture_module(None) == "gpuval_capture"
    assert plugin_api.capture_module("gpuval.cluster.gpuval_mpirun") == (
        "gpuval.cluster.gpuval_capture"
    )
    assert plugin_api.sibling_module("gpuval_collect", "gpuval_pack") == "gpuval_pack"
    assert plugin_api.sibling_module("gpuval.cluster.gpuval_collect", "gpuval_pack") == (
        "gpuval.cluster.gpuval_pack"
    )


def test_render_report_keeps_gpuval_quiet_and_gives_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "data" / "sample-run", run)
    rendered = plugin_api.render_report(run)
    assert (rendered.verdict, rendered.rc) == ("fail", 1)  # the bundled sample run fails
    assert rendered.summary is not None and rendered.summary["verdict"] == "fail"
    assert any(line.startswith("verdict: FAIL") for line in rendered.lines)
    assert capsys.readouterr() == ("", "")
    assert plugin_api.render_report(tmp_path / "missing").verdict == "error"


def test_judge_pairs_of_an_empty_run_plans_nothing_to_repeat(tmp_path: Path) -> None:
    (tmp_path / "raw").mkdir()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "t", "hosts": ["a", "b"]}))
    group_steps = {"a": "allnodes-allreduce", "b": "allnodes-allreduce-g2"}
    progress = plugin_api.judge_pairs(tmp_path, ["iperf3"], group_steps=group_steps)
    assert progress.latest == [] and progress.used_rounds == 0
    assert progress.mpi_preflight["found"] is False
    assert progress.groups == {
        "a": {"status": "missing", "reason": "no allnodes-allreduce output from a"},
        "b": {"status": "missing", "reason": "no allnodes-allreduce-g2 output from b"},
    }


def test_declared_hardware_takes_the_variables_that_are_set_in_the_schemas_types() -> None:
    declared = plugin_api.declared_hardware({
        "gpuval_gpu_model": "H100 SXM", "gpuval_gpus_per_node": "8", "gpuval_system": None,
        "gpuval_nic_count": 8, "gpuval_nic_rate_gbit": "400", "gpuval_ib_hcas": "mlx5_0, mlx5_1",
        "gpuval_network_interface": "", "unrelated": 1,
    })  # fmt: skip
    assert declared == {
        "gpu_model": "H100 SXM", "gpus_per_node": 8, "nic_count": 8, "nic_rate_gbit": 400.0,
        "ib_hcas": ["mlx5_0", "mlx5_1"],
    }  # fmt: skip
    # 0 GPUs per node is the inventories' "do not check", not a declaration of none
    assert plugin_api.declared_hardware({"gpuval_gpus_per_node": 0}) == {}
    assert plugin_api.declared_hardware({"gpuval_ib_hcas": ["mlx5_0"]}) == {"ib_hcas": ["mlx5_0"]}


def test_declared_hardware_takes_the_nvlink_domain_of_a_tray() -> None:
    declared = plugin_api.declared_hardware({"gpuval_nvl_domain": "rack-a01",
                                             "gpuval_nvl_domain_nodes": "18"})  # fmt: skip
    assert declared == {"nvl_domain": "rack-a01", "nvl_domain_nodes": 18}
    # 0 trays is "the run's nodes that name the rack", not a rack of none
    assert plugin_api.declared_hardware({"gpuval_nvl_domain_nodes": 0}) == {}


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"gpuval_gpus_per_node": "eight"}, "gpuval_gpus_per_node: 'eight' is not a whole number"),
        ({"gpuval_nic_count": 2.5}, "gpuval_nic_count: 2.5 is not a whole number"),
        ({"gpuval_nic_rate_gbit": -1}, "gpuval_nic_rate_gbit: -1 must not be negative"),
    ],
)
def test_declared_hardware_names_a_bad_variable(variables: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plugin_api.declared_hardware(variables)


UNKNOWN_GPU_MODEL = REPO / "tests" / "data" / "verdicts" / "topology-unknown-gpu-model"


def test_the_report_gate_fails_closed_on_an_unjudged_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(UNKNOWN_GPU_MODEL, run)
    rendered = plugin_api.render_report(run)
    assert (rendered.verdict, rendered.rc) == ("unjudged", 3)  # never a pass for the play
    assert plugin_api.render_report(run, fail_on="fail").rc == 0  # relaxed on request


def test_every_gate_fails_closed_by_default() -> None:
    """gpuval report and run, the report action and the report role all default to
    --fail-on unjudged."""
    from gpuval.cli import build_parser
    from gpuval.run.launch import RunRequest

    parser = build_parser()
    for command in (["report", "r"], ["run"]):
        assert parser.parse_args(command).fail_on == "unjudged"
    assert {f.name: f.default for f in dataclasses.fields(RunRequest)}["fail_on"] == "unjudged"
    action = runpy.run_path(str(REPO / "plugins" / "action" / "gpuval_report.py"))
    documented = yaml.safe_load(action["DOCUMENTATION"])["options"]["fail_on"]["default"]
    assert action["ARGUMENT_SPEC"]["fail_on"]["default"] == documented == "unjudged"
    role = REPO / "roles" / "report"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    specified = specs["argument_specs"]["main"]["options"]["report_fail_on"]["default"]
    assert defaults["report_fail_on"] == specified == "unjudged"


# Lambda rental runs once a run, in the controller process: nothing to gain from the preload.
ONCE_A_RUN = ("gpuval.cloud",)


def test_the_preload_callback_imports_what_every_action_plugin_imports() -> None:
    """Run in a fresh interpreter, as ansible-playbook's main process loads the callback: after
    it, a forked worker imports none of what the action plugins import (nor a parser)."""
    wanted = {
        name
        for path in (REPO / "plugins" / "action").glob("*.py")
        for name in re.findall(r"from (gpuval[\w.]*) import", path.read_text())
        if not name.startswith(ONCE_A_RUN)
    }
    assert "gpuval.files.node_archive" in wanted  # the collect's, after every phase and round
    script = (
        "import json, runpy, sys\n"
        f"callback = runpy.run_path({str(REPO / 'plugins/callback/gpuval_preload.py')!r})\n"
        "callback['CallbackModule']()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert wanted - loaded == set()
    assert "gpuval.runfolder" in loaded  # the collect's read-ahead (gpuval.plugin_api)
    assert {f"gpuval.parsers.{name}" for name in PARSER_MODULES} <= loaded


def test_a_gpuval_that_cannot_be_imported_in_part_does_not_stop_the_run_from_starting() -> None:
    """The preload is only a saving: a missing part (here the parsers) is left to the action
    plugins that need it, which say so when they run."""
    script = (
        "import runpy, sys\n"
        "sys.modules['gpuval.parsers'] = None  # import gpuval.parsers raises ImportError\n"
        f"callback = runpy.run_path({str(REPO / 'plugins/callback/gpuval_preload.py')!r})\n"
        "callback['CallbackModule']()\n"
        "print('started')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "started\n"), done.stderr
