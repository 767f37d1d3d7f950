"""`gpuval run`: the validation playbook through ansible-runner's Python API, with live progress,
then the report of the run folder.

- The playbook is the checkout's playbooks/benchmark.yml when gpuval runs from a checkout, else
  the installed collection's (gpuval.cluster.benchmark); both it and the inventory are
  parameters. Ansible runs in the playbook's project folder, so its ansible.cfg applies.
- ansible-runner's artifacts (every event, the whole stdout, status and rc) stay in the run
  folder under runner/<ident>/; the environment the runner recorded is removed from them, since
  it can hold credentials. The Lambda API key is never in it, even while the run lasts: Ansible
  gets it from a socket that this process serves (gpuval.cloud.key_handover).
- The playbook's own report phase is skipped: gpuval renders the report itself, with the
  profile and baseline, and writes history, Prometheus file and webhook (gpuval.pipeline).
- With --tags, run.json expects no step of the measuring phases that do not run.
- Ctrl-C (or SIGTERM) stops the run cleanly: ansible-playbook is interrupted (killed if it has
  not stopped within 30 s, or at a second Ctrl-C), the nodes' outputs so far are collected, and
  the report judges what was gathered. Steps already started on the nodes run on to their end or
  their time limit. The exit status is then 2: the run is incomplete.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from gpuval.checks.model import Status
from gpuval.cloud.key_handover import KEY_SOCKET_ENV, serving_key
from gpuval.cloud.lambda_api import API_KEY_ENV
from gpuval.files.archive import Archive
from gpuval.files.atomic import OutputSet, json_text
from gpuval.pipeline import AUTO, DEFAULT_FAIL_ON, EXIT_ERROR, PROFILE_RECORD, report_run
from gpuval.plan.steps import PLANNED_PHASES as MEASURING_PHASES
from gpuval.profile import Profile
from gpuval.run.progress import Progress, ticking

RUN_ID_FORMAT = "%Y%m%dT%H%M%SZ"
STOP_GRACE_S = 30.0
COLLECT_TIMEOUT_S = 300
CHECKOUT = Path(__file__).resolve().parents[3]
COLLECTION_PLAYBOOK = "gpuval.cluster.benchmark"


def default_playbook() -> tuple[str, Path]:
    """(playbook, project folder): the checkout's benchmark.yml, else the collection's."""
    candidate = CHECKOUT / "playbooks" / "benchmark.yml"
    if candidate.is_file():
        return str(candidate), CHECKOUT
    return COLLECTION_PLAYBOOK, Path.cwd()


def new_run_id(archive: Archive) -> str:
    base = datetime.now(UTC).strftime(RUN_ID_FORMAT)
    run_id, n = base, 1
    while (archive.root / run_id).exists():
        n += 1
        run_id = f"{base}-{n}"
    return run_id


@dataclass(frozen=True)
class RunRequest:
    inventory: Path
    playbook: str  # a path, or a collection's playbook name
    project_dir: Path  # Ansible's working directory (its ansible.cfg)
    archive: Archive
    run_id: str
    profile: Profile | None = None
    baseline: str | None = None
    tags: tuple[str, ...] = ()
    skip_tags: tuple[str, ...] = ()
    limit: str | None = None
    extra_vars: tuple[str, ...] = ()  # -e arguments as given
    fail_on: Status = DEFAULT_FAIL_ON
    prometheus_file: Path | None = None
    webhook_url: str | None = field(default=None, repr=False)  # a secret: never printed
    # more for Ansible (ARA; the socket that hands over the Lambda API key)
    environment: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def run_dir(self) -> Path:
        return self.archive.root / self.run_id


def phases_run(tags: tuple[str, ...], skip_tags: tuple[str, ...]) -> list[str]:
    """The measuring phases (those run.json expects steps of) that the tags let run."""
    chosen = set(MEASURING_PHASES) if not tags or "all" in tags else set(tags)
    return [p for p in MEASURING_PHASES if p in chosen and p not in skip_tags]


def phase_vars(phases: list[str]) -> dict[str, Any]:
    """Role variables that keep run.json's expected steps to the phases that run (the step
    registry leaves out every step of the others)."""
    return {"run_context_phases": phases}


class Stopper:
    """Ctrl-C and SIGTERM: the first interrupts ansible-playbook, the second (or the grace time
    running out) has ansible-runner kill it."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.requests = 0
        self.first_at = 0.0
        self.playbook_pid: int | None = None

    @property
    def stopped(self) -> bool:
        return self.requests > 0

    def request(self, signum: int, frame: FrameType | None) -> None:
        self.requests += 1
        if self.requests == 1:
            self.first_at = time.monotonic()
            self.out.write(
                f"\ngpuval run: {signal.Signals(signum).name}: stopping ansible-playbook "
                "(Ctrl-C again to kill it)\n"
            )
            if self.playbook_pid is not None:
                with suppress(ProcessLookupError):
                    os.kill(self.playbook_pid, signal.SIGINT)
        else:
            self.out.write("\ngpuval run: killing ansible-playbook\n")
        self.out.flush()

    def cancel(self) -> bool:
        """ansible-runner's cancel_callback."""
        if not self.requests:
            return False
        no_pid = self.playbook_pid is None
        return no_pid or self.requests > 1 or time.monotonic() - self.first_at > STOP_GRACE_S


