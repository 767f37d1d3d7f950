"""gpuval_capture with background: the steps run in a process of their own and the task returns
once ready says they serve, the files are those of a step run in the task, a later background
call of the same name and folder starts only after the earlier one ended (its ports free), and
a flock on the returned lock waits for the steps to end."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.ansible_modules import module_argv
from tests.ansible_modules import run_module as run_ansible_module


def run_module(tmp_path: Path, **args: Any) -> dict[str, Any]:
    return run_ansible_module("gpuval_capture", tmp_path, False, **args)


def sidecar(dest: Path, name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((dest / f"{name}.meta.json").read_text())
    return document


def ended(dest: Path, name: str) -> dict[str, Any]:
    """The step's sidecar once its background process wrote the final one (20 s at most)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        path = dest / f"{name}.meta.json"
        if path.exists() and (found := sidecar(dest, name))["ended_at"] is not None:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{name} did not end")


def held_until_released(flag_dir: Path, tag: str) -> str:
    """A command that says it started, then serves until the test releases it."""
    return (
        f"touch {flag_dir}/{tag}.started; "
        f"until [ -e {flag_dir}/{tag}.release ]; do sleep 0.05; done; echo {tag} served"
    )


def test_returns_once_ready_while_the_step_still_runs(tmp_path: Path) -> None:
    dest, flags = tmp_path / "peer", tmp_path
    try:
        # If the background process kept the task's output open, this would wait for the step
        # and run_module's 60 s limit would end the test first.
        result = run_module(
            tmp_path, name="server", dest=str(dest), phase="network", timeout=50,
            background="iperf3",
            command=held_until_released(flags, "server"),
            ready=f"until [ -e {flags}/server.started ]; do sleep 0.05; done",
        )  # fmt: skip
        assert result["failed"] is False
        # Beside the run folder, never in it: a folder is collected whole.
        assert result["background_lock"] == f"{dest}.iperf3.background.lock"
        running = sidecar(dest, "server")
        assert running["exit_code"] is None and running["started_at"] is not None
    finally:
        (flags / "server.release").touch()
    # What a role's wait task runs: it returns once the steps have ended, sidecar written.
    subprocess.run(["flock", "--shared", result["background_lock"], "true"], check=True, timeout=30)
    done = sidecar(dest, "server")
    assert done["exit_code"] == 0 and done["timed_out"] is False
    assert (dest / "server.txt").read_text() == "server served\n"


def test_a_later_background_call_starts_after_the_earlier_one_ended(tmp_path: Path) -> None:
    dest, flags = tmp_path / "peer", tmp_path
    args_file = tmp_path / "second.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {
        "name": "second", "dest": str(dest), "phase": "network", "command": "echo second",
        "background": "servers",
    }}))  # fmt: skip
    try:
        run_module(
            tmp_path, name="first", dest=str(dest), phase="network", timeout=50,
            background="servers",
            command=held_until_released(flags, "first"),
            ready=f"until [ -e {flags}/first.started ]; do sleep 0.05; done",
        )  # fmt: skip
        second = subprocess.Popen(module_argv("gpuval_capture", args_file), stdout=subprocess.PIPE)
        # Time for the second call to start (and, without the lock, to run its echo at once).
        time.sleep(1)
    finally:
        (flags / "first.release").touch()
    output, _ = second.communicate(timeout=60)
    assert json.loads(output)["failed"] is False
    first_ended = ended(dest, "first")["ended_at"]
    assert ended(dest, "second")["started_at"] >= first_ended
    assert (dest / "second.txt").read_text() == "second\n"


def test_a_ready_command_that_fails_fails_the_task_with_its_output(tmp_path: Path) -> None:
    result = run_module(
        tmp_path, name="server", dest=str(tmp_path / "peer"), phase="network", timeout=10,
        command="true", background="iperf3",
        ready="echo 'iperf3 servers not listening' >&2; exit 3",
    )  # fmt: skip
    assert result["failed"] is True
    assert result["msg"].startswith("ready command exited with 3: ")
    assert result["msg"].endswith(": iperf3 servers not listening")


def test_ready_without_background_is_refused(tmp_path: Path) -> None:
    result = run_module(
        tmp_path, name="x", dest=str(tmp_path), phase="network", command="true", ready="true"
    )
    assert result["failed"] is True
    assert result["msg"] == "ready is run only with background (the steps in the background)"
    assert not (tmp_path / "x.meta.json").exists()
