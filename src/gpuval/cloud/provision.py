"""Launch a run's Lambda instances and tear them down, recording both in the run folder.

    client = LambdaCloud(api_key_from_environment(), api_url_from_environment())
    request = RunRequest(run_id=..., run_dir=..., instance_type="gpu_8x_h100_sxm5", ...)
    print("\\n".join(plan(client, request).lines()))      # refuses what the limits forbid
    instances = launch(client, request)                  # active and answering on ssh
    group_vars = inventory_group_vars(request.run_dir, {"ansible_user": "ubuntu"})
    write_inventory(request.run_dir, instances, group_vars)
    ...benchmark...
    teardown(client, request.run_dir, reason="run finished")

A launch that fails half-way (no capacity for the second instance, an instance stuck booting,
no ssh, Ctrl-C) terminates everything it launched before raising. Instances are named
`<prefix>-<run-id>-<n>`, and teardown terminates the ids of the state file plus any live
instance named that way (one launched by a request whose answer was lost).
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpuval.cloud.cost import CostPlan, PlanRefused, billed_usd, check_limits, plan_run
from gpuval.cloud.lambda_api import CODE_NOT_FOUND, Instance, LambdaApiError, LambdaCloud
from gpuval.cloud.state import (
    STATE_DIR,
    LaunchedInstance,
    RunState,
    now_iso,
    read_state,
    seconds_between,
    state_lock,
    state_path,
    write_state,
)
from gpuval.files.atomic import json_text, write_json, write_output

INVENTORY_FILE = "inventory.yml"
COST_FILE = "cost.json"
RUN_JSON = "run.json"
BILLING_SOURCE = "https://docs.lambda.ai/public-cloud/billing"
SSH_BANNER = b"SSH-"


class ProvisionError(RuntimeError):
    """A launch that failed; what it launched has been terminated (the message says so)."""


@dataclass(frozen=True)
class RunRequest:
    run_id: str
    run_dir: Path
    instance_type: str
    region: str
    count: int
    ssh_key_name: str
    hours: float
    max_spend_usd: float
    max_instances: int
    name_prefix: str = "gpuval"
    # Lambda: "Instances might take several minutes to launch".
    active_timeout_s: float = 1200.0
    ssh_timeout_s: float = 600.0
    poll_s: float = 10.0
    ssh_port: int = 22

    @property
    def run_prefix(self) -> str:
        return f"{self.name_prefix}-{self.run_id}"

    @property
    def state_file(self) -> Path:
        return state_path(self.run_dir)


@dataclass
class TeardownResult:
    terminated: list[str] = field(default_factory=list)  # names terminated now
    already_gone: list[str] = field(default_factory=list)
    cost: dict[str, Any] | None = None


def _is_run_instance(name: str, run_prefix: str) -> bool:
    return re.fullmatch(re.escape(run_prefix) + r"-\d+", name) is not None


def plan(client: LambdaCloud, request: RunRequest) -> CostPlan:
    """The cost plan from the API's prices and capacity, refused (PlanRefused) when over the
    limits, when the type or SSH key is unknown, or when the region has no capacity."""
    offers = client.instance_types()
    chosen = plan_run(
        offers,
        instance_type=request.instance_type,
        region=request.region,
        count=request.count,
        hours=request.hours,
    )
    check_limits(chosen, max_usd=request.max_spend_usd, max_instances=request.max_instances)
    keys = client.ssh_key_names()
    if request.ssh_key_name not in keys:
        raise PlanRefused(
            f"the Lambda account has no SSH key named {request.ssh_key_name!r} "
            f"(keys: {', '.join(sorted(keys)) or 'none'}); add your public key at "
            "https://cloud.lambda.ai/ssh-keys or name another one; nothing was launched"
        )
    return chosen


def launch(
    client: LambdaCloud,
    request: RunRequest,
    *,
    say: Callable[[str], None] = lambda line: None,
    on_recorded: Callable[[], None] = lambda: None,
) -> list[Instance]:
    """Launch the planned instances, wait until they are active and answer on ssh; the state
    file lists every id as soon as the API returns it (`on_recorded` is called once it exists,
    before the first launch: the moment to start a guard). On any failure (or interrupt) what
    was launched is terminated and ProvisionError says what happened."""
    chosen = plan(client, request)
    path = request.state_file
    with state_lock(path):
        if path.exists() and read_state(path).live():
            raise PlanRefused(
                f"run {request.run_id} already has live instances ({path}): tear them down "
                "first, or launch under another run id"
            )
        deadline = datetime.now(UTC) + timedelta(hours=request.hours)
        state = RunState(
            run_id=request.run_id,
            name_prefix=request.run_prefix,
            plan=chosen.to_dict(),
            deadline=deadline.isoformat(timespec="seconds"),
        )
        write_state(path, state)
    try:
        on_recorded()
        ids = []
        for number in range(1, request.count + 1):
            name = f"{request.run_prefix}-{number}"
            for instance_id in client.launch(
                region=request.region,
                instance_type=request.instance_type,
                ssh_key_name=request.ssh_key_name,
                name=name,
            ):
                _record_launch(path, LaunchedInstance(instance_id, name, now_iso()))
                ids.append(instance_id)
                say(f"launched {name} ({instance_id})")
        instances = wait_active(client, ids, request, say=say)
        wait_ssh(instances, request, say=say)
        _record_addresses(path, instances)
        return instances
    except BaseException as problem:
        reason = "interrupted" if isinstance(problem, KeyboardInterrupt) else str(problem)
        try:
            result = teardown(client, request.run_dir, reason=f"launch failed: {reason}")
        except LambdaApiError as cleanup:
            raise ProvisionError(
                f"{reason}; terminating what was launched failed too ({cleanup}): the ids are "
                f"in {path}, run playbooks/lambda_teardown.yml -e gpuval_run_id={request.run_id}"
            ) from None
        if not isinstance(problem, Exception):
            raise
        gone = ", ".join(result.terminated) or "nothing had been launched"
        raise ProvisionError(f"{problem}; terminated what this launch started: {gone}") from None


def seconds_left(run_dir: Path) -> int:
    """Seconds until the run's deadline (its time-to-live), 0 once passed or when it has none."""
    deadline = read_state(state_path(run_dir)).deadline
    return max(0, round(seconds_between(now_iso(), deadline))) if deadline else 0


