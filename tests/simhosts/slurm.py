"""A real Slurm on simulated hosts: slurmctld, munge and one slurmd per host.

    from tests.simhosts.slurm import slurm_cluster

    with slurm_cluster(3, name="e2e-slurm") as slurm:
        slurm.run("sinfo")  # the controller's client, SLURM_CONF set
        slurm.hosts.host("node1").exec(["srun", "-N2", "hostname"])

The hosts (node1..nodeN) get the files of Debian's slurmd, slurm-client, munge and libpmix2
(and the dependencies the image lacks), downloaded once through the cluster's apt proxy into the
shared package cache and extracted once into a layer beside the image, which each host gets as
a copy: `apt-get install` on each host took 80 s for three hosts on this shared machine, and a
read-only bind of the controller's binaries would need their shared libraries and plugin
directory beside them. slurmctld and the controller's munged run from the controller's own
installation (tests/setup/system-packages.sh) inside one more simulated host, `slurmctl`, whose
network namespace is theirs: tearing the cluster down (or `python -m tests.simhosts down`)
kills them with the hosts, and its address is the one the nodes and the controller's clients
reach. One slurm.conf serves both sides. No accounting database: Slurm records steps in
slurmctld's log (DebugFlags=Steps) and in `scontrol show step` while they run.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from .cluster import Cluster, Host
from .fixtures import simulated_hosts
from .image import package_cache
from .system import SimHostsError, missing_tools, process_start_time, remove_tree, run, sbin_env

CONTROLLER_HOST = "slurmctl"
PARTITION = "gpu"
# libpmix2: srun --mpi=pmix and slurmd load it (only suggested by the plugins package).
HOST_PACKAGES = ("slurmd", "slurm-client", "munge", "libpmix2")
# Controller-side programs (the daemons, and the clients gpuval and the tests run there), with
# the Debian package of each.
CONTROLLER_PROGRAMS = {
    "slurmctld": "slurmctld",
    "munged": "munge",
    "scontrol": "slurm-client",
    "sinfo": "slurm-client",
    "salloc": "slurm-client",
    "scancel": "slurm-client",
}
# The nodes claim more CPUs than the machine has (SlurmdParameters=config_overrides): a pair
# step's ranks and the concurrent steps of a round must fit in one node's CPUs.
NODE_CPUS = 16
START_TIMEOUT_S = 60.0
PMIX_DIR = "/usr/lib/x86_64-linux-gnu/pmix2/lib"
# What the layer leaves out of the packages (no person reads a simulated host's manual).
UNREAD = ("usr/share/doc", "usr/share/man", "usr/share/locale")
# The machine's cgroups are hybrid (v1 controllers, v2 unified), which slurmd's autodetection
# refuses ("Hybrid mode is not supported"); with proctrack/linuxproc and task/none no cgroup
# is made, so naming v1 is enough.
CGROUP_CONF = "CgroupPlugin=cgroup/v1\n"
APT_TIMEOUT_S = 600


@dataclass(frozen=True)
class SlurmCluster:
    hosts: Cluster
    nodes: list[str]
    directory: Path
    gpus_per_node: int
    start_seconds: float

    @property
    def conf(self) -> Path:
        return self.directory / "slurm.conf"

    @property
    def environment(self) -> dict[str, str]:
        """What the controller's Slurm clients need (scontrol, sinfo, salloc...)."""
        return {**sbin_env(), "SLURM_CONF": str(self.conf)}

    @property
    def controller_log(self) -> Path:
        return self.directory / "slurmctld.log"

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A Slurm client command on the controller, against this cluster."""
        return subprocess.run(
            list(command), env=self.environment, capture_output=True, text=True, check=check
        )

    def node(self, name: str) -> Host:
        return self.hosts.host(name)

    def write_node_inventory(self, path: Path) -> Path:
        """The nodes as an INI inventory at `path` (all of them, drained or not, and not the
        controller host), reached over ssh as the cluster's own inventory reaches them."""
        hosts = self.hosts
        lines = ["[gpu_nodes]"]
        lines += [f"{name} ansible_host={hosts.host(name).ip}" for name in self.nodes]
        lines += [
            "[gpu_nodes:vars]",
            "ansible_user=root",
            f"ansible_ssh_private_key_file={hosts.ssh_key}",
            f"ansible_ssh_common_args='-o StrictHostKeyChecking=accept-new "
            f"-o UserKnownHostsFile={hosts.known_hosts} -o IdentitiesOnly=yes'",
            "ansible_python_interpreter=/usr/bin/python3",
        ]
        path.write_text("\n".join(lines) + "\n")
        return path


