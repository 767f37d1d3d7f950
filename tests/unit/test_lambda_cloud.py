"""gpuval.cloud against the local stand-in for Lambda's Cloud API (tests/fake_lambda_api).

Expected numbers are worked out by hand from the documented rules: the price is the API's
`price_cents_per_hour`, a plan costs count x price x hours, and an instance is billed per
started minute (https://docs.lambda.ai/public-cloud/billing).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.action_plugins import run_action
from tests.fake_lambda_api import FakeLambdaCloud, FakeType, Machine

from gpuval.cloud import guard
from gpuval.cloud.cost import PlanRefused, billed_usd, check_limits, plan_run, time_to_live_hours
from gpuval.cloud.lambda_api import (
    CODE_INVALID_KEY,
    CODE_NO_CAPACITY,
    CODE_RATE_LIMITED,
    CODE_UNREACHABLE,
    LambdaApiError,
    LambdaCloud,
    gpus_of_type_name,
)
from gpuval.cloud.provision import (
    ProvisionError,
    RunRequest,
    inventory_group_vars,
    launch,
    teardown,
    write_inventory,
)
from gpuval.cloud.state import read_state, state_lock, state_path, write_state

KEY = "secret-lambda-key-5f0c9a1e"
# The OpenAPI document's example: gpu_8x_h100_sxm5gdr at 3592 cents per hour.
H100_8X = "gpu_8x_h100_sxm5gdr"
PRICE_CENTS = 3592


@pytest.fixture
def ssh_port() -> Iterator[int]:
    """A port on 127.0.0.1 that greets like an sshd (what wait_ssh looks for)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join()
    listener.close()


def machines(count: int) -> list[Machine]:
    return [Machine("127.0.0.1", f"10.0.0.{11 + n}") for n in range(count)]


@pytest.fixture
def cloud() -> Iterator[FakeLambdaCloud]:
    h100 = FakeType(H100_8X, "H100 (80 GB SXM5)", 8, PRICE_CENTS, capacity={"us-east-1": 6})
    with FakeLambdaCloud(KEY, [h100], ["laptop"], machines(6), boot_s=0.2) as fake:
        yield fake


def client_of(cloud: FakeLambdaCloud, key: str = KEY, **options: float) -> LambdaCloud:
    return LambdaCloud(key, cloud.url, backoff_s=0.01, **options)  # type: ignore[arg-type]


def request_for(tmp_path: Path, port: int, **changes: object) -> RunRequest:
    fields: dict[str, object] = {
        "run_id": "20261122T120000Z", "run_dir": tmp_path / "20261122T120000Z",
        "instance_type": H100_8X, "region": "us-east-1", "count": 2, "ssh_key_name": "laptop",
        "hours": 1.5, "max_spend_usd": 200.0, "max_instances": 4, "active_timeout_s": 5.0,
        "ssh_timeout_s": 5.0, "poll_s": 0.05, "ssh_port": port,
    }  # fmt: skip
    return RunRequest(**(fields | changes))  # type: ignore[arg-type]


def launches(cloud: FakeLambdaCloud) -> int:
    return sum(path.endswith("/launch") for _, path, _ in cloud.requests)


# --- the API client -------------------------------------------------------------------------


def test_instance_types_carry_price_gpus_and_capacity(cloud: FakeLambdaCloud) -> None:
    offer = client_of(cloud).instance_types()[H100_8X]
    assert offer.instance_type.price_cents_per_hour == PRICE_CENTS
    assert offer.instance_type.gpus == 8
    assert offer.regions_with_capacity == ("us-east-1",)


def test_a_wrong_key_is_refused_without_showing_it(cloud: FakeLambdaCloud) -> None:
    wrong = "not-the-key-0000"
    client = client_of(cloud, wrong)
    with pytest.raises(LambdaApiError) as refused:
        client.instances()
    assert refused.value.code == CODE_INVALID_KEY
    assert refused.value.status == 401
    assert "invalid, expired, or deleted" in str(refused.value)
    assert wrong not in str(refused.value) + repr(client)


def test_rate_limited_calls_back_off_and_succeed(cloud: FakeLambdaCloud) -> None:
    waits: list[float] = []
    client = LambdaCloud(KEY, cloud.url, backoff_s=0.5, sleep=waits.append)
    cloud.refuse_next = 3
    assert client.ssh_key_names() == ["laptop"]
    assert waits == [0.5, 1.0, 2.0]  # exponential backoff


def test_rate_limited_too_long_says_so(cloud: FakeLambdaCloud) -> None:
    client = LambdaCloud(KEY, cloud.url, attempts=3, backoff_s=1, sleep=lambda _: None)
    cloud.refuse_next = 3
    with pytest.raises(LambdaApiError) as refused:
        client.instances()
    assert refused.value.code == CODE_RATE_LIMITED
    assert "still refused after 3 tries" in str(refused.value)


