"""The host image: one debootstrap Debian root filesystem, built once and cached.

Every simulated host mounts an overlayfs over it, so the image itself is never written after
it is built. The cache key hashes everything that shapes the image, so changing the package
list builds a new image beside the old one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .system import SimHostsError, remove_tree, require_root, require_tools, run

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
DEFAULT_CACHE = Path("/var/cache/gpuval/simhosts")
# Bump when the post-debootstrap configuration below changes, to invalidate cached images.
IMAGE_LAYOUT_VERSION = 1
PACKAGES = (
    "python3",
    "openssh-server",
    "openssh-client",
    "iproute2",
    "sudo",
    "ca-certificates",
    "procps",
    "iputils-ping",
)

SSHD_CONFIG = """\
# Written by the gpuval simulated-host harness.
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
# No PAM in a chroot without logind; key authentication does not need it.
UsePAM no
UseDNS no
HostKey /etc/ssh/ssh_host_ed25519_key
# Ansible forks and MPI launchers open many sessions at once.
MaxStartups 100:30:200
MaxSessions 100
Include /etc/ssh/sshd_config.d/*.conf
"""

# No DNS server is reachable from a host: fail lookups at once instead of after a timeout.
RESOLV_CONF = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"


@dataclass(frozen=True)
class ImageSpec:
    suite: str
    mirror: str
    security_mirror: str
    packages: tuple[str, ...]

    @property
    def key(self) -> str:
        described = json.dumps(
            {
                "suite": self.suite,
                "mirror": self.mirror,
                "security_mirror": self.security_mirror,
                "packages": sorted(self.packages),
                "layout": IMAGE_LAYOUT_VERSION,
            },
            sort_keys=True,
        )
        return hashlib.sha256(described.encode()).hexdigest()[:12]

    @property
    def sources_list(self) -> str:
        return (
            f"deb {self.mirror} {self.suite} main\n"
            f"deb {self.mirror} {self.suite}-updates main\n"
            f"deb {self.security_mirror} {self.suite}-security main\n"
        )


def apt_source_uris(sources_dir: Path) -> list[tuple[str, list[str]]]:
    """(URI, suites) of every apt source of this machine, one-line and deb822 formats."""
    found: list[tuple[str, list[str]]] = []
    files = [sources_dir / "sources.list", *sorted((sources_dir / "sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, flags=re.MULTILINE))
                for uri in fields.get("URIs", "").split():
                    found.append((uri, fields.get("Suites", "").split()))
        else:
            for line in text.splitlines():
                match = re.match(r"^\s*deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", line)
                if match:
                    found.append((match.group(1), [match.group(2)]))
    return found


def machine_mirrors(sources_dir: Path = Path("/etc/apt")) -> tuple[str, str]:
    """The Debian mirror and security mirror this machine's apt uses (same reachability)."""
    mirror, security = DEFAULT_MIRROR, DEFAULT_SECURITY_MIRROR
    for uri, suites in reversed(apt_source_uris(sources_dir)):
        if SUITE in suites:
            mirror = uri.rstrip("/")
        if f"{SUITE}-security" in suites:
            security = uri.rstrip("/")
    return mirror, security


def default_spec() -> ImageSpec:
    mirror, security = machine_mirrors()
    return ImageSpec(
        suite=SUITE,
        mirror=os.environ.get("GPUVAL_SIMHOSTS_MIRROR", mirror),
        security_mirror=os.environ.get("GPUVAL_SIMHOSTS_SECURITY_MIRROR", security),
        packages=PACKAGES,
    )


def cache_root() -> Path:
    return Path(os.environ.get("GPUVAL_SIMHOSTS_CACHE", str(DEFAULT_CACHE)))


def package_cache() -> Path:
    """Debian packages the hosts downloaded, shared by every cluster: a host starts with them in
    its apt archive, so installing a package another host had costs no download (a cluster's
    hosts each fetched Open MPI's 114 MB through the proxy before)."""
    return cache_root() / "apt-archives"


def share_packages(source: Path, target: Path) -> int:
    """Put the .deb files of `source` that `target` lacks into it: hard links, or copies renamed
    into place across file systems (a reader never sees half a file). apt checks each file's
    hash before using it. Returns how many were added."""
    if not source.is_dir():
        return 0
    target.mkdir(parents=True, exist_ok=True)
    added = 0
    for package in source.glob("*.deb"):
        destination = target / package.name
        if destination.exists():
            continue
        try:
            os.link(package, destination)
        except FileExistsError:  # another cluster shared it first
            continue
        except OSError:
            partial = destination.with_name(f".{package.name}.{os.getpid()}")
            shutil.copyfile(package, partial)
            partial.replace(destination)
        added += 1
    return added


def image_path(spec: ImageSpec) -> Path:
    return cache_root() / f"{spec.suite}-{spec.key}"


def _configure(root: Path, spec: ImageSpec) -> None:
    """Make a fresh debootstrap tree a host image: per-host keys, sshd config, apt sources."""
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc/ssh/sshd_config").write_text(SSHD_CONFIG)
    (root / "etc/ssh/sshd_config.d").mkdir(exist_ok=True)
    (root / "etc/apt/sources.list").write_text(spec.sources_list)
    resolv = root / "etc/resolv.conf"
    resolv.unlink(missing_ok=True)
    resolv.write_text(RESOLV_CONF)
    for archive in (root / "var/cache/apt/archives").glob("*.deb"):
        archive.unlink()
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)


def _build(target: Path, spec: ImageSpec) -> None:
    started = time.monotonic()
    result = run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(spec.packages)}",
            spec.suite,
            str(target),
            spec.mirror,
        ],
        check=False,
    )
    if result.returncode != 0:
        log = target / "debootstrap/debootstrap.log"
        tail = log.read_text(errors="replace").splitlines()[-15:] if log.exists() else []
        raise SimHostsError(
            f"debootstrap of {spec.suite} from {spec.mirror} failed "
            f"(exit status {result.returncode}): {result.stderr.strip()[-2000:]}\n"
            + "\n".join(tail)
        )
    _configure(target, spec)
    (target / ".gpuval-image.json").write_text(
        json.dumps(
            {
                "suite": spec.suite,
                "mirror": spec.mirror,
                "packages": list(spec.packages),
                "build_seconds": round(time.monotonic() - started, 1),
            }
        )
    )


def ensure_image(spec: ImageSpec | None = None, *, rebuild: bool = False) -> Path:
    """The cached image directory for `spec`, building it first if needed.

    Builds into a temporary directory and renames it into place, under a file lock, so a
    concurrent run either waits for the build or finds the finished image, never half of one.
    """
    spec = spec or default_spec()
    final = image_path(spec)
    if final.is_dir() and not rebuild:
        return final
    require_root()
    require_tools(["debootstrap"])
    final.parent.mkdir(parents=True, exist_ok=True)
    with open(final.parent / f".{final.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if rebuild and final.is_dir():
            stale = final.with_name(f".old-{final.name}-{os.getpid()}")
            final.rename(stale)
            remove_tree(stale)
        if final.is_dir():
            return final
        for leftover in final.parent.glob(f".build-{final.name}-*"):
            remove_tree(leftover)
        building = final.with_name(f".build-{final.name}-{os.getpid()}")
        try:
            _build(building, spec)
            building.rename(final)
        finally:
            remove_tree(building)
    return final