def _record_launch(path: Path, launched: LaunchedInstance) -> None:
    with state_lock(path):
        state = read_state(path)
        state.instances.append(launched)
        write_state(path, state)


def _record_addresses(path: Path, instances: Iterable[Instance]) -> None:
    by_id = {i.id: i for i in instances}
    with state_lock(path):
        state = read_state(path)
        for launched in state.instances:
            if found := by_id.get(launched.id):
                launched.ip, launched.private_ip = found.ip, found.private_ip
        write_state(path, state)


def wait_active(
    client: LambdaCloud,
    ids: Sequence[str],
    request: RunRequest,
    *,
    say: Callable[[str], None] = lambda line: None,
) -> list[Instance]:
    """The instances once all are active (one listing per poll: the API allows ~1 request/s)."""
    deadline = time.monotonic() + request.active_timeout_s
    while True:
        listed = {i.id: i for i in client.instances() if i.id in ids}
        for instance in listed.values():
            if instance.status in ("terminated", "preempted"):
                raise ProvisionError(
                    f"instance {instance.name} was {instance.status} while booting"
                )
        ready = [listed[i] for i in ids if i in listed and listed[i].status == "active"]
        if len(ready) == len(ids) and all(i.ip for i in ready):
            say(f"{len(ready)} instance(s) active")
            return ready
        if time.monotonic() > deadline:
            ready_ids = {r.id for r in ready}
            states = ", ".join(
                f"{listed[i].name}: {listed[i].status}" if i in listed else f"{i}: unlisted"
                for i in ids
                if i not in ready_ids
            )
            raise ProvisionError(
                f"instances not active after {request.active_timeout_s:.0f} s ({states}); "
                "stuck booting?"
            )
        time.sleep(request.poll_s)


def _answers_ssh(address: str, port: int, timeout_s: float) -> bool:
    try:
        with socket.create_connection((address, port), timeout=timeout_s) as connection:
            connection.settimeout(timeout_s)
            return connection.recv(len(SSH_BANNER)) == SSH_BANNER
    except OSError:
        return False


def wait_ssh(
    instances: Sequence[Instance],
    request: RunRequest,
    *,
    say: Callable[[str], None] = lambda line: None,
) -> None:
    """Until every instance's sshd sends its banner on the public address."""
    deadline = time.monotonic() + request.ssh_timeout_s
    pending = {i.name: i.ip or "" for i in instances}
    while True:
        pending = {n: ip for n, ip in pending.items() if not _answers_ssh(ip, request.ssh_port, 5)}
        if not pending:
            say(f"{len(instances)} instance(s) answer on ssh")
            return
        if time.monotonic() > deadline:
            silent = ", ".join(f"{name} ({ip})" for name, ip in pending.items())
            raise ProvisionError(
                f"no ssh on port {request.ssh_port} after {request.ssh_timeout_s:.0f} s: {silent}"
            )
        time.sleep(min(request.poll_s, 5.0))


