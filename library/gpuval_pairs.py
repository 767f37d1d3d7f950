#!/usr/bin/python
# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible module: judge the pair tests gathered so far and plan what to run next (controller)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: gpuval_pairs
short_description: Judge gpuval pair tests in a run folder and plan the next rounds
description:
  - Thin wrapper over C(gpuval.analysis.pairs) and C(gpuval.schedule), run on the controller
    between the rounds of the pair phase. Reads the controller's run folder (C(run.json),
    C(raw/<host>/)) as collected so far.
  - Returns the latest try of every pair (passed, failed, or judged low against the cluster
    median), the pairs to run again to confirm a failure (as RV(retry_rounds), rounds of disjoint
    pairs with the next try number), the next schedule stage (RV(next)), the all-nodes test's
    outcome and the MPI preflight's outcome.
  - Step names follow C(pair-<kind>-r<round>-<a>--<b>-try<k>) (see C(gpuval.analysis.pairs)).
version_added: "0.1.0"
options:
  run_dir:
    description: The controller's run folder (C(reports/<run-id>)).
    type: path
    required: true
  hosts:
    description: Every host of the schedule (the inventory group), in any order.
    type: list
    elements: str
    required: true
  active_hosts:
    description:
      - Hosts still in the play (C(ansible_play_hosts)). Pairs with a host not listed are
        neither retried nor scheduled. Default every host of O(hosts).
    type: list
    elements: str
  mode:
    description: C(all-pairs) (every pair, circle rounds) or C(staged) (all nodes first).
    type: str
    choices: [all-pairs, staged]
    default: all-pairs
  stage:
    description:
      - What has just finished. C(start) plans the first stage; C(all-nodes) judges the
        all-nodes test (O(all_nodes_host)/O(all_nodes_step)) and plans screening; C(screen)
        judges the screening pairs and plans the confirmation rounds; C(pairs) only judges
        (RV(next) is C(done)).
    type: str
    choices: [start, all-nodes, screen, pairs]
    default: pairs
  kinds:
    description: Pair kinds run in this run; the planned rounds carry one try per kind.
    type: list
    elements: str
    choices: [iperf3, allreduce, nccl]
    default: [iperf3]
  rounds:
    description: Judge and retry only pairs of these schedule rounds (default all).
    type: list
    elements: int
  max_tries:
    description: Tries per pair measurement, the first included (repeat to confirm).
    type: int
    default: 3
  thresholds:
    description:
      - JSON file overriding gpuval's verdict thresholds (C(pair_low_fraction) is read), the same
        file C(gpuval report --thresholds) gets, so the repeats follow the report's judgement.
    type: path
  parallel:
    description:
      - Pairs of a round run at the same time. False puts every pair in a round of its own
        (one pair after another; for comparison and for networks that cannot take the load).
    type: bool
    default: true
  partners:
    description: Known-good partners per suspect in the confirmation rounds.
    type: int
    default: 1
  all_nodes_host:
    description: Host whose folder holds the all-nodes test (default the first host).
    type: str
  all_nodes_step:
    description: Step name of the all-nodes test.
    type: str
    default: allnodes-allreduce
notes:
  - Check mode is supported; the module only reads.
requirements:
  - the gpuval package importable by the module's Python (the controller's .venv)
author:
  - gpuval contributors
"""

EXAMPLES = r"""
- name: Judge the first tries and plan the repeats
  gpuval_pairs:
    run_dir: "{{ gpuval_reports_dir }}/{{ gpuval_run_id }}"
    hosts: "{{ groups['gpu_nodes'] }}"
    active_hosts: "{{ ansible_play_hosts }}"
    kinds: [iperf3, allreduce]
    max_tries: 3
  delegate_to: localhost
  run_once: true
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  register: pairs_judged

- name: Staged mode, after the all-nodes test
  gpuval_pairs:
    run_dir: reports/20261121T055300Z
    hosts: [node1, node2, node3, node4]
    mode: staged
    stage: all-nodes
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
pairs:
  description: Latest try of each pair measurement (one per direction for iperf3).
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "iperf3", "a": "node1", "b": "node2", "src": "node1", "dst": "node2",
            "round": 1, "try": 1, "status": "low", "value": 0.9, "unit": "Gbit/s",
            "reason": ""}]
failing_pairs:
  description: Pairs (C(a--b)) with a measurement that failed, is low or was wrong.
  returned: always
  type: list
  elements: str
retry_rounds:
  description:
    - Rounds of disjoint pairs to run again; each entry C({round, a, b, tries}) where C(tries)
      maps each kind to re-run to its next try number. Empty when nothing is left to confirm.
  returned: always
  type: list
  elements: list
next:
  description:
    - The next stage, C({mode, rounds, suspects, known_good}); C(mode) is one of C(done),
      C(all-nodes), C(all-pairs), C(screen), C(confirm). C(rounds) entries are like
      RV(retry_rounds), with try 1 and round numbers following those already used.
  returned: always
  type: dict
all_nodes:
  description: Outcome of the all-nodes test, C({status, reason}); status pass, fail or missing.
  returned: when O(stage) is all-nodes
  type: dict