def _munge_socket(cluster: Cluster) -> str:
    # The same path on the controller and in every host (a folder of its own there), inside the
    # cluster's state directory, which tearing it down deletes.
    return f"{cluster.state_dir}/slurm/munge/munge.socket"


def slurm_conf(cluster: Cluster, nodes: Sequence[Host], directory: Path, gpus: int) -> str:
    """One slurm.conf for slurmctld (on the controller's file system) and every slurmd."""
    controller = cluster.host(CONTROLLER_HOST)
    names = ",".join(node.name for node in nodes)
    lines = [
        f"ClusterName=gvsim{cluster.index}",
        f"SlurmctldHost={controller.name}({controller.ip})",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={_munge_socket(cluster)}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={directory / 'state'}",
        f"SlurmctldLogFile={directory / 'slurmctld.log'}",
        f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
        # Each step's nodes and end in slurmctld's log (what the tests read): the Steps flag
        # logs at verbose.
        "SlurmctldDebug=verbose",
        "DebugFlags=Steps",
        "SlurmdSpoolDir=/var/spool/slurmd",
        "SlurmdLogFile=/var/log/slurmd.log",
        "SlurmdPidFile=/run/slurmd.pid",
        "SlurmdDebug=info",
        "SlurmdParameters=config_overrides",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "KillWait=5",
        "GresTypes=gpu",
    ]
    lines += [
        f"NodeName={node.name} NodeAddr={node.ip} CPUs={NODE_CPUS} Gres=gpu:{gpus} State=UNKNOWN"
        for node in nodes
    ]
    lines.append(f"PartitionName={PARTITION} Nodes={names} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def gres_conf(gpus: int) -> str:
    # slurmd 22.05 reports no GPU of a Count without File: stand-in device nodes (major 195 as
    # NVIDIA's, nothing behind them) give Slurm GPUs to count and schedule.
    return f"Name=gpu File=/dev/nvidia[0-{gpus - 1}]\n"


def _apt(host: Host, proxy: str, packages: Sequence[str], *arguments: str) -> str:
    script = (
        f"export DEBIAN_FRONTEND=noninteractive http_proxy={proxy}; "
        f"apt-get {' '.join(arguments)} --no-install-recommends {' '.join(packages)}"
    )
    result = subprocess.run(
        ["nsenter", "-t", str(host.init_pid), "-m", "-u", "-n", "-p", "-r", "-w",
         "sh", "-c", script],
        capture_output=True, text=True, timeout=APT_TIMEOUT_S, env=sbin_env(),
    )  # fmt: skip
    if result.returncode != 0:
        raise SimHostsError(
            f"apt-get {' '.join(arguments)} {', '.join(packages)} on {host.name} failed "
            f"(through the cluster's proxy, {proxy}): {result.stdout[-2000:]}"
            f"{result.stderr[-2000:]}"
        )
    return result.stdout


def _slurm_layer(host: Host, image: str, proxy: str, packages: Sequence[str]) -> Path:
    """The files of the Slurm packages (and the dependencies the image lacks), extracted once
    per image into the image cache: a host gets them by a copy, where `apt-get install` on each
    host took 80 s for three under load (measured), and apt's own start is seconds more."""
    key = hashlib.sha256(repr(sorted(packages)).encode()).hexdigest()[:8]
    layer = package_cache().parent / f"{Path(image).name}-slurm-{key}"
    if layer.is_dir():
        return layer
    simulated = _apt(host, proxy, packages, "install", "--simulate")
    versions = sorted(re.findall(r"^Inst (\S+) \((\S+)", simulated, re.MULTILINE))
    _apt(host, proxy, packages, "install", "--download-only", "--yes", "--quiet")
    archives = host.root / "var/cache/apt/archives"
    building = Path(tempfile.mkdtemp(prefix=layer.name + ".", dir=layer.parent))
    for name, version in versions:
        found = list(archives.glob(f"{name}_{version.replace(':', '%3a')}_*.deb"))
        if len(found) != 1:
            raise SimHostsError(f"the package {name} {version} is not in {archives}")
        run(["dpkg-deb", "--extract", str(found[0]), str(building)])
    for unread in UNREAD:
        remove_tree(building / unread)
    # What the packages' alternatives make (update-alternatives in their postinst).
    for program in ("slurmd", "slurmstepd"):
        (building / "usr/sbin" / program).symlink_to(f"{program}-wlm")
    # Debian's mpi/pmix plugin opens libpmix.so, which only libpmix-dev (and its development
    # dependencies) installs: the link to the library is enough.
    (building / PMIX_DIR.lstrip("/") / "libpmix.so").symlink_to("libpmix.so.2")
    with suppress(OSError):
        building.rename(layer)
    remove_tree(building)
    return layer


def _install_layer(host: Host, layer: Path) -> None:
    # tar keeps the image's merged /usr (/lib -> usr/lib) where a package ships /lib files.
    run(["sh", "-c", f"tar -C {layer} -cf - . | tar -C {host.root} -xf - --keep-directory-symlink"])


def _write(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Root's file (munged runs as root and checks its key's owner), replacing any other."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    os.chown(path, 0, 0)
    os.chown(path.parent, 0, 0)
    path.chmod(mode)


def _spawn(argv: Sequence[str], log: Path) -> None:
    """A daemon in the foreground, in a session of its own; `down` kills it with its host."""
    with open(log, "ab") as output:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=True,
            env=sbin_env(),
        )
    if process_start_time(process.pid) is None:
        raise SimHostsError(f"{argv[0]} did not start; see {log}")


