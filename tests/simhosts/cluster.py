"""Bring a cluster of simulated hosts up and down.

A host is a network namespace (veth pair on a per-cluster bridge) running `sshd -D` inside
`unshare --uts --mount --pid`, chrooted into its own overlayfs over the cached image. Its
mounts live only in its private mount namespace, so they vanish with its processes. The
cluster's state file records everything created, so `down` works from any process, is
idempotent, and also cleans up a cluster that was only half created.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import shlex
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .apt_lists import keep_lists, seed_lists
from .image import ensure_image, package_cache, share_packages
from .system import (
    SimHostsError,
    child_pids,
    is_running,
    is_same_process,
    kill_if_same,
    link_exists,
    mounts_under,
    netns_pids,
    process_start_time,
    remove_tree,
    require_root,
    require_tools,
    run,
    sbin_env,
    wait_gone,
)

DEFAULT_STATE_ROOT = Path("/var/tmp/gpuval-simhosts")
REGISTRY = Path("/run/gpuval-simhosts")
STATE_FILE = "cluster.json"
# Clusters live in 10.213.<index>.0/24; the index also names the bridge and the veths.
SUBNET_FIRST_OCTETS = "10.213"
SUBNET_COUNT = 256
FIRST_HOST_OCTET = 11
# Not tinyproxy's packaged default (8888), which a system-wide tinyproxy may hold.
PROXY_PORT = 18888
# Inside a host root: apt's archive of downloaded packages.
APT_ARCHIVES = Path("var/cache/apt/archives")
SSH_PORT = 22
NAME_PATTERN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
START_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Bind:
    """A controller directory bind-mounted into a host (`target` defaults to the same path)."""

    source: str
    target: str = ""
    readonly: bool = True

    @property
    def mount_point(self) -> str:
        return self.target or self.source


@dataclass(frozen=True)
class HostSpec:
    name: str
    groups: tuple[str, ...] = ()
    binds: tuple[Bind, ...] = ()


@dataclass
class Host:
    name: str
    ip: str
    netns: str
    veth: str
    directory: str
    groups: list[str] = field(default_factory=list)
    binds: list[Bind] = field(default_factory=list)
    launcher_pid: int | None = None
    launcher_start: int | None = None

    @property
    def init_pid(self) -> int | None:
        """Pid (in the controller's pid namespace) of the host's pid 1, its sshd."""
        if not is_same_process(self.launcher_pid, self.launcher_start):
            return None
        assert self.launcher_pid is not None
        children = child_pids(self.launcher_pid)
        return children[0] if children else None

    @property
    def root(self) -> Path:
        """The host's root filesystem as the controller sees it (through /proc)."""
        pid = self.init_pid
        if pid is None:
            raise SimHostsError(f"host {self.name} is not running")
        return Path(f"/proc/{pid}/root")

    def exec(
        self, command: Sequence[str], *, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a command inside the host (all its namespaces and its root), without ssh."""
        pid = self.init_pid
        if pid is None:
            raise SimHostsError(f"host {self.name} is not running")
        enter = ["nsenter", "-t", str(pid), "-m", "-u", "-n", "-p", "-r", "-w"]
        return run([*enter, *command], check=check)


@dataclass
class Cluster:
    name: str
    index: int
    state_dir: str
    image: str
    hosts: list[Host] = field(default_factory=list)
    proxy_pid: int | None = None
    proxy_start: int | None = None

    @property
    def subnet(self) -> str:
        return f"{SUBNET_FIRST_OCTETS}.{self.index}.0/24"

    @property
    def bridge(self) -> str:
        return f"gvsim{self.index}"

    @property
    def bridge_ip(self) -> str:
        return f"{SUBNET_FIRST_OCTETS}.{self.index}.1"

    @property
    def proxy_url(self) -> str:
        return f"http://{self.bridge_ip}:{PROXY_PORT}"

    @property
    def ssh_key(self) -> Path:
        return Path(self.state_dir) / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return Path(self.state_dir) / "known_hosts"

    @property
    def inventory(self) -> Path:
        return Path(self.state_dir) / "inventory.ini"

    @property
    def ssh_config(self) -> Path:
        return Path(self.state_dir) / "ssh_config"

    @property
    def state_file(self) -> Path:
        return Path(self.state_dir) / STATE_FILE

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise SimHostsError(f"cluster {self.name} has no host {name!r}")

    def ssh_command(self, host: str, *command: str) -> list[str]:
        """An ssh command line that runs `command` on `host` as root."""
        return ["ssh", "-F", str(self.ssh_config), host, *command]

    def to_json(self) -> dict[str, object]:
        document = asdict(self)
        document.update(
            subnet=self.subnet,
            bridge=self.bridge,
            bridge_ip=self.bridge_ip,
            proxy_url=self.proxy_url,
            ssh_key=str(self.ssh_key),
            known_hosts=str(self.known_hosts),
            inventory=str(self.inventory),
            ssh_config=str(self.ssh_config),
        )
        return document

    @classmethod
    def from_json(cls, document: Mapping[str, object]) -> Cluster:
        raw_hosts = document.get("hosts", [])
        assert isinstance(raw_hosts, list)
        hosts = [
            Host(**{**raw, "binds": [Bind(**bind) for bind in raw.get("binds", [])]})
            for raw in raw_hosts
        ]
        fields = {"name", "index", "state_dir", "image", "proxy_pid", "proxy_start"}
        kwargs = {key: value for key, value in document.items() if key in fields}
        return cls(hosts=hosts, **kwargs)  # type: ignore[arg-type]

    @property
    def registry_file(self) -> Path:
        return REGISTRY / f"{self.name}.json"

    def save(self) -> None:
        """Write the state file, and its copy in the machine-wide registry.

        The copy lets `down --all` clean up a cluster whose state directory was deleted
        (a molecule ephemeral directory, say) while the cluster was still up.
        """
        text = json.dumps(self.to_json(), indent=2) + "\n"
        for path in (self.state_file, self.registry_file):
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(".tmp")
            temporary.write_text(text)
            temporary.rename(path)


def default_state_dir(name: str) -> Path:
    return Path(os.environ.get("GPUVAL_SIMHOSTS_STATE", str(DEFAULT_STATE_ROOT))) / name


def load(state_dir: Path) -> Cluster | None:
    try:
        document = json.loads((state_dir / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    return Cluster.from_json(document)


def registered() -> list[Cluster]:
    """Every cluster of this machine that has not been torn down."""
    return [
        Cluster.from_json(json.loads(path.read_text())) for path in sorted(REGISTRY.glob("*.json"))
    ]


def _check_name(name: str, what: str) -> None:
    if not NAME_PATTERN.match(name):
        raise SimHostsError(
            f"{what} {name!r} is not a valid host name (lower-case letters, digits, '-')"
        )


@contextmanager
def _registry_lock() -> Iterator[None]:
    REGISTRY.mkdir(parents=True, exist_ok=True)
    with open(REGISTRY / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _subnet_in_use(index: int) -> bool:
    routes = run(["ip", "-4", "route", "show", "to", "root", f"{SUBNET_FIRST_OCTETS}.{index}.0/24"])
    return bool(routes.stdout.strip())


def _allocate_index(name: str) -> int:
    """A free subnet index, starting from one derived from the name (stable across runs)."""
    start = int(hashlib.sha256(name.encode()).hexdigest(), 16) % SUBNET_COUNT
    for offset in range(SUBNET_COUNT):
        index = (start + offset) % SUBNET_COUNT
        if not link_exists(f"gvsim{index}") and not _subnet_in_use(index):
            return index
    raise SimHostsError(f"no free subnet left in {SUBNET_FIRST_OCTETS}.0.0/16")


def _hosts_file(cluster: Cluster) -> str:
    lines = ["127.0.0.1\tlocalhost", f"{cluster.bridge_ip}\tgpuval-controller"]
    lines += [f"{host.ip}\t{host.name}" for host in cluster.hosts]
    return "\n".join(lines) + "\n"


def _proxy_environment(cluster: Cluster) -> str:
    """sshd `SetEnv` lines: every ssh session of a host reaches the internet through the proxy."""
    no_proxy = ",".join(
        ["localhost", "127.0.0.1", cluster.bridge_ip, "gpuval-controller"]
        + [name for host in cluster.hosts for name in (host.name, host.ip)]
    )
    variables = {
        "http_proxy": cluster.proxy_url,
        "https_proxy": cluster.proxy_url,
        "HTTP_PROXY": cluster.proxy_url,
        "HTTPS_PROXY": cluster.proxy_url,
        "no_proxy": no_proxy,
        "NO_PROXY": no_proxy,
    }
    return "SetEnv " + " ".join(f"{key}={value}" for key, value in variables.items()) + "\n"


def _write_private(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _prepare_root(cluster: Cluster, host: Host) -> None:
    """Write the host's own files into its overlay upper directory before it is mounted."""
    directory = Path(host.directory)
    upper = directory / "upper"
    for sub in ("upper", "work", "merged"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    _write_private(upper / "etc/hostname", host.name + "\n")
    _write_private(upper / "etc/machine-id", secrets.token_hex(16) + "\n", 0o444)
    _write_private(upper / "etc/hosts", _hosts_file(cluster))
    _write_private(
        upper / "etc/apt/apt.conf.d/01gpuval-proxy",
        f'Acquire::http::Proxy "{cluster.proxy_url}";\n'
        f'Acquire::https::Proxy "{cluster.proxy_url}";\n',
    )
    _write_private(upper / "etc/ssh/sshd_config.d/gpuval-proxy.conf", _proxy_environment(cluster))
    share_packages(package_cache(), upper / APT_ARCHIVES)
    seed_lists(Path(cluster.image), upper)
    public_key = cluster.ssh_key.with_suffix(".pub").read_text()
    (upper / "root").mkdir(mode=0o700, exist_ok=True)
    _write_private(upper / "root/.ssh/authorized_keys", public_key, 0o600)
    (upper / "root/.ssh").chmod(0o700)
    host_key = upper / "etc/ssh/ssh_host_ed25519_key"
    if not host_key.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", host.name, "-f", str(host_key)])
    for bind in host.binds:
        if not Path(bind.source).is_dir():
            raise SimHostsError(f"bind source {bind.source} is not a directory")


def _init_script(cluster: Cluster, host: Host) -> str:
    """The shell script that runs as pid 1 of the host: mounts, then execs sshd in the chroot."""
    directory = Path(host.directory)
    merged = shlex.quote(str(directory / "merged"))
    overlay = (
        f"lowerdir={cluster.image},upperdir={directory / 'upper'},workdir={directory / 'work'}"
    )
    lines = [
        "set -eu",
        f"hostname {shlex.quote(host.name)}",
        f"M={merged}",
        f'mount -t overlay overlay -o {shlex.quote(overlay)} "$M"',
        'mount -t proc proc "$M/proc"',
        'mount -t sysfs sysfs "$M/sys"',
        'mount -t cgroup2 cgroup2 "$M/sys/fs/cgroup" 2>/dev/null || true',
        'mount -t tmpfs -o mode=755 tmpfs "$M/run"',
        'mkdir -p "$M/run/sshd" "$M/run/lock"',
        'mount -t tmpfs -o mode=755 tmpfs "$M/dev"',
        "for dev in null zero full random urandom tty; do",
        '  touch "$M/dev/$dev"; mount --bind "/dev/$dev" "$M/dev/$dev"',
        "done",
        'mkdir -p "$M/dev/pts" "$M/dev/shm"',
        'mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$M/dev/pts"',
        'ln -s pts/ptmx "$M/dev/ptmx"',
        'mount -t tmpfs -o mode=1777 tmpfs "$M/dev/shm"',
        'ln -s /proc/self/fd "$M/dev/fd"',
        'ln -s /proc/self/fd/0 "$M/dev/stdin"',
        'ln -s /proc/self/fd/1 "$M/dev/stdout"',
        'ln -s /proc/self/fd/2 "$M/dev/stderr"',
    ]
    for bind in host.binds:
        target = '"$M"' + shlex.quote(bind.mount_point)
        lines.append(f"mkdir -p {target}")
        lines.append(f"mount --rbind {shlex.quote(bind.source)} {target}")
        if bind.readonly:
            lines.append(f"mount -o remount,bind,ro {target}")
    lines.append('exec chroot "$M" /usr/sbin/sshd -D -e')
    return "\n".join(lines) + "\n"


def _start_host(cluster: Cluster, host: Host) -> None:
    directory = Path(host.directory)
    script = directory / "init.sh"
    script.write_text(_init_script(cluster, host))
    with open(directory / "host.log", "ab") as log:
        process = subprocess.Popen(
            [
                "ip", "netns", "exec", host.netns,
                "unshare", "--uts", "--mount", "--pid", "--fork", "--kill-child",
                "/bin/sh", str(script),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env=sbin_env(),
        )  # fmt: skip
    host.launcher_pid = process.pid
    host.launcher_start = process_start_time(process.pid)


def _create_network(cluster: Cluster, host: Host, position: int) -> None:
    peer = f"gv{cluster.index}p{position}"
    commands = [
        ["ip", "netns", "add", host.netns],
        ["ip", "link", "add", host.veth, "type", "veth", "peer", "name", peer],
        ["ip", "link", "set", peer, "netns", host.netns],
        ["ip", "link", "set", host.veth, "master", cluster.bridge, "up"],
        ["ip", "-n", host.netns, "link", "set", peer, "name", "eth0"],
        ["ip", "-n", host.netns, "addr", "add", f"{host.ip}/24", "dev", "eth0"],
        ["ip", "-n", host.netns, "link", "set", "eth0", "up"],
        ["ip", "-n", host.netns, "link", "set", "lo", "up"],
        ["ip", "-n", host.netns, "route", "add", "default", "via", cluster.bridge_ip],
    ]
    for command in commands:
        run(command)


def _start_proxy(cluster: Cluster) -> None:
    directory = Path(cluster.state_dir)
    config = directory / "tinyproxy.conf"
    config.write_text(
        f"Port {PROXY_PORT}\n"
        f"Listen {cluster.bridge_ip}\n"
        "Timeout 600\n"
        f"Allow {cluster.subnet}\n"
        "MaxClients 100\n"
        "User nobody\n"
        "Group nogroup\n"
        "LogLevel Connect\n"
        "DisableViaHeader Yes\n"
    )
    with open(directory / "tinyproxy.log", "ab") as log:
        process = subprocess.Popen(
            ["tinyproxy", "-d", "-c", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env=sbin_env(),
        )
    cluster.proxy_pid = process.pid
    cluster.proxy_start = process_start_time(process.pid)


def _wait_for_port(
    address: str, port: int, process: tuple[int | None, int | None], log: Path, what: str
) -> None:
    """Wait until `address:port` accepts connections; fail at once if `process` dies."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        with suppress(OSError), socket.create_connection((address, port), timeout=0.5):
            return
        if not is_running(*process) or time.monotonic() > deadline:
            text = log.read_text(errors="replace") if log.exists() else ""
            raise SimHostsError(f"{what} did not start; its log:\n{text[-3000:]}")
        time.sleep(0.02)


def _wait_started(cluster: Cluster) -> None:
    for host in cluster.hosts:
        _wait_for_port(
            host.ip,
            SSH_PORT,
            (host.launcher_pid, host.launcher_start),
            Path(host.directory) / "host.log",
            f"sshd of host {host.name}",
        )
    _wait_for_port(
        cluster.bridge_ip,
        PROXY_PORT,
        (cluster.proxy_pid, cluster.proxy_start),
        Path(cluster.state_dir) / "tinyproxy.log",
        "tinyproxy",
    )


def _write_access_files(cluster: Cluster) -> None:
    """The Ansible inventory and an ssh_config, both using the cluster's own key."""
    ssh_args = (
        f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={cluster.known_hosts} "
        "-o IdentitiesOnly=yes"
    )
    lines = ["[gpu_nodes]"] + [f"{host.name} ansible_host={host.ip}" for host in cluster.hosts]
    lines += [
        "",
        "[gpu_nodes:vars]",
        "ansible_user=root",
        f"ansible_ssh_private_key_file={cluster.ssh_key}",
        f"ansible_ssh_common_args='{ssh_args}'",
        "ansible_python_interpreter=/usr/bin/python3",
    ]
    groups = sorted({group for host in cluster.hosts for group in host.groups} - {"gpu_nodes"})
    for group in groups:
        lines += ["", f"[{group}]"]
        lines += [host.name for host in cluster.hosts if group in host.groups]
    cluster.inventory.write_text("\n".join(lines) + "\n")
    stanzas = [
        f"Host {host.name} {host.ip}\n"
        f"  HostName {host.ip}\n"
        "  User root\n"
        f"  IdentityFile {cluster.ssh_key}\n"
        "  IdentitiesOnly yes\n"
        "  StrictHostKeyChecking accept-new\n"
        f"  UserKnownHostsFile {cluster.known_hosts}\n"
        "  LogLevel ERROR\n"
        for host in cluster.hosts
    ]
    cluster.ssh_config.write_text("\n".join(stanzas))


def up(
    name: str,
    hosts: Sequence[HostSpec],
    *,
    state_dir: Path | None = None,
    bind_ro: Sequence[str] = (),
) -> Cluster:
    """Start a cluster of simulated hosts; tears down a leftover cluster of the same name first."""
    require_root()
    require_tools()
    _check_name(name, "cluster name")
    if not hosts:
        raise SimHostsError("a cluster needs at least one host")
    for spec in hosts:
        _check_name(spec.name, "host name")
    if len({spec.name for spec in hosts}) != len(hosts):
        raise SimHostsError("host names must be distinct")
    image = ensure_image()
    state = (state_dir or default_state_dir(name)).resolve()
    leftover = load(state) or next((c for c in registered() if c.name == name), None)
    if leftover is not None:
        down(leftover)
    with _registry_lock():
        index = _allocate_index(name)
        cluster = Cluster(name=name, index=index, state_dir=str(state), image=str(image))
        cluster.hosts = [
            Host(
                name=spec.name,
                ip=f"{SUBNET_FIRST_OCTETS}.{index}.{FIRST_HOST_OCTET + position}",
                netns=f"gvsim{index}-{spec.name}",
                veth=f"gv{index}h{position}",
                directory=str(state / "hosts" / spec.name),
                groups=list(spec.groups),
                binds=[Bind(path) for path in bind_ro] + list(spec.binds),
            )
            for position, spec in enumerate(hosts)
        ]
        # Saved before anything is created, so a failure part-way can still be torn down.
        cluster.save()
        # Bridged traffic skips the controller's iptables (a FORWARD policy of DROP, as Docker
        # sets, would otherwise cut hosts off from each other).
        run(["ip", "link", "add", cluster.bridge, "type", "bridge", "nf_call_iptables", "0"])
    try:
        run(["ip", "addr", "add", f"{cluster.bridge_ip}/24", "dev", cluster.bridge])
        run(["ip", "link", "set", cluster.bridge, "up"])
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"gpuval-simhosts-{name}",
             "-f", str(cluster.ssh_key)])  # fmt: skip
        cluster.known_hosts.write_text("")
        _start_proxy(cluster)
        for position, host in enumerate(cluster.hosts):
            _create_network(cluster, host, position)
            _prepare_root(cluster, host)
            _start_host(cluster, host)
            cluster.save()
        _write_access_files(cluster)
        _wait_started(cluster)
    except BaseException:
        down(cluster)
        raise
    return cluster


def down(cluster: Cluster, *, keep_files: bool = False) -> None:
    """Tear a cluster down completely; idempotent and safe on a half-created cluster."""
    require_root()
    victims: list[tuple[int, int | None]] = []
    for host in cluster.hosts:
        init = host.init_pid
        # Killing pid 1 of the host's pid namespace kills every process in it.
        for pid in [*([init] if init else []), *netns_pids(host.netns)]:
            victims.append((pid, process_start_time(pid)))
        if host.launcher_pid is not None:
            victims.append((host.launcher_pid, host.launcher_start))
    if cluster.proxy_pid is not None:
        victims.append((cluster.proxy_pid, cluster.proxy_start))
    for pid, start in victims:
        kill_if_same(pid, start)
    wait_gone(victims)
    for host in cluster.hosts:
        if link_exists(host.veth):
            run(["ip", "link", "del", host.veth], check=False)
        if Path(f"/run/netns/{host.netns}").exists():
            run(["ip", "netns", "del", host.netns], check=False)
    if link_exists(cluster.bridge):
        run(["ip", "link", "del", cluster.bridge], check=False)
    state = Path(cluster.state_dir)
    for point in mounts_under(state) if state.exists() else []:
        run(["umount", "--lazy", point], check=False)
    for host in cluster.hosts:
        share_packages(Path(host.directory) / "upper" / APT_ARCHIVES, package_cache())
        keep_lists(Path(cluster.image), Path(host.directory) / "upper")
    cluster.registry_file.unlink(missing_ok=True)
    if keep_files:
        cluster.state_file.unlink(missing_ok=True)
    else:
        remove_tree(state)