mpi_preflight:
  description:
    - The MPI preflight found in the folder, C({found, ok, failed_hosts, reason}).
  returned: always
  type: dict
"""

KINDS = ["iperf3", "allreduce", "nccl"]
ARGUMENT_SPEC: dict[str, Any] = {
    "run_dir": {"type": "path", "required": True},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "active_hosts": {"type": "list", "elements": "str"},
    "mode": {"type": "str", "choices": ["all-pairs", "staged"], "default": "all-pairs"},
    "stage": {
        "type": "str",
        "choices": ["start", "all-nodes", "screen", "pairs"],
        "default": "pairs",
    },
    "kinds": {"type": "list", "elements": "str", "choices": KINDS, "default": ["iperf3"]},
    "rounds": {"type": "list", "elements": "int"},
    "max_tries": {"type": "int", "default": 3},
    "thresholds": {"type": "path"},
    "parallel": {"type": "bool", "default": True},
    "partners": {"type": "int", "default": 1},
    "all_nodes_host": {"type": "str"},
    "all_nodes_step": {"type": "str", "default": "allnodes-allreduce"},
}

Entry = dict[str, Any]  # {round, a, b, tries: {kind: try}}


def latest_tries(analysis: Any, rounds: Sequence[int] | None) -> list[dict[str, Any]]:
    """The latest try of each measurement (kind, pair, direction), in the analysis' order."""
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
                "round": last.round, "try": last.attempt, "status": status, "value": last.value,
                "unit": last.unit, "reason": last.reason,
            })  # fmt: skip
    return found


def pack_rounds(entries: Iterable[Entry]) -> list[list[Entry]]:
    """Entries in rounds where no host appears twice (first fit, in the given order)."""
    rounds: list[list[Entry]] = []
    busy: list[set[str]] = []
    for entry in entries:
        for index, hosts in enumerate(busy):
            if not hosts & {entry["a"], entry["b"]}:
                rounds[index].append(entry)
                hosts.update((entry["a"], entry["b"]))
                break
        else:
            rounds.append([entry])
            busy.append({entry["a"], entry["b"]})
    return rounds


def one_pair_per_round(rounds: list[list[Entry]], parallel: bool) -> list[list[Entry]]:
    """The rounds as they are, or (not parallel) every pair in a round of its own."""
    return rounds if parallel else [[entry] for entries in rounds for entry in entries]


def retry_entries(
    latest: Sequence[dict[str, Any]], max_tries: int, active: set[str]
) -> list[Entry]:
    """Pairs whose latest try failed or was low, with tries left and both hosts still there.
    Wrong results are not re-run: a later try cannot repair corrupted data."""
    wanted: dict[tuple[int, str, str], dict[str, int]] = {}
    for t in latest:
        if t["status"] not in ("failed", "low") or t["try"] >= max_tries:
            continue
        if not {t["a"], t["b"]} <= active:
            continue
        tries = wanted.setdefault((t["round"], t["a"], t["b"]), {})
        tries[t["kind"]] = max(tries.get(t["kind"], 0), t["try"] + 1)
    return [{"round": r, "a": a, "b": b, "tries": tries} for (r, a, b), tries in wanted.items()]


def schedule_entries(
    rounds: Sequence[Sequence[Sequence[str]]],
    first_round: int,
    kinds: Sequence[str],
    active: set[str],
) -> list[list[Entry]]:
    """A schedule's rounds as entries with try 1 of every kind; pairs with a host gone dropped
    (their first tries stay missing, which fails them closed)."""
    planned = []
    for number, pairs in enumerate(rounds, start=first_round):
        planned.append([
            {"round": number, "a": a, "b": b, "tries": dict.fromkeys(kinds, 1)}
            for a, b in pairs if a in active and b in active
        ])  # fmt: skip
    return planned


def pair_outcomes(latest: Sequence[dict[str, Any]]) -> dict[tuple[str, str], bool]:
    """Per pair: passed when every measurement of every kind passed."""
    outcomes: dict[tuple[str, str], bool] = {}
    for t in latest:
        pair = (t["a"], t["b"])
        outcomes[pair] = outcomes.get(pair, True) and t["status"] == "ok"
    return outcomes


def all_nodes_outcome(files: Sequence[Any], host: str, step: str) -> dict[str, str]:
    from gpuval.checks.cluster import allnodes_bench_checks
    from gpuval.checks.thresholds import DEFAULTS

    mine = [f for f in files if f.host == host and f.step == step]
    if not mine:
        return {"status": "missing", "reason": f"no {step} output from {host}"}
    sidecar = mine[0].sidecar
    if sidecar is not None and (sidecar.skipped or sidecar.timed_out or sidecar.exit_code != 0):
        why = sidecar.skipped or (
            "timed out" if sidecar.timed_out else f"exit status {sidecar.exit_code}"
        )
        return {"status": "fail", "reason": f"{step} on {host}: {why}"}
    checks, _ = allnodes_bench_checks(mine, None, DEFAULTS)
    if not checks:
        return {"status": "fail", "reason": f"{step} on {host}: no result in its output"}
    failing = [c for c in checks if c.status == "fail"]
    return {"status": "fail" if failing else "pass", "reason": (failing or checks)[0].reason}