@contextmanager
def _signals(handler: Any) -> Iterator[None]:
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def _scrub(artifacts: Path) -> None:
    """Drop the environment ansible-runner recorded beside the command: it holds whatever the
    caller's environment held, credentials included."""
    command = artifacts / "command"
    try:
        recorded = json.loads(command.read_text(encoding="utf-8"))
        recorded.pop("env", None)
        command.write_text(json.dumps(recorded, indent=2) + "\n", encoding="utf-8")
    except (OSError, ValueError, AttributeError):
        pass


@contextmanager
def _lambda_key_handed_over(request: RunRequest) -> Iterator[RunRequest]:
    """The request with an environment that names a socket answering $LAMBDA_API_KEY instead
    of holding the key: ansible-runner writes its child's environment into the `command`
    artifact, and a run killed before its end leaves it there."""
    key = os.environ.get(API_KEY_ENV, "")
    if not key.strip():
        yield request
        return
    with serving_key(key) as path:
        handed = {API_KEY_ENV: "", KEY_SOCKET_ENV: path}
        yield dataclasses.replace(request, environment=request.environment | handed)


def _environment(request: RunRequest) -> dict[str, str]:
    environment = {
        # ansible-runner starts `ansible-playbook` from PATH: the one beside this Python first.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        # ansible-runner turns host key checking off unless told; keep Ansible's (and
        # ansible.cfg's) default of checking.
        "ANSIBLE_HOST_KEY_CHECKING": os.environ.get("ANSIBLE_HOST_KEY_CHECKING", "True"),
    }
    config = request.project_dir / "ansible.cfg"
    if "ANSIBLE_CONFIG" not in os.environ and config.is_file():
        environment["ANSIBLE_CONFIG"] = str(config)
    return environment | request.environment


def _play(
    request: RunRequest, ident: str, tags: list[str], extravars: dict[str, Any],
    progress: Progress | None, cancel: Any, timeout: int | None = None,
) -> Any:  # fmt: skip
    import ansible_runner

    profile_vars = request.profile.ansible_vars() if request.profile else {}
    cmdline = ["-e", json.dumps(profile_vars)] if profile_vars else []
    for extra in request.extra_vars:
        cmdline += ["-e", extra]
    runner_dir = request.run_dir / "runner"
    runner_dir.mkdir(parents=True, exist_ok=True)
    runner = ansible_runner.run(
        private_data_dir=str(runner_dir),
        artifact_dir=str(runner_dir),
        ident=ident,
        project_dir=str(request.project_dir),
        playbook=request.playbook,
        inventory=str(request.inventory.resolve()),
        cmdline=shlex.join(cmdline) or None,
        extravars=extravars,
        tags=",".join(tags) or None,
        skip_tags=",".join([*request.skip_tags, "report"]),
        limit=request.limit,
        envvars=_environment(request),
        fact_cache_type="ansible.cfg",  # not runner's own per-run cache: Ansible's settings
        suppress_env_files=True,
        quiet=True,
        settings={"pexpect_timeout": 1},
        event_handler=progress.on_event if progress else None,
        cancel_callback=cancel,
        timeout=timeout,
    )
    _scrub(runner_dir / ident)
    return runner


