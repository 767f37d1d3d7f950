# Copyright: gpuval contributors
# Apache License 2.0 (see pyproject.toml)
# mypy: allow-subclassing-any
"""Action gpuval_lambda: plan, launch or terminate a run's Lambda instances (over gpuval.cloud)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.module_utils.common.parameters import env_fallback
from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: gpuval_lambda
short_description: Launch and terminate the Lambda Cloud instances of one gpuval run
description:
  - O(state=planned) prints nothing and launches nothing; it returns the cost plan (type, count,
    hourly price from the API, expected duration, total) and fails when the plan exceeds
    O(max_spend_usd) or O(max_instances), the type is unknown, the region has no capacity or
    the SSH key is not in the account.
  - O(state=present) checks the same, records the run in C(<run_dir>/lambda/state.json),
    launches O(count) instances named C(<name_prefix>-<run id>-<n>), waits until they are
    active and answer on ssh, and writes C(<run_dir>/lambda/inventory.yml). A launch that
    fails half-way terminates what it launched before failing.
  - O(state=described) asks the API nothing and needs no key; it returns what the name of
    O(instance_type) says (RV(type_gpus)), for what must be known before the plan (the run's
    predicted duration).
  - O(state=absent) terminates the run's live instances (the ids of the state file and any
    live instance named like the run's), records the cost in C(lambda/cost.json) and in the
    C(cloud) section of C(run.json). In check mode it only lists them.
  - Calls C(gpuval.cloud.provision) inside ansible-playbook's own process (an action plugin);
    never connects to the host it runs for.
  - Lambda Cloud API reference U(https://docs-api.lambda.ai/api/cloud).
version_added: "0.1.0"
options:
  state:
    description: What to do.
    type: str
    choices: [planned, present, absent, described]
    default: present
  api_key:
    description:
      - Lambda Cloud API key; defaults to the environment variable C(LAMBDA_API_KEY) (or the
        key C(gpuval run) hands over).
      - Give it from Ansible Vault, and set C(no_log) on the task. Surrounding whitespace is
        dropped; a key with any other character that is not printable ASCII is refused.
    type: str
  api_url:
    description:
      - API base URL; defaults to C(GPUVAL_LAMBDA_API_URL), else U(https://cloud.lambda.ai/api/v1).
    type: str
  run_dir:
    description: The run folder (C(reports/<run-id>)); the state lives in its C(lambda/).
    type: path
    required: true
  run_id:
    description: The run id; defaults to the name of O(run_dir).
    type: str
  name_prefix:
    description: First part of the instance names (C(<name_prefix>-<run id>-<n>)).
    type: str
    default: gpuval
  instance_type:
    description: Lambda instance type, e.g. C(gpu_8x_h100_sxm5).
    type: str
  region:
    description: Lambda region, e.g. C(us-east-1).
    type: str
  count:
    description: Number of instances.
    type: int
    default: 1
  ssh_key_name:
    description: Name of an SSH key of the Lambda account, installed on the instances.
    type: str
  hours:
    description:
      - Expected duration of the run; the plan's total and the time-to-live.
      - 0 or less takes them from O(predicted_s) (gpuval.cloud.cost.time_to_live_hours).
    type: float
    default: 1.0
  predicted_s:
    description:
      - The run's predicted duration in seconds (C(gpuval_plan)'s C(plan.total_s)), used when
        O(hours) is 0 or less; a quarter is added, and the launch's waits.
    type: float
  max_spend_usd:
    description: The most this run may cost; a larger plan is refused.
    type: float
  max_instances:
    description: The most instances this run may launch.
    type: int
    default: 8
  active_timeout_s:
    description: How long instances may take to become active.
    type: float
    default: 1200
  ssh_timeout_s:
    description: How long active instances may take to answer on ssh.
    type: float
    default: 600
  poll_s:
    description: Seconds between status polls (the API allows about one request per second).
    type: float
    default: 10
  ssh_port:
    description: Port checked for the instances' ssh banner.
    type: int
    default: 22
  guard:
    description:
      - Start a guard process that terminates the instances when the ansible-playbook
        running this task ends without tearing them down, or when O(hours) have passed.
    type: bool
    default: false
  inventory_vars:
    description: Variables of group C(gpu_nodes) in the written inventory (C(ansible_user)...).
    type: dict
    default: {}
notes:
  - The key is never returned, printed or written; the module fails with the API's error code
    and a message saying what to do.
requirements:
  - the gpuval package installed in ansible-playbook's Python
author:
  - gpuval contributors
"""

