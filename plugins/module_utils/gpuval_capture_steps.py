# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
"""Running gpuval_capture's steps on a node: each command's output streamed into its raw file,
its sidecar written before and after, its timeout enforced on the whole process group, steps of
one group at the same time. Shared by the module and the background process it can detach."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

SCHEMA_VERSION = 1
OUTPUT_RETURN_LIMIT = 1 << 20


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
