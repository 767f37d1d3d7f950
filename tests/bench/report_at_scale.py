"""`make bench`: time `gpuval report` on a run folder of 1,024 nodes x 8 GPUs, and its peak memory.

Targets (issue 15, on a 2-core machine): the whole command under 15 s and under 1 GB peak.

Every node is the same 8-GPU HGX H100 node, composed from real outputs the repository holds: the
suite's own H100 run (tests/data/device/h100-x1-suite-2026-11-23: its step list and sidecars,
the six intranode collectives of nccl-tests, the health probes, the version and sysfs outputs,
the steps it skipped) with its GPU-count-bound outputs replaced by 8-GPU H100 ones:
`nvidia-smi -q` of 8x H100 (gpud's test data), the 8x H100 `--query-gpu` CSV of the A3 Mega
case, the DGX H100 `topo -m`, the all-links-active DGX H100 `nvlink -s`, and the 8x H100
p2pBandwidthLatencyTest of NCCL issue 1264. Its one-GPU `nvidia-smi` table is left out (it
would contradict the other seven GPUs). The repository holds no real eight-GPU output of all six
collectives, so the collectives are the suite's real one-GPU runs: the same sweep, rows and
size, seven device lines short of an eight-GPU output.

The report runs as `python -m gpuval report RUN --out OUT --quiet`, a child process: its wall
time, its CPU time and its peak memory (its largest process's, and all its processes' together)
are printed, never asserted (a loaded machine is no failure). Twice: cold, every file parsed, as
a folder gpuval never read; then warm, after every host's files were read ahead into the run's
parse cache as the collect after each phase does (that reading timed too, in one more child: on
a cluster it is spread over the phases). Then, as after a gpuval upgrade, the parse cache
removed: a report into the run folder, which parses everything and keeps it, and the report
after it, warm again. The verdicts must all be the same.

    python -m tests.bench.report_at_scale               # 1,024 nodes
    python -m tests.bench.report_at_scale --quick       # 128 nodes, to iterate
    python -m tests.bench.report_at_scale --nodes 256 --keep /tmp/run256   # keep the folder
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuval.files.parse_cache import CACHE_DIR

DATA = Path(__file__).resolve().parents[1] / "data"
SUITE = DATA / "device" / "h100-x1-suite-2026-11-23"
SUITE_HOST = "localhost"
NODES = 1024
QUICK_NODES = 128
GPUS = 8
TARGET_SECONDS = 15.0
TARGET_MB = 1000.0

Q_8X_H100 = DATA / "outputs" / "nvidia-smi" / "q-gpud-535.161.08-8xH100-fabric-completed.txt"
# step -> (raw file name, tool, real 8-GPU output it takes)
EIGHT_GPU_OUTPUTS: dict[str, tuple[str, str, Path]] = {
    "nvidia-smi-query": ("nvidia-smi-query.txt", "nvidia-smi-q", Q_8X_H100),
    "nvidia-smi-query-after": ("nvidia-smi-query-after.txt", "nvidia-smi-q", Q_8X_H100),
    "nvidia-smi-query-gpu": (
        "nvidia-smi-query-gpu.csv",
        "nvidia-smi-csv",
        DATA / "verdicts" / "internode-h100-2x8-a3mega-published" / "raw" / "ztan-mig-235z"
        / "nvidia-smi-query-gpu.csv",
    ),
    "nvidia-smi-topo": (
        "nvidia-smi-topo.txt",
        "nvidia-smi-topo",
        DATA / "outputs" / "nvidia-smi" / "shared-topo-dgx-8xH100-topo-m.txt",
    ),
    "nvidia-smi-nvlink": (
        "nvidia-smi-nvlink.txt",
        "nvidia-smi-nvlink",
        DATA / "verdicts" / "nvlink-all-active-dgx-h100" / "raw" / "dgx-h100"
        / "nvidia-smi-nvlink.txt",
    ),
    "p2pBandwidthLatencyTest": (
        "p2pBandwidthLatencyTest.txt",
        "p2pBandwidthLatencyTest",
        DATA / "outputs" / "p2p" / "nccl-1264-8xH100-tabs-trailing-truncated.txt",
    ),
}  # fmt: skip
LEFT_OUT = {"nvidia-smi"}  # the one-GPU table


@dataclass
class NodeTemplate:
    """One node's files: raw outputs as bytes, sidecars as documents (their host set per node)."""

    raws: dict[str, bytes]
    sidecars: dict[str, dict[str, Any]]  # sidecar file name -> document
    expected: list[str]


def node_template() -> NodeTemplate:
    """The 8-GPU node: the suite's run with its GPU-count-bound outputs replaced."""
    folder = SUITE / "raw" / SUITE_HOST
    raws: dict[str, bytes] = {}
    sidecars: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.meta.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        step = document["name"]
        if step in LEFT_OUT:
            continue
        if step in EIGHT_GPU_OUTPUTS:
            raw, tool, source = EIGHT_GPU_OUTPUTS[step]
            document.update(raw=raw, tool=tool, exit_code=0, skipped=None)
            raws[raw] = source.read_bytes()
        elif document.get("raw"):
            raws[document["raw"]] = (folder / document["raw"]).read_bytes()
        sidecars[path.name] = document
    meta = json.loads((SUITE / "run.json").read_text(encoding="utf-8"))
    expected = [s for s in meta["expected"][SUITE_HOST] if s not in LEFT_OUT]
    return NodeTemplate(raws, sidecars, expected)