EXAMPLES = r"""
- name: Launch two 8x H100 instances for this run
  gpuval_lambda:
    api_key: "{{ lambda_api_key | default(omit) }}"
    run_dir: "{{ gpuval_reports_dir }}/{{ gpuval_run_id }}"
    instance_type: gpu_8x_h100_sxm5
    region: us-east-1
    count: 2
    ssh_key_name: my-laptop
    hours: 2
    max_spend_usd: 200
  no_log: true
  register: launched

- name: Terminate them
  gpuval_lambda:
    state: absent
    run_dir: "{{ gpuval_reports_dir }}/{{ gpuval_run_id }}"
  no_log: true
"""

RETURN = r"""
plan:
  description: The cost plan (states planned and present).
  returned: when a plan was made
  type: dict
  sample: {"instance_type": "gpu_8x_h100_sxm5", "count": 2, "price_cents_per_hour": 3592,
           "hours": 2.0, "total_usd": 143.68}
plan_lines:
  description: The plan in words, for printing before launching.
  returned: when a plan was made
  type: list
  elements: str
hosts:
  description: The launched instances as inventory hosts (name and variables).
  returned: state present
  type: list
  elements: dict
group_vars:
  description: Variables of group gpu_nodes in the written inventory (O(inventory_vars) and ssh
    options with the run's own known_hosts file).
  returned: state present
  type: dict
inventory:
  description: Path of the written inventory.
  returned: state present
  type: str
terminated:
  description: Names of the instances terminated (in check mode, that would be).
  returned: state absent
  type: list
  elements: str
cost:
  description: What the run cost (per started minute from launch to termination).
  returned: state absent
  type: dict
type_gpus:
  description: GPUs per instance as the name of O(instance_type) says (C(gpu_8x_h100_sxm5) has
    8); 0 for a name of another form.
  returned: state described
  type: int
  sample: 8
seconds_left:
  description: Seconds left of the run's time-to-live (the instances' watchdog arms with it).
  returned: state present
  type: int
outcome_file:
  description: The key-free record of this answer in the run folder (C(lambda/plan.json),
    C(lambda/launch.json) or C(lambda/teardown.json)), for playbooks whose task is C(no_log).
  returned: in every state but described
  type: str
error:
  description: What went wrong, in words; also in msg.
  returned: failure
  type: str
"""

