"""The raw-capture Ansible module, run the way Ansible runs it: a process given a JSON args file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from tests.ansible_modules import module_argv
from tests.ansible_modules import run_module as run_ansible_module

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "library" / "gpuval_capture.py"
SIDECAR_SCHEMA = json.loads((REPO / "src/gpuval/schemas/sidecar.schema.json").read_text())
SIDECAR_KEYS = {
    "schema_version",
    "name",
    "host",
    "phase",
    "raw",
    "command",
    "tool",
    "cwd",
    "env",
    "exit_code",
    "timed_out",
    "timeout_s",
    "started_at",
    "ended_at",
    "duration_s",
    "skipped",
}


def run_module(tmp_path: Path, check_mode: bool = False, **args: Any) -> dict[str, Any]:
    """Run the module with ANSIBLE_MODULE_ARGS and return its JSON result."""
    return run_ansible_module("gpuval_capture", tmp_path, check_mode, **args)


def read_sidecar(dest: Path, name: str) -> dict[str, Any]:
    """The sidecar, checked against the run-folder contract's schema."""
    document: dict[str, Any] = json.loads((dest / f"{name}.meta.json").read_text())
    jsonschema.validate(document, SIDECAR_SCHEMA)
    return document


def parse_utc(stamp: str) -> datetime:
    assert stamp.endswith("Z"), stamp
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill 0; it is dead for our purpose.
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def test_success_writes_raw_output_and_complete_sidecar(tmp_path: Path) -> None:
    dest = tmp_path / "run" / "node1"
    result = run_module(
        tmp_path,
        name="hello",
        dest=str(dest),
        command="echo out; echo err >&2",
        phase="preflight",
        tool="nvidia-smi",
        host="node1",
    )
    assert result["changed"] is True
    assert result["rc"] == 0
    assert result["timed_out"] is False
    assert result["raw_path"] == str(dest / "hello.txt")
    assert (dest / "hello.txt").read_text() == "out\nerr\n"
    sidecar = read_sidecar(dest, "hello")
    assert set(sidecar) == SIDECAR_KEYS
    assert sidecar["schema_version"] == 1
    assert sidecar["name"] == "hello"
    assert sidecar["host"] == "node1"
    assert sidecar["phase"] == "preflight"
    assert sidecar["raw"] == "hello.txt"
    assert sidecar["command"] == "echo out; echo err >&2"
    assert sidecar["tool"] == "nvidia-smi"
    assert sidecar["exit_code"] == 0
    assert sidecar["timed_out"] is False
    assert sidecar["timeout_s"] is None
    assert sidecar["skipped"] is None
    started, ended = parse_utc(sidecar["started_at"]), parse_utc(sidecar["ended_at"])
    assert started <= ended
    assert sidecar["duration_s"] == result["duration_s"] >= 0


def test_non_zero_exit_is_recorded_not_failed(tmp_path: Path) -> None:
    result = run_module(
        tmp_path, name="bad", dest=str(tmp_path), command="echo partial; exit 3", phase="intranode"
    )
    assert "failed" not in result or result["failed"] is False
    assert result["rc"] == 3
    assert read_sidecar(tmp_path, "bad")["exit_code"] == 3
    assert (tmp_path / "bad.txt").read_text() == "partial\n"


def test_missing_binary_is_exit_127_with_a_message_in_the_raw_file(tmp_path: Path) -> None:
    result = run_module(
        tmp_path,
        name="missing",
        dest=str(tmp_path),
        command=["/nonexistent/nvidia-smi", "-q"],
        phase="preflight",
    )
    assert result["rc"] == 127
    assert "cannot run command" in (tmp_path / "missing.txt").read_text()
    assert read_sidecar(tmp_path, "missing")["command"] == "/nonexistent/nvidia-smi -q"