def mpi_preflight_outcome(files: Sequence[Any]) -> dict[str, Any]:
    from gpuval.checks.cluster import mpi_preflight_checks

    checks = mpi_preflight_checks(files)
    summary = [c for c in checks if c.check_id == "mpi-preflight"]
    if not summary:
        return {"found": False, "ok": None, "failed_hosts": [], "reason": ""}
    return {
        "found": True,
        "ok": all(c.status == "pass" for c in summary),
        "failed_hosts": sorted({c.host for c in checks if c.check_id == "mpi-preflight.host"}),
        "reason": "; ".join(c.reason for c in summary),
    }


def next_stage(
    params: dict[str, Any],
    latest: Sequence[dict[str, Any]],
    used_rounds: int,
    all_nodes: dict[str, str] | None,
    active: set[str],
) -> dict[str, Any]:
    from gpuval.schedule import circle_rounds, staged_plan

    hosts = params["hosts"]
    kinds = params["kinds"]
    stage = params["stage"]
    done: dict[str, Any] = {"mode": "done", "rounds": [], "suspects": [], "known_good": []}
    if stage == "start":
        if params["mode"] == "staged":
            return {**done, "mode": "all-nodes"}
        return {
            **done,
            "mode": "all-pairs",
            "rounds": schedule_entries(circle_rounds(hosts), 1, kinds, active),
        }
    if stage == "all-nodes":
        plan = staged_plan(hosts, all_nodes is not None and all_nodes["status"] == "pass")
    elif stage == "screen":
        outcomes = pair_outcomes(latest)
        plan = staged_plan(hosts, False, outcomes, params["partners"])
    else:
        return done
    return {
        "mode": plan.mode,
        "rounds": schedule_entries(plan.rounds, used_rounds + 1, kinds, active),
        "suspects": plan.suspects,
        "known_good": [h for h in plan.known_good if h in active],
    }


def judge(params: dict[str, Any]) -> dict[str, Any]:
    from gpuval.checks.pairs import PairThresholds, analyse_pairs
    from gpuval.checks.thresholds import load_thresholds
    from gpuval.runfolder import read_run_folder

    run_dir = Path(params["run_dir"])
    folder = read_run_folder(run_dir)
    suite = load_thresholds(Path(params["thresholds"]) if params["thresholds"] else None)
    thresholds = PairThresholds.from_thresholds(
        dataclasses.replace(suite, pair_max_tries=params["max_tries"])
    )
    expected = (
        folder.meta.get("expected") if isinstance(folder.meta.get("expected"), dict) else None
    )
    analysis = analyse_pairs(folder.files, thresholds, expected)
    latest = [t for t in latest_tries(analysis, params["rounds"]) if t["kind"] in params["kinds"]]
    active = set(params["active_hosts"] if params["active_hosts"] is not None else params["hosts"])
    used_rounds = max((t.round for t in analysis.tries), default=0)
    result: dict[str, Any] = {
        "pairs": latest,
        "failing_pairs": sorted({f"{t['a']}--{t['b']}" for t in latest if t["status"] != "ok"}),
        "retry_rounds": one_pair_per_round(
            pack_rounds(retry_entries(latest, params["max_tries"], active)), params["parallel"]
        ),
        "mpi_preflight": mpi_preflight_outcome(folder.files),
    }
    all_nodes = None
    if params["stage"] == "all-nodes":
        host = params["all_nodes_host"] or sorted(params["hosts"])[0]
        all_nodes = all_nodes_outcome(folder.files, host, params["all_nodes_step"])
        result["all_nodes"] = all_nodes
    planned = next_stage(params, latest, used_rounds, all_nodes, active)
    planned["rounds"] = one_pair_per_round(planned["rounds"], params["parallel"])
    result["next"] = planned
    return result


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    if params["max_tries"] < 1 or params["partners"] < 1:
        module.fail_json(msg="max_tries and partners must be at least 1")
    if not Path(params["run_dir"]).is_dir():
        if module.check_mode:  # a dry run has no run folder yet: nothing to judge or plan
            done = {"mode": "done", "rounds": [], "suspects": [], "known_good": []}
            no_preflight: dict[str, Any] = {
                "found": False,
                "ok": None,
                "failed_hosts": [],
                "reason": "",
            }
            module.exit_json(
                changed=False,
                pairs=[],
                failing_pairs=[],
                retry_rounds=[],
                next=done,
                mpi_preflight=no_preflight,
            )
        module.fail_json(msg=f"run folder {params['run_dir']} does not exist")
    try:
        result = judge(params)
    except ImportError as problem:
        module.fail_json(
            msg=f"cannot import gpuval ({problem}): run the module with the Python that has "
            "gpuval installed (ansible_python_interpreter: '{{ ansible_playbook_python }}')"
        )
    except ValueError as problem:  # a host list the schedule refuses (duplicates, '--')
        module.fail_json(msg=str(problem))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