def write_run_folder(run: Path, nodes: int) -> int:
    """`nodes` copies of the 8-GPU node under run/raw/, and run.json; the number of files."""
    template = node_template()
    hosts = [f"gpu{i:04d}" for i in range(1, nodes + 1)]
    files = 0
    for host in hosts:
        folder = run / "raw" / host
        folder.mkdir(parents=True)
        for name, content in template.raws.items():
            (folder / name).write_bytes(content)
        for name, document in template.sidecars.items():
            (folder / name).write_text(json.dumps({**document, "host": host}, indent=2))
        files += len(template.raws) + len(template.sidecars)
    suite = json.loads((SUITE / "run.json").read_text(encoding="utf-8"))
    declared = {"gpu_model": "H100 SXM", "gpus_per_node": GPUS, "system": "HGX H100"}
    (run / "run.json").write_text(json.dumps({
        "run_id": f"report-at-scale-{nodes}", "started_at": suite["started_at"],
        "config": suite["config"], "hosts": hosts,
        "expected": dict.fromkeys(hosts, template.expected),
        "declared": dict.fromkeys(hosts, declared),
    }, indent=2))  # fmt: skip
    return files + 1


@dataclass
class Measured:
    seconds: float
    cpu_seconds: float
    peak_mb: float  # the largest process
    together_mb: float  # the command's processes together (proportional set size), at peak
    exit_status: int
    verdict_line: str


class TreeMemory(threading.Thread):
    """The peak of a process and its descendants' memory together, sampled every 0.1 s: their
    proportional set sizes (a page shared by forked processes counted once, split among them;
    Linux's /proc, else 0)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kb, self.done = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.peak_kb = max(self.peak_kb, sum(map(_pss_kb, _tree(self.pid))))


def _tree(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # the command name (2nd field) may hold spaces: the parent is 2 fields after ")"
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    tree, grown = {root}, True
    while grown:
        found = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= found
        grown = bool(found)
    return sorted(tree)


def _pss_kb(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


# What every collect does for its host (plugins/action/gpuval_collect.py), for all of them.
READ_AHEAD = """
import sys
from pathlib import Path
from gpuval.runfolder import update_parse_cache
run = Path(sys.argv[1])
for host in sorted(folder.name for folder in (run / "raw").iterdir()):
    update_parse_cache(run, host)
"""


def timed(command: list[str]) -> Measured:
    """`command` in a child process: its wall time, its CPU time (its worker processes'
    included), the peak RSS of its largest process (wait4), the peak of all its processes'
    memory together (TreeMemory), its last stderr line."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors)
        memory = TreeMemory(child.pid)
        memory.start()
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        memory.done.set()
        memory.join()
        child.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        lines = errors.read().decode(errors="replace").strip().splitlines()
    # ru_maxrss: kilobytes on Linux
    return Measured(
        seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, memory.peak_kb / 1024,
        child.returncode, lines[-1] if lines else "",
    )  # fmt: skip


def time_report(run: Path, out: Path | None) -> Measured:
    """`gpuval report` of `run` in a child process, into `out` (None: into the run folder, which
    keeps what it parsed in the parse cache)."""
    elsewhere = ["--out", str(out)] if out else []
    return timed([sys.executable, "-m", "gpuval", "report", str(run), *elsewhere, "--quiet"])


def figures(measured: Measured) -> str:
    return (f"{measured.seconds:.1f} s ({measured.cpu_seconds:.1f} s CPU), {measured.peak_mb:.0f}"
            f" MB peak, {measured.together_mb:.0f} MB with its workers")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=NODES, help=f"default {NODES}")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_NODES} nodes")
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="write the run folder to DIR (new), keep it"
    )
    args = parser.parse_args(argv)
    nodes = QUICK_NODES if args.quick else args.nodes
    with tempfile.TemporaryDirectory(prefix="report-at-scale-") as scratch:
        run = args.keep or Path(scratch) / "run"
        files = write_run_folder(run, nodes)
        cold = time_report(run, Path(scratch) / "cold")
        read_ahead = timed([sys.executable, "-c", READ_AHEAD, str(run)])
        warm = time_report(run, Path(scratch) / "warm")
        # As after a gpuval upgrade (every cache of other code) with no collect since: the
        # first report into the run folder parses everything and keeps it, the next one not.
        shutil.rmtree(run / CACHE_DIR)
        kept = time_report(run, None)
        after = time_report(run, None)
    for measured in (cold, warm, kept, after):
        if measured.exit_status not in (0, 1, 3):  # 2: an error, the report was not written
            print(f"gpuval report failed (exit {measured.exit_status}): {measured.verdict_line}")
            return 1
    print(f"report of {nodes} nodes x {GPUS} GPUs ({files} files) "
          f"[targets at {NODES} nodes: {TARGET_SECONDS:g} s, {TARGET_MB:g} MB]:\n"
          f"  cold (every file parsed): {figures(cold)}; {cold.verdict_line}\n"
          f"  read ahead into the parse cache (the collects' share): {figures(read_ahead)}\n"
          f"  warm (parse cache filled): {figures(warm)}; {warm.verdict_line}\n"
          f"  cold into the run folder, keeping what it parsed: {figures(kept)}\n"
          f"  the next report (warm from what that one kept): {figures(after)}")  # fmt: skip
    if read_ahead.exit_status != 0 or len({_verdict(m) for m in (cold, warm, kept, after)}) > 1:
        print(f"the parse cache changed the outcome: read ahead exit {read_ahead.exit_status}"
              f" {read_ahead.verdict_line}")  # fmt: skip
        return 1
    return 0


def _verdict(measured: Measured) -> str:
    """The verdict and counts, less the report's path."""
    return measured.verdict_line.split("; report:")[0]


if __name__ == "__main__":
    sys.exit(main())
