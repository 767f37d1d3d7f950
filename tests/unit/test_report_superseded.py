"""The report lists the copies a later one replaced (superseded/<host>/<name>): kept, never judged.
results.json names each one, report.html shows them, and the verdict is the one of the same run
folder without them. Only the controller's own copies are listed: a link, or a folder whose name
is not plain, is not one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from gpuval.files.superseded import supersede
from gpuval.pipeline import report_run

DEVICE_RUN = Path(__file__).resolve().parents[1] / "data" / "device" / "h200-x1-mpi-2026-11-27"
HOST = "localhost"


def results(run: Path) -> dict[str, object]:
    return dict(json.loads((run / "results.json").read_text()))


def test_the_replaced_copies_are_listed_and_judge_nothing(tmp_path: Path) -> None:
    untouched, run = tmp_path / "untouched", tmp_path / "run"
    shutil.copytree(DEVICE_RUN / "raw", untouched / "raw")
    shutil.copy(DEVICE_RUN / "run.json", untouched / "run.json")
    shutil.copytree(untouched, run)
    # An earlier copy of os-release, replaced in raw/ by the one there now, as the collect does.
    raw = run / "raw" / HOST
    earlier = raw / "os-release.txt.earlier"
    earlier.write_text('PRETTY_NAME="<b>an older image</b>"\n')
    os.utime(earlier, (1_700_000_000, 1_700_000_000))
    moved = supersede(earlier, raw, "os-release.txt")
    assert moved == "superseded/localhost/os-release.txt.1700000000"
    # Not the controller's copies: a link, and a host folder whose name is not plain.
    (run / "superseded" / HOST / "link.txt").symlink_to(run / "run.json")
    (run / "superseded" / "..x").mkdir()
    (run / "superseded" / "..x" / "file.txt").write_text("x")
    assert report_run(untouched, quiet=True) == report_run(run, quiet=True)
    listed, plain = results(run), results(untouched)
    assert listed["superseded"] == ["superseded/localhost/os-release.txt.1700000000"]
    assert "superseded" not in plain
    assert listed["verdict"] == plain["verdict"]
    assert listed["checks"] == plain["checks"]
    html = (run / "report.html").read_text()
    assert "superseded/localhost/os-release.txt.1700000000" in html
    assert "Replaced copies" in html
    assert "Replaced copies" not in (untouched / "report.html").read_text()