def test_an_unreachable_api_is_named() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    client = LambdaCloud(KEY, f"http://127.0.0.1:{port}/api/v1", attempts=2, backoff_s=0)
    with pytest.raises(LambdaApiError) as refused:
        client.instances()
    assert refused.value.code == CODE_UNREACHABLE
    assert f"127.0.0.1:{port}" in str(refused.value)


def test_a_launch_beyond_capacity_gives_the_documented_code(cloud: FakeLambdaCloud) -> None:
    cloud.types[H100_8X].capacity["us-east-1"] = 0
    with pytest.raises(LambdaApiError) as refused:
        client_of(cloud).launch(
            region="us-east-1", instance_type=H100_8X, ssh_key_name="laptop", name="x-1"
        )
    assert refused.value.code == CODE_NO_CAPACITY
    assert refused.value.status == 400


# --- the cost guard -------------------------------------------------------------------------


def test_plan_costs_count_times_price_times_hours(cloud: FakeLambdaCloud) -> None:
    chosen = plan_run(
        client_of(cloud).instance_types(),
        instance_type=H100_8X, region="us-east-1", count=2, hours=1.5,
    )  # fmt: skip
    assert chosen.hourly_usd == pytest.approx(71.84)  # 2 x $35.92
    assert chosen.total_usd == pytest.approx(107.76)  # x 1.5 h
    assert chosen.lines()[-1] == "expected duration 1.5 h: expected cost $107.76"


def test_limits_refuse_larger_plans(cloud: FakeLambdaCloud) -> None:
    offers = client_of(cloud).instance_types()
    chosen = plan_run(offers, instance_type=H100_8X, region="us-east-1", count=2, hours=1.5)
    with pytest.raises(PlanRefused, match=r"\$107.76 exceeds the limit of \$100.00"):
        check_limits(chosen, max_usd=100, max_instances=4)
    with pytest.raises(PlanRefused, match="2 instances exceed the limit of 1"):
        check_limits(chosen, max_usd=1000, max_instances=1)
    check_limits(chosen, max_usd=107.76, max_instances=2)


def test_plans_name_what_is_offered(cloud: FakeLambdaCloud) -> None:
    offers = client_of(cloud).instance_types()
    with pytest.raises(PlanRefused, match=f"no instance type 'gpu_1x_a10'.*{H100_8X}"):
        plan_run(offers, instance_type="gpu_1x_a10", region="us-east-1", count=1, hours=1)
    with pytest.raises(PlanRefused, match=r"no capacity .* in us-west-1 \(capacity now: us-east-1"):
        plan_run(offers, instance_type=H100_8X, region="us-west-1", count=1, hours=1)


def test_billing_counts_started_minutes() -> None:
    assert billed_usd(PRICE_CENTS, 60) == pytest.approx(0.60)  # 3592 / 60 = 59.9 cents
    assert billed_usd(PRICE_CENTS, 61) == pytest.approx(1.20)  # two started minutes
    assert billed_usd(PRICE_CENTS, 3600) == pytest.approx(35.92)


# --- provisioning ---------------------------------------------------------------------------


def test_launch_records_waits_and_writes_an_inventory(
    cloud: FakeLambdaCloud, tmp_path: Path, ssh_port: int
) -> None:
    cloud.launch_interval_s = 0.3  # the second launch is rate-limited, then retried
    request = request_for(tmp_path, ssh_port)
    instances = launch(client_of(cloud), request)
    assert [i.name for i in instances] == ["gpuval-20261122T120000Z-1", "gpuval-20261122T120000Z-2"]
    assert all(i.status == "active" for i in instances)
    assert ("POST", "/api/v1/instance-operations/launch", 429) in cloud.requests
    state = read_state(request.state_file)
    assert [i.id for i in state.instances] == [i.id for i in instances]
    assert state.plan["total_usd"] == pytest.approx(107.76)
    group_vars = inventory_group_vars(request.run_dir, {"ansible_user": "ubuntu"})
    inventory = write_inventory(request.run_dir, instances, group_vars)
    text = inventory.read_text()
    document = json.loads(text[text.index("{") :])
    host = document["gpu_nodes"]["hosts"]["gpuval-20261122T120000Z-2"]
    assert host["ansible_host"] == "127.0.0.1"
    assert host["openmpi_node_address"] == "10.0.0.12"
    assert host["gpuval_gpus_per_node"] == 8
    assert host["gpuval_gpu_model"] == "H100 (80 GB SXM5)"
    assert document["gpu_nodes"]["vars"]["ansible_user"] == "ubuntu"
    known_hosts = request.run_dir / "lambda" / "known_hosts"
    assert (
        f"UserKnownHostsFile={known_hosts}"
        in document["gpu_nodes"]["vars"]["ansible_ssh_common_args"]
    )


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"region": "us-south-1"}, r"no capacity .* nothing was launched"),
        ({"ssh_key_name": "desktop"}, r"no SSH key named 'desktop' .*keys: laptop"),
        ({"max_instances": 1}, r"2 instances exceed the limit of 1 .*nothing was launched"),
    ],
)
def test_refused_plans_launch_nothing(
    cloud: FakeLambdaCloud, tmp_path: Path, ssh_port: int, change: dict[str, object], refusal: str
) -> None:
    with pytest.raises(PlanRefused, match=refusal):
        launch(client_of(cloud), request_for(tmp_path, ssh_port, **change))
    assert launches(cloud) == 0


