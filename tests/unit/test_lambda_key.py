"""The Lambda API key on disk nowhere and in no output: what a key may look like, that it never
follows a redirect to another host, that a `gpuval run` killed mid-run leaves it in no file, and
that a local host's facts (the controller's environment) keep it out of the fact cache."""

from __future__ import annotations

import json
import os
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fake_lambda_api import FakeLambdaCloud, FakeType, Machine

from gpuval.cloud.key_handover import KEY_SOCKET_ENV, serving_key
from gpuval.cloud.lambda_api import (
    CODE_INVALID_KEY,
    CODE_REDIRECTED,
    LambdaApiError,
    LambdaCloud,
    api_key_from_environment,
    checked_api_key,
)

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
KEY = "marker-lambda-key-9d41c7e2"
H100 = "gpu_8x_h100_sxm5"

visible = st.text(string.ascii_letters + string.digits + "_-.", min_size=12, max_size=40)
# Characters no key holds: controls (C0, DEL, C1), inner spaces, non-ASCII.
forbidden = st.one_of(
    st.characters(max_codepoint=0x1F), st.sampled_from(["\x7f", "\x85", " ", "\u00a0", "é"])
)


@given(core=visible, before=st.text(" \t\r\n"), after=st.text(" \t\r\n"))
def test_surrounding_whitespace_is_dropped(core: str, before: str, after: str) -> None:
    assert checked_api_key(before + core + after) == core


@given(left=visible, bad=forbidden, right=visible)
def test_a_key_with_another_character_is_refused_without_showing_it(
    left: str, bad: str, right: str
) -> None:
    with pytest.raises(LambdaApiError) as refused:
        LambdaCloud(left + bad + right, "http://127.0.0.1:9/api/v1")
    assert refused.value.code == CODE_INVALID_KEY
    said = str(refused.value) + repr(refused.value)
    assert f"at position {len(left) + 1}" in said
    assert left not in said and right not in said


# --- redirects -------------------------------------------------------------------------------


