"""What the end-to-end tests share: the toolkits bound into the simulated hosts, and the GPU
test doubles (recorded real outputs of a 4x H100 node, tests/fixtures/gpu-doubles)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.simhosts.cluster import Cluster

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
CUDA_TOOLKIT = "/usr/local/cuda-13.0"
# NCCL from the nvidia-nccl-cu13 wheel (tests/fixtures/nccl-wheel/setup.sh): with the toolkit,
# the hosts look like nodes that ship CUDA and NCCL (Lambda Stack), so nothing is downloaded
# from NVIDIA (unreachable here).
NCCL_DIR = "/var/tmp/gpuval-test-nccl"
TOOLKIT_VARS = {"cuda_home": CUDA_TOOLKIT, "nccl_home": NCCL_DIR}
DOUBLES = REPO / "tests" / "fixtures" / "gpu-doubles"
DOUBLES_ON_HOST = "/opt/gpuval-doubles"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# benchmark.yml's variables for hosts with the doubles: their binaries first, one collective.
DOUBLES_VARIABLES: dict[str, object] = {
    "gpuval_node_environment": {"PATH": f"{DOUBLES_ON_HOST}/bin:{DEFAULT_PATH}"},
    "nccl_tests_prebuilt_bin_dir": f"{DOUBLES_ON_HOST}/bin",
    "cuda_samples_prebuilt_p2p_binary": f"{DOUBLES_ON_HOST}/bin/p2pBandwidthLatencyTest",
    "bench_intranode_collectives": ["all_reduce"],
    "bench_internode_collectives": ["all_reduce"],
    "bench_internode_network_interface": "eth0",
}


def install_doubles(cluster: Cluster, data: Path) -> None:
    """The doubles and their recordings (gathered into `data` first) on every host."""
    subprocess.run([str(DOUBLES / "data.sh"), str(data)], check=True)
    for host in cluster.hosts:
        target = host.root / DOUBLES_ON_HOST.lstrip("/")
        shutil.copytree(DOUBLES / "bin", target / "bin")
        shutil.copytree(data, target / "data")
