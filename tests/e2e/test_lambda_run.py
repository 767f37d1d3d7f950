"""playbooks/lambda_*.yml end to end against a local stand-in for Lambda's Cloud API
(tests/fake_lambda_api, on 127.0.0.1), whose "instances" are simulated hosts (tests/simhosts).

1. A whole run: lambda_acceptance.yml through ansible-runner at -vvv, the key from Ansible
   Vault. The plan is printed, the second launch is rate-limited and retried, two instances
   carrying the recorded GPU doubles are benchmarked and reported, then terminated; the
   recordings' FAIL verdict fails the playbook only after teardown; the cost is recorded; the
   key appears in no output, runner event, artifact or file.
2. Refusals that launch nothing: no capacity in the region, a plan over the spending limit, an
   SSH key the account lacks, a wrong API key.
3. A half-failed launch (capacity for one of two): the launched instance is terminated.
4. lambda_teardown.yml: asks first (and without a terminal never gets a yes), then terminates
   the run's instances and only those.
5. Ctrl-C in the middle of the benchmark: the guard terminates the instances.
6. A lost controller: the instance's watchdog powers it off once its time-to-live has passed.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import ansible_runner
import pytest

from gpuval.cloud.lambda_api import LambdaCloud
from gpuval.cloud.state import LaunchedInstance, RunState, now_iso, state_path, write_state
from tests.e2e.doubles import DOUBLES_VARS, REPO, TOOLKIT_VARS, VENV_BIN, install_doubles
from tests.fake_lambda_api import FakeInstance, FakeLambdaCloud, FakeType, Machine
from tests.simhosts import faults
from tests.simhosts.cluster import Cluster
from tests.simhosts.fixtures import simulated_hosts
from tests.simhosts.system import SimHostsError

pytestmark = pytest.mark.simhosts

KEY = "lambda-test-key-7d3f0b9c2e41"
SSH_KEY_NAME = "gpuval-test"
# The doubles replay a 4x H100 SXM node; the price is this test's own.
H100_4X = FakeType("gpu_4x_h100_sxm5", "H100 (80 GB SXM5)", 4, 1236, capacity={"us-east-1": 2})
LAUNCH_INVENTORY = REPO / "inventory" / "lambda-launch.ini"
# The whole run stops short of the phases that need Open MPI on the nodes, which Lambda Stack
# ships and the simulated hosts would download for two minutes (test_benchmark_playbook covers
# them): the intranode phase measures, the report judges.
SKIPPED = "install,mpi-preflight,internode,pairs"


@dataclass
class Run:
    returncode: int
    output: str
    reports: Path
    run_id: str

    @property
    def run_dir(self) -> Path:
        return self.reports / self.run_id

    def record(self, name: str) -> dict[str, object]:
        document = json.loads((self.run_dir / "lambda" / name).read_text())
        assert isinstance(document, dict)
        return document


def new_type(**capacity: int) -> FakeType:
    return FakeType(H100_4X.name, H100_4X.gpu_description, H100_4X.gpus,
                    H100_4X.price_cents_per_hour, dict(capacity))  # fmt: skip


def power_off(cluster: Cluster) -> Callable[[FakeInstance], None]:
    """What terminating an instance does to its simulated host."""

    def terminate(instance: FakeInstance) -> None:
        for host in cluster.hosts:
            if host.ip == instance.machine.ip and host.init_pid is not None:
                faults.kill_host(cluster, host)

    return terminate


@contextmanager
def fake_cloud(
    cluster: Cluster | None, kind: FakeType, *, launch_interval_s: float = 0.0
) -> Iterator[FakeLambdaCloud]:
    hosts = cluster.hosts if cluster else []
    machines = [Machine(h.ip, h.ip) for h in hosts] or [Machine("192.0.2.1", "10.0.0.1")] * 2
    with FakeLambdaCloud(
        KEY, [kind], [SSH_KEY_NAME], machines, boot_s=1.0, launch_interval_s=launch_interval_s,
        on_terminate=power_off(cluster) if cluster else None,
    ) as cloud:  # fmt: skip
        yield cloud


def lambda_variables(
    cloud: FakeLambdaCloud, reports: Path, run_id: str, cluster: Cluster | None
) -> dict[str, object]:
    variables: dict[str, object] = {
        "gpuval_run_id": run_id, "gpuval_reports_dir": str(reports),
        "lambda_cloud_api_url": cloud.url, "lambda_cloud_instance_type": H100_4X.name,
        "lambda_cloud_region": "us-east-1", "lambda_cloud_count": 2,
        "lambda_cloud_ssh_key_name": SSH_KEY_NAME, "lambda_cloud_hours": 1,
        "lambda_cloud_max_spend_usd": 50, "lambda_cloud_poll_s": 0.5,
        "lambda_cloud_active_timeout_s": 60, "lambda_cloud_ssh_timeout_s": 60,
        # A simulated host powers off when its pid 1 (sshd) ends.
        "lambda_watchdog_poweroff_command": "kill -TERM 1",
    }  # fmt: skip
    if cluster is not None:
        variables |= {
            "lambda_cloud_ssh_user": "root",
            "lambda_cloud_ssh_private_key_file": str(cluster.ssh_key),
            "lambda_cloud_node_vars": {"ansible_python_interpreter": "/usr/bin/python3"},
        }
    return variables


def environment(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("LAMBDA_")}
    # Facts in memory: the repository's fact cache is keyed by host name, and other tests'
    # simulated clusters, running at the same time, have hosts of the same names.
    return base | {
        "PATH": f"{VENV_BIN}:{os.environ['PATH']}", "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_CACHE_PLUGIN": "memory", **extra,
    }  # fmt: skip


def playbook(name: str, variables: dict[str, object]) -> list[str]:
    return [
        str(VENV_BIN / "ansible-playbook"), "-i", str(LAUNCH_INVENTORY),
        str(REPO / "playbooks" / name), "-e", json.dumps(variables),
    ]  # fmt: skip


def run_playbook(name: str, variables: dict[str, object], reports: Path) -> Run:
    """With the key in the environment."""
    done = subprocess.run(
        playbook(name, variables), cwd=REPO, env=environment(LAMBDA_API_KEY=KEY),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return Run(done.returncode, done.stdout + done.stderr, reports, str(variables["gpuval_run_id"]))


def files_holding(folder: Path, secret: str) -> list[Path]:
    return [
        path for path in folder.rglob("*")
        if path.is_file() and secret.encode() in path.read_bytes()
    ]  # fmt: skip


def launches(cloud: FakeLambdaCloud) -> list[int]:
    return [status for _, path, status in cloud.requests if path.endswith("/launch")]


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


# --- 1. a whole run ---------------------------------------------------------------------------


@dataclass
class WholeRun:
    run: Run
    cloud: FakeLambdaCloud
    private_data: Path
    bill_usd: float


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory: pytest.TempPathFactory, toolkits: list[str]) -> Iterator[WholeRun]:
    work = tmp_path_factory.mktemp("lambda-whole")
    with simulated_hosts(2, name="e2e-lambda", bind_ro=toolkits) as cluster:
        install_doubles(cluster, work)
        # Launches closer than 1 s are refused (the API's "one per 12 seconds", shortened).
        with fake_cloud(cluster, new_type(**{"us-east-1": 2}), launch_interval_s=1.0) as cloud:
            reports = work / "reports"
            variables = lambda_variables(cloud, reports, "lambda-whole", cluster)
            variables |= {**TOOLKIT_VARS, **DOUBLES_VARS}
            password = work / "vault-password"
            password.write_text("vault-test-password\n")
            secrets = work / "lambda-secrets.yml"
            secrets.write_text(f"lambda_cloud_api_key: {KEY}\n")
            subprocess.run(
                [str(VENV_BIN / "ansible-vault"), "encrypt", "--vault-password-file",
                 str(password), str(secrets)], check=True, capture_output=True,
            )  # fmt: skip
            private_data = work / "runner"
            private_data.mkdir()
            result = ansible_runner.run(
                private_data_dir=str(private_data), project_dir=str(REPO),
                playbook=str(REPO / "playbooks" / "lambda_acceptance.yml"),
                inventory=str(LAUNCH_INVENTORY), extravars=variables,
                cmdline=f"--vault-password-file {password} -e @{secrets} --skip-tags {SKIPPED}",
                envvars=environment(), verbosity=3, quiet=True,
            )  # fmt: skip
            output = (private_data / "artifacts" / result.config.ident / "stdout").read_text()
            (work / "ansible.log").write_text(output)  # for a failing test's reader
            run = Run(result.rc, output, reports, "lambda-whole")
            yield WholeRun(run, cloud, private_data, cloud.bill_usd())


def test_the_plan_is_printed_before_launching(whole_run: WholeRun) -> None:
    output = whole_run.run.output
    plan = output.index("launch 2 x gpu_4x_h100_sxm5 (4x H100 (80 GB SXM5)) in us-east-1")
    assert "price $12.36/h each, $24.72/h in all (Lambda Cloud API)" in output
    assert "expected duration 1 h: expected cost $24.72" in output
    assert plan < output.index("TASK [lambda_cloud : Launch the instances")


def test_a_rate_limited_launch_is_retried(whole_run: WholeRun) -> None:
    assert launches(whole_run.cloud) == [200, 429, 200]


def test_the_run_is_benchmarked_reported_and_torn_down(whole_run: WholeRun) -> None:
    run = whole_run.run
    # The recordings fail the verdict (see test_recorded_gpu_run): judged after teardown.
    assert run.returncode == 2, run.output[-6000:]
    assert "gpuval verdict FAIL" in run.output
    terminated = run.output.index("TASK [lambda_cloud : Terminate the run's instances and record")
    assert terminated < run.output.rindex("gpuval verdict FAIL")
    names = ["gpuval-lambda-whole-1", "gpuval-lambda-whole-2"]
    assert json.loads((run.run_dir / "run.json").read_text())["hosts"] == names
    for name in names:
        raw = (run.run_dir / "raw" / name / "nccl-all_reduce.txt").read_text()
        assert "# Avg bus bandwidth : 98.414" in raw
    assert "355.89" in (run.run_dir / "measurements.csv").read_text()
    assert whole_run.cloud.live() == []
    state = json.loads((run.run_dir / "lambda" / "state.json").read_text())
    assert state["finished"] is True
    assert {i["terminated_by"] for i in state["instances"]} == {"teardown (lambda_teardown.yml)"}
    assert "time-to-live watchdog armed: powers off at" in run.output


def test_the_cost_is_recorded_in_the_run(whole_run: WholeRun) -> None:
    run = whole_run.run
    cost = run.record("cost.json")
    assert cost["provider"] == "lambda"
    assert cost["plan"]["total_usd"] == pytest.approx(24.72)  # type: ignore[index]
    recorded = cost["cost"]["total_usd"]  # type: ignore[index]
    # Both count started minutes: gpuval from the launch answer, the account from the launch.
    one_minute_each = 2 * H100_4X.price_cents_per_hour / 60 / 100
    assert whole_run.bill_usd - one_minute_each <= recorded <= whole_run.bill_usd + 0.01
    results = json.loads((run.run_dir / "results.json").read_text())
    assert results["meta"]["cloud"] == cost
    assert f"cost ${recorded}" in run.output
    page = (run.run_dir / "report.html").read_text()  # rendered again after teardown
    assert f"<dt>What the run cost</dt><dd>{recorded} USD" in page


def test_the_guard_stood_down(whole_run: WholeRun) -> None:
    launched = whole_run.run.record("launch.json")
    assert isinstance(launched["guard_pid"], int)
    log = whole_run.run.run_dir / "lambda" / "guard.log"
    wait_until(lambda: "nothing to do" in log.read_text(), 30, "the guard to stand down")


def test_the_key_leaks_nowhere(whole_run: WholeRun) -> None:
    run = whole_run.run
    assert KEY not in run.output
    events = list((whole_run.private_data / "artifacts").rglob("job_events/*.json"))
    assert len(events) > 100
    assert files_holding(whole_run.private_data, KEY) == []
    assert files_holding(run.run_dir, KEY) == []
    assert files_holding(REPO / ".cache", KEY) == []


# --- 2. to 4. launches that fail, and teardown ------------------------------------------------


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    """lambda_provision.yml runs that must launch nothing, or terminate what they launched."""
    reports = tmp_path_factory.mktemp("lambda-refusals") / "reports"
    runs = {}
    with fake_cloud(None, new_type(**{"us-east-1": 1})) as cloud:
        cases: dict[str, dict[str, object]] = {
            "no-capacity": {"lambda_cloud_region": "us-west-1"},
            "over-budget": {"lambda_cloud_max_spend_usd": 20},
            "unknown-ssh-key": {"lambda_cloud_ssh_key_name": "desktop"},
            "wrong-key": {},
            # The time-to-live from gpuval plan (lambda_cloud_hours 0); refused on its cost
            # before half-failed takes the region's one instance of capacity.
            "predicted-hours": {"lambda_cloud_hours": 0, "lambda_cloud_max_spend_usd": 1},
            "half-failed": {},
        }
        for case, changes in cases.items():
            variables = lambda_variables(cloud, reports, case, None) | changes
            if case == "wrong-key":
                done = subprocess.run(
                    playbook("lambda_provision.yml", variables), cwd=REPO,
                    env=environment(LAMBDA_API_KEY="not-the-key"), capture_output=True,
                    text=True, check=False,
                )  # fmt: skip
                runs[case] = Run(done.returncode, done.stdout + done.stderr, reports, case)
            else:
                runs[case] = run_playbook("lambda_provision.yml", variables, reports)
            runs[case].output += f"\nlaunch requests so far: {launches(cloud)}"
        assert cloud.live() == []
        yield runs


def test_no_capacity_launches_nothing(refusals: dict[str, Run]) -> None:
    run = refusals["no-capacity"]
    assert run.returncode == 2
    assert (
        "no capacity for gpu_4x_h100_sxm5 in us-west-1 (capacity now: us-east-1); "
        "nothing was launched" in run.output
    )
    assert "launch requests so far: []" in run.output


def test_a_plan_over_the_limit_is_refused(refusals: dict[str, Run]) -> None:
    run = refusals["over-budget"]
    assert run.returncode == 2
    assert "expected cost $24.72 exceeds the limit of $20.00 per run" in run.output
    assert "launch requests so far: []" in run.output


def test_without_hours_the_plan_predicts_the_time_to_live(refusals: dict[str, Run]) -> None:
    run = refusals["predicted-hours"]
    assert (run.run_dir / "plan.json").is_file(), run.output
    predicted = json.loads((run.run_dir / "plan.json").read_text())
    assert (predicted["nodes"], predicted["gpus_per_node"]) == (2, 4)  # gpu_4x_h100_sxm5
    # A quarter more than predicted, plus the 60 s active and 60 s ssh waits, in tenths of an
    # hour rounded up; at $12.36/h per instance (the fake's 4x H100 price), two instances.
    hours = math.ceil((predicted["total_s"] * 1.25 + 60 + 60) / 3600 * 10) / 10
    assert run.returncode == 2
    assert "predicted duration" in run.output
    refusal = f"expected cost ${round(24.72 * hours, 2):.2f} exceeds the limit of $1.00"
    assert refusal in run.output, run.output
    assert "launch requests so far: []" in run.output


def test_an_ssh_key_the_account_lacks_is_refused(refusals: dict[str, Run]) -> None:
    run = refusals["unknown-ssh-key"]
    assert run.returncode == 2
    assert f"the Lambda account has no SSH key named 'desktop' (keys: {SSH_KEY_NAME})" in run.output
    assert "launch requests so far: []" in run.output


def test_a_wrong_key_is_refused(refusals: dict[str, Run]) -> None:
    run = refusals["wrong-key"]
    assert run.returncode == 2
    assert "API key was invalid, expired, or deleted. (HTTP 401, global/invalid-api-key)" in (
        run.output
    )
    assert "not-the-key" not in run.output


def test_a_half_failed_launch_terminates_what_it_launched(refusals: dict[str, Run]) -> None:
    run = refusals["half-failed"]
    assert run.returncode == 2
    assert "instance-operations/launch/insufficient-capacity" in run.output
    assert "terminated what this launch started: gpuval-half-failed-1" in run.output
    assert "launch requests so far: [200, 400]" in run.output
    state = json.loads((run.run_dir / "lambda" / "state.json").read_text())
    assert [i["terminated_by"].startswith("launch failed:") for i in state["instances"]] == [True]


def test_failed_launches_never_show_the_key(refusals: dict[str, Run]) -> None:
    for run in refusals.values():
        assert KEY not in run.output
    assert files_holding(next(iter(refusals.values())).reports, KEY) == []


@pytest.fixture(scope="module")
def teardowns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[Run], list[str]]]:
    """lambda_teardown.yml on a run with one instance in its state file and one only named like
    the run's, beside another run's and the user's own: first unconfirmed, then confirmed."""
    reports = tmp_path_factory.mktemp("lambda-teardown") / "reports"
    with fake_cloud(None, new_type(**{"us-east-1": 4})) as cloud:
        cloud.free_machines = [Machine("192.0.2.1", "10.0.0.1")] * 4
        client = LambdaCloud(KEY, cloud.url)
        ids = {
            name: client.launch(
                region="us-east-1", instance_type=H100_4X.name, ssh_key_name=SSH_KEY_NAME, name=name
            )[0]
            for name in ["gpuval-td-1", "gpuval-td-2", "gpuval-td-x-1", "my-notebook"]
        }
        plan = {"price_cents_per_hour": H100_4X.price_cents_per_hour, "total_usd": 24.72}
        state = RunState(run_id="td", name_prefix="gpuval-td", plan=plan)
        state.instances = [LaunchedInstance(ids["gpuval-td-1"], "gpuval-td-1", now_iso())]
        write_state(state_path(reports / "td"), state)
        variables: dict[str, object] = {
            "gpuval_run_id": "td", "gpuval_reports_dir": str(reports),
            "lambda_cloud_api_url": cloud.url,
        }  # fmt: skip
        unconfirmed = run_playbook("lambda_teardown.yml", variables, reports)
        unconfirmed.output += f"\nlive: {sorted(i.name for i in cloud.live())}"
        confirmed = run_playbook(
            "lambda_teardown.yml", variables | {"lambda_cloud_teardown_confirm": False}, reports
        )
        yield [unconfirmed, confirmed], sorted(i.name for i in cloud.live())