class Recorder(BaseHTTPRequestHandler):
    """An API double: /api/v1/instances answers an empty list and records the Authorization it
    got; /moved/... redirects to Recorder.target."""

    seen: ClassVar[list[tuple[str, str]]] = []
    target: ClassVar[str] = ""

    def do_GET(self) -> None:
        if self.path.startswith("/moved/"):
            self.send_response(302)
            self.send_header("Location", Recorder.target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        Recorder.seen.append((self.headers.get("Host", ""), self.headers["Authorization"] or ""))
        body = json.dumps({"data": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def serve() -> Iterator[Callable[[str], str]]:
    """Starts a Recorder on an address; its base URL."""
    servers: list[ThreadingHTTPServer] = []

    def start(host: str) -> str:
        server = ThreadingHTTPServer((host, 0), Recorder)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://{host}:{server.server_port}"

    Recorder.seen = []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("elsewhere", ["127.0.0.2", "127.0.0.1"])  # another host, another port
def test_a_redirect_to_another_host_is_refused_and_gets_no_key(
    serve: Callable[[str], str], elsewhere: str
) -> None:
    api = serve("127.0.0.1")
    Recorder.target = serve(elsewhere) + "/api/v1/instances"
    with pytest.raises(LambdaApiError) as refused:
        LambdaCloud(KEY, api + "/moved/api/v1", attempts=1).instances()
    assert refused.value.code == CODE_REDIRECTED
    assert "redirected to another host" in str(refused.value)
    assert KEY not in str(refused.value)
    assert Recorder.seen == []  # nothing reached the other host, the key least of all


def test_a_redirect_within_the_api_keeps_the_key(serve: Callable[[str], str]) -> None:
    api = serve("127.0.0.1")
    Recorder.target = api + "/api/v1/instances"
    assert LambdaCloud(KEY, api + "/moved/api/v1").instances() == []
    assert Recorder.seen == [(api.removeprefix("http://"), f"Bearer {KEY}")]


# --- a killed run, the fact cache ------------------------------------------------------------


def files_holding(key: str, *folders: Path) -> list[Path]:
    found = []
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and not path.is_symlink() and key.encode() in path.read_bytes():
                found.append(path)
    return found


def environment(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LAMBDA_", "ANSIBLE_"))}
    return base | {"PATH": f"{VENV_BIN}:{os.environ['PATH']}", **extra}


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def playbook_pids(artifacts: Path) -> set[int]:
    pids = set()
    for event in artifacts.glob("*/job_events/*.json"):
        try:
            pids.add(int(json.loads(event.read_text())["pid"]))
        except (ValueError, KeyError, OSError):
            continue
    return pids


def end(pid: int) -> None:
    """Waits for a process the killed run left (its own), killing it after 30 s."""
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def temporary() -> Iterator[Path]:
    """gpuval run's $TMPDIR (where the key's socket lives): short, as a socket's path must be."""
    folder = Path(tempfile.mkdtemp(prefix="gpuval-test-"))
    yield folder
    shutil.rmtree(folder)


def test_a_gpuval_run_killed_mid_run_leaves_the_key_in_no_file(
    tmp_path: Path, temporary: Path
) -> None:
    """The Lambda inventory's nodes (reached locally), their facts gathered and cached, a plan
    made with the key, then the run is killed (SIGKILL: nothing cleans up)."""
    h100 = FakeType(H100, "H100 (80 GB SXM5)", 8, 3592, capacity={"us-east-1": 2})
    machine = Machine("127.0.0.1", "127.0.0.1")
    reports, facts, started = tmp_path / "reports", tmp_path / "facts", tmp_path / "started"
    with FakeLambdaCloud(KEY, [h100], ["laptop"], [machine], boot_s=0.0) as cloud:
        LambdaCloud(KEY, cloud.url).launch(
            region="us-east-1", instance_type=H100, ssh_key_name="laptop", name="gpuval-killed-1"
        )
        inventory = tmp_path / "run.lambda_cloud.yml"
        inventory.write_text(
            f"plugin: lambda_cloud\napi_url: {cloud.url}\nname_prefix: gpuval-killed-\n"
            f"compose:\n  ansible_connection: \"'local'\"\n"
            f"  ansible_python_interpreter: \"'{sys.executable}'\"\n"
        )
        playbook = tmp_path / "killed.yml"
        playbook.write_text(f"""
- name: The run's Lambda nodes, reached locally
  hosts: gpu_nodes
  gather_facts: true
  tasks:
    - name: Plan with the key
      gpuval_lambda:
        state: planned
        api_url: {cloud.url}
        run_dir: "{{{{ gpuval_reports_dir }}}}/{{{{ gpuval_run_id }}}}"
        instance_type: {H100}
        region: us-east-1
        ssh_key_name: laptop
        max_spend_usd: 100
      no_log: true
    - name: Say the run is under way
      ansible.builtin.file:
        path: {started}
        state: touch
        mode: "0644"
    - name: Run until killed
      ansible.builtin.command: sleep 120
      changed_when: false
""")
        run = subprocess.Popen(
            [str(VENV_BIN / "gpuval"), "run", "-i", str(inventory), "--playbook", str(playbook),
             "--reports", str(reports), "--run-id", "killed"],
            env=environment(
                LAMBDA_API_KEY=KEY, GPUVAL_LAMBDA_API_URL=cloud.url, TMPDIR=str(temporary),
                ANSIBLE_CACHE_PLUGIN="jsonfile", ANSIBLE_CACHE_PLUGIN_CONNECTION=str(facts),
            ),
            stdout=(tmp_path / "gpuval-run.log").open("w"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_for(started.exists, 240, "the playbook's long task")
        finally:
            run.kill()
            run.wait()
        runner = reports / "killed" / "runner"
        for pid in playbook_pids(runner):
            end(pid)
    plan = json.loads((reports / "killed" / "lambda" / "plan.json").read_text())
    assert "error" not in plan and plan["plan"]["count"] == 1  # the key reached the plugins
    assert (runner / "benchmark" / "command").is_file()
    cached = list(facts.iterdir())
    assert cached and all(b"ansible_env" in path.read_bytes() for path in cached)
    assert files_holding(KEY, tmp_path, temporary) == []
    # what the kill left of the socket's folder: the socket (no contents on disk), no file.
    # (Ansible's own module payloads, killed mid-task, may stay beside it: the key is in none.)
    left = [p for p in temporary.glob("gpuval-key-*/**/*") if p.is_file()]
    assert list(temporary.glob("gpuval-key-*")) and left == []


def test_a_local_host_keeps_the_controller_environment_out_of_the_fact_cache(
    tmp_path: Path,
) -> None:
    """Role cuda reads the facts naming NVIDIA's repository; on the controller (gpuval on a
    GPU box, inventory/local.ini) they would hold $LAMBDA_API_KEY."""
    playbook = tmp_path / "facts.yml"
    playbook.write_text("""
- name: The repository facts of a local host
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Name NVIDIA's repository (in check mode; its download may fail offline)
      ansible.builtin.import_role:
        name: cuda
        tasks_from: repo.yml
""")
    facts = tmp_path / "facts"
    subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "--check",
         "-e", f"ansible_python_interpreter={sys.executable}", str(playbook)],
        env=environment(
            LAMBDA_API_KEY=KEY, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
            ANSIBLE_CACHE_PLUGIN="jsonfile", ANSIBLE_CACHE_PLUGIN_CONNECTION=str(facts),
        ),
        cwd=REPO, capture_output=True, check=False,
    )  # fmt: skip
    cached = list(facts.iterdir())
    assert cached and all(b"ansible_distribution" in path.read_bytes() for path in cached)
    assert files_holding(KEY, facts) == []


@pytest.mark.parametrize(
    ("spelled", "said"),
    [
        (KEY + "\n", "launch 1 x gpu_8x_h100_sxm5 (8x H100 (80 GB SXM5)) in us-east-1"),
        (
            KEY[:12] + "\x07" + KEY[12:],
            "the API key has a control character (U+0007) at position 13",
        ),
    ],
)
def test_provisioning_shows_and_writes_no_key(tmp_path: Path, spelled: str, said: str) -> None:
    """lambda_provision.yml plans with the key, then its launch is refused (no capacity left)."""
    h100 = FakeType(H100, "H100 (80 GB SXM5)", 8, 3592, capacity={"us-east-1": 1})
    reports = tmp_path / "reports"
    with FakeLambdaCloud(KEY, [h100], ["laptop"], []) as cloud:
        done = subprocess.run(
            [str(VENV_BIN / "ansible-playbook"), "-i", "inventory/lambda-launch.ini",
             "playbooks/lambda_provision.yml", "-e", f"gpuval_reports_dir={reports}",
             "-e", "gpuval_run_id=newline", "-e", f"lambda_cloud_instance_type={H100}",
             "-e", "lambda_cloud_region=us-east-1", "-e", "lambda_cloud_count=1",
             "-e", "lambda_cloud_ssh_key_name=laptop"],
            env=environment(
                LAMBDA_API_KEY=spelled, GPUVAL_LAMBDA_API_URL=cloud.url,
                ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_CACHE_PLUGIN="memory",
                ANSIBLE_FORCE_COLOR="0",
            ),
            cwd=REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert said in output
    assert (reports / "newline" / "lambda" / "plan.json").is_file()
    for part in (KEY, KEY[:12], KEY[12:]):
        assert part not in output
    assert files_holding(KEY[12:], reports) == []


def test_the_handed_over_key_is_read_while_served_and_missed_clearly_after() -> None:
    with serving_key(KEY + "\n") as path:
        assert api_key_from_environment({KEY_SOCKET_ENV: path, "LAMBDA_API_KEY": ""}) == KEY
    with pytest.raises(LambdaApiError) as missed:
        api_key_from_environment({KEY_SOCKET_ENV: path})
    assert "is gpuval run still running?" in str(missed.value)
