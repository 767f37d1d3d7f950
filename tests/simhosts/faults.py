"""Network and host faults for tests: throttled links, lossy links, dead hosts."""

from __future__ import annotations

import os
import signal
import time

from .cluster import Cluster, Host
from .system import SimHostsError, is_running, process_start_time, run

# Burst and latency as in the measured recipe of test-environment.md (1 Gbit/s throttle).
TBF_BURST = "512kb"
TBF_LATENCY = "20ms"
FAULT_COMMENT = "gpuval-fault"


def _both_ends(host: Host) -> list[list[str]]:
    """`tc` prefixes for the controller-side veth (traffic to the host) and the host's eth0."""
    return [["tc"], ["ip", "netns", "exec", host.netns, "tc"]]


def throttle(host: Host, rate: str) -> None:
    """Limit the host's link to `rate` (tc syntax, e.g. "1gbit") in both directions."""
    for prefix, device in zip(_both_ends(host), (host.veth, "eth0"), strict=True):
        run([*prefix, "qdisc", "replace", "dev", device, "root", "tbf", "rate", rate,
             "burst", TBF_BURST, "latency", TBF_LATENCY])  # fmt: skip


def line_rate(host: Host, megabits: int) -> None:
    """Make the host's eth0 a NIC of `megabits` Mbit/s: its link limited to that rate, and its
    sysfs speed saying so (a veth says 10000 whatever it carries). Many pairs measured at once
    on a 2-core machine share its CPUs and each reach a fraction of 10 Gbit/s; below a rate
    they all reach at once, a healthy cluster measures healthy against its line rate."""
    throttle(host, f"{megabits}mbit")
    speed = "/run/gpuval-eth0-speed"
    host.exec(["sh", "-c", f"echo {megabits} > {speed} && "
               f"mount --bind {speed} /sys/class/net/eth0/speed"])  # fmt: skip


def unthrottle(host: Host) -> None:
    for prefix, device in zip(_both_ends(host), (host.veth, "eth0"), strict=True):
        run([*prefix, "qdisc", "del", "dev", device, "root"], check=False)


def drop_traffic(host: Host, probability: float = 1.0) -> None:
    """Drop this share of the packets the host receives (iptables in its network namespace)."""
    if not 0.0 < probability <= 1.0:
        raise SimHostsError(f"drop probability must be in (0, 1], not {probability}")
    match = [] if probability >= 1.0 else [
        "-m", "statistic", "--mode", "random", "--probability", f"{probability:.6f}"
    ]  # fmt: skip
    run(["ip", "netns", "exec", host.netns, "iptables", "-A", "INPUT", *match,
         "-m", "comment", "--comment", FAULT_COMMENT, "-j", "DROP"])  # fmt: skip


def restore_traffic(host: Host) -> None:
    """Remove every rule drop_traffic added to the host."""
    listing = run(["ip", "netns", "exec", host.netns, "iptables", "-S", "INPUT"])
    for rule in listing.stdout.splitlines():
        if FAULT_COMMENT in rule and rule.startswith("-A "):
            run(["ip", "netns", "exec", host.netns, "iptables", "-D", *rule.split()[1:]])


def disconnect(host: Host) -> None:
    """Cut the host off the network for good (its veth is deleted); it keeps running."""
    run(["ip", "link", "del", host.veth], check=False)


def kill_host(cluster: Cluster, host: Host, timeout: float = 5.0) -> None:
    """Kill the host: its pid 1 (sshd) and with it every process of the host; returns dead."""
    pid = host.init_pid
    if pid is None:
        raise SimHostsError(f"host {host.name} of {cluster.name} is not running")
    start = process_start_time(pid)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while is_running(pid, start) or is_running(host.launcher_pid, host.launcher_start):
        if time.monotonic() > deadline:
            raise SimHostsError(f"host {host.name} did not die within {timeout} s")
        time.sleep(0.01)
