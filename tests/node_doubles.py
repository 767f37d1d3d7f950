"""One simulated 4x H100 node for `gpuval node-health`: the GPU test doubles
(tests/fixtures/gpu-doubles) with the node health recordings of health-data.py (at most one
fault), a sysfs-like PCI folder made from this project's development VM's listing
(tests/data/outputs/sysfs-pci/dev-vm-grep-virtio-no-link.txt, one file per `path:value` line),
and the stand-in scontrol (tests/fake_scontrol.py) playing the Slurm 22.05 of tests/data/slurm/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import fake_scontrol

REPO = Path(__file__).parents[1]
SLURM = REPO / "tests" / "data" / "slurm"
DOUBLES = REPO / "tests" / "fixtures" / "gpu-doubles"
PCI_LISTING = REPO / "tests" / "data" / "outputs" / "sysfs-pci" / "dev-vm-grep-virtio-no-link.txt"


def node_data(folder: Path, fault: str | None) -> Path:
    """The doubles' recordings of one node (with `fault`) and a sysfs-like PCI folder."""
    data = folder / "data"
    subprocess.run(["sh", str(DOUBLES / "data.sh"), str(data)], check=True)
    command = [sys.executable, str(DOUBLES / "health-data.py"), str(data)]
    subprocess.run(command + (["--fault", fault] if fault else []), check=True)
    for line in PCI_LISTING.read_text().splitlines():
        path, _, value = line.rpartition(":")
        target = folder / "pci" / path.removeprefix("/sys/bus/pci/devices/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value + "\n")
    return data


def node_health(
    folder: Path, node: str, *options: str, scontrol_text: Path | None = None,
    gpu_tools: bool = True,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """gpuval node-health on the recorded node, with the doubles (or without nvidia-smi)."""
    environment = fake_scontrol.install(folder, SLURM)
    if scontrol_text:
        environment["FAKE_SCONTROL_TEXT"] = str(scontrol_text)
    tools = folder / "tools"
    tools.mkdir(exist_ok=True)
    for tool in ("journalctl", *(["nvidia-smi"] if gpu_tools else [])):
        link = tools / tool
        if not link.exists():
            link.symlink_to(DOUBLES / "bin" / tool)
    environment |= {
        "PATH": f"{tools}:{environment['PATH']}",
        "GPUVAL_DOUBLES_DATA": str(folder / "data"),
        "PYTHONPATH": str(REPO / "src"),
    }
    command = [
        sys.executable, "-m", "gpuval", "node-health", "--node", node,
        "--state-dir", str(folder / "state"), "--work-dir", str(folder),
        "--sysfs-pci-root", str(folder / "pci"),
        "--sysfs-infiniband-root", str(folder / "data" / "sys" / "class" / "infiniband"),
        "--modules-file", str(folder / "data" / "proc-modules"), *options,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