def test_teardown_asks_first(teardowns: tuple[list[Run], list[str]]) -> None:
    unconfirmed = teardowns[0][0]
    assert unconfirmed.returncode == 2
    assert "run td: 2 live instance(s) to terminate: gpuval-td-1, gpuval-td-2" in unconfirmed.output
    assert "not confirmed: nothing was terminated" in unconfirmed.output
    assert "live: ['gpuval-td-1', 'gpuval-td-2', 'gpuval-td-x-1', 'my-notebook']" in (
        unconfirmed.output
    )


def test_teardown_terminates_exactly_the_runs_instances(
    teardowns: tuple[list[Run], list[str]],
) -> None:
    (_, confirmed), live = teardowns
    assert confirmed.returncode == 0, confirmed.output[-3000:]
    assert "terminated: gpuval-td-1, gpuval-td-2" in confirmed.output
    assert live == ["gpuval-td-x-1", "my-notebook"]
    cost = confirmed.record("cost.json")["cost"]
    # Two instances alive for under a minute each: one started minute each, $12.36 / 60.
    assert cost["total_usd"] == pytest.approx(2 * 0.21)  # type: ignore[index]
    assert "cost $0.42 (planned $24.72)" in confirmed.output


# --- 5. and 6. runs cut short -----------------------------------------------------------------


