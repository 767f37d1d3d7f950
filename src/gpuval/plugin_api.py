"""What the Ansible controller plugins (plugins/action/) ask of gpuval while a run goes on.

The plugins run inside ansible-playbook's own process and import this module directly. It is
the only module of the Ansible side that reaches into the judge (the run folder reader, the
pair analysis, the thresholds, the report pipeline), so a move of those is fixed here:
- `judge_pairs`: the latest try of every pair measurement gathered so far, as the report would
  judge it, with the MPI preflight's and the group (all-nodes) tests' outcomes (between pair
  rounds);
- `render_report`: `gpuval report` on a run folder, its verdict and what it printed;
- `preflight_facts` / `version_problems`: the facts later roles need, read from preflight
  probe outputs by gpuval's parsers, and the cross-host version rule;
- `capture_module` / `sibling_module`: the name of a node-side module (capture, pack) beside a
  running action, and `capture_on_node`: one gpuval_capture call of an action's steps;
- `collect_packed` / `read_ahead`: what a node packed, into the controller's raw/<host>/, and
  parsed ahead into the run's parse cache;
- `add_inventory_hosts`: the hosts an inventory plugin (slurm, lambda_cloud) found, into the
  inventory;
- `preload`: what the action plugins import, imported once in ansible-playbook's main process.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from gpuval.plan import steps
from gpuval.plan.pair_rounds import LatestTry

CAPTURE_MODULE = "gpuval_capture"
# The verdict when nothing was judged (bad input), from gpuval report's exit code
# (pipeline.EXIT_CODES read backwards).
VERDICT_OF_EXIT_CODE = {1: "fail", 2: "error", 3: "unjudged"}
# What the action plugins import where they run: in a worker that ansible-playbook forks for
# every task and host, which imported them anew each time (the parsers alone, for the collect
# after every pair round, cost a third of a CPU second a host). Imported once in the main
# process, before it forks, every worker has them already.
ACTION_IMPORTS = (
    "gpuval.checks.pairs", "gpuval.checks.thresholds", "gpuval.evidence", "gpuval.files.atomic",
    "gpuval.files.node_archive", "gpuval.nodebench", "gpuval.plan.group_testing",
    "gpuval.plan.health_probes", "gpuval.plan.mpirun", "gpuval.plan.pair_plan",
    "gpuval.plan.phase_tags", "gpuval.plan.plan_text", "gpuval.plan.stage_costs",
    "gpuval.runfolder", "gpuval.slurm.allocation", "gpuval.slurm.nodes", "gpuval.slurm.scontrol",
)  # fmt: skip


def preload() -> None:
    """Import ACTION_IMPORTS and every parser (the collect reads each new file ahead)."""
    for name in ACTION_IMPORTS:
        importlib.import_module(name)
    from gpuval.parsers import parser_modules

    parser_modules()


def capture_module(resolved_action: str | None) -> str:
    """gpuval_capture from the same place as the running action."""
    return sibling_module(resolved_action, CAPTURE_MODULE)


def capture_on_node(
    execute_module: Callable[..., dict[str, Any]],
    resolved_action: str | None,
    task_vars: dict[str, Any] | None,
    options: Mapping[str, Any],
    phase: str,
    probes: list[dict[str, Any]],
) -> dict[str, Any]:
    """Run `probes` on the node in one gpuval_capture call, with the running action's own
    `dest`, `host` and `timeout` options: `execute_module` is the action's `_execute_module`,
    `resolved_action` its task's `resolved_action` (which says where gpuval_capture is)."""
    return execute_module(
        module_name=capture_module(resolved_action),
        module_args={
            "dest": options["dest"],
            "host": options["host"],
            "phase": phase,
            "timeout": options["timeout"],
            "steps": probes,
        },
        task_vars=task_vars,
    )


def sibling_module(resolved_action: str | None, module: str) -> str:
    """A node-side module of gpuval from the same place as the running action: the
    collection's FQCN when the action came from a collection (gpuval.cluster.gpuval_mpirun),
    else the short name that ansible.cfg's library path resolves."""
    parts = (resolved_action or "").split(".")
    if len(parts) == 3 and parts[0] != "ansible":
        return f"{parts[0]}.{parts[1]}.{module}"
    return module


