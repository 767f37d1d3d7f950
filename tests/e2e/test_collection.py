"""`make collection` builds gpuval.cluster; installed elsewhere it runs without the checkout.

The tarball is installed into a temporary folder and used from outside the repository (no
ansible.cfg of ours, no roles/ or library/ path): every playbook passes --syntax-check by its
collection name, and benchmark.yml's preflight, collect and report phases run on two simulated
hosts, writing the run folder under the working directory's reports/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.simhosts.fixtures import simulated_hosts

pytestmark = pytest.mark.simhosts

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
PLAYBOOKS = [
    "benchmark", "acceptance", "preflight", "install", "build", "report",
    "lambda_provision", "lambda_acceptance", "lambda_teardown",
]  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder outside the repository with the built collection installed in it."""
    work = tmp_path_factory.mktemp("collection")
    subprocess.run(["make", "-C", str(REPO), "collection"], check=True, capture_output=True)
    version = subprocess.run(
        [sys.executable, "-c", "import gpuval; print(gpuval.__version__)"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    tarball = REPO / "build" / f"gpuval-cluster-{version}.tar.gz"
    subprocess.run(
        [str(VENV_BIN / "ansible-galaxy"), "collection", "install", str(tarball), "-p",
         str(work / "collections")], check=True, capture_output=True,
    )  # fmt: skip
    return work


def ansible_playbook(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")
    }
    environment.update(
        PATH=f"{VENV_BIN}:{os.environ['PATH']}",
        ANSIBLE_COLLECTIONS_PATH=str(work / "collections"),
        ANSIBLE_FORCE_COLOR="0",
    )
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), *args],
        cwd=work, env=environment, capture_output=True, text=True, check=False, timeout=900,
    )  # fmt: skip


def test_the_tarball_holds_the_suite_and_no_test_scaffolding(installed: Path) -> None:
    root = installed / "collections" / "ansible_collections" / "gpuval" / "cluster"
    assert (root / "plugins" / "modules" / "gpuval_capture.py").is_file()
    assert (root / "plugins" / "module_utils" / "gpuval_capture_steps.py").is_file()
    assert (root / "plugins" / "action" / "gpuval_report.py").is_file()
    assert (root / "plugins" / "action" / "gpuval_lambda.py").is_file()
    assert (root / "plugins" / "inventory" / "lambda_cloud.py").is_file()
    assert (root / "meta" / "runtime.yml").is_file()
    assert "pip install gpuval" in (root / "README.md").read_text()
    assert sorted(p.name for p in (root / "roles").iterdir()) == sorted(
        p.name for p in (REPO / "roles").iterdir()
    )
    assert not list(root.glob("roles/*/molecule"))
    manifest = json.loads((root / "MANIFEST.json").read_text())
    assert manifest["collection_info"]["dependencies"] == {}


def test_every_playbook_passes_syntax_check_by_its_collection_name(installed: Path) -> None:
    (installed / "syntax.ini").write_text("[gpu_nodes]\nnode1\n")
    names = [f"gpuval.cluster.{playbook}" for playbook in PLAYBOOKS]
    # One call for all of them: ansible-playbook's start-up costs more than a syntax check.
    done = ansible_playbook(installed, "-i", "syntax.ini", *names, "--syntax-check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_short_run_on_simulated_hosts_from_outside_the_repository(installed: Path) -> None:
    with simulated_hosts(2, name="e2e-collection") as cluster:
        done = ansible_playbook(
            installed, "-i", str(cluster.inventory), "gpuval.cluster.benchmark",
            "--tags", "preflight,collect,report", "-e", "gpuval_run_id=from-collection",
            "-e", '{"report_fail_play": false}',
        )  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr
    run_dir = installed / "reports" / "from-collection"
    assert json.loads((run_dir / "run.json").read_text())["hosts"] == ["node1", "node2"]
    for host in ["node1", "node2"]:
        assert (run_dir / "raw" / host / "os-release.txt").read_text().strip()
    assert (run_dir / "report.html").is_file()
