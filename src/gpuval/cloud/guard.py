"""The guard: terminates a run's instances when the run ends without doing it itself.

A detached process (its own session, so Ctrl-C in the terminal does not reach it) started when
the instances are launched. It watches the process that runs the benchmark (ansible-playbook)
and the run's deadline; when that process is gone (finished, failed, interrupted, killed) and
the run's teardown has not happened, or when the deadline (the budgeted time) passes, it
terminates the run's instances and records the cost, then exits. A run that tears down
normally marks its state finished, and the guard exits without doing anything.

    python -m gpuval.cloud.guard --run-dir reports/<run-id> --watch-pid PID
(the API key comes from LAMBDA_API_KEY in its environment, never from its command line).
The process is found through /proc (Linux); where there is none, the guard keeps the deadline
only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from gpuval.cloud.lambda_api import (
    API_KEY_ENV,
    API_URL_ENV,
    LambdaApiError,
    LambdaCloud,
    api_key_from_environment,
    api_url_from_environment,
)
from gpuval.cloud.provision import teardown
from gpuval.cloud.state import (
    STATE_DIR,
    StateError,
    read_state,
    state_lock,
    state_path,
    write_state,
)

GUARD_LOG = "guard.log"
POLL_S = 2.0
# Keep trying to terminate through an API outage for this long before giving up.
GIVE_UP_AFTER_S = 3600.0
PLAYBOOK_COMMANDS = ("ansible-playbook",)


def _stat_field(pid: int, number: int) -> int | None:
    """Field `number` (as proc(5) counts, from 1) of /proc/<pid>/stat; None without a process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: count the fields after its closing bracket.
    return int(stat[stat.rindex(")") + 2 :].split()[number - 3])


def process_start_time(pid: int) -> int | None:
    """Start time of a live process (clock ticks since boot), None when there is none."""
    return _stat_field(pid, 22)


def _parent_pid(pid: int) -> int | None:
    return _stat_field(pid, 4)


def _runs(pid: int, commands: Sequence[str]) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    names = {os.path.basename(arg.decode(errors="replace")) for arg in argv[:2]}
    return any(command in names for command in commands)


def playbook_process(start: int | None = None) -> int | None:
    """The outermost ancestor of this process running ansible-playbook (its workers are forks
    of it and run the same command), None when there is none or no /proc to look in."""
    found = None
    pid: int | None = _parent_pid(start or os.getpid())
    while pid and pid > 1:
        if _runs(pid, PLAYBOOK_COMMANDS):
            found = pid
        pid = _parent_pid(pid)
    return found


def start_guard(run_dir: Path, *, api_key: str, api_url: str, watch_pid: int | None) -> int:
    """Start the guard detached from this process and its terminal; its pid. The key travels
    in its environment; its output goes to lambda/guard.log in the run folder."""
    environment = {**os.environ, API_KEY_ENV: api_key, API_URL_ENV: api_url}
    command = [sys.executable, "-m", "gpuval.cloud.guard", "--run-dir", str(run_dir)]
    started = process_start_time(watch_pid) if watch_pid is not None else None
    if started is not None:
        command += ["--watch-pid", str(watch_pid), "--watch-start", str(started)]
    log = run_dir / STATE_DIR / GUARD_LOG
    with open(log, "a", encoding="utf-8") as output:
        process = subprocess.Popen(
            command,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    path = state_path(run_dir)
    with state_lock(path):
        state = read_state(path)
        state.guard_pid = process.pid
        write_state(path, state)
    return process.pid


def _say(message: str) -> None:
    print(f"{datetime.now(UTC).isoformat(timespec='seconds')} gpuval guard: {message}", flush=True)


def wait_for_reason(run_dir: Path, watch_pid: int | None, watch_start: int | None) -> str | None:
    """Why the instances must go now, or None when the run tore them down itself."""
    path = state_path(run_dir)
    while True:
        state = read_state(path)
        if state.finished:
            return None
        if state.deadline and datetime.now(UTC) >= datetime.fromisoformat(state.deadline):
            return f"time-to-live reached ({state.deadline})"
        if watch_pid is not None and process_start_time(watch_pid) != watch_start:
            return f"the run (process {watch_pid}) ended without tearing down"
        time.sleep(POLL_S)


def guard(
    run_dir: Path, client: LambdaCloud, watch_pid: int | None, watch_start: int | None
) -> int:
    reason = wait_for_reason(run_dir, watch_pid, watch_start)
    if reason is None:
        _say("the run tore its instances down itself; nothing to do")
        return 0
    _say(f"{reason}: terminating the run's instances")
    started = time.monotonic()
    delay = POLL_S
    while True:
        try:
            result = teardown(client, run_dir, reason=f"guard: {reason}")
        except LambdaApiError as problem:
            if time.monotonic() - started > GIVE_UP_AFTER_S:
                _say(f"giving up: {problem}; the instances may still run, see {run_dir}")
                return 1
            _say(f"{problem}; trying again in {delay:.0f} s")
            time.sleep(delay)
            delay = min(delay * 2, 60.0)
            continue
        total = (result.cost or {}).get("total_usd")
        _say(f"terminated {', '.join(result.terminated) or 'nothing'}; cost ${total}")
        return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuval.cloud.guard", description=__doc__)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--watch-pid", type=int)
    parser.add_argument("--watch-start", type=int)
    arguments = parser.parse_args(argv)
    try:
        client = LambdaCloud(api_key_from_environment(), api_url_from_environment())
        return guard(arguments.run_dir, client, arguments.watch_pid, arguments.watch_start)
    except (LambdaApiError, StateError) as problem:
        _say(str(problem))
        return 2


if __name__ == "__main__":
    sys.exit(main())
