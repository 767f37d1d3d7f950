"""Each host's runs indexed by record type once (issue 15, speed): the index gives what a scan
of the host's files gives, kind by kind, in file order."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval.evidence import build_evidence, runs_of
from gpuval.runfolder import read_run_folder

DATA = Path(__file__).parents[1] / "data"
FOLDERS = [DATA / "sample-run", DATA / "device" / "h100-x1-suite-2026-11-23"]


@pytest.mark.parametrize("run", FOLDERS, ids=[f.name for f in FOLDERS])
def test_the_index_gives_each_kind_as_a_scan_of_the_files_does(run: Path) -> None:
    hosts = build_evidence(read_run_folder(run)).hosts.values()
    kinds = {type(record) for host in hosts for file in host.files for record in file.runs}
    assert kinds  # the folder has parsed runs to index
    assert {
        (host.name, kind.__name__): list(host.runs.of(kind)) for host in hosts for kind in kinds
    } == {
        (host.name, kind.__name__): list(runs_of(host.files, kind))
        for host in hosts
        for kind in kinds
    }


@pytest.mark.parametrize("run", FOLDERS, ids=[f.name for f in FOLDERS])
def test_a_kind_that_several_record_types_share_keeps_file_order(run: Path) -> None:
    for host in build_evidence(read_run_folder(run)).hosts.values():
        assert list(host.runs.of(object)) == list(runs_of(host.files, object)), host.name