def collect_packed(packed: Mapping[str, Any], node_dir: str, dest: Path) -> dict[str, Any]:
    """What a node packed, into the controller's raw/<host>/ (`dest`), read ahead for the
    report: a collect's return values (gpuval.files.node_archive.collected)."""
    from gpuval.files.node_archive import collected

    return collected(packed, node_dir, dest, read_ahead)


def read_ahead(dest: Path) -> list[str]:
    """Parse what just arrived in raw/<host>/ into the run's parse cache, so that `gpuval report`
    finds it read; warnings (never a failure: the report reads what the cache lacks)."""
    from gpuval.runfolder import RAW_DIR, update_parse_cache

    if dest.parent.name != RAW_DIR:
        return []
    try:
        update_parse_cache(dest.parent.parent, dest.name)
    except Exception as problem:  # a slower report, never a lost collect
        return [f"{dest}: not read ahead for the report ({type(problem).__name__}: {problem})"]
    return []


# ------------------------------------------------------------------ inventory plugins


def add_inventory_hosts(plugin: Any, hosts: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """Put each (host name, its variables) into an inventory plugin's group (its `group`
    option) with those variables, then apply its `constructed` options (compose, groups,
    keyed_groups) to them, as every inventory plugin of gpuval (slurm, lambda_cloud) does."""
    group = plugin.get_option("group")
    strict = plugin.get_option("strict")
    plugin.inventory.add_group(group)
    for host, variables in hosts:
        plugin.inventory.add_host(host, group=group)
        for name, value in variables.items():
            plugin.inventory.set_variable(host, name, value)
        plugin._set_composite_vars(plugin.get_option("compose"), variables, host, strict)
        plugin._add_host_to_composed_groups(plugin.get_option("groups"), variables, host, strict)
        plugin._add_host_to_keyed_groups(plugin.get_option("keyed_groups"), variables, host, strict)


# ------------------------------------------------------------------ pair tests between rounds


@dataclass
class PairProgress:
    """The pair tests of a run folder as judged so far."""

    latest: list[LatestTry]
    mpi_preflight: dict[str, Any]
    used_rounds: int
    details: list[dict[str, Any]] = field(default_factory=list)
    # Group tests (staged mode), by their first node: status pass/fail/missing/unjudged (correct,
    # no bound to judge its bandwidth: not a pass) and why.
    groups: dict[str, dict[str, str]] = field(default_factory=dict)


def _latest_tries(analysis: Any, rounds: Sequence[int] | None) -> list[dict[str, Any]]:
    found = []
    for verdict in analysis.pairs:
        for measurement in verdict.measurements:
            tries = [t for t in measurement.tries if not rounds or t.round in rounds]
            if not tries:
                continue
            last = max(tries, key=lambda t: t.attempt)
            status = (
                "wrong" if last.outcome == "wrong"
                else "failed" if last.value is None
                else "low" if last.low
                else "ok"
            )  # fmt: skip
            found.append({
                "kind": last.kind, "a": last.a, "b": last.b, "src": last.src, "dst": last.dst,
                "round": last.round, "attempt": last.attempt, "status": status,
                "value": last.value, "unit": last.unit, "reason": last.reason,
            })  # fmt: skip
    return found


# The preflight's outcome where there is none to judge (see _mpi_preflight_outcome).
NO_MPI_PREFLIGHT: dict[str, Any] = {
    "found": False, "ok": None, "retry": False, "failed_hosts": [], "reason": "",
}  # fmt: skip


def _mpi_preflight_outcome(files: Sequence[Any], run_dir: Path) -> dict[str, Any]:
    """The preflight as judged so far: `retry` when its only try failed (the role runs it once
    more before any host is failed on it), `failed_hosts` the hosts it fails."""
    from gpuval.checks.mpi_preflight import mpi_preflight_checks
    from gpuval.evidence import mpi_preflight_tries, parsed_files

    tries = mpi_preflight_tries(parsed_files(files, run_dir))
    checks = mpi_preflight_checks(tries)
    summary = [c for c in checks if c.check_id == "mpi-preflight"]
    if not summary:
        return dict(NO_MPI_PREFLIGHT)
    return {
        "found": True,
        "ok": all(c.status != "fail" for c in summary),
        "retry": any(preflight.retry_due for preflight in tries),
        "failed_hosts": sorted({
            c.host for c in checks if c.check_id == "mpi-preflight.host" and c.status == "fail"
        }),
        "reason": "; ".join(c.reason for c in summary),
    }  # fmt: skip


def _all_nodes_outcome(
    files: Sequence[Any], host: str, run_dir: Path, name: str, evidence: Any, thresholds: Any
) -> dict[str, str]:
    """A group test as the screen judges it: it passes only when it reduced correctly and its
    busbw is within the pair judge's pass band of the bound of the group's slowest link. The
    screen is a filter: a false failure costs one bisection round (the suspects then meet two
    partners), a missed slow node a wrong verdict; so a low (warn) busbw fails it, and a busbw
    with no bound to judge it against leaves it unjudged, which the search does not pass."""
    from gpuval.checks.cluster import allnodes_bench_checks
    from gpuval.evidence import all_nodes_runs, parsed_files

    mine = [f for f in files if f.host == host and f.step == name]
    if not mine:
        return {"status": "missing", "reason": f"no {name} output from {host}"}
    sidecar = mine[0].sidecar
    if sidecar is not None and (sidecar.skipped or sidecar.timed_out or sidecar.exit_code != 0):
        why = sidecar.skipped or (
            "timed out" if sidecar.timed_out else f"exit status {sidecar.exit_code}"
        )
        return {"status": "fail", "reason": f"{name} on {host}: {why}"}
    checks, _ = allnodes_bench_checks(all_nodes_runs(parsed_files(mine, run_dir)), evidence,
                                      thresholds)  # fmt: skip
    if not checks:
        return {"status": "fail", "reason": f"{name} on {host}: no result in its output"}
    failing = [c for c in checks if c.status in ("fail", "warn")]
    if failing:
        return {"status": "fail", "reason": "; ".join(c.reason for c in failing)}
    bandwidth = [c for c in checks if c.category == "bandwidth"]
    if not bandwidth or any(c.status == "unjudged" for c in bandwidth):
        why = bandwidth[0].reason if bandwidth else f"{name} on {host}: no busbw measured"
        return {"status": "unjudged", "reason": (
            f"correct, but unjudged on bandwidth ({why}); not passed: the search goes on "
            "splitting this group"
        )}  # fmt: skip
    return {"status": "pass", "reason": "; ".join(c.reason for c in checks)}


def judge_pairs(
    run_dir: Path,
    kinds: Sequence[str],
    thresholds_file: Path | None = None,
    rounds: Sequence[int] | None = None,
    group_steps: Mapping[str, str] | None = None,
) -> PairProgress:
    """Judge the pair tries in the controller's run folder, as the report will (same
    thresholds file, same expected steps); `rounds` limits the judgement to those rounds;
    `group_steps`: the all-nodes test steps of staged mode's group tests, by first node."""
    from gpuval.checks.pairs import PairThresholds, analyse_pairs
    from gpuval.checks.thresholds import load_thresholds
    from gpuval.evidence import build_evidence, pair_evidence
    from gpuval.runfolder import read_run_folder

    folder = read_run_folder(run_dir, cached=True)
    suite = load_thresholds(thresholds_file)
    analysis = analyse_pairs(
        pair_evidence(folder),
        PairThresholds.from_thresholds(suite),
    )
    details = [t for t in _latest_tries(analysis, rounds) if t["kind"] in kinds]
    latest: list[LatestTry] = [
        {k: t[k] for k in ("kind", "a", "b", "round", "attempt", "status")}  # type: ignore[misc]
        for t in details
    ]
    # The group tests are judged against the nodes' network, so they need every host's
    # evidence (the pair tries alone do not).
    evidence = build_evidence(folder) if group_steps else None
    return PairProgress(
        latest=latest,
        mpi_preflight=_mpi_preflight_outcome(folder.files, run_dir),
        used_rounds=max((t.round for t in analysis.tries), default=0),
        details=details,
        groups={
            host: _all_nodes_outcome(folder.files, host, run_dir, name, evidence, suite)
            for host, name in (group_steps or {}).items()
        },
    )


def plan_rack_search(
    run_dir: Path, thresholds_file: Path | None = None, partners: int | None = None
) -> dict[str, Any]:
    """The next stage of every failing NVL72 rack's search, replayed from the controller's run
    folder as the report will (gpuval.checks.rack_search.next_stage): rounds of runs, the
    stages left, one line per rack."""
    from gpuval.checks.context import JudgeState
    from gpuval.checks.rack_search import SEARCHED, next_stage
    from gpuval.checks.thresholds import load_thresholds
    from gpuval.evidence import build_evidence
    from gpuval.plan.confirmation import MIN_PARTNERS
    from gpuval.runfolder import read_run_folder

    evidence = build_evidence(read_run_folder(run_dir))
    judge = JudgeState(evidence, load_thresholds(thresholds_file))
    return next_stage(evidence, judge, SEARCHED, partners or MIN_PARTNERS)


# ------------------------------------------------------------------ the report


@dataclass
class Rendered:
    rc: int
    verdict: str
    lines: list[str]
    # summary.json's verdict, counts and failing checks; None when nothing was judged
    summary: dict[str, Any] | None


class _Lines(logging.Handler):
    """Keeps the report's messages as lines (Ansible's stdout and stderr are not gpuval's)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines += self.format(record).splitlines()


def render_report(
    run_dir: Path, thresholds_file: Path | None = None, fail_on: str = "unjudged"
) -> Rendered:
    """`gpuval report RUN_DIR --fail-on FAIL_ON`: its exit code, verdict and what it said."""
    from gpuval.checks.model import STATUSES, Status
    from gpuval.pipeline import messages_to, report
    from gpuval.report.summary import check_entry, sort_checks, status_counts

    if fail_on not in STATUSES:
        raise ValueError(f"fail_on {fail_on!r} is not a verdict")

    said = _Lines()
    with messages_to(said):
        reported = report(run_dir, thresholds_file=thresholds_file, fail_on=cast("Status", fail_on))
    judgement = reported.judgement
    if judgement is None:
        return Rendered(reported.exit_code, VERDICT_OF_EXIT_CODE.get(reported.exit_code, "error"),
                        said.lines, None)  # fmt: skip
    checks = sort_checks(judgement.checks)
    summary = {
        "verdict": judgement.verdict,
        "counts": status_counts(checks),
        "failing_checks": [check_entry(c) for c in checks if c.status in ("error", "fail")],
    }
    return Rendered(reported.exit_code, judgement.verdict, said.lines, summary)


# ------------------------------------------------------------------ preflight

# lspci -n lines of NVIDIA display (0300) and 3D (0302) controllers.
_PCI_GPU = re.compile(r"^\S+ 030[02]:", re.MULTILINE)


def preflight_probes(
    cuda_home: str | None, nccl_home: str | None, nvcc_dirs: Sequence[str], headers: Sequence[str]
) -> list[dict[str, Any]]:
    """The preflight probes as the capture module runs them: nvcc searched in the toolkit in
    use first, NCCL's version read from the header of the NCCL in use first."""
    nvcc = [f"{d}/nvcc" for d in ([f"{cuda_home}/bin"] if cuda_home else []) + list(nvcc_dirs)]
    probes = []
    for probe in steps.PREFLIGHT_PROBES:
        command: Any = list(probe.command) if isinstance(probe.command, tuple) else probe.command
        entry: dict[str, Any] = {
            "name": probe.name,
            "command": command,
            "tool": probe.tool,
            "raw_ext": probe.raw_ext,
            "return_output": probe.facts,
        }
        if probe.name == "nccl-version":
            entry["command"] = nccl_version_script(
                ([f"{nccl_home}/include/nccl.h"] if nccl_home else []) + list(headers)
            )
        if isinstance(command, list):
            entry["search"] = nvcc if probe.name == "nvcc-version" else []
            if probe.gpu:
                entry["skip_note"] = ": no NVIDIA driver, GPU phases skipped"
        probes.append(entry)
    return probes


def nccl_version_script(headers: Sequence[str]) -> str:
    """Where NCCL is and which version: header defines first (exact), then the library file
    names, then a Python wheel (gpuval.parsers.software_versions reads this output)."""
    import shlex

    listed = " ".join(shlex.quote(h) for h in dict.fromkeys(headers))
    return "\n".join([
        f"for header in {listed}; do",
        '  if [ -r "$header" ]; then',
        '    echo "header: $header"',
        "    grep -E '^#define NCCL_(MAJOR|MINOR|PATCH|SUFFIX|VERSION_CODE)\\b' \"$header\"",
        "  fi",
        "done",
        "PATH=\"$PATH:/sbin:/usr/sbin\" ldconfig -p 2>/dev/null | grep -E 'libnccl\\.so' |"
        " while read -r _ _ _ path; do",
        '  echo "library: $path -> $(readlink -f "$path")"',
        "done",
        "python3 - <<'PY' 2>/dev/null",
        "import importlib.util",
        'spec = importlib.util.find_spec("nvidia.nccl")',
        "for location in (spec.submodule_search_locations or []) if spec else []:",
        '    print("python wheel: " + location)',
        "PY",
        "true",
    ])  # fmt: skip


def _version(text: str, tool: str) -> tuple[str | None, str | None]:
    from gpuval.parsers import parse_text

    result = parse_text(text, tool=tool) if text.strip() else None
    for run in result.runs if result else []:
        version = getattr(run, "version", None)
        return (str(version) if version else None), getattr(run, "implementation", None)
    return None, None


def _gpus(csv_text: str) -> list[Any]:
    from gpuval.parsers import parse_text

    result = parse_text(csv_text, tool="nvidia-smi-csv") if csv_text.strip() else None
    return [gpu for run in (result.runs if result else []) for gpu in getattr(run, "gpus", [])]


def _rdma_hcas(ibstat: str, ibv_devinfo: str) -> list[str]:
    """The node's HCAs in rail order (gpuval.evidence.model.rail_order), from ibstat, else
    ibv_devinfo (the same adapters)."""
    from gpuval.evidence.model import rail_order
    from gpuval.parsers import parse_text

    for text, tool in ((ibstat, "ibstat"), (ibv_devinfo, "ibv_devinfo")):
        result = parse_text(text, tool=tool) if text.strip() else None
        ports = [
            (device.name, port.link_layer)
            for run in (result.runs if result else [])
            for device in getattr(run, "devices", [])
            for port in device.ports
        ]
        if ports:
            return rail_order(ports)
    return []


def _smi_failure(result: Mapping[str, Any], output: str, timeout_s: float) -> str | None:
    """Why nvidia-smi's query failed, in one line; None when it ran fine or was skipped."""
    if result.get("skipped_reason") or result.get("rc") == 0:
        return None
    if result.get("timed_out"):
        return f"nvidia-smi timed out after {timeout_s:g} s"
    lines = [
        line.strip()
        for line in output.splitlines()
        if line.strip() and not re.match(r"^\s*(\d+\s*,|index,)", line)
    ]
    return f"nvidia-smi failed (exit {result.get('rc')}): {lines[0] if lines else 'no output'}"


def preflight_facts(results: Sequence[Mapping[str, Any]], timeout_s: float) -> dict[str, Any]:
    """The facts later roles orchestrate with, read by gpuval's parsers from the probe outputs
    the capture module returned; `problems` lists what makes this node's run meaningless."""
    by_name = {str(r.get("name")): r for r in results}

    def output(name: str) -> str:
        return str(by_name.get(name, {}).get("output") or "")

    gpus = _gpus(output("nvidia-smi-query-gpu"))
    capabilities = sorted({c for g in gpus if (c := g.fields.get("compute_cap"))})
    nvcc, _ = _version(output("nvcc-version"), "nvcc-version")
    cuda = nvcc
    if cuda is None:
        found = re.search(r"CUDA Version: *([0-9.]+)", output("nvidia-smi"))
        cuda = found[1] if found else None
    mpi, implementation = _version(output("mpirun-version"), "mpirun-version")
    smi_error = _smi_failure(
        by_name.get("nvidia-smi-query-gpu", {}), output("nvidia-smi-query-gpu"), timeout_s
    )
    pci_gpus = len(_PCI_GPU.findall(output("lspci-nvidia")))
    return {
        "preflight_has_gpu": bool(gpus),
        "preflight_gpu_count": len(gpus),
        "preflight_gpu_names": [str(g.name) for g in gpus],
        "preflight_compute_capabilities": capabilities,
        "preflight_nvcc_gencode": " ".join(
            f"-gencode=arch=compute_{c.replace('.', '')},code=sm_{c.replace('.', '')}"
            for c in capabilities
        ),
        "preflight_driver_version": gpus[0].fields.get("driver_version") if gpus else None,
        "preflight_cuda_version": ".".join(cuda.split(".")[:2]) if cuda else None,
        "preflight_nccl_version": _version(output("nccl-version"), "nccl-version")[0],
        "preflight_mpi_version": f"{implementation} {mpi}" if implementation and mpi else mpi,
        "preflight_smi_error": smi_error,
        "preflight_pci_gpu_count": pci_gpus,
        "preflight_rdma_hcas": _rdma_hcas(output("ibstat"), output("ibv_devinfo")),
    }


def host_problems(facts: Mapping[str, Any], expected_gpus: int) -> list[str]:
    """What makes one node's benchmarks meaningless: GPUs lost or missing."""
    problems = []
    smi_error, count = facts.get("preflight_smi_error"), int(facts["preflight_gpu_count"])
    if smi_error and "No devices were found" not in smi_error:
        problems.append(f"{smi_error}: GPUs missing from nvidia-smi (lost, or the driver is not "
                        "talking to them)")  # fmt: skip
    if expected_gpus > 0 and count < expected_gpus:
        problems.append(f"expected {expected_gpus} GPUs, nvidia-smi lists {count}")
    if int(facts["preflight_pci_gpu_count"]) > count:
        problems.append(
            f"{facts['preflight_pci_gpu_count']} NVIDIA GPUs on the PCI bus but nvidia-smi "
            f"lists {count}: GPUs missing (driver not loaded, or fallen off the bus)"
        )
    return problems


def version_problems(facts_by_host: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Mixed NVIDIA driver or NCCL versions across hosts (collectives hang or fail between
    NCCL versions): one sentence each."""
    problems = []
    for key, label, why in (
        ("preflight_driver_version", "NVIDIA driver", ""),
        ("preflight_nccl_version", "NCCL", " (NCCL hangs or fails between versions)"),
    ):
        seen = {h: str(f[key]) for h, f in sorted(facts_by_host.items()) if f.get(key)}
        if len(set(seen.values())) > 1:
            problems.append(f"mixed {label} versions across hosts{why}: {json.dumps(seen)}")
    return problems


# ------------------------------------------------------------------ run.json `declared`

# Inventory variable of each run.json `declared` key, and the type it is written as.
DECLARED_VARIABLES: dict[str, tuple[str, type]] = {
    "gpu_model": ("gpuval_gpu_model", str),
    "gpus_per_node": ("gpuval_gpus_per_node", int),
    "system": ("gpuval_system", str),
    "nic_count": ("gpuval_nic_count", int),
    "nic_rate_gbit": ("gpuval_nic_rate_gbit", float),
    "ib_hcas": ("gpuval_ib_hcas", list),
    "network_interface": ("gpuval_network_interface", str),
    "nvl_domain": ("gpuval_nvl_domain", str),
    "nvl_domain_nodes": ("gpuval_nvl_domain_nodes", int),
}
_ZERO_UNSET = {"gpus_per_node", "nvl_domain_nodes"}
KIND_WORDS = {str: "a string", int: "a whole number", float: "a number", list: "a list"}


def declared_hardware(variables: Mapping[str, Any]) -> dict[str, Any]:
    """What a host's inventory variables say it is (run.json `declared`): the variables that are
    set, in run.schema.json's types. Unset means null, "" or, for gpuval_gpus_per_node and
    gpuval_nvl_domain_nodes, 0 (the inventories' "do not check"); gpuval_ib_hcas may be
    NCCL_IB_HCA's comma-separated form.
    A value of the wrong type is a ValueError naming its variable."""
    declared: dict[str, Any] = {}
    for key, (variable, kind) in DECLARED_VARIABLES.items():
        value = variables.get(variable)
        if value is None or value == "" or value == [] or (key in _ZERO_UNSET and value == 0):
            continue
        try:
            if kind is list:
                items = value.split(",") if isinstance(value, str) else list(value)
                declared[key] = [str(item).strip() for item in items if str(item).strip()]
            elif kind is str:
                declared[key] = str(value)
            else:
                declared[key] = _number(value, kind)
        except (TypeError, ValueError):
            raise ValueError(f"{variable}: {value!r} is not {KIND_WORDS[kind]}") from None
        if isinstance(declared[key], int | float) and declared[key] < 0:
            raise ValueError(f"{variable}: {value!r} must not be negative")
    return declared


def _number(value: Any, kind: type) -> int | float:
    if isinstance(value, bool):
        raise TypeError(value)
    number = float(value)
    if kind is int:
        if not number.is_integer():
            raise ValueError(value)
        return int(number)
    return number
