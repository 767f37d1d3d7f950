"""A stand-in `sbatch` for the `gpuval run --slurm` tests: it writes each call's arguments and
the text of the script it was given (its last argument) to $FAKE_SBATCH_LOG (one JSON object a
line) and answers as `sbatch --parsable` does, with the job id alone. With $FAKE_SBATCH_REFUSE
set it refuses the job with that text on stderr and exit status 1, as sbatch refuses one
(`sbatch: error: Batch job submission failed: <Slurm's error string>`)."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

JOB_ID = "4242"

SCRIPT = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
script = open(args[-1]).read() if args and os.path.isfile(args[-1]) else None
with open(os.environ["FAKE_SBATCH_LOG"], "a") as log:
    log.write(json.dumps({{"argv": args, "script": script}}) + "\\n")
if os.environ.get("FAKE_SBATCH_REFUSE"):
    sys.stderr.write(os.environ["FAKE_SBATCH_REFUSE"] + "\\n")
    sys.exit(1)
print("{JOB_ID}")
"""


def install(folder: Path, environment: dict[str, str]) -> dict[str, str]:
    """Put the fake in `folder`/bin (the fake scontrol's PATH folder); the environment with its
    log named."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "sbatch"
    script.write_text(SCRIPT)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return environment | {"FAKE_SBATCH_LOG": str(folder / "sbatch.log")}


def calls(folder: Path) -> list[dict[str, object]]:
    """Each call so far: {"argv": [...], "script": its text}."""
    log = folder / "sbatch.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