def test_a_half_failed_launch_terminates_what_it_launched(
    cloud: FakeLambdaCloud, tmp_path: Path, ssh_port: int
) -> None:
    # The listing shows capacity; the second launch finds none (taken meanwhile by others).
    real_launch = cloud._launch

    def first_only(body: object, now: float) -> object:
        if cloud.instances:
            cloud.types[H100_8X].capacity["us-east-1"] = 0
        return real_launch(body, now)

    cloud._launch = first_only  # type: ignore[method-assign,assignment]
    request = request_for(tmp_path, ssh_port)
    with pytest.raises(ProvisionError) as failed:
        launch(client_of(cloud), request)
    message = str(failed.value)
    assert "insufficient-capacity" in message
    assert "terminated what this launch started: gpuval-20261122T120000Z-1" in message
    assert cloud.live() == []
    state = read_state(request.state_file)
    assert state.finished
    assert [i.terminated_by for i in state.instances] == [
        f"launch failed: {message.split('; terminated')[0]}"
    ]


def test_instances_stuck_booting_are_terminated(
    cloud: FakeLambdaCloud, tmp_path: Path, ssh_port: int
) -> None:
    cloud.stuck_booting = True
    with pytest.raises(ProvisionError, match=r"not active after 1 s .*: booting.*stuck booting"):
        launch(client_of(cloud), request_for(tmp_path, ssh_port, active_timeout_s=1.0))
    assert len(cloud.instances) == 2
    assert cloud.live() == []


