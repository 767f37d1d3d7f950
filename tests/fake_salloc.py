"""Stand-in `salloc` and `scancel` for the tests of gpuval's Slurm allocation
(gpuval.slurm.allocation), beside the fake scontrol (tests/fake_scontrol.py): each call's program
and arguments go to $FAKE_SALLOC_LOG (one JSON object a line). salloc grants job JOB_ID as
Slurm 22.05's `salloc --no-shell` says it on standard error ("salloc: Granted job allocation N")
and writes the job's line for the fake `scontrol show job N` into $FAKE_SCONTROL_JOBS:
CONSTRUCTED, the fields gpuval reads (JobId, JobName, NodeList: the --nodelist asked for).
scancel succeeds silently, as Slurm's does."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

JOB_ID = "4243"

SALLOC = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SALLOC_LOG"], "a") as log:
    log.write(json.dumps({{"program": "salloc", "argv": args}}) + "\\n")
options = dict(a.removeprefix("--").split("=", 1) for a in args if "=" in a)
os.makedirs(os.environ["FAKE_SCONTROL_JOBS"], exist_ok=True)
with open(os.path.join(os.environ["FAKE_SCONTROL_JOBS"], "{JOB_ID}"), "w") as job:
    job.write(f"JobId={JOB_ID} JobName={{options['job-name']}} NodeList={{options['nodelist']}}\\n")
sys.stderr.write("salloc: Granted job allocation {JOB_ID}\\n")
"""

SCANCEL = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["FAKE_SALLOC_LOG"], "a") as log:
    log.write(json.dumps({{"program": "scancel", "argv": sys.argv[1:]}}) + "\\n")
"""


def install(folder: Path, environment: dict[str, str]) -> dict[str, str]:
    """Put the fakes in `folder`/bin (the fake scontrol's PATH folder); the environment with
    their log and the jobs folder named."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in (("salloc", SALLOC), ("scancel", SCANCEL)):
        script = bin_dir / name
        script.write_text(text)
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return environment | {
        "FAKE_SALLOC_LOG": str(folder / "salloc.log"),
        "FAKE_SCONTROL_JOBS": str(folder / "jobs"),
    }


def calls(folder: Path) -> list[dict[str, object]]:
    """Each call so far: {"program": "salloc" or "scancel", "argv": [...]}."""
    log = folder / "salloc.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def main() -> None:
    """`python -m tests.fake_salloc FOLDER`: the fake salloc, scancel and scontrol in FOLDER/bin,
    for a molecule scenario whose environment names FOLDER's files as install() does."""
    from tests import fake_scontrol

    folder = Path(sys.argv[1])
    fake_scontrol.install(folder, Path(__file__).parent / "data" / "slurm")
    install(folder, {})


if __name__ == "__main__":
    main()
