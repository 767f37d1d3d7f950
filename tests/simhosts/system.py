"""Subprocess helpers and the preconditions every simulated-host operation checks."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path


class SimHostsError(RuntimeError):
    """A simulated-host operation failed; the message says what to do about it."""


# Controller-side commands the harness runs, with the Debian package that provides each.
CONTROLLER_TOOLS: dict[str, str] = {
    "debootstrap": "debootstrap",
    "ip": "iproute2",
    "tc": "iproute2",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "mount": "mount",
    "chroot": "coreutils",
    "ssh-keygen": "openssh-client",
    "ssh": "openssh-client",
    "tinyproxy": "tinyproxy",
    "iptables": "iptables",
}


SBIN_DIRS: tuple[str, ...] = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def require_root() -> None:
    if os.geteuid() != 0:
        raise SimHostsError(
            "simulated hosts need root (network namespaces, bridges, overlay mounts): "
            "run as root or with sudo"
        )


def missing_tools(tools: Sequence[str] = tuple(CONTROLLER_TOOLS)) -> list[str]:
    """Names of `tools` not on PATH (sbin directories included, as root would have them)."""
    search_path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN_DIRS])
    return [tool for tool in tools if shutil.which(tool, path=search_path) is None]


def require_tools(tools: Sequence[str] = tuple(CONTROLLER_TOOLS)) -> None:
    missing = missing_tools(tools)
    if missing:
        packages = sorted({CONTROLLER_TOOLS.get(tool, tool) for tool in missing})
        raise SimHostsError(
            f"missing commands: {', '.join(missing)}; install them with: "
            f"apt-get install {' '.join(packages)} (or: bash tests/setup/system-packages.sh)"
        )


def sbin_env() -> dict[str, str]:
    """The current environment with sbin directories on PATH (sudo/pytest may drop them)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([env.get("PATH", "/usr/bin:/bin"), *SBIN_DIRS])
    return env


def run(
    command: Sequence[str], *, check: bool = True, input_text: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command, capturing output; on failure raise SimHostsError quoting its stderr."""
    try:
        result = subprocess.run(
            list(command),
            input=input_text,
            capture_output=True,
            text=True,
            env=sbin_env(),
            check=False,
        )
    except FileNotFoundError as error:
        raise SimHostsError(f"command not found: {command[0]}") from error
    if check and result.returncode != 0:
        raise SimHostsError(
            f"`{' '.join(command)}` failed with exit status {result.returncode}: "
            f"{(result.stderr or result.stdout).strip()}"
        )
    return result


def process_start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot, or None when it does not exist.

    Stored next to a pid so a later `down` never kills an unrelated process that reused it.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; the fields after it are space separated.
    fields_after_name = stat.rsplit(")", 1)[1].split()
    return int(fields_after_name[19])


def is_same_process(pid: int | None, start_time: int | None) -> bool:
    return pid is not None and start_time is not None and process_start_time(pid) == start_time


def is_running(pid: int | None, start_time: int | None) -> bool:
    """The process exists, is the one started at `start_time`, and is not a zombie.

    A killed child of this very process stays a zombie until reaped, so reap it here.
    """
    if pid is None:
        return False
    with suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X") and process_start_time(pid) == start_time


def child_pids(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def mounts_under(directory: Path) -> list[str]:
    """Mount points at or below `directory` in this mount namespace, deepest first."""
    prefix = str(directory.resolve())
    points: list[str] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        # Field 5 is the mount point, with spaces etc. octal-escaped.
        point = line.split()[4].encode().decode("unicode_escape")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return sorted(points, key=len, reverse=True)


def remove_tree(directory: Path) -> None:
    """Unmount whatever is mounted below `directory` (lazily), then delete it."""
    if not directory.exists():
        return
    for point in mounts_under(directory):
        run(["umount", "--lazy", point], check=False)
    run(["rm", "-rf", "--one-file-system", str(directory)])


# --- Tearing down: processes by pid and start time (a pid can be reused), links, namespaces.


def kill_if_same(pid: int | None, start: int | None) -> None:
    if is_same_process(pid, start):
        assert pid is not None
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def netns_pids(netns: str) -> list[int]:
    result = run(["ip", "netns", "pids", netns], check=False)
    return [int(pid) for pid in result.stdout.split()] if result.returncode == 0 else []


def wait_gone(pids: Sequence[tuple[int, int | None]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while any(is_running(pid, start) for pid, start in pids):
        if time.monotonic() > deadline:
            raise SimHostsError(f"processes did not exit: {[pid for pid, _ in pids]}")
        time.sleep(0.01)


def link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()
