#!/usr/bin/python
# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Ansible module: run a command, keep its raw output and a JSON sidecar (run-folder contract)."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
from typing import Any

from ansible.module_utils.basic import AnsibleModule

try:  # the repository's library/ (ansible.cfg's module_utils)
    from ansible.module_utils.gpuval_capture_steps import batches, capture_together
    from ansible.module_utils.gpuval_pack_files import pack
except ImportError:  # the gpuval.cluster collection
    from ansible_collections.gpuval.cluster.plugins.module_utils.gpuval_capture_steps import (
        batches,
        capture_together,
    )
    from ansible_collections.gpuval.cluster.plugins.module_utils.gpuval_pack_files import pack

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
  - With O(background), the steps run in a process that outlives the task, which returns once
    they started and O(ready) succeeded (servers a peer's clients then reach, or members of a
    job that must start together whatever Ansible's C(forks)). Waiting for them is one blocking
    C(flock) on RV(background_lock), not an C(async_status) loop (a module run per host and
    second).
  - With O(collect_to), once the steps ended the files of O(dest) that the controller does not
    hold yet come back in the task's own result and are written into O(collect_to) on the
    controller, as C(gpuval_collect) would in a task of its own (the action plugin of the same
    name does the controller's part).
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
  background:
    description:
      - Run the steps in a process of their own that outlives the task (their files as in the
        task), under this name (letters, digits, C(.), C(_) and C(-)), and return once it started
        and O(ready) exited 0.
      - The process holds an exclusive C(flock) on RV(background_lock),
        C(<dest>.<background>.background.lock) beside O(dest), until its steps have ended. A
        later call with the same O(dest) and name first waits for it (so its ports are free;
        each step ends by its O(timeout)), so the task's own timeout must leave room for that.
    type: str
  ready:
    description:
      - With O(background), a bash command run once the steps started (for example one that
        polls until their ports listen); the task fails with its output unless it exits 0
        within 90 s.
    type: str
  collect_to:
    description:
      - The controller's C(raw/<host>/) folder, to bring the new files of O(dest) to once the
        steps ended (not with O(background), whose steps outlive the task; not in check mode).
      - Read by the action plugin on the controller, which gives the module O(pack_held).
    type: path
  pack_held:
    description:
      - What the controller holds of O(dest) (path relative to it -> [size, mtime in whole
        seconds]); the files that differ are returned as RV(pack). Set by the action plugin for
        O(collect_to).
    type: dict
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

- name: Serve one iperf3 test in the background, returning once it listens
  gpuval_capture:
    name: iperf3-server
    dest: "{{ gpuval_node_run_dir }}"
    command: iperf3 -s -1 -J -p 5201
    phase: network
    timeout: 130
    background: iperf3
    ready: "until ss -Hltn 'sport = :5201' | grep -q .; do sleep 0.1; done"

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
  returned: unless O(background)
  type: int
  sample: 0
timed_out:
  description: Whether the timeout killed the command.
  returned: unless O(background)
  type: bool
  sample: false
raw_path:
  description: Path of the raw output file; null when skipped or in check mode.
  returned: unless O(background)
  type: str
  sample: /var/tmp/gpuval/runs/20261121T055300Z/nvidia-smi-topo.txt
sidecar_path:
  description: Path of the JSON sidecar; null in check mode.
  returned: unless O(background)
  type: str
  sample: /var/tmp/gpuval/runs/20261121T055300Z/nvidia-smi-topo.meta.json
duration_s:
  description: Wall-clock seconds the command ran; null when it did not run.
  returned: unless O(background)
  type: float
  sample: 0.42
skipped_reason:
  description: The O(skip_reason) recorded (or the missing requirement), or null.
  returned: unless O(background)
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
  returned: when O(steps) is given, unless O(background)
  type: list
  elements: dict
pack:
  description:
    - The new or changed files of O(dest), as module C(gpuval_pack) returns them (C(found),
      C(files), C(packed), C(archive), C(unreadable)); the action plugin unpacks them and
      returns RV(collected) instead.
  returned: with O(pack_held)
  type: dict
collected:
  description: What O(collect_to) received, as C(gpuval_collect) returns it (C(files),
    C(new_files), C(superseded), C(msg)).
  returned: with O(collect_to)
  type: dict
background_lock:
  description: The lock the background process holds until its steps have ended.
  returned: with O(background)
  type: str
  sample: /var/tmp/gpuval/peers/20261121T055300Z.iperf3.background.lock
"""


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
    "background": {"type": "str"},
    "ready": {"type": "str"},
    "collect_to": {"type": "path"},
    "pack_held": {"type": "dict"},
}
# ready polls on its own (gpuval.plan.pair_plan's listening commands give up after 60 s).
READY_TIMEOUT_S = 90


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


def background_lock(params: dict[str, Any]) -> str:
    """Beside dest, not in it: a run folder is collected whole, and the lock is no output."""
    return f"{params['dest'].rstrip(os.sep)}.{params['background']}.background.lock"


def start_in_background(steps: list[dict[str, Any]], params: dict[str, Any]) -> None:
    """Run the steps in a process that outlives the module: once the earlier background call of
    this name has ended, fork twice (the process is nobody's child and in a session of its
    own), its standard streams on /dev/null, so the task's ssh session ends with the module."""
    lock = os.open(background_lock(params), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    # Taken before the fork: the background process holds the same open file, so the lock is
    # released only when it ends, however it ends.
    fcntl.flock(lock, fcntl.LOCK_EX)
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        os.close(lock)
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    null = os.open(os.devnull, os.O_RDWR)
    for stream in (0, 1, 2):
        os.dup2(null, stream)
    os.closerange(3, lock)
    os.closerange(lock + 1, os.sysconf("SC_OPEN_MAX"))
    try:
        for batch in batches(steps):
            capture_together(batch, params)
    finally:
        os._exit(0)  # never the module's exit path (its result was the parent's to send)


def not_ready(command: str) -> str | None:
    """Why the ready command did not succeed; None when it exited 0 in time."""
    try:
        done = subprocess.run(
            ["/bin/bash", "-c", command], stdin=subprocess.DEVNULL, capture_output=True,
            timeout=READY_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"ready command still running after {READY_TIMEOUT_S} s: {command}"
    if done.returncode == 0:
        return None
    said = (done.stdout + done.stderr).decode("utf-8", errors="replace").strip()
    return f"ready command exited with {done.returncode}: {command}" + (f": {said}" if said else "")


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    steps, problem = steps_of(params)
    if problem:
        module.fail_json(msg=problem)
    if params["ready"] is not None and params["background"] is None:
        module.fail_json(msg="ready is run only with background (the steps in the background)")
    if params["background"] is not None and params["collect_to"] is not None:
        module.fail_json(msg="collect_to is for steps that end within the task, not background")
    if params["background"] is not None and not STEP_NAME.match(params["background"]):
        module.fail_json(msg=f"background {params['background']!r} may hold only letters, "
                         "digits, '.', '_', '-'")  # fmt: skip
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
    if params["background"] is not None:
        start_in_background(steps, params)
        problem = None if params["ready"] is None else not_ready(params["ready"])
        lock = background_lock(params)
        if problem:
            module.fail_json(msg=problem, background_lock=lock)
        module.exit_json(failed=False, changed=True, background_lock=lock)
    results = [result for batch in batches(steps) for result in capture_together(batch, params)]
    packed = (
        {} if params["pack_held"] is None else {"pack": pack(params["dest"], params["pack_held"])}
    )
    if params["steps"] is not None:
        module.exit_json(failed=False, changed=True, results=results, **packed)
    single = {k: v for k, v in results[0].items() if k != "name"}
    module.exit_json(failed=False, changed=True, **single, **packed)


if __name__ == "__main__":
    main()
