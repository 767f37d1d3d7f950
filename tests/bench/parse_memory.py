"""`make bench`: time and peak memory of reading and parsing big raw files, each in a fresh process.

- 20 MB of real nccl-tests/rccl-tests outputs (tests/data/outputs/nccl-tests and the sample run's
  copies of the shared samples) concatenated over and over, as a log that gathers many runs;
- a 200 MB binary file (random bytes) that a sidecar names as nccl-tests output, and the same
  file with no tool named (detection only).

Targets, on a 2-core machine: the 20 MB log in < 5 s; any file costs at most about twice its
size in memory (peak resident size less the interpreter's, imports included, before reading);
the parse result (what results.json keeps of a file) grows with the measurements, not the text.
The text log is read as `gpuval parse` reads it: whole once to detect its tool, then a block at
a time to parse it (its tables kept as numbers), so its peak is the larger of the two.

    PYTHONPATH=src python -m tests.bench.parse_memory [--text-mb 20] [--binary-mb 200]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "tests" / "data" / "outputs" / "nccl-tests"
SAMPLES = REPO / "tests" / "data" / "sample-run" / "raw"


def real_outputs() -> str:
    """Every real text output, each ending in a newline, one after another."""
    paths = sorted(REAL.glob("*.txt")) + sorted(SAMPLES.glob("*/nccl-all_reduce.txt"))
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in paths]
    return "".join(t if t.endswith("\n") else t + "\n" for t in texts)


def write_text_log(path: Path, megabytes: int) -> None:
    block = real_outputs()
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < megabytes * 1_000_000:
            written += out.write(block)


def write_binary(path: Path, megabytes: int) -> None:
    with path.open("wb") as out:
        for _ in range(megabytes):
            out.write(os.urandom(1_000_000))


def _peak_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(path: Path, tool: str | None) -> None:
    """Parse `path` in this (fresh) process and print what it cost, as JSON."""
    from gpuval.parsers import parse_file

    baseline = _peak_mb()
    start, cpu = time.perf_counter(), time.process_time()
    result = parse_file(path, tool=tool)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    peak = _peak_mb()
    document = json.dumps(result.to_dict()) if result is not None else ""
    runs = result.runs if result is not None else []
    print(json.dumps({
        "seconds": seconds, "cpu_seconds": cpu_seconds, "cost_mb": peak - baseline,
        "tool": result.tool if result is not None else None, "runs": len(runs),
        "rows": sum(len(getattr(run, "rows", [])) for run in runs),
        "diagnostics": len(result.warnings) + len(result.errors) if result is not None else 0,
        "json_mb": len(document) / 1e6,
    }))  # fmt: skip


def measure(label: str, path: Path, tool: str | None) -> bool:
    """Parse `path` in a child process and print one line; False when it failed."""
    command = [sys.executable, "-m", "tests.bench.parse_memory", "--child", str(path)]
    command += ["--tool", tool] if tool else []
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode != 0:
        print(f"{label}: failed\n{done.stderr}")
        return False
    got = json.loads(done.stdout.splitlines()[-1])
    size = path.stat().st_size / 1e6
    print(f"{label} ({size:.0f} MB): {got['seconds']:.2f} s ({got['cpu_seconds']:.2f} s CPU), "
          f"{got['cost_mb']:.0f} MB peak over the interpreter ({got['cost_mb'] / size:.2f}x), "
          f"{got['tool']}: {got['runs']} runs, {got['rows']} rows, {got['diagnostics']} "
          f"diagnostics, parse result {got['json_mb']:.1f} MB as JSON")  # fmt: skip
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text-mb", type=int, default=20)
    parser.add_argument("--binary-mb", type=int, default=200)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tool", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.tool)
        return 0
    # Seconds on a shared machine mean little without the load they were measured under.
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory() as folder:
        text, binary = Path(folder) / "nccl-tests.log", Path(folder) / "binary.raw"
        write_text_log(text, args.text_mb)
        ok = measure("concatenated nccl-tests runs", text, None)
        text.unlink()
        write_binary(binary, args.binary_mb)
        ok &= measure("binary file named nccl-tests", binary, "nccl-tests")
        ok &= measure("binary file, tool detected", binary, None)
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