def test_ctrl_c_mid_benchmark_still_tears_down(
    tmp_path_factory: pytest.TempPathFactory, toolkits: list[str]
) -> None:
    reports = tmp_path_factory.mktemp("lambda-interrupted") / "reports"
    with (
        simulated_hosts(2, name="e2e-lambda-int", bind_ro=toolkits) as cluster,
        fake_cloud(cluster, new_type(**{"us-east-1": 2})) as cloud,
    ):
        variables = lambda_variables(cloud, reports, "interrupted", cluster) | TOOLKIT_VARS
        # Its own session, so that "Ctrl-C" reaches the whole process group, as in a terminal.
        process = subprocess.Popen(
            playbook("lambda_acceptance.yml", variables), cwd=REPO,
            env=environment(LAMBDA_API_KEY=KEY), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        run_json = reports / "interrupted" / "run.json"
        wait_until(lambda: run_json.exists() or process.poll() is not None, 180, "the benchmark")
        assert process.poll() is None, process.communicate()[0][-6000:]
        assert len(cloud.live()) == 2
        os.killpg(process.pid, signal.SIGINT)
        output, _ = process.communicate(timeout=120)
        assert KEY not in output
        assert "User interrupted execution" in output
        wait_until(lambda: not cloud.live(), 60, "the guard to terminate the instances")
        state_file = reports / "interrupted" / "lambda" / "state.json"
        wait_until(lambda: json.loads(state_file.read_text())["finished"], 30, "the state")
    state = json.loads(state_file.read_text())
    assert {i["terminated_by"] for i in state["instances"]} == {
        f"guard: the run (process {process.pid}) ended without tearing down"
    }
    cloud_record = json.loads(run_json.read_text())["cloud"]
    assert cloud_record["cost"]["total_usd"] > 0


def test_a_node_powers_itself_off_after_its_time_to_live(tmp_path: Path) -> None:
    arm = tmp_path / "arm.yml"
    arm.write_text(
        "- name: Arm the watchdog\n  hosts: gpu_nodes\n  gather_facts: false\n"
        "  roles: [lambda_watchdog]\n"
    )
    with simulated_hosts(1, name="e2e-lambda-ttl") as cluster:
        host = cluster.hosts[0]
        variables = {
            "lambda_watchdog_seconds": 3,
            "lambda_watchdog_poweroff_command": "kill -TERM 1",
        }
        done = subprocess.run(
            [str(VENV_BIN / "ansible-playbook"), "-i", str(cluster.inventory), str(arm),
             "-e", json.dumps(variables)],
            cwd=REPO, env=environment(), capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert host.init_pid is not None  # still up: three seconds to go
        wait_until(lambda: host.init_pid is None, 60, "the node to power off")
        log = Path(host.directory) / "upper" / "var" / "lib" / "gpuval" / "ttl-watchdog"
        assert "time-to-live reached: kill -TERM 1" in (log / "watchdog.log").read_text()
        with pytest.raises(SimHostsError):
            host.exec(["true"])