def test_timeout_kills_the_process_group_and_keeps_partial_output(tmp_path: Path) -> None:
    child_pid_file = tmp_path / "child.pid"
    # The child ignores SIGTERM, so only the group-wide SIGKILL ends it.
    script = (
        f"sh -c 'trap \"\" TERM; echo $$ > {child_pid_file}; sleep 30' & "
        "echo before-timeout; sleep 30; echo never"
    )
    started = time.monotonic()
    result = run_module(
        tmp_path,
        name="slow",
        dest=str(tmp_path),
        command=script,
        phase="internode",
        timeout=1,
        kill_grace_s=0.5,
    )
    assert time.monotonic() - started < 15
    assert result["timed_out"] is True
    assert result["rc"] is None
    assert (tmp_path / "slow.txt").read_text() == "before-timeout\n"
    sidecar = read_sidecar(tmp_path, "slow")
    assert sidecar["timed_out"] is True
    assert sidecar["exit_code"] is None
    assert sidecar["timeout_s"] == 1
    assert sidecar["ended_at"] is not None
    child_pid = int(child_pid_file.read_text())
    deadline = time.monotonic() + 5
    while pid_alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(child_pid)


def test_skip_reason_runs_nothing_and_writes_only_a_sidecar(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = run_module(
        tmp_path,
        name="p2p",
        dest=str(tmp_path),
        command=f"touch {marker}",
        phase="intranode",
        skip_reason="host has fewer than 2 GPUs",
    )
    assert result["raw_path"] is None
    assert result["rc"] is None
    assert not marker.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["args.json", "p2p.meta.json"]
    sidecar = read_sidecar(tmp_path, "p2p")
    assert sidecar["skipped"] == "host has fewer than 2 GPUs"
    assert sidecar["raw"] is None
    assert sidecar["exit_code"] is None


def test_env_is_passed_to_the_command_and_recorded(tmp_path: Path) -> None:
    run_module(
        tmp_path,
        name="env",
        dest=str(tmp_path),
        command='echo "$NCCL_DEBUG $NCCL_MIN_NCHANNELS"; pwd',
        phase="intranode",
        env={"NCCL_DEBUG": "INFO", "NCCL_MIN_NCHANNELS": 4},
        chdir="/",
    )
    assert (tmp_path / "env.txt").read_text() == "INFO 4\n/\n"
    sidecar = read_sidecar(tmp_path, "env")
    assert sidecar["env"] == {"NCCL_DEBUG": "INFO", "NCCL_MIN_NCHANNELS": "4"}
    assert sidecar["cwd"] == "/"


def test_check_mode_runs_and_writes_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    marker = tmp_path / "ran"
    result = run_module(
        tmp_path,
        check_mode=True,
        name="check",
        dest=str(dest),
        command=f"touch {marker}",
        phase="preflight",
    )
    assert result["changed"] is True
    assert result["rc"] is None
    assert not marker.exists()
    assert not dest.exists()


def test_sidecar_exists_with_null_exit_code_while_the_command_runs(tmp_path: Path) -> None:
    args_file = tmp_path / "args.json"
    args_file.write_text(
        json.dumps(
            {
                "ANSIBLE_MODULE_ARGS": {
                    "name": "long",
                    "dest": str(tmp_path),
                    "command": f"touch {tmp_path}/started; sleep 30",
                    "phase": "intranode",
                    "timeout": 20,
                }
            }
        )
    )
    process = subprocess.Popen(module_argv("gpuval_capture", args_file))
    try:
        deadline = time.monotonic() + 15
        while not (tmp_path / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        sidecar = read_sidecar(tmp_path, "long")
        assert sidecar["exit_code"] is None
        assert sidecar["started_at"] is not None
        assert sidecar["ended_at"] is None
    finally:
        process.kill()
        process.wait()


def test_return_output_gives_the_text_back(tmp_path: Path) -> None:
    result = run_module(
        tmp_path,
        name="csv",
        dest=str(tmp_path),
        command="printf 'index, name\\n0, NVIDIA H100\\n'",
        phase="preflight",
        raw_ext="csv",
        return_output=True,
    )
    assert result["output"] == "index, name\n0, NVIDIA H100\n"
    assert result["output_truncated"] is False
    assert result["raw_path"].endswith("csv.csv")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"name": "../escape", "command": "true"}, "may hold only"),
        ({"name": "ok"}, "command is required"),
        ({"name": "ok", "command": "true", "raw_ext": "a/b"}, "not a plain file extension"),
        ({"name": "ok", "command": "true", "timeout": -1}, "timeout must be"),
    ],
)
def test_bad_arguments_fail(tmp_path: Path, args: dict[str, Any], message: str) -> None:
    result = run_module(tmp_path, dest=str(tmp_path / "d"), phase="preflight", **args)
    assert result["failed"] is True
    assert message in result["msg"]
    assert not (tmp_path / "d").exists()