def _munged(socket: str, key: str, state: str) -> str:
    """Start munged as root (--force) with this key and socket, in the foreground."""
    return (
        f"mkdir -p {os.path.dirname(socket)} {state} && chmod 0755 {os.path.dirname(socket)} && "
        f"exec munged --foreground --force --key-file={key} --socket={socket} "
        f"--pid-file={state}/munged.pid --seed-file={state}/munged.seed "
        f"--log-file={state}/munged.log"
    )


def _start_controller(cluster: Cluster, directory: Path) -> None:
    controller = cluster.host(CONTROLLER_HOST)
    key = directory / "munge.key"
    socket = _munge_socket(cluster)
    enter = ["ip", "netns", "exec", controller.netns]
    _spawn([*enter, "sh", "-c", _munged(socket, str(key), str(directory / "munge"))],
           directory / "munged.out")  # fmt: skip
    _wait_for(lambda: Path(socket).exists(), f"the controller's munged ({directory}/munge)")
    (directory / "state").mkdir(exist_ok=True)
    # The cluster's names for slurmctld's lookups (the controller's DNS resolver would make it
    # wait 10 s for each and the nodes' sruns time out): the hosts' /etc/hosts and resolv.conf.
    for name in ("hosts", "resolv.conf"):
        shutil.copy(controller.root / "etc" / name, directory / name)
    daemon = (
        f"mount --bind {directory / 'hosts'} /etc/hosts && "
        f"mount --bind {directory / 'resolv.conf'} /etc/resolv.conf && "
        f"hostname {CONTROLLER_HOST} && exec slurmctld -D -i -f {directory / 'slurm.conf'}"
    )
    _spawn([*enter, "unshare", "--uts", "--mount", "sh", "-c", daemon], directory / "slurmctld.out")


