"""`gpuval plan`: the phases, steps, pair rounds and predicted duration of a run (and its cost
where instances are rented), before anything starts; refused over --max-minutes."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuval.cli.options import count, positive_count, positive_number

LOG = logging.getLogger(__name__)
GROUP = "gpu_nodes"

PLAN_HELP = """\
What a run would do and how long it would take, before anything starts: its phases, the steps of
each, the pair rounds (all pairs, or staged with what each faulty node adds at most) and a
predicted duration per phase and in all; with --price-per-hour, the cost. Each step's duration is
the median of what earlier runs of the same step, sizes and node shape recorded (the sidecars of
the run folders the history database lists), else a documented default (printed with its
reason); every step says which. So is Ansible's own time in each phase, from the play times
(plays.json) of earlier runs of as many nodes, and in each round of pairs, from those runs' rounds
of as many hosts.

The run is described by the inventory (the hosts of gpu_nodes, their gpuval_gpus_per_node and
gpuval_ib_hcas), the profile and -e variables over the roles' defaults, as `gpuval run` would;
or without an inventory by --nodes, --gpus-per-node and --rails. Ansible's work for each host runs
on the controller, so the plan counts its cores: this machine's, or --controller-cores.
Exit status: 0 the plan fits, 1 it is over --max-minutes (with what to turn off to fit), 2 error.

Examples:
  gpuval plan -i inventory/my-cluster.ini
  gpuval plan -i inventory/my-cluster.ini --profile h100-sxm-8x -e bench_pairs_mode=staged
  gpuval plan --nodes 16 --gpus-per-node 8 --rails 8 --max-minutes 30
  gpuval plan --nodes 1024 --gpus-per-node 8 --rails 8 -e bench_pairs_mode=staged --json
  gpuval plan --nodes 1024 --gpus-per-node 8 --controller-cores 32   # planned on a laptop
  gpuval plan -i inventory/my-cluster.ini --skip-tags install   # as the run will be started
  gpuval plan --nodes 2 --gpus-per-node 8 --price-per-hour 23.92   # Lambda 8x H100 SXM"""


