"""Command line: python -m tests.simhosts {image,up,down,list,exec,throttle,...}."""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from . import faults
from .cluster import Bind, Cluster, HostSpec, default_state_dir, down, load, registered, up
from .image import ensure_image
from .system import SimHostsError


def _parse_host_bind(text: str) -> tuple[str, Bind]:
    """HOST=SOURCE[:TARGET][:rw] -> (host, Bind)."""
    host, _, spec = text.partition("=")
    parts = spec.split(":")
    readonly = parts[-1] != "rw"
    if not readonly:
        parts = parts[:-1]
    if not host or not parts[0]:
        raise argparse.ArgumentTypeError(f"expected HOST=SOURCE[:TARGET][:rw], got {text!r}")
    return host, Bind(parts[0], parts[1] if len(parts) > 1 else "", readonly)


def _parse_host_group(text: str) -> tuple[str, list[str]]:
    """HOST=GROUP[,GROUP...] -> (host, groups)."""
    host, _, groups = text.partition("=")
    if not host or not groups:
        raise argparse.ArgumentTypeError(f"expected HOST=GROUP[,GROUP], got {text!r}")
    return host, groups.split(",")


def _platform_specs(platforms_json: str) -> list[HostSpec]:
    """Host specs from molecule's `platforms` list (name, groups, bind_ro)."""
    platforms = json.loads(platforms_json)
    if not isinstance(platforms, list) or not platforms:
        raise SimHostsError("--platforms-json must be a non-empty JSON list of platforms")
    return [
        HostSpec(
            name=str(platform["name"]),
            groups=tuple(platform.get("groups", ())),
            binds=tuple(Bind(str(path)) for path in platform.get("bind_ro", ())),
        )
        for platform in platforms
    ]


def _host_specs(arguments: argparse.Namespace) -> list[HostSpec]:
    if arguments.platforms_json:
        return _platform_specs(arguments.platforms_json)
    names = (
        arguments.hosts.split(",")
        if arguments.hosts
        else [f"node{number}" for number in range(1, arguments.count + 1)]
    )
    binds: dict[str, list[Bind]] = {}
    for host, bind in arguments.host_bind:
        binds.setdefault(host, []).append(bind)
    groups: dict[str, list[str]] = {}
    for host, host_groups in arguments.group:
        groups.setdefault(host, []).extend(host_groups)
    unknown = (set(binds) | set(groups)) - set(names)
    if unknown:
        raise SimHostsError(f"--host-bind/--group name hosts not in the cluster: {sorted(unknown)}")
    return [
        HostSpec(name, tuple(groups.get(name, ())), tuple(binds.get(name, ()))) for name in names
    ]


def _cluster(arguments: argparse.Namespace) -> Cluster:
    state_dir = arguments.state_dir or default_state_dir(arguments.name)
    cluster = load(Path(state_dir))
    if cluster is None:
        raise SimHostsError(f"no cluster state in {state_dir} (is it up?)")
    return cluster


def _summary(cluster: Cluster) -> str:
    lines = [
        f"cluster {cluster.name}: bridge {cluster.bridge} {cluster.subnet}, "
        f"proxy {cluster.proxy_url}",
        f"  inventory  {cluster.inventory}",
        f"  ssh        ssh -F {cluster.ssh_config} <host>",
    ]
    lines += [f"  {host.name:<12} {host.ip:<15} netns {host.netns}" for host in cluster.hosts]
    return "\n".join(lines)


def _instance_config(cluster: Cluster) -> list[dict[str, object]]:
    """Molecule's instance config (default driver): how to reach each instance."""
    return [
        {
            "instance": host.name,
            "address": host.ip,
            "user": "root",
            "port": 22,
            "identity_file": str(cluster.ssh_key),
        }
        for host in cluster.hosts
    ]


def _write_instance_config(path: Path, instances: list[dict[str, object]]) -> None:
    # JSON is YAML, which molecule reads this file as.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(instances, indent=2) + "\n")


def _command_up(arguments: argparse.Namespace) -> None:
    started = time.monotonic()
    cluster = up(
        arguments.name,
        _host_specs(arguments),
        state_dir=arguments.state_dir,
        bind_ro=arguments.bind_ro,
    )
    if arguments.instance_config:
        _write_instance_config(arguments.instance_config, _instance_config(cluster))
    if arguments.json:
        print(json.dumps(cluster.to_json(), indent=2))
    else:
        print(_summary(cluster))
        print(f"up in {time.monotonic() - started:.2f} s")