ARGUMENT_SPEC: dict[str, Any] = {
    "state": {"choices": ["planned", "present", "absent", "described"], "default": "present"},
    "api_key": {"type": "str", "no_log": True, "fallback": (env_fallback, ["LAMBDA_API_KEY"])},
    "api_url": {"type": "str", "fallback": (env_fallback, ["GPUVAL_LAMBDA_API_URL"])},
    "run_dir": {"type": "path", "required": True},
    "run_id": {"type": "str"},
    "name_prefix": {"type": "str", "default": "gpuval"},
    "instance_type": {"type": "str"},
    "region": {"type": "str"},
    "count": {"type": "int", "default": 1},
    "ssh_key_name": {"type": "str", "no_log": False},
    "hours": {"type": "float", "default": 1.0},
    "predicted_s": {"type": "float"},
    "max_spend_usd": {"type": "float"},
    "max_instances": {"type": "int", "default": 8},
    "active_timeout_s": {"type": "float", "default": 1200.0},
    "ssh_timeout_s": {"type": "float", "default": 600.0},
    "poll_s": {"type": "float", "default": 10.0},
    "ssh_port": {"type": "int", "default": 22},
    "guard": {"type": "bool", "default": False},
    "inventory_vars": {"type": "dict", "default": {}},
}
# Options passed as they are to gpuval.cloud.provision.RunRequest.
REQUEST_OPTIONS = (
    "instance_type", "region", "count", "ssh_key_name", "hours", "max_spend_usd",
    "max_instances", "name_prefix", "active_timeout_s", "ssh_timeout_s", "poll_s", "ssh_port",
)  # fmt: skip
LAUNCH_OPTIONS = ["instance_type", "region", "ssh_key_name", "max_spend_usd"]
# What each state answered, in the run folder (lambda/).
OUTCOME_FILES = {"planned": "plan.json", "present": "launch.json", "absent": "teardown.json"}


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        from gpuval.cloud.cost import PlanRefused
        from gpuval.cloud.lambda_api import LambdaApiError, gpus_of_type_name
        from gpuval.cloud.provision import ProvisionError
        from gpuval.cloud.state import StateError
        from gpuval.files.atomic import OutputError, write_json

        super().run(tmp, task_vars)
        _, params = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC,
            required_if=[
                ("state", "planned", LAUNCH_OPTIONS),
                ("state", "present", LAUNCH_OPTIONS),
                ("state", "described", ["instance_type"]),
            ],
        )
        if params["state"] == "described":
            return {"changed": False, "type_gpus": gpus_of_type_name(params["instance_type"])}
        check_mode = bool(self._task.check_mode)
        run_dir = Path(params["run_dir"]).resolve()
        result: dict[str, Any] = {"changed": False, "check_mode": check_mode}
        try:
            act(params, check_mode, run_dir, result)
        except (LambdaApiError, PlanRefused, ProvisionError, StateError, OutputError) as problem:
            result["error"] = str(problem)
        # The task that passes the key is no_log, which hides its result: the playbook reads
        # this key-free record of the answer to print the plan or the error.
        outcome = run_dir / "lambda" / OUTCOME_FILES[params["state"]]
        write_json(outcome, result)
        result["outcome_file"] = str(outcome)
        if "error" in result:
            result.update(failed=True, msg=result["error"])
        return result


def act(params: dict[str, Any], check_mode: bool, run_dir: Path, result: dict[str, Any]) -> None:
    """Plan, launch or tear down, as params["state"] says; what happened goes into result."""
    from gpuval.cloud import guard, provision
    from gpuval.cloud.cost import time_to_live_hours
    from gpuval.cloud.lambda_api import (
        LambdaCloud,
        api_key_from_environment,
        api_url_from_environment,
    )

    api_key = (params["api_key"] or "").strip() or api_key_from_environment()
    api_url = params["api_url"] or api_url_from_environment()
    client = LambdaCloud(api_key, api_url)
    if params["state"] == "absent":
        teardown = provision.teardown(
            client, run_dir, reason="teardown (lambda_teardown.yml)", dry_run=check_mode
        )
        result |= {
            "changed": bool(teardown.terminated) and not check_mode,
            "terminated": teardown.terminated,
            "already_gone": teardown.already_gone,
            "cost": teardown.cost,
        }
        return
    options = {option: params[option] for option in REQUEST_OPTIONS}
    if options["hours"] <= 0:
        options["hours"] = time_to_live_hours(
            params["predicted_s"] or 0.0, params["active_timeout_s"], params["ssh_timeout_s"]
        )
    request = provision.RunRequest(
        run_id=params["run_id"] or run_dir.name, run_dir=run_dir, **options
    )
    plan = provision.plan(client, request)
    result |= {"plan": plan.to_dict(), "plan_lines": plan.lines()}
    if params["state"] == "planned" or check_mode:
        return

    def start_guard() -> None:
        result["changed"] = True  # the state file exists from here on
        if params["guard"]:
            watched = guard.playbook_process()
            result["guard_pid"] = guard.start_guard(
                run_dir, api_key=api_key, api_url=api_url, watch_pid=watched
            )
            result["guard_watches"] = watched

    instances = provision.launch(client, request, on_recorded=start_guard)
    group_vars = provision.inventory_group_vars(run_dir, params["inventory_vars"])
    inventory = provision.write_inventory(run_dir, instances, group_vars)
    result |= {
        "hosts": [{"name": i.name, **provision.host_variables(i)} for i in instances],
        "group_vars": group_vars,
        "inventory": str(inventory),
        "seconds_left": provision.seconds_left(run_dir),
    }