def _start_node(host: Host, cluster: Cluster, directory: Path, gpus: int) -> None:
    root = host.root
    _write(root / "etc/munge/munge.key", (directory / "munge.key").read_bytes(), 0o400)
    _write(root / "etc/slurm/slurm.conf", (directory / "slurm.conf").read_text())
    _write(root / "etc/slurm/gres.conf", (directory / "gres.conf").read_text())
    _write(root / "etc/slurm/cgroup.conf", CGROUP_CONF)
    (root / "var/spool/slurmd").mkdir(parents=True, exist_ok=True)
    devices = "; ".join(f"mknod -m 666 /dev/nvidia{n} c 195 {n}" for n in range(gpus))
    host.exec(["sh", "-c", devices])
    socket = _munge_socket(cluster)
    script = (
        f"({_munged(socket, '/etc/munge/munge.key', '/var/lib/gpuval-munge')}) & "
        f"while [ ! -S {socket} ]; do sleep 0.05; done; exec slurmd -D"
    )
    enter = ["nsenter", "-t", str(host.init_pid), "-m", "-u", "-n", "-p", "-r", "-w"]
    _spawn([*enter, "sh", "-c", script], Path(host.directory) / "slurmd.out")


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SimHostsError(f"{what} did not come up within {timeout:.0f} s")
        time.sleep(0.1)


def _nodes_idle(slurm: SlurmCluster) -> bool:
    result = slurm.run("sinfo", "--noheader", "--Node", "--format=%N %T", check=False)
    states = dict(line.split() for line in result.stdout.splitlines() if line.strip())
    return result.returncode == 0 and all(states.get(n) == "idle" for n in slurm.nodes)


def require_slurm() -> None:
    missing = missing_tools(tuple(CONTROLLER_PROGRAMS))
    if missing:
        packages = sorted({CONTROLLER_PROGRAMS[name] for name in missing})
        raise SimHostsError(
            f"missing Slurm programs on the controller: {', '.join(missing)}; install them with: "
            f"apt-get install {' '.join(packages)} (or: bash tests/setup/system-packages.sh)"
        )


def start_slurm(
    cluster: Cluster, gpus_per_node: int, extra_packages: Sequence[str] = ()
) -> SlurmCluster:
    """Slurm on a running cluster whose last host is `slurmctl`: the others are its nodes."""
    require_slurm()
    started = time.monotonic()
    nodes = [host for host in cluster.hosts if host.name != CONTROLLER_HOST]
    directory = Path(cluster.state_dir) / "slurm"
    directory.mkdir(parents=True, exist_ok=True)
    _write(directory / "munge.key", secrets.token_bytes(1024), 0o400)
    _write(directory / "slurm.conf", slurm_conf(cluster, nodes, directory, gpus_per_node))
    _write(directory / "gres.conf", gres_conf(gpus_per_node))
    packages = sorted({*HOST_PACKAGES, *extra_packages})
    layer = _slurm_layer(nodes[0], cluster.image, cluster.proxy_url, packages)
    for host in nodes:
        _install_layer(host, layer)
    logging.info("slurm: packages on %d hosts in %.1f s", len(nodes), time.monotonic() - started)
    _start_controller(cluster, directory)
    for host in nodes:
        _start_node(host, cluster, directory, gpus_per_node)
    logging.info("slurm: daemons started at %.1f s", time.monotonic() - started)
    names = [node.name for node in nodes]
    slurm = SlurmCluster(cluster, names, directory, gpus_per_node, 0.0)
    _wait_for(lambda: _nodes_idle(slurm), f"the Slurm nodes (see {directory}/slurmctld.log)")
    return SlurmCluster(cluster, names, directory, gpus_per_node, time.monotonic() - started)


@contextmanager
def slurm_cluster(
    count: int,
    name: str,
    *,
    gpus_per_node: int = 4,
    extra_packages: Sequence[str] = (),
    bind_ro: Sequence[str] = (),
) -> Iterator[SlurmCluster]:
    """`count` simulated hosts node1..nodeN, each a Slurm node of the partition `gpu`, with a
    controller; torn down however the block ends. `extra_packages`: Debian packages the nodes
    get too (their files, the same way as Slurm's); `bind_ro`: controller folders every host
    sees read-only at the same path."""
    names = [f"node{number}" for number in range(1, count + 1)]
    hosts = [*names, CONTROLLER_HOST]
    with simulated_hosts(count + 1, name, bind_ro, host_names=hosts) as cluster:
        yield start_slurm(cluster, gpus_per_node, extra_packages)