def _command_down(arguments: argparse.Namespace) -> None:
    if arguments.match:
        clusters = [c for c in registered() if fnmatch.fnmatchcase(c.name, arguments.match)]
    else:
        state_dir = arguments.state_dir or default_state_dir(arguments.name)
        found = load(Path(state_dir))
        clusters = [found] if found is not None else []
    for cluster in clusters:
        down(cluster, keep_files=arguments.keep_files)
        print(f"cluster {cluster.name} is down")
    if arguments.instance_config:
        _write_instance_config(arguments.instance_config, [])


def _command_list(arguments: argparse.Namespace) -> None:
    clusters = registered()
    if arguments.json:
        print(json.dumps([cluster.to_json() for cluster in clusters], indent=2))
    for cluster in [] if arguments.json else clusters:
        print(_summary(cluster))


def _command_image(arguments: argparse.Namespace) -> None:
    started = time.monotonic()
    path = ensure_image(rebuild=arguments.rebuild)
    print(f"{path} ({time.monotonic() - started:.1f} s)")


def _command_exec(arguments: argparse.Namespace) -> None:
    result = _cluster(arguments).host(arguments.host).exec(arguments.command, check=False)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    raise SystemExit(result.returncode)


def _command_fault(arguments: argparse.Namespace) -> None:
    cluster = _cluster(arguments)
    host = cluster.host(arguments.host)
    if arguments.command == "throttle":
        faults.throttle(host, arguments.rate)
    elif arguments.command == "unthrottle":
        faults.unthrottle(host)
    elif arguments.command == "drop":
        faults.drop_traffic(host, arguments.probability)
    elif arguments.command == "restore":
        faults.restore_traffic(host)
    elif arguments.command == "disconnect":
        faults.disconnect(host)
    elif arguments.command == "kill":
        faults.kill_host(cluster, host)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.simhosts", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    def with_cluster(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--name", default="simhosts", help="cluster name (default: simhosts)")
        sub.add_argument("--state-dir", type=Path, help="state directory (default: by name)")
        return sub

    image = commands.add_parser("image", help="build the cached host image if missing")
    image.add_argument("--rebuild", action="store_true")
    image.set_defaults(handler=_command_image)

    start = with_cluster("up", "start a cluster")
    hosts = start.add_mutually_exclusive_group()
    hosts.add_argument("--count", type=int, default=3, help="hosts node1..nodeN (default 3)")
    hosts.add_argument("--hosts", help="comma-separated host names")
    hosts.add_argument("--platforms-json", help="molecule platforms (name, groups, bind_ro)")
    start.add_argument(
        "--group",
        type=_parse_host_group,
        action="append",
        default=[],
        metavar="HOST=GROUP[,GROUP]",
        help="extra inventory groups of a host",
    )
    start.add_argument(
        "--bind-ro",
        action="append",
        default=[],
        metavar="DIR",
        help="bind DIR read-only at the same path into every host",
    )
    start.add_argument(
        "--host-bind",
        type=_parse_host_bind,
        action="append",
        default=[],
        metavar="HOST=SRC[:TARGET][:rw]",
        help="bind a directory into one host",
    )
    start.add_argument("--json", action="store_true", help="print the cluster state as JSON")
    start.add_argument("--instance-config", type=Path, help="write molecule's instance config")
    start.set_defaults(handler=_command_up)  # fmt: skip

    stop = with_cluster("down", "tear a cluster down (idempotent)")
    stop.add_argument(
        "--match",
        metavar="GLOB",
        help="every registered cluster whose name matches GLOB; other people's clusters "
        "(molecule runs: mol-<role>-<scenario>) are registered too, so match narrowly",
    )
    stop.add_argument("--keep-files", action="store_true", help="keep the hosts' files")
    stop.add_argument("--instance-config", type=Path, help="empty molecule's instance config")
    stop.set_defaults(handler=_command_down)

    listing = commands.add_parser("list", help="list running clusters")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(handler=_command_list)

    run_in = with_cluster("exec", "run a command inside a host without ssh")
    run_in.add_argument("host")
    run_in.add_argument("command", nargs=argparse.REMAINDER)
    run_in.set_defaults(handler=_command_exec)

    for name, help_text in [
        ("throttle", "limit a host's link rate (tc tbf), e.g. 1gbit"),
        ("unthrottle", "remove a throttle"),
        ("drop", "drop a share of the packets a host receives"),
        ("restore", "remove packet drops"),
        ("disconnect", "delete a host's veth"),
        ("kill", "kill every process of a host"),
    ]:
        fault = with_cluster(name, help_text)
        fault.add_argument("host")
        if name == "throttle":
            fault.add_argument("rate")
        if name == "drop":
            fault.add_argument("probability", type=float, nargs="?", default=1.0)
        fault.set_defaults(handler=_command_fault)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    try:
        arguments.handler(arguments)
    except SimHostsError as error:
        print(f"simhosts: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
