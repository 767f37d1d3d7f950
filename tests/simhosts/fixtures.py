"""Simulated hosts for pytest: a context manager and a fixture factory.

    from tests.simhosts.fixtures import simulated_hosts

    with simulated_hosts(3, name="e2e-basic", bind_ro=["/usr/local/cuda-13.0"]) as cluster:
        subprocess.run(["ansible-playbook", "-i", str(cluster.inventory), ...], check=True)

Teardown runs however the block ends.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from .cluster import Bind, Cluster, HostSpec, down, registered, up


def _down_orphans(name: str) -> None:
    """Tear down clusters of this name left by test processes that were killed outright."""
    for cluster in registered():
        owner = re.fullmatch(rf"{re.escape(name)}-(\d+)", cluster.name)
        if owner and not Path(f"/proc/{owner.group(1)}").exists():
            down(cluster)


@contextmanager
def simulated_hosts(
    count: int,
    name: str = "pytest",
    bind_ro: Sequence[str] = (),
    *,
    host_names: Sequence[str] | None = None,
    host_binds: Mapping[str, Sequence[Bind]] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
) -> Iterator[Cluster]:
    """`count` hosts named node1..nodeN (or `host_names`), torn down on exit.

    The cluster name also names its state directory, so concurrent test runs must use
    different names; the process id is appended to keep two runs of one test apart, and
    clusters of this name whose test process has died are torn down first.
    """
    names = list(host_names) if host_names is not None else [
        f"node{number}" for number in range(1, count + 1)
    ]  # fmt: skip
    specs = [
        HostSpec(
            name=host,
            groups=tuple((groups or {}).get(host, ())),
            binds=tuple((host_binds or {}).get(host, ())),
        )
        for host in names
    ]
    _down_orphans(name)
    cluster = up(f"{name}-{os.getpid()}", specs, bind_ro=bind_ro)
    try:
        yield cluster
    finally:
        down(cluster)