def test_steps_run_in_order_each_with_its_files_and_missing_programs_are_skipped(
    tmp_path: Path,
) -> None:
    dest = tmp_path / "run"
    fake = tmp_path / "bin" / "fake-nvcc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88' \"$@\"\n")
    fake.chmod(0o755)
    result = run_module(
        tmp_path,
        dest=str(dest),
        phase="preflight",
        host="node1",
        steps=[
            {"name": "nvcc-version", "command": ["nvcc", "--version"], "tool": "nvcc-version",
             "search": [str(tmp_path / "none"), str(fake)], "return_output": True},
            {"name": "gpu", "command": ["no-such-program-gpuval", "-q"], "search": [],
             "skip_note": ": no NVIDIA driver"},
            {"name": "os-release", "command": "echo ID=debian", "tool": "os-release"},
        ],
    )  # fmt: skip
    assert result["failed"] is False, result
    by_name = {r["name"]: r for r in result["results"]}
    assert list(by_name) == ["nvcc-version", "gpu", "os-release"]
    assert by_name["nvcc-version"]["rc"] == 0
    assert by_name["nvcc-version"]["output"].strip() == (
        "Cuda compilation tools, release 13.0, V13.0.88 --version"
    )
    assert read_sidecar(dest, "nvcc-version")["command"] == f"{fake} --version"
    assert (
        by_name["gpu"]["skipped_reason"]
        == "no-such-program-gpuval not found on this host: no NVIDIA driver"
    )
    assert read_sidecar(dest, "gpu")["raw"] is None
    assert (dest / "os-release.txt").read_text() == "ID=debian\n"
    assert all(read_sidecar(dest, n)["host"] == "node1" for n in by_name)


def test_through_ansible_a_failing_command_does_not_fail_the_task(tmp_path: Path) -> None:
    """Ansible marks results with a non-zero rc as failed unless the module says otherwise."""
    ansible = Path(sys.executable).parent / "ansible"
    completed = subprocess.run(
        [
            str(ansible),
            "localhost",
            "-i",
            "localhost,",
            "-c",
            "local",
            "-M",
            str(MODULE.parent),
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-m",
            "gpuval_capture",
            "-a",
            json.dumps(
                {"name": "fails", "dest": str(tmp_path), "command": "exit 4", "phase": "network"}
            ),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "ANSIBLE_CALLBACK_RESULT_FORMAT": "json"},
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert '"rc": 4' in completed.stdout
    assert read_sidecar(tmp_path, "fails")["exit_code"] == 4


def test_steps_run_in_one_call_each_with_its_own_raw_file_and_sidecar(tmp_path: Path) -> None:
    dest = tmp_path / "run"
    result = run_module(
        tmp_path, dest=str(dest), phase="health", timeout=30,
        steps=[
            {"name": "first", "command": "echo one", "tool": "kernel-log"},
            {"name": "second", "command": ["sh", "-c", "echo two; exit 3"], "raw_ext": "log",
             "timeout": "5"},
            {"name": "third", "command": "echo never", "requires": ["no-such-program-here"]},
            {"name": "fourth", "command": "echo never", "requires": [str(tmp_path / "*.nothing")]},
        ],
    )  # fmt: skip
    assert result["failed"] is False
    assert [(r["name"], r["rc"]) for r in result["results"]] == [
        ("first", 0), ("second", 3), ("third", None), ("fourth", None)]  # fmt: skip
    assert (dest / "first.txt").read_text() == "one\n"
    assert (dest / "second.log").read_text() == "two\n"
    first, second = read_sidecar(dest, "first"), read_sidecar(dest, "second")
    assert (first["phase"], first["tool"], first["timeout_s"]) == ("health", "kernel-log", 30)
    assert (second["exit_code"], second["timeout_s"]) == (3, 5)
    third = read_sidecar(dest, "third")
    assert (
        third["raw"] is None and third["skipped"] == "no-such-program-here not found on this host"
    )
    assert read_sidecar(dest, "fourth")["skipped"].endswith("*.nothing not found on this host")
    assert not (dest / "third.txt").exists()


def test_a_required_program_on_path_or_a_matching_path_lets_the_step_run(tmp_path: Path) -> None:
    (tmp_path / "present.flag").write_text("")
    result = run_module(
        tmp_path, name="found", dest=str(tmp_path / "d"), phase="health", command="echo ok",
        requires=["sh", str(tmp_path / "*.flag")],
    )  # fmt: skip
    assert result["rc"] == 0 and result["skipped_reason"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"steps": [{"name": "a", "command": "true", "colour": "red"}]},
            "unknown key(s) ['colour']",
        ),
        ({"steps": [{"name": "a/b", "command": "true"}]}, "step 'a/b': name"),
        ({"steps": [{"name": "a"}]}, "step 'a': command is required"),
        ({"name": "a", "command": "true", "steps": []}, "not both"),
        ({"name": "a", "command": "true", "steps": [{"name": "b", "command": "true"}]}, "not both"),
    ],
)
def test_bad_steps_fail_before_anything_runs(
    tmp_path: Path, args: dict[str, Any], message: str
) -> None:
    result = run_module(tmp_path, dest=str(tmp_path / "d"), phase="health", **args)
    assert result["failed"] is True and message in result["msg"]
    assert not (tmp_path / "d").exists()


