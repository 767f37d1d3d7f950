"""The doubles the end-to-end tests put into the simulated hosts.

The hosts look like nodes that ship CUDA and NCCL (Lambda Stack): the controller's CUDA 13.0
toolkit and NCCL from the nvidia-nccl-cu13 wheel are bound read-only into them, so nothing is
downloaded from NVIDIA (unreachable here). With the GPU doubles (tests/fixtures/gpu-doubles) they
also print recorded real outputs of a 4x H100 node in place of nvidia-smi, all_reduce_perf and
p2pBandwidthLatencyTest.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.simhosts.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
CUDA_TOOLKIT = "/usr/local/cuda-13.0"
NCCL_DIR = "/var/tmp/gpuval-test-nccl"
TOOLKIT_VARS = {"cuda_home": CUDA_TOOLKIT, "nccl_home": NCCL_DIR}
DOUBLES = REPO / "tests" / "fixtures" / "gpu-doubles"
DOUBLES_ON_HOST = "/opt/gpuval-doubles"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The recorded binaries in place of building the real ones, one collective each way.
DOUBLES_VARS: dict[str, object] = {
    "gpuval_node_environment": {"PATH": f"{DOUBLES_ON_HOST}/bin:{DEFAULT_PATH}"},
    "nccl_tests_prebuilt_bin_dir": f"{DOUBLES_ON_HOST}/bin",
    "cuda_samples_prebuilt_p2p_binary": f"{DOUBLES_ON_HOST}/bin/p2pBandwidthLatencyTest",
    "bench_intranode_collectives": ["all_reduce"],
    "bench_internode_collectives": ["all_reduce"],
    "gpuval_network_interface": "eth0",
}


def setup_toolkits() -> list[str]:
    """The folders to bind read-only into every simulated host (NCCL unpacked once)."""
    setup = REPO / "tests" / "fixtures" / "nccl-wheel" / "setup.sh"
    subprocess.run(["bash", str(setup), NCCL_DIR], check=True, env={
        **os.environ, "PIP": str(VENV_BIN / "pip")
    })  # fmt: skip
    return [CUDA_TOOLKIT, NCCL_DIR]


def doubles_data(work: Path) -> Path:
    """The doubles' recordings, gathered once into `work`."""
    data = work / "doubles-data"
    if not data.is_dir():
        subprocess.run([str(DOUBLES / "data.sh"), str(data)], check=True)
    return data


def install_doubles(cluster: Cluster, work: Path) -> None:
    """The GPU doubles and their recordings under /opt/gpuval-doubles on every host."""
    data = doubles_data(work)
    for host in cluster.hosts:
        target = host.root / DOUBLES_ON_HOST.lstrip("/")
        shutil.copytree(DOUBLES / "bin", target / "bin")
        shutil.copytree(data, target / "data")


def install_empty_journal(cluster: Cluster) -> None:
    """On every host a `journalctl` that finds nothing, as on a fresh container or minimal VM
    whose journald holds no kernel messages: it prints `-- No entries --` and exits 0. It lies in
    /usr/local/bin, before /usr/bin (a real journalctl) on root's PATH."""
    for host in cluster.hosts:
        journalctl = host.root / "usr" / "local" / "bin" / "journalctl"
        journalctl.parent.mkdir(parents=True, exist_ok=True)
        journalctl.write_text("#!/bin/sh\necho '-- No entries --'\n")
        journalctl.chmod(0o755)
