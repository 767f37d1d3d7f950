#!/usr/bin/python
# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible module: run a command, keep its raw output and a JSON sidecar (run-folder contract)."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: gpuval_capture
short_description: Run a command and capture its raw output and a JSON sidecar for gpuval
description:
  - Runs one command on the managed node and streams its stdout and stderr, interleaved as
    printed, into C(<dest>/<name>.<raw_ext>) while it runs, so a step that is killed keeps
    its partial output.
  - Writes the sidecar C(<dest>/<name>.meta.json) of the gpuval run-folder contract twice,
    with C(exit_code) null before the command starts, and again when it ends. A step that
    never finished (host lost, Ansible killed) therefore stays visible as unfinished.
  - Never fails because the command failed; the exit status is recorded and returned as RV(rc).
    Judging happens later, on the controller.
  - On timeout the whole process group of the command is killed (SIGTERM, then SIGKILL after
    O(kill_grace_s) seconds), so children such as C(mpirun) ranks do not linger.
  - With O(skip_reason) nothing runs; only a sidecar with C(skipped) and C(raw) null is written.
  - With O(steps), runs several steps one after another in one call (the preflight probes),
    each with its own raw file and sidecar, and returns one result per step in RV(results).
    Consecutive steps with the same C(group) run at the same time (started together, each with
    its own timeout), and the next step starts when all of them have ended.