def _terminate(client: LambdaCloud, ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """Terminate ids; (terminated, already gone). One at a time after a not-found, so one
    instance that is gone does not keep the others alive."""
    try:
        client.terminate(ids)
        return list(ids), []
    except LambdaApiError as problem:
        if problem.code != CODE_NOT_FOUND:
            raise
    terminated, gone = [], []
    for instance_id in ids:
        try:
            client.terminate([instance_id])
            terminated.append(instance_id)
        except LambdaApiError as problem:
            if problem.code != CODE_NOT_FOUND:
                raise
            gone.append(instance_id)
    return terminated, gone


def teardown(
    client: LambdaCloud, run_dir: Path, *, reason: str, dry_run: bool = False
) -> TeardownResult:
    """Terminate the run's live instances: those of the state file, and any live instance named
    like the run's (`<run prefix>-<n>`). Marks the state finished and records the cost; with
    `dry_run`, only names what it would terminate."""
    path = state_path(run_dir)
    with state_lock(path):
        state = read_state(path)
        known = {i.id for i in state.instances}
        for found in client.instances():
            ours = _is_run_instance(found.name, state.name_prefix)
            if found.live and ours and found.id not in known:
                # Launched by a request whose answer was lost: billed since about the run's start.
                state.instances.append(LaunchedInstance(found.id, found.name, state.created_at))
        live = state.live()
        result = TeardownResult()
        if dry_run:
            result.terminated = [i.name for i in live]
            return result
        terminated, gone = _terminate(client, [i.id for i in live]) if live else ([], [])
        ended = now_iso()
        for launched in live:
            launched.terminated_at = ended
            launched.terminated_by = reason
            if launched.id in terminated:
                result.terminated.append(launched.name)
            elif launched.id in gone:
                result.already_gone.append(launched.name)
        state.finished = True
        state.cost = cost_of(state)
        write_state(path, state)
        result.cost = state.cost
        record_cost(run_dir, state)
        return result


def cost_of(state: RunState, at: str | None = None) -> dict[str, Any]:
    """What the run's instances cost (or have cost so far), by the started minute from the
    launch answer to termination: an upper bound of Lambda's bill, which starts once an instance
    passes its health checks."""
    price = int(state.plan.get("price_cents_per_hour", 0))
    until = at or now_iso()
    per_instance: list[dict[str, Any]] = []
    for launched in state.instances:
        seconds = seconds_between(launched.launched_at, launched.terminated_at or until)
        per_instance.append({
            "name": launched.name, "id": launched.id, "seconds": round(seconds),
            "usd": billed_usd(price, seconds), "terminated": launched.terminated_at is not None,
        })  # fmt: skip
    return {
        "currency": "USD",
        "total_usd": round(sum(float(entry["usd"]) for entry in per_instance), 2),
        "planned_usd": state.plan.get("total_usd"),
        "price_cents_per_hour": price,
        "instances": per_instance,
        "method": "per started minute from launch to termination, an upper bound of the bill "
        f"({BILLING_SOURCE}); Lambda's invoice is authoritative",
    }


def record_cost(run_dir: Path, state: RunState) -> None:
    """lambda/cost.json, and run.json's `cloud` section when the run folder has one (so
    results.json carries it as `meta.cloud`)."""
    cloud = {
        "provider": "lambda",
        "instance_type": state.plan.get("instance_type"),
        "region": state.plan.get("region"),
        "count": len(state.instances),
        "plan": state.plan,
        "cost": state.cost if state.cost is not None else cost_of(state),
    }
    write_json(run_dir / STATE_DIR / COST_FILE, cloud)
    run_json = run_dir / RUN_JSON
    try:
        document = json.loads(run_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # no run.json yet (the launch failed): cost.json is the record
    if isinstance(document, dict):
        write_json(run_json, {**document, "cloud": cloud})


def host_variables(instance: Instance) -> dict[str, Any]:
    """Ansible variables of one instance: where to reach it, its private address for MPI, and
    what it was rented as (GPU model and count)."""
    kind = instance.instance_type
    variables: dict[str, Any] = {
        "ansible_host": instance.ip,
        "openmpi_node_address": instance.private_ip or instance.ip,
        "lambda_instance_id": instance.id,
        "lambda_region": instance.region,
    }
    if kind is not None:
        variables |= {
            "gpuval_gpus_per_node": kind.gpus,
            "gpuval_gpu_model": kind.gpu_description,
            "lambda_instance_type": kind.name,
            "lambda_price_cents_per_hour": kind.price_cents_per_hour,
        }
    return variables


def inventory_group_vars(run_dir: Path, extra: Mapping[str, Any]) -> dict[str, Any]:
    """Variables of group gpu_nodes for the run's instances: `extra` (user, key...) plus ssh
    options. Lambda reuses public addresses between customers: a per-run known_hosts file keeps
    this run's host keys apart from the user's own."""
    known_hosts = run_dir / STATE_DIR / "known_hosts"
    known_hosts.touch()
    common = f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking=accept-new"
    return {"ansible_ssh_common_args": common, **extra}


def write_inventory(
    run_dir: Path, instances: Sequence[Instance], group_vars: Mapping[str, Any]
) -> Path:
    """reports/<run-id>/lambda/inventory.yml: group gpu_nodes with the run's instances."""
    document = {
        "gpu_nodes": {
            "hosts": {i.name: host_variables(i) for i in instances},
            "vars": dict(group_vars),
        }
    }
    path = run_dir / STATE_DIR / INVENTORY_FILE
    header = (
        "# Lambda instances of this run, written by gpuval (playbooks/lambda_provision.yml).\n"
        "# Use it beside inventory/ (for its group_vars):\n"
        f"#   ansible-playbook -i inventory/lambda-launch.ini -i {path} \\\n"
        f"#     playbooks/benchmark.yml -e gpuval_run_id={run_dir.name}\n"
    )
    write_output(path, header + json_text(document))
    return path
