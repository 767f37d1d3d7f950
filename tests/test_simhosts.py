"""The simulated-host harness really gives separate hosts: names, addresses, files, ssh, apt."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.simhosts import Cluster, HostSpec, SimHostsError, down, faults, up
from tests.simhosts.fixtures import simulated_hosts
from tests.simhosts.system import is_same_process, mounts_under

pytestmark = pytest.mark.simhosts

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with simulated_hosts(3, name="simtest") as started:
        yield started


def ssh(cluster: Cluster, host: str, command: str, timeout: float = 60) -> str:
    result = subprocess.run(
        cluster.ssh_command(host, command),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"{host}: {command}: {result.stderr}"
    return result.stdout


def tcp_reachable(address: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout):
            return True
    except OSError:
        return False


def test_hosts_have_their_own_names_and_addresses(cluster: Cluster) -> None:
    reported = {host.name: ssh(cluster, host.name, "hostname").strip() for host in cluster.hosts}
    assert reported == {"node1": "node1", "node2": "node2", "node3": "node3"}
    addresses = {
        host.name: ssh(cluster, host.name, "ip -4 -o addr show dev eth0").split()[3]
        for host in cluster.hosts
    }
    assert addresses == {host.name: f"{host.ip}/24" for host in cluster.hosts}
    assert len(set(addresses.values())) == 3


def test_hosts_resolve_each_other_by_name(cluster: Cluster) -> None:
    resolved = ssh(cluster, "node1", "getent hosts node3").split()[0]
    assert resolved == cluster.host("node3").ip
    assert "1 received" in ssh(cluster, "node1", "ping -c 1 -W 2 node2")


def test_files_written_on_one_host_are_invisible_on_another(cluster: Cluster) -> None:
    ssh(cluster, "node1", "echo node1 > /var/tmp/owner && echo node1 > /tmp/owner")
    assert ssh(cluster, "node1", "cat /var/tmp/owner /tmp/owner") == "node1\nnode1\n"
    assert ssh(cluster, "node2", "ls /var/tmp/owner /tmp/owner 2>&1 || true").count("No such") == 2
    # Nor does a host's write reach the shared image.
    assert not (Path(cluster.image) / "var/tmp/owner").exists()


def test_processes_of_a_host_are_its_own(cluster: Cluster) -> None:
    ssh(cluster, "node1", "nohup sleep 300 >/dev/null 2>&1 &")
    assert "sleep 300" in ssh(cluster, "node1", "ps -eo args")
    assert "sleep 300" not in ssh(cluster, "node2", "ps -eo args")


def test_ansible_playbook_runs_over_ssh(cluster: Cluster, tmp_path: Path) -> None:
    playbook = tmp_path / "hostname.yml"
    playbook.write_text(
        "- hosts: gpu_nodes\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - ansible.builtin.ping:\n"
        "    - ansible.builtin.command: hostname\n"
        "      register: simtest_hostname\n"
        "      changed_when: false\n"
        "    - ansible.builtin.assert:\n"
        "        that: simtest_hostname.stdout == inventory_hostname\n"
    )
    environment = {
        **os.environ,
        "ANSIBLE_PIPELINING": "true",
        "ANSIBLE_FORKS": "8",
        "ANSIBLE_NOCOLOR": "true",
    }
    result = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(cluster.inventory), str(playbook)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environment,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for host in ("node1", "node2", "node3"):
        assert f"{host}" in result.stdout and "failed=0" in result.stdout
    assert result.stdout.count("ok=3") == 3


def test_apt_reaches_the_mirror_only_through_the_proxy(cluster: Cluster) -> None:
    output = ssh(cluster, "node2", "apt-get update 2>&1", timeout=300)
    assert "bookworm InRelease" in output and "Err:" not in output
    tinyproxy_log = (Path(cluster.state_dir) / "tinyproxy.log").read_text()
    assert "deb.debian.org" in tinyproxy_log
    direct = ssh(
        cluster,
        "node2",
        "python3 -c 'import socket; socket.create_connection((\"151.101.2.132\", 80), timeout=3)'"
        " 2>&1 && echo connected || echo unreachable",
    )
    assert direct.strip().endswith("unreachable")


def iperf_mbits(cluster: Cluster, host: str) -> float:
    """Controller-to-host throughput over one second, with an iperf3 server in the host's netns."""
    target = cluster.host(host)
    in_netns = ["ip", "netns", "exec", target.netns]
    server = subprocess.Popen(
        [*in_netns, "iperf3", "-s", "-1", "-B", target.ip],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # A probing connection would use up the one-off server: watch its socket instead.
        deadline = time.monotonic() + 5
        listening = [*in_netns, "ss", "-Hltn", "sport", "=", ":5201"]
        while not subprocess.run(listening, capture_output=True, text=True).stdout.strip():
            assert time.monotonic() < deadline, "iperf3 server did not start"
            time.sleep(0.05)
        result = subprocess.run(
            ["iperf3", "-c", target.ip, "-t", "1", "-J"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    finally:
        server.wait(timeout=10)
    report = json.loads(result.stdout)
    return float(report["end"]["sum_received"]["bits_per_second"]) / 1e6


def test_throttle_slows_one_host_only(cluster: Cluster) -> None:
    faults.throttle(cluster.host("node3"), "50mbit")
    try:
        throttled = iperf_mbits(cluster, "node3")
        free = iperf_mbits(cluster, "node2")
    finally:
        faults.unthrottle(cluster.host("node3"))
    assert throttled < 60, throttled
    assert free > 4 * throttled, (free, throttled)
    assert iperf_mbits(cluster, "node3") > 4 * throttled


def test_dropped_traffic_cuts_a_host_off_until_restored(cluster: Cluster) -> None:
    node3 = cluster.host("node3")
    faults.drop_traffic(node3)
    try:
        assert not tcp_reachable(node3.ip, 22)
        assert tcp_reachable(cluster.host("node2").ip, 22)
    finally:
        faults.restore_traffic(node3)
    assert tcp_reachable(node3.ip, 22)


def test_teardown_leaves_nothing_behind() -> None:
    cluster = up("simtest-down", [HostSpec("a"), HostSpec("b"), HostSpec("c")])
    ssh(cluster, "a", "nohup sleep 4242 >/dev/null 2>&1 &")
    faults.kill_host(cluster, cluster.host("c"))
    pids = [(host.launcher_pid, host.launcher_start) for host in cluster.hosts]
    pids.append((cluster.proxy_pid, cluster.proxy_start))
    down(cluster)
    down(cluster)  # idempotent
    assert not any(is_same_process(pid, start) for pid, start in pids)
    assert not Path(cluster.state_dir).exists()
    assert not mounts_under(Path(cluster.state_dir).parent / cluster.name)
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"gvsim{cluster.index}-" not in namespaces
    links = os.listdir("/sys/class/net")
    assert not [link for link in links if link.startswith(f"gv{cluster.index}h")]
    assert cluster.bridge not in links
    processes = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "sleep 4242" not in processes and cluster.state_dir not in processes


def test_failed_start_cleans_up_the_half_made_cluster(tmp_path: Path) -> None:
    missing = tmp_path / "not-there"
    with pytest.raises(SimHostsError, match="not a directory"):
        up("simtest-half", [HostSpec("a")], bind_ro=[str(missing)])
    links = os.listdir("/sys/class/net")
    assert not [link for link in links if link.startswith("gvsim") and "half" in link]
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "-a " not in namespaces.replace("\n", " \n")
