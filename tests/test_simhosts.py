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

from tests.simhosts import Bind, Cluster, HostSpec, SimHostsError, down, faults, registered, up
from tests.simhosts.cluster import default_state_dir
from tests.simhosts.fixtures import simulated_hosts
from tests.simhosts.system import is_same_process, mounts_under, require_tools

pytestmark = pytest.mark.simhosts

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def shared_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A read-only toolkit-like directory for every host, and a writable one for node1."""
    toolkit = tmp_path_factory.mktemp("toolkit")
    (toolkit / "bin").mkdir()
    (toolkit / "bin" / "tool").write_text("#!/bin/sh\necho tool\n")
    return toolkit, tmp_path_factory.mktemp("node1-extra")


@pytest.fixture(scope="module")
def cluster(shared_dirs: tuple[Path, Path]) -> Iterator[Cluster]:
    toolkit, extra = shared_dirs
    with simulated_hosts(
        3,
        name="simtest",
        bind_ro=[str(toolkit)],
        host_binds={"node1": [Bind(str(extra), "/srv/extra", readonly=False)]},
    ) as started:
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
    assert (cluster.host("node1").root / "var/tmp/owner").read_text() == "node1\n"
    # Nor does a host's write reach the shared image.
    assert not (Path(cluster.image) / "var/tmp/owner").exists()


def test_binds_reach_the_hosts_they_were_given_to(
    cluster: Cluster, shared_dirs: tuple[Path, Path]
) -> None:
    toolkit, extra = shared_dirs
    for host in ("node1", "node3"):
        assert ssh(cluster, host, f"cat {toolkit}/bin/tool") == "#!/bin/sh\necho tool\n"
        assert "Read-only" in ssh(cluster, host, f"touch {toolkit}/new 2>&1 || true")
    ssh(cluster, "node1", "echo from-node1 > /srv/extra/out")
    assert (extra / "out").read_text() == "from-node1\n"
    assert "No such" in ssh(cluster, "node2", "ls /srv/extra 2>&1 || true")


def test_processes_of_a_host_are_its_own(cluster: Cluster) -> None:
    ssh(cluster, "node1", "nohup sleep 300 >/dev/null 2>&1 &")
    assert "sleep 300" in ssh(cluster, "node1", "ps -eo args")
    assert "sleep 300" not in ssh(cluster, "node2", "ps -eo args")
    assert "sleep 300" in cluster.host("node1").exec(["ps", "-eo", "args"]).stdout
    assert cluster.host("node2").exec(["hostname"]).stdout == "node2\n"


def test_hosts_ssh_to_each_other_by_name_with_keys_they_were_given(cluster: Cluster) -> None:
    # What an MPI role does: give the hosts a key, then launch across them by name.
    key = cluster.ssh_key.read_text()
    ssh(cluster, "node1", f"umask 077 && printf '%s' '{key}' > /root/.ssh/id_ed25519")
    reply = ssh(cluster, "node1", "ssh -o StrictHostKeyChecking=accept-new node2 hostname")
    assert reply == "node2\n"


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
    assert not tcp_reachable(cluster.host("c").ip, 22)
    assert tcp_reachable(cluster.host("b").ip, 22)
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
    with pytest.raises(SimHostsError, match="not a directory"):
        up("simtest-half", [HostSpec("halfhost")], bind_ro=[str(tmp_path / "not-there")])
    assert not any(cluster.name == "simtest-half" for cluster in registered())
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "-halfhost" not in namespaces
    assert not default_state_dir("simtest-half").exists()


def test_a_host_that_cannot_start_fails_fast_with_its_log(tmp_path: Path) -> None:
    # Mounting a directory onto a file of the image makes the host's start script fail.
    broken = HostSpec("brokenhost", binds=(Bind(str(tmp_path), "/etc/hostname"),))
    started = time.monotonic()
    with pytest.raises(SimHostsError, match=r"sshd of host brokenhost did not start(.|\n)*mkdir"):
        up("simtest-broken", [HostSpec("fine"), broken])
    assert time.monotonic() - started < 10
    assert not any(cluster.name == "simtest-broken" for cluster in registered())
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "-brokenhost" not in namespaces


def test_missing_tools_name_the_package_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("tests.simhosts.system.SBIN_DIRS", ())
    with pytest.raises(SimHostsError, match=r"apt-get install .*tinyproxy"):
        require_tools(["ip", "tinyproxy"])


def test_cli_refuses_to_run_without_root() -> None:
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-B", "-m", "tests.simhosts", "up", "--name", "simtest-nonroot"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "need root" in result.stderr
