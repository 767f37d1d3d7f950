"""roles/mpi_preflight as Ansible runs it, with an mpirun double that crashes the first try: a
failed first try runs once more (step mpi-preflight-retry) before any host is failed on it.

Expected, from the rule (one failed try is not a verdict on a host): a crash the second try
does not repeat fails no host and the play ends 0; a crash both tries show on node2 stops node2
alone (ansible-playbook ends 2, node1 goes on). The crash is Open MPI 4.1's own report."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.e2e.local_playbook import REPO, run_locally

HOSTS = ["node1", "node2"]
SOURCE = REPO / "src/gpuval/nodebench/mpi_preflight.c"
PASSED = """gpuval-mpi-preflight rank 0/2 host node1
gpuval-mpi-preflight rank 1/2 host node2
gpuval-mpi-preflight alltoall pairs 2 bad 0
gpuval-mpi-preflight allreduce sum 3 expected 3
gpuval-mpi-preflight OK 2 ranks on 2 hosts
"""
CRASHED = """gpuval-mpi-preflight rank 0/2 host node1
[node2:04242] *** Process received signal ***
[node2:04242] Signal: Segmentation fault (11)
--------------------------------------------------------------------------
mpirun noticed that process rank 1 with PID 4242 on node node2 exited on signal 11 \
(Segmentation fault).
--------------------------------------------------------------------------
"""


def play(tmp_path: Path, second_try: str) -> tuple[int, str, Path]:
    """The role on node1 and node2 (connection local), its mpirun a double that prints CRASHED
    on its first call and `second_try` on the next."""
    build, node_dir, reports = tmp_path / "build", tmp_path / "node", tmp_path / "reports"
    for folder in (build, node_dir, reports / "r" / "raw"):
        folder.mkdir(parents=True)
    # The program as built from this very source, so the role compiles nothing.
    digest = hashlib.sha1(SOURCE.read_bytes(), usedforsecurity=False).hexdigest()
    (build / f"mpi_preflight-{digest[:12]}").write_text("")
    for number, text in ((1, CRASHED), (2, second_try)):
        (tmp_path / f"try{number}.txt").write_text(text)
    mpirun = tmp_path / "mpirun"
    mpirun.write_text(
        f"#!/bin/sh\ncd {tmp_path}\nif [ -e called ]; then cat try2.txt; "
        f'grep -q " OK " try2.txt && exit 0; exit 139; fi\ntouch called; cat try1.txt; exit 139\n'
    )
    mpirun.chmod(0o755)
    completed = run_locally(tmp_path, HOSTS, {
        "name": "preflight", "gather_facts": False,
        "vars": {
            "gpuval_node_run_dir": str(node_dir), "gpuval_reports_dir": str(reports),
            "gpuval_run_id": "r", "mpi_preflight_group": "all",
            "mpi_preflight_build_dir": str(build),
            "openmpi_launch": {"mpirun": str(mpirun), "args": [], "env": {}, "export": [],
                               "addresses": {}},
        },
        "roles": [str(REPO / "roles/mpi_preflight")],
    })  # fmt: skip
    return completed.returncode, completed.stdout + completed.stderr, reports / "r/raw/node1"


def test_a_crash_the_second_try_does_not_repeat_fails_no_host(tmp_path: Path) -> None:
    returncode, output, raw = play(tmp_path, PASSED)
    assert returncode == 0, output
    assert "MPI preflight's first try failed, so it runs once more" in output
    assert "MPI preflight passed: MPI preflight passed on its second try" in output
    ran = {path.name: json.loads(path.read_text())["exit_code"] for path in raw.glob("*.meta.json")}
    assert ran == {"mpi-preflight.meta.json": 139, "mpi-preflight-retry.meta.json": 0}


def test_a_crash_both_tries_show_stops_that_host_alone(tmp_path: Path) -> None:
    returncode, output, raw = play(tmp_path, CRASHED)
    assert returncode == 2, output
    assert "fatal: [node2]: FAILED!" in output and "MPI preflight failed on node2" in output
    assert "fatal: [node1]" not in output
    assert (raw / "mpi-preflight-retry.txt").read_text() == CRASHED
