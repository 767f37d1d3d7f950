"""Simulated hosts for tests: network namespaces with their own root, hostname and sshd."""

from .cluster import Bind, Cluster, Host, HostSpec, down, load, registered, up
from .image import ensure_image
from .system import SimHostsError

__all__ = [
    "Bind",
    "Cluster",
    "Host",
    "HostSpec",
    "SimHostsError",
    "down",
    "ensure_image",
    "load",
    "registered",
    "up",
]
