"""A stand-in `scontrol` for the Slurm tests: it writes each call's arguments (one JSON list a
line) to $FAKE_SCONTROL_LOG and answers `show nodes` and `show reservation` with outputs a real
Slurm recorded (tests/data/slurm/), `show job N` with the file N of $FAKE_SCONTROL_JOBS (the
fake salloc writes it), as the Slurm it plays would: with $FAKE_SCONTROL_JSON
unset, `--json` is refused as Slurm 22.05's scontrol refuses it. `update` succeeds, except for
the nodes named in $FAKE_SCONTROL_REFUSE (comma separated); with $FAKE_SCONTROL_DOWN set, every
call fails as when the controller cannot be reached."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

SCRIPT = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_SCONTROL_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
words = [a for a in args if a not in ("--oneliner", "-o")]
if os.environ.get("FAKE_SCONTROL_DOWN"):
    sys.stderr.write("slurm_load_node error: Unable to contact slurm controller "
                     "(connect failure)\\n")
    sys.exit(1)
if words[:2] == ["show", "nodes"] and "--json" in words:
    if not os.environ.get("FAKE_SCONTROL_JSON"):
        sys.stderr.write(open(os.environ["FAKE_SCONTROL_REFUSED"]).read())
        sys.exit(1)
    sys.stdout.write(open(os.environ["FAKE_SCONTROL_JSON"]).read())
elif words[:2] == ["show", "nodes"]:
    wanted = set(words[2].split(",")) if len(words) > 2 and "[" not in words[2] else None
    for line in open(os.environ["FAKE_SCONTROL_TEXT"]).read().splitlines():
        name = line.split()[0].removeprefix("NodeName=")
        if wanted is None or name in wanted:
            print(line)
elif words[:2] == ["show", "job"]:
    sys.stdout.write(open(os.path.join(os.environ["FAKE_SCONTROL_JOBS"], words[2])).read())
elif words[:2] == ["show", "reservation"]:
    sys.stdout.write(open(os.environ["FAKE_SCONTROL_RESERVATION"]).read())
elif words[:1] == ["update"]:
    node = words[1].removeprefix("NodeName=")
    if node in os.environ.get("FAKE_SCONTROL_REFUSE", "").split(","):
        sys.stderr.write("slurm_update error: Invalid node state specified\\n")
        sys.exit(1)
else:
    sys.stderr.write("fake scontrol: not played: " + " ".join(args) + "\\n")
    sys.exit(2)
"""


def install(folder: Path, outputs: Path, json_file: str | None = None) -> dict[str, str]:
    """Put the fake on a PATH in `folder`; the environment to run gpuval (or Ansible) with."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "scontrol"
    script.write_text(SCRIPT)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    environment = dict(os.environ)
    environment |= {
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "FAKE_SCONTROL_LOG": str(folder / "scontrol.log"),
        "FAKE_SCONTROL_TEXT": str(outputs / "scontrol-show-nodes-oneliner-22.05.txt"),
        "FAKE_SCONTROL_REFUSED": str(outputs / "scontrol-show-nodes-json-refused-22.05.stderr"),
        "FAKE_SCONTROL_RESERVATION": str(outputs / "scontrol-show-reservation-oneliner-22.05.txt"),
    }
    if json_file:
        environment["FAKE_SCONTROL_JSON"] = str(outputs / json_file)
    return environment


def calls(folder: Path) -> list[list[str]]:
    """The arguments of each call so far."""
    import json

    log = folder / "scontrol.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