def _record_profile(request: RunRequest, extravars: dict[str, Any]) -> None:
    """profile.json (the report judges with it) and thresholds.json for the pair rounds."""
    if request.profile is None:
        return
    run_dir = request.run_dir
    path = run_dir / "thresholds.json"
    records = OutputSet()
    records.add(run_dir / PROFILE_RECORD, json_text(request.profile.record()))
    records.add(path, json_text(dataclasses.asdict(request.profile.thresholds)))
    records.commit()
    extravars["bench_pairs_thresholds_file"] = str(path.resolve())


def launch(request: RunRequest, out: TextIO = sys.stdout) -> int:
    """Run the playbook, follow it, report; the exit code (pipeline.EXIT_CODES; a stopped run
    is an error)."""
    run_dir = request.run_dir.resolve()
    phases = phases_run(request.tags, request.skip_tags)
    extravars: dict[str, Any] = {
        "gpuval_run_id": request.run_id,
        "gpuval_reports_dir": str(request.archive.root.resolve()),
        **(phase_vars(phases) if request.tags or request.skip_tags else {}),
    }
    _record_profile(request, extravars)
    tags = [*request.tags, "collect"] if request.tags else []
    out.write(
        f"gpuval run {request.run_id}: {request.playbook} on {request.inventory}"
        + (f", profile {request.profile.name}" if request.profile else "")
        + (f", tags {','.join(tags)}" if tags else "")
        + f"\n  run folder {run_dir} (ansible-runner's events and output in runner/)\n"
    )
    if request.tags or request.skip_tags:
        out.write(f"  measuring phases run: {', '.join(phases) or 'none'}\n")
    out.flush()
    progress = Progress(run_dir / "run.json", out, out.isatty())
    stopper = Stopper(out)

    def cancel() -> bool:
        stopper.playbook_pid = progress.playbook_pid
        return stopper.cancel()

    stop_ticking = ticking(progress)
    with _lambda_key_handed_over(request) as handed_over:
        with _signals(stopper.request):
            try:
                runner = _play(handed_over, "benchmark", tags, extravars, progress, cancel)
            finally:
                stop_ticking()
        progress.finish()
        out.write(
            f"ansible-playbook: {runner.status} (rc {runner.rc}); its output: "
            f"{run_dir / 'runner' / 'benchmark' / 'stdout'}\n"
        )
        if stopper.stopped:
            _collect_after_stop(handed_over, extravars, out)
    out.flush()
    code = report_run(
        run_dir,
        fail_on=request.fail_on,
        profile=None if request.profile else AUTO,
        baseline=request.baseline,
        prometheus_file=request.prometheus_file,
        webhook_url=request.webhook_url,
    )
    if stopper.stopped:
        out.write("gpuval run: stopped before the end: the run is incomplete (exit 2)\n")
        return EXIT_ERROR
    return code


def _collect_after_stop(request: RunRequest, extravars: dict[str, Any], out: TextIO) -> None:
    out.write(
        "gpuval run: collecting what the nodes measured so far (Ctrl-C to skip; at most "
        f"{COLLECT_TIMEOUT_S} s)\n"
    )
    out.flush()
    skip = Stopper(out)
    with _signals(skip.request):
        runner = _play(
            request, "collect-after-stop", ["collect"], extravars, None, skip.cancel,
            COLLECT_TIMEOUT_S,
        )  # fmt: skip
    out.write(f"collect: {runner.status} (rc {runner.rc})\n")