def add_plan_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = commands.add_parser(
        "plan",
        help="the time (and cost) plan of a run, before it starts",
        description=PLAN_HELP,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    plan.add_argument("-i", "--inventory", type=Path, metavar="INVENTORY", help="Ansible inventory")
    plan.add_argument("--profile", metavar="NAME|FILE", help="acceptance profile")
    plan.add_argument(
        "-e",
        "--extra-vars",
        action="append",
        default=[],
        metavar="VARS",
        help="role variables, KEY=VALUE or JSON or @file (repeatable), as for gpuval run",
    )
    plan.add_argument("--nodes", type=count, metavar="N", help="this many nodes (no inventory)")
    plan.add_argument("--gpus-per-node", type=count, metavar="G", help="GPUs in each node")
    plan.add_argument("--rails", type=count, metavar="R", help="RDMA HCAs (rails) in each node")
    plan.add_argument(
        "--forks",
        type=count,
        default=None,
        metavar="F",
        help="hosts Ansible works on at once (default: ansible.cfg's 50)",
    )
    plan.add_argument(
        "--controller-cores",
        type=positive_count,
        default=None,
        metavar="C",
        help="CPU cores of the machine that runs ansible-playbook (default: this machine's)",
    )
    plan.add_argument(
        "--max-minutes", type=positive_number, metavar="M", help="refuse a longer plan"
    )
    plan.add_argument(
        "--price-per-hour", type=positive_number, metavar="USD", help="what one node costs per hour"
    )
    plan.add_argument(
        "--tags",
        action="append",
        default=[],
        metavar="TAGS",
        help="plan only the phases these ansible-playbook tags run (comma-separated, repeatable)",
    )
    plan.add_argument(
        "--skip-tags",
        action="append",
        default=[],
        metavar="TAGS",
        help="leave out the phases these tags skip, as ansible-playbook --skip-tags would",
    )
    plan.add_argument("--json", action="store_true", help="print plan.json instead of the table")
    plan.add_argument(
        "--reports",
        type=Path,
        metavar="DIR",
        help="the reports folder whose history is read (default: $GPUVAL_REPORTS_DIR, else "
        "./reports)",
    )


def _inventory(path: Path) -> tuple[list[str], dict[str, Any]]:
    """(the hosts of gpu_nodes, the first host's variables) as Ansible reads the inventory."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader
    from ansible.vars.manager import VariableManager

    init_plugin_loader()  # outside ansible-playbook, the plugin loader starts empty
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(path)])
    group = inventory.groups.get(GROUP)
    hosts = [host.name for host in group.get_hosts()] if group else []
    if not hosts:
        raise ValueError(f"{path}: the inventory has no hosts in group {GROUP}")
    first = inventory.get_host(hosts[0])
    variables = VariableManager(loader=loader, inventory=inventory).get_vars(host=first)
    return hosts, dict(variables)


def shape_and_variables(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    from gpuval.plan import inputs
    from gpuval.plan.phase_tags import RUN_TAGS, SKIP_TAGS
    from gpuval.plan.plan_model import FORKS, Shape

    layers = [inputs.role_defaults(inputs.roles_dir())]
    if args.inventory is not None:
        if not args.inventory.exists():
            raise ValueError(f"{args.inventory}: no such inventory file or folder")
        hosts, found = _inventory(args.inventory)
        layers.append(found)
    elif args.nodes:
        hosts = [f"node{n:04d}" for n in range(1, args.nodes + 1)]
    else:
        raise ValueError("name the inventory with -i INVENTORY, or the shape with --nodes N")
    if args.profile:
        from gpuval.profile import load_profile  # the judging stack: only when named

        layers.append(load_profile(args.profile).ansible_vars())
    layers.append(inputs.extra_vars(args.extra_vars))
    layers.append({RUN_TAGS: ",".join(args.tags), SKIP_TAGS: ",".join(args.skip_tags)})
    variables = inputs.merged(*layers)
    gpus = args.gpus_per_node
    if gpus is None:
        gpus = int(variables.get("gpuval_gpus_per_node") or 0)  # a profile sets it too
        if not gpus:
            raise ValueError(
                "the GPUs per node are unknown: set gpuval_gpus_per_node in the inventory, pick "
                "a --profile, or pass --gpus-per-node G (0 for nodes without GPUs)"
            )
    rails = args.rails
    if rails is None:
        hcas = variables.get("gpuval_ib_hcas") or variables.get("bench_pairs_rdma_hcas")
        rails = inputs.hca_count(hcas)
    shape = Shape(tuple(hosts), gpus, rails, args.forks or FORKS)
    if args.controller_cores is not None:
        shape = replace(shape, controller_cores=args.controller_cores)
    return shape, variables


def plan_command(args: argparse.Namespace) -> int:
    from gpuval.files.archive import Archive
    from gpuval.plan import duration, plan_text

    try:
        shape, variables = shape_and_variables(args)
        archive = Archive(args.reports) if args.reports else Archive.default()
        estimate = duration.estimate_from_history(shape, variables, archive.history_path)
        staged = (
            duration.estimate_from_history(
                shape, {**variables, "bench_pairs_mode": "staged"}, archive.history_path
            )
            if estimate.pairs_mode == "all-pairs"
            else None
        )
    except ValueError as problem:  # a ProfileError is one too
        print(f"gpuval plan: {problem}", file=sys.stderr)
        return 2
    if shape.rails == 0:
        LOG.info("no RDMA rails named (gpuval_ib_hcas, --rails): no ib_write_bw pairs planned")
    price = (
        plan_text.Price(args.price_per_hour, "--price-per-hour")
        if args.price_per_hour is not None
        else None
    )
    if args.json:
        print(json.dumps(plan_text.plan_document(estimate, price), indent=2))
    else:
        print("\n".join(plan_text.plan_lines(estimate, price)))
    if args.max_minutes is not None and estimate.total_s > args.max_minutes * 60:
        print("\n".join(plan_text.to_fit(estimate, args.max_minutes * 60, staged)), file=sys.stderr)
        return 1
    return 0