def test_steps_of_one_group_run_together_each_whole_with_its_own_exit_status(
    tmp_path: Path,
) -> None:
    """Lanes started together: each writes only its own files, and the one that outlives its
    timeout is recorded as timed out (partial output kept) while the others end normally."""
    dest = tmp_path / "run"
    # Each lane waits until every lane of its group has started (its marker file exists), so
    # the steps can only finish if they run at the same time; the deadline ends a lone wait.
    started = tmp_path / "started"
    started.mkdir()

    def lane(index: int, tail: str) -> str:
        return (
            f"touch {started}/{index}; for _ in $(seq 100); do "
            f'[ "$(ls {started} | wc -l)" -ge 3 ] && break; sleep 0.1; done; '
            f'echo "lane {index} saw $(ls {started} | wc -l) lanes started"; {tail}'
        )

    result = run_module(
        tmp_path, dest=str(dest), phase="network", timeout=30,
        steps=[
            {"name": "lane0", "command": lane(0, "exit 0"), "group": "host"},
            {"name": "lane1", "command": lane(1, "exit 4"), "group": "host"},
            {"name": "lane2", "command": lane(2, "sleep 60"), "group": "host", "timeout": 5},
            {"name": "lane3", "command": "echo skipped", "group": "host",
             "skip_reason": "no HCA for rail 3 on node2"},
            {"name": "after", "command": f"ls {started} | wc -l", "group": "cuda"},
        ],
    )  # fmt: skip
    assert result["failed"] is False, result
    by_name = {r["name"]: r for r in result["results"]}
    assert list(by_name) == ["lane0", "lane1", "lane2", "lane3", "after"]
    assert [(by_name[n]["rc"], by_name[n]["timed_out"]) for n in by_name] == [
        (0, False), (4, False), (None, True), (None, False), (0, False),
    ]  # fmt: skip
    for index in range(3):
        assert (dest / f"lane{index}.txt").read_text() == f"lane {index} saw 3 lanes started\n"
    sidecars = {n: read_sidecar(dest, n) for n in by_name}
    assert [sidecars[n]["exit_code"] for n in by_name] == [0, 4, None, None, 0]
    assert [sidecars[n]["timed_out"] for n in by_name] == [False, False, True, False, False]
    assert sidecars["lane2"]["timeout_s"] == 5 and sidecars["lane0"]["timeout_s"] == 30
    assert sidecars["lane1"]["command"] == lane(1, "exit 4")
    assert sidecars["lane3"]["skipped"] == "no HCA for rail 3 on node2"
    assert not (dest / "lane3.txt").exists()
    assert all(sidecars[n]["ended_at"] is not None for n in by_name)
    # The next group starts once every lane of the one before has ended.
    assert (dest / "after.txt").read_text().strip() == "3"
    assert parse_utc(sidecars["after"]["started_at"]) >= max(
        parse_utc(sidecars[n]["ended_at"]) for n in ("lane0", "lane1", "lane2")
    )


def test_a_group_must_be_a_string(tmp_path: Path) -> None:
    result = run_module(
        tmp_path, dest=str(tmp_path / "d"), phase="network",
        steps=[{"name": "a", "command": "true", "group": ["host"]}],
    )  # fmt: skip
    assert result["failed"] is True and "step 'a': group must be a string" in result["msg"]
    assert not (tmp_path / "d").exists()