version_added: "0.1.0"
options:
  name:
    description:
      - Step name; the base name of the raw file and of the sidecar.
      - Letters, digits, C(.), C(_) and C(-) only.
      - Required unless O(steps) is given.
    type: str
  steps:
    description:
      - Several steps, run in order. Each is a dict with the keys C(name), C(command), C(tool),
        C(raw_ext), C(timeout), C(skip_reason), C(return_output), C(env) and C(requires) of the
        options of the same name (O(phase), O(dest), O(host), O(chdir) and O(kill_grace_s) are
        shared; O(env), O(timeout) and O(requires) are the defaults of a step), C(search) and
        C(group).
      - C(search) (a list, possibly empty) makes a missing program a skip instead of a failure;
        the first executable of C(search) is run in place of the first word of C(command), else
        that word found on PATH (and /sbin, /usr/sbin); when none is found the step is recorded
        as skipped with C(<program> not found on this host) and C(skip_note) after it.
      - C(group) (a string) runs the step at the same time as the steps next to it with the same
        C(group) (the rails of an RDMA pair); a step without one runs alone.
    type: list
    elements: dict
  requires:
    description:
      - Programs (looked up on PATH, then /sbin and /usr/sbin) or paths (containing C(/), glob
        patterns allowed) the command needs; when one is missing the step is recorded as skipped
        with the reason C(<what> not found on this host).
    type: list
    elements: str
    default: []
  dest:
    description: Folder of the node's raw outputs for this run; created when missing.
    type: path
    required: true
  command:
    description:
      - The command. A string runs through C(/bin/sh -c) (pipes and redirections work);
        a list runs as an argument vector without a shell.
      - Required unless O(skip_reason) is given.
    type: raw
  phase:
    description: Phase of the run the step belongs to.
    type: str
    required: true
    choices: [preflight, intranode, internode, network, mpi-preflight, health]
  tool:
    description:
      - Name of the gpuval parser for the output (for example C(nccl-tests), C(nvidia-smi-topo)).
      - Null lets the controller detect the tool from the content.
    type: str
  env:
    description: Environment variables set for the command (added to the module's environment).
    type: dict
    default: {}
  chdir:
    description: Working directory of the command; the module's working directory when unset.
    type: path
  timeout:
    description: Seconds before the command's process group is killed; 0 means no limit.
    type: float
    default: 0
  kill_grace_s:
    description: Seconds between SIGTERM and SIGKILL when the timeout is reached.
    type: float
    default: 5
  skip_reason:
    description: Run nothing; record this reason in the sidecar's C(skipped) field.
    type: str
  raw_ext:
    description: File name extension of the raw output (without the dot).
    type: str
    default: txt
  host:
    description:
      - Host name recorded in the sidecar. Pass C({{ inventory_hostname }}) so that it matches
        the controller's C(raw/<host>/) folder; the node's own host name when unset.
    type: str
  return_output:
    description:
      - Also return the first MiB of the output as RV(output), for tasks that derive facts from
        it on the node. Leave off for benchmark output, which can be hundreds of MB.
    type: bool
    default: false
notes:
  - Check mode runs nothing and writes nothing; it reports the step as changed.
  - A command killed by a signal other than the timeout is recorded with exit code 128 + signal.
author:
  - gpuval contributors
"""

EXAMPLES = r"""
- name: Capture the GPU topology matrix
  gpuval_capture:
    name: nvidia-smi-topo
    dest: "{{ gpuval_node_run_dir }}"
    host: "{{ inventory_hostname }}"
    command: nvidia-smi topo -m
    phase: preflight
    tool: nvidia-smi-topo

- name: Run all_reduce_perf with a time limit and NCCL debug output
  gpuval_capture:
    name: nccl-all_reduce
    dest: "{{ gpuval_node_run_dir }}"
    host: "{{ inventory_hostname }}"
    command: ["{{ nccl_tests_bin_dir }}/all_reduce_perf", "-b", "8", "-e", "8G", "-g", "8"]
    env:
      NCCL_DEBUG: INFO
    phase: intranode
    tool: nccl-tests
    timeout: 1800
  tags: [molecule-idempotence-notest]

- name: Run the preflight probes in one call
  gpuval_capture:
    dest: "{{ gpuval_node_run_dir }}"
    host: "{{ inventory_hostname }}"
    phase: preflight
    steps:
      - {name: nvidia-smi-topo, command: [nvidia-smi, topo, -m], tool: nvidia-smi-topo, search: []}
      - {name: os-release, command: "uname -a; cat /etc/os-release", tool: os-release}
      - {name: health-ib-sysfs, command: "grep -H . /sys/class/infiniband/*/fw_ver",
         tool: sysfs-infiniband, requires: ["/sys/class/infiniband/*/ports"]}

- name: Measure two rails at the same time, each with its own file, sidecar and timeout
  gpuval_capture:
    dest: "{{ gpuval_node_run_dir }}"
    host: "{{ inventory_hostname }}"
    phase: network
    timeout: 60
    steps:
      - {name: rail0, command: [ib_write_bw, -d, mlx5_0, -p, "18515", 10.0.0.2], group: host}
      - {name: rail1, command: [ib_write_bw, -d, mlx5_1, -p, "18516", 10.0.0.2], group: host}

- name: Record that the peer-to-peer test was not run
  gpuval_capture:
    name: p2pBandwidthLatencyTest
    dest: "{{ gpuval_node_run_dir }}"
    phase: intranode
    skip_reason: host has fewer than 2 GPUs
"""

RETURN = r"""
rc:
  description: Exit status of the command; null when it timed out, was skipped or in check mode.
  returned: always
  type: int
  sample: 0
timed_out:
  description: Whether the timeout killed the command.
  returned: always
  type: bool
  sample: false
raw_path:
  description: Path of the raw output file; null when skipped or in check mode.
  returned: always
  type: str
  sample: /var/tmp/gpuval/runs/20261121T055300Z/nvidia-smi-topo.txt
sidecar_path:
  description: Path of the JSON sidecar; null in check mode.
  returned: always
  type: str
  sample: /var/tmp/gpuval/runs/20261121T055300Z/nvidia-smi-topo.meta.json
duration_s:
  description: Wall-clock seconds the command ran; null when it did not run.
  returned: always
  type: float
  sample: 0.42
skipped_reason:
  description: The O(skip_reason) recorded (or the missing requirement), or null.
  returned: always
  type: str
output:
  description: First MiB of the captured output (decoded as UTF-8 with replacement characters).
  returned: when O(return_output) is true and the command ran
  type: str
output_truncated:
  description: Whether RV(output) is shorter than the raw file.
  returned: when O(return_output) is true and the command ran
  type: bool
results:
  description: With O(steps), one result per step (its C(name) and the values above).
  returned: when O(steps) is given
  type: list
  elements: dict
"""


SCHEMA_VERSION = 1
OUTPUT_RETURN_LIMIT = 1 << 20
STEP_NAME = re.compile(r"^[A-Za-z0-9._-]+$")

ARGUMENT_SPEC: dict[str, Any] = {
    "name": {"type": "str"},
    "steps": {"type": "list", "elements": "dict"},
    "requires": {"type": "list", "elements": "str", "default": []},
    "dest": {"type": "path", "required": True},
    "command": {"type": "raw"},
    "phase": {
        "type": "str",
        "required": True,
        "choices": ["preflight", "intranode", "internode", "network", "mpi-preflight", "health"],
    },
    "tool": {"type": "str"},
    "env": {"type": "dict", "default": {}},
    "chdir": {"type": "path"},
    "timeout": {"type": "float", "default": 0},
    "kill_grace_s": {"type": "float", "default": 5},
    "skip_reason": {"type": "str"},
    "raw_ext": {"type": "str", "default": "txt"},
    "host": {"type": "str"},
    "return_output": {"type": "bool", "default": False},
}


def utc_now() -> str:
    """ISO-8601 UTC timestamp with microseconds, e.g. 2026-11-21T05:53:17.123456Z."""
    # timezone.utc, not datetime.UTC: nodes may run Python 3.8-3.10 (Ubuntu 20.04/22.04).
    now = datetime.now(timezone.utc)  # noqa: UP017
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def command_text(command: str | list[Any]) -> str:
    """The command as one shell-readable string for the sidecar."""
    if isinstance(command, list):
        return shlex.join(str(part) for part in command)
    return command


def popen_args(command: str | list[Any]) -> list[str]:
    """Argument vector: strings go through /bin/sh -c, lists run as they are."""
    if isinstance(command, list):
        return [str(part) for part in command]
    return ["/bin/sh", "-c", command]


def write_json_atomic(path: str, document: dict[str, Any]) -> None:
    """Write via a temporary file and rename, so a reader never sees half a sidecar."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, sort_keys=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def exit_code_of(returncode: int) -> int:
    """Popen reports death by signal N as -N; record it the way a shell does (128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def kill_process_group(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the command's whole process group, then SIGKILL whatever is left."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        # Even when the leader is gone, members of its group may not be: go on to SIGKILL.
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait_s)


def run_streaming(
    argv: list[str],
    raw_path: str,
    cwd: str,
    env: dict[str, str],
    timeout_s: float | None,
    grace_s: float,
) -> tuple[int | None, bool]:
    """Run argv with stdout+stderr going straight to raw_path; return (exit code, timed out)."""
    with open(raw_path, "wb") as raw:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=raw,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,  # own process group, so a timeout can kill all of it
        )
        try:
            return exit_code_of(process.wait(timeout=timeout_s)), False
        except subprocess.TimeoutExpired:
            kill_process_group(process, grace_s)
            return None, True


def read_head(path: str, limit: int) -> tuple[str, bool]:
    """The first `limit` bytes of a file as text, and whether the file is longer."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit


STEP_KEYS = (
    "name",
    "command",
    "tool",
    "raw_ext",
    "timeout",
    "skip_reason",
    "return_output",
    "env",
    "requires",
)
# Where system tools (ibstat, lspci) live when the login PATH lacks them.
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def build_sidecar(step: dict[str, Any], common: dict[str, Any], cwd: str) -> dict[str, Any]:
    """The sidecar as written before the command starts (exit_code null)."""
    env = {key: str(value) for key, value in step["env"].items()}
    skipped = step["skip_reason"]
    command = step["command"]
    timeout = step["timeout"]
    return {
        "schema_version": SCHEMA_VERSION,
        "name": step["name"],
        "host": common["host"] or socket.gethostname(),
        "phase": common["phase"],
        "raw": None if skipped else f"{step['name']}.{step['raw_ext']}",
        "command": None if command is None else command_text(command),
        "tool": step["tool"],
        "cwd": cwd,
        "env": env,
        "exit_code": None,
        "timed_out": False,
        "timeout_s": timeout if timeout > 0 else None,
        "started_at": None,
        "ended_at": None,
        "duration_s": None,
        "skipped": skipped,
    }


def step_problem(step: dict[str, Any]) -> str | None:
    """Argument checks that argument_spec cannot express; None when the step is fine."""
    if not isinstance(step["name"], str) or not STEP_NAME.match(step["name"]):
        return f"name {step['name']!r} may hold only letters, digits, '.', '_', '-'"
    raw_ext = step["raw_ext"]
    if not isinstance(raw_ext, str) or not STEP_NAME.match(raw_ext) or raw_ext == "meta.json":
        return f"raw_ext {raw_ext!r} is not a plain file extension"
    command = step["command"]
    if step["skip_reason"] is None:
        if command is None or command == "" or command == []:
            return "command is required unless skip_reason is given"
        if not isinstance(command, (str, list)):
            return "command must be a string or a list of arguments"
    if not isinstance(step["timeout"], (int, float)) or step["timeout"] < 0:
        return "timeout must be >= 0 (0: no limit)"
    if not isinstance(step["env"], dict):
        return "env must be a mapping of variable names to values"
    if step["group"] is not None and not isinstance(step["group"], str):
        return "group must be a string (steps next to each other with the same group run together)"
    return None


def steps_of(params: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The steps to run (one without O(steps)), each with every key filled; or a problem."""
    if (params["name"] is None) == (params["steps"] is None):
        return [], "give either name (one step) or steps (several), not both or neither"
    given = params["steps"] if params["steps"] is not None else [params]
    found = []
    for raw_step in given:
        unknown = set(raw_step) - {*STEP_KEYS, "search", "skip_note", "group"}
        if params["steps"] is not None and unknown:
            return [], f"step {raw_step.get('name')!r}: unknown key(s) {sorted(unknown)}"
        step = {key: raw_step.get(key, params[key]) for key in STEP_KEYS}
        step["timeout"] = float(step["timeout"]) if step["timeout"] is not None else 0.0
        if isinstance(step["requires"], str):
            step["requires"] = [step["requires"]]
        step["search"] = raw_step.get("search")
        step["skip_note"] = raw_step.get("skip_note") or ""
        step["group"] = raw_step.get("group")
        problem = step_problem(step)
        if problem:
            return [], problem if params["steps"] is None else f"step {step['name']!r}: {problem}"
        found.append(step)
    return found, None


def program_path(env: dict[str, str]) -> str:
    """The PATH programs are looked up on: the command's, then the sbin folders."""
    return os.pathsep.join([env.get("PATH", os.defpath), *SBIN])


def find_program(step: dict[str, Any], env: dict[str, str]) -> str | None:
    """The program a step with `search` runs: the first executable candidate, else its first
    word on PATH; None when neither exists."""
    for candidate in step["search"]:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(str(step["command"][0]), path=program_path(env))


def missing_requirement(requires: list[str], env: dict[str, str]) -> str | None:
    """The first program or path of `requires` the node lacks."""
    for wanted in requires:
        found = glob.glob(wanted) if "/" in wanted else shutil.which(wanted, path=program_path(env))
        if not found:
            return wanted
    return None


def capture(step: dict[str, Any], common: dict[str, Any]) -> dict[str, Any]:
    """Run one step: raw file and sidecar under dest; its result."""
    cwd = common["chdir"] or os.getcwd()
    dest, name = common["dest"], step["name"]
    env = dict(os.environ)
    env.update({key: str(value) for key, value in step["env"].items()})
    if step["skip_reason"] is None and (lacking := missing_requirement(step["requires"], env)):
        step["skip_reason"] = f"{lacking} not found on this host"
    if (
        step["skip_reason"] is None
        and step["search"] is not None
        and isinstance(step["command"], list)
    ):
        program = find_program(step, env)
        if program is None:
            step["skip_reason"] = f"{step['command'][0]} not found on this host{step['skip_note']}"
        else:
            step["command"] = [program, *step["command"][1:]]
    sidecar_path = os.path.join(dest, f"{name}.meta.json")
    raw_path = os.path.join(dest, f"{name}.{step['raw_ext']}")
    result: dict[str, Any] = {
        "name": name,
        "rc": None,
        "timed_out": False,
        "raw_path": None,
        "sidecar_path": sidecar_path,
        "duration_s": None,
        "skipped_reason": step["skip_reason"],
    }
    sidecar = build_sidecar(step, common, cwd)
    if step["skip_reason"] is not None:
        now = utc_now()
        sidecar.update(started_at=now, ended_at=now)
        write_json_atomic(sidecar_path, sidecar)
        return result

    sidecar["started_at"] = utc_now()
    write_json_atomic(sidecar_path, sidecar)
    started = time.monotonic()
    try:
        exit_code, timed_out = run_streaming(
            popen_args(step["command"]),
            raw_path,
            cwd,
            env,
            step["timeout"] or None,
            common["kill_grace_s"],
        )
    except OSError as error:
        # The command could not start (missing binary, bad chdir): record it like a shell would.
        with open(raw_path, "ab") as raw:
            raw.write(f"gpuval_capture: cannot run command: {error}\n".encode())
        exit_code, timed_out = (127 if isinstance(error, FileNotFoundError) else 126), False
    duration = round(time.monotonic() - started, 6)
    sidecar.update(
        exit_code=exit_code,
        timed_out=timed_out,
        ended_at=utc_now(),
        duration_s=duration,
    )
    write_json_atomic(sidecar_path, sidecar)
    result.update(rc=exit_code, timed_out=timed_out, raw_path=raw_path, duration_s=duration)
    if step["return_output"]:
        result["output"], result["output_truncated"] = read_head(raw_path, OUTPUT_RETURN_LIMIT)
    return result


def batches(steps: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The steps in order, consecutive steps of one `group` in one batch, every other alone."""
    found: list[list[dict[str, Any]]] = []
    for step in steps:
        if found and step["group"] is not None and found[-1][-1]["group"] == step["group"]:
            found[-1].append(step)
        else:
            found.append([step])
    return found


def capture_together(batch: list[dict[str, Any]], common: dict[str, Any]) -> list[dict[str, Any]]:
    """Run a batch's steps at the same time, each in a thread waiting on its own process (and
    timeout); the results in the batch's order once all have ended."""
    if len(batch) == 1:
        return [capture(batch[0], common)]
    with ThreadPoolExecutor(max_workers=len(batch)) as pool:
        return list(pool.map(capture, batch, [common] * len(batch)))


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    steps, problem = steps_of(params)
    if problem:
        module.fail_json(msg=problem)
    # Explicit "failed": without it Ansible marks any result whose rc is not 0 (or null) failed.
    if module.check_mode:
        skipped = [
            {"name": s["name"], "rc": None, "skipped_reason": s["skip_reason"]} for s in steps
        ]
        if params["steps"] is not None:
            module.exit_json(failed=False, changed=True, results=skipped)
        module.exit_json(
            failed=False, changed=True, timed_out=False, raw_path=None, sidecar_path=None,
            duration_s=None, **{k: v for k, v in skipped[0].items() if k != "name"},
        )  # fmt: skip
    os.makedirs(params["dest"], exist_ok=True)
    results = [result for batch in batches(steps) for result in capture_together(batch, params)]
    if params["steps"] is not None:
        module.exit_json(failed=False, changed=True, results=results)
    single = {k: v for k, v in results[0].items() if k != "name"}
    module.exit_json(failed=False, changed=True, **single)


if __name__ == "__main__":
    main()