def test_no_ssh_terminates(cloud: FakeLambdaCloud, tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        closed = int(taken.getsockname()[1])
    with pytest.raises(ProvisionError, match=f"no ssh on port {closed} after 1 s"):
        launch(client_of(cloud), request_for(tmp_path, closed, ssh_timeout_s=1.0))
    assert cloud.live() == []


def test_teardown_sweeps_the_run_prefix_and_records_the_cost(
    cloud: FakeLambdaCloud, tmp_path: Path, ssh_port: int
) -> None:
    client = client_of(cloud)
    request = request_for(tmp_path, ssh_port)
    launch(client, request)
    # One launched by a request whose answer was lost, one of another run, one of the user's.
    for name in ["gpuval-20261122T120000Z-3", "gpuval-20261122T120000Z-3x", "my-notebook"]:
        client.launch(region="us-east-1", instance_type=H100_8X, ssh_key_name="laptop", name=name)
    (request.run_dir / "run.json").write_text(json.dumps({"run_id": request.run_id}))
    result = teardown(client, request.run_dir, reason="done")
    assert sorted(result.terminated) == [f"gpuval-20261122T120000Z-{n}" for n in (1, 2, 3)]
    assert sorted(i.name for i in cloud.live()) == ["gpuval-20261122T120000Z-3x", "my-notebook"]
    # Three instances, each alive for under a minute: one started minute each.
    assert result.cost is not None
    assert result.cost["total_usd"] == pytest.approx(3 * 0.60)
    run_json = json.loads((request.run_dir / "run.json").read_text())
    assert run_json["cloud"]["cost"]["total_usd"] == pytest.approx(1.80)
    assert run_json["cloud"]["plan"]["total_usd"] == pytest.approx(107.76)
    cost_json = json.loads((request.run_dir / "lambda" / "cost.json").read_text())
    assert cost_json == run_json["cloud"]
    again = teardown(client, request.run_dir, reason="again")
    assert again.terminated == []


def test_the_key_is_in_no_file_of_the_run(
    cloud: FakeLambdaCloud, tmp_path: Path, ssh_port: int
) -> None:
    request = request_for(tmp_path, ssh_port)
    instances = launch(client_of(cloud), request)
    write_inventory(request.run_dir, instances, inventory_group_vars(request.run_dir, {}))
    teardown(client_of(cloud), request.run_dir, reason="done")
    written = [p for p in request.run_dir.rglob("*") if p.is_file()]
    assert len(written) >= 3
    assert not [p for p in written if KEY in p.read_text(errors="replace")]


# --- the guard ------------------------------------------------------------------------------


def wait_until(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def guarded_run(
    cloud: FakeLambdaCloud, tmp_path: Path, port: int, watched: subprocess.Popen[bytes]
) -> RunRequest:
    request = request_for(tmp_path, port)
    launch(client_of(cloud), request)
    guard.start_guard(request.run_dir, api_key=KEY, api_url=cloud.url, watch_pid=watched.pid)
    return request


def test_the_guard_terminates_when_the_run_dies(
    cloud: FakeLambdaCloud, tmp_path: Path, ssh_port: int
) -> None:
    watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    request = guarded_run(cloud, tmp_path, ssh_port, watched)
    time.sleep(2.5)  # a guard poll or more: nothing happens while the run lives
    assert len(cloud.live()) == 2
    watched.kill()
    watched.wait()
    wait_until(lambda: not cloud.live())
    wait_until(lambda: read_state(request.state_file).finished)
    state = read_state(request.state_file)
    assert all(i.terminated_by.startswith("guard: the run (process") for i in state.instances)  # type: ignore[union-attr]
    log = (request.run_dir / "lambda" / "guard.log").read_text()
    assert "ended without tearing down" in log
    assert KEY not in log


def test_the_guard_leaves_a_run_that_tore_down_itself(
    cloud: FakeLambdaCloud, tmp_path: Path, ssh_port: int
) -> None:
    watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    request = guarded_run(cloud, tmp_path, ssh_port, watched)
    teardown(client_of(cloud), request.run_dir, reason="done")
    log = request.run_dir / "lambda" / "guard.log"
    wait_until(lambda: "nothing to do" in log.read_text())
    watched.kill()
    watched.wait()
    assert {i.terminated_by for i in read_state(request.state_file).instances} == {"done"}


def test_the_guard_terminates_at_the_deadline(
    cloud: FakeLambdaCloud, tmp_path: Path, ssh_port: int
) -> None:
    watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    request = guarded_run(cloud, tmp_path, ssh_port, watched)
    with state_lock(request.state_file):
        state = read_state(request.state_file)
        state.deadline = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
        write_state(request.state_file, state)
    wait_until(lambda: not cloud.live())
    watched.kill()
    watched.wait()
    wait_until(lambda: read_state(state_path(request.run_dir)).finished)
    reasons = {i.terminated_by for i in read_state(request.state_file).instances}
    assert len(reasons) == 1
    assert next(iter(reasons)).startswith("guard: time-to-live reached")


def test_the_time_to_live_is_the_prediction_with_a_quarter_more_and_the_launch_waits() -> None:
    # 1 h predicted: 1.25 h, plus 20 min for active and 10 for ssh: 1.75 h, up to a tenth.
    assert time_to_live_hours(3600, 1200, 600) == 1.8
    assert time_to_live_hours(288, 1200, 600) == 0.6  # 360 + 1800 s: exactly 0.6 h
    with pytest.raises(PlanRefused, match="set lambda_cloud_hours"):
        time_to_live_hours(0, 1200, 600)


@pytest.mark.parametrize(
    ("name", "gpus"),
    [
        # The API reference's examples (https://docs-api.lambda.ai/api/cloud; the instance of
        # GET /instances as transcribed in https://raw.githubusercontent.com/api-evangelist/
        # lambda/refs/heads/main/openapi/lambda-cloud-api-openapi.yml)
        (H100_8X, 8),
        ("gpu_1x_a100_sxm4", 1),
        # Launched by users (https://github.com/karpathy/nanochat/discussions/617), and the
        # types the fake API and the examples of this repository offer
        ("gpu_8x_a100_80gb_sxm4", 8),
        ("gpu_8x_h100_sxm5", 8),
        ("gpu_4x_h100_sxm5", 4),
        ("gpu_1x_a10", 1),
        # Not of Lambda's form: no count said
        ("", 0),
        ("8x_h100", 0),
        ("gpu_h100_sxm5", 0),
    ],
)
def test_the_gpus_of_an_instance_type_are_read_from_its_name(name: str, gpus: int) -> None:
    assert gpus_of_type_name(name) == gpus


def test_gpuval_lambda_describes_a_type_without_a_key_or_the_api(tmp_path: Path) -> None:
    args = {"state": "described", "run_dir": str(tmp_path), "instance_type": H100_8X}
    described = run_action("gpuval_lambda", args, {})
    assert described.result == {"changed": False, "type_gpus": 8}
    assert described.node_calls == [] and list(tmp_path.iterdir()) == []
