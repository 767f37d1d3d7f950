"""Reading run folders: sidecars, raw files and every way they can be wrong, as diagnostics."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpuval.evidence import build_evidence
from gpuval.files import atomic
from gpuval.runfolder import RunFolder, RunFolderError, load_json, read_run_folder

SAMPLE = Path(__file__).parents[1] / "data" / "sample-run"
TOPO = (SAMPLE / "raw" / "dual-gpu-pcie" / "nvidia-smi-topo.txt").read_text()


def sidecar(name: str, host: str, **fields: Any) -> dict[str, Any]:
    return {
        "schema_version": 1, "name": name, "host": host, "phase": "preflight",
        "raw": f"{name}.txt", "command": "nvidia-smi topo -m", "tool": "nvidia-smi-topo",
        "cwd": None, "env": {}, "exit_code": 0, "timed_out": False, "timeout_s": None,
        "started_at": None, "ended_at": None, "duration_s": None, "skipped": None, **fields,
    }  # fmt: skip


def write_step(run: Path, host: str, name: str, text: str | None = TOPO, **fields: Any) -> None:
    folder = run / "raw" / host
    folder.mkdir(parents=True, exist_ok=True)
    if text is not None:
        (folder / f"{name}.txt").write_text(text)
    (folder / f"{name}.meta.json").write_text(json.dumps(sidecar(name, host, **fields)))


def test_reads_sidecar_and_parses_with_its_tool_hint(tmp_path: Path) -> None:
    write_step(tmp_path, "n1", "topo", env={"CUDA_VISIBLE_DEVICES": "0,1"})
    folder = read_run_folder(tmp_path)
    (raw,) = folder.files
    assert raw.path == "raw/n1/topo.txt" and raw.sidecar is not None
    assert raw.sidecar.env == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert raw.parse is not None and raw.parse.tool == "nvidia-smi-topo"
    assert raw.parse.source == "raw/n1/topo.txt"  # relative: results.json is portable
    assert [d.message for d in folder.diagnostics if d.level == "error"] == []


def test_bad_sidecar_json_names_file_line_and_column(tmp_path: Path) -> None:
    write_step(tmp_path, "n1", "topo")
    (tmp_path / "raw/n1/topo.meta.json").write_text('{\n  "name": "topo",\n  "host" "n1"\n}')
    folder = read_run_folder(tmp_path)
    bad = [d for d in folder.diagnostics if d.source == "raw/n1/topo.meta.json"]
    assert len(bad) == 1 and bad[0].level == "error" and bad[0].line == 3
    assert "line 3, column" in bad[0].message
    # the raw file it described is still read, as a file without sidecar
    assert [f.path for f in folder.files] == ["raw/n1/topo.txt"]
    assert folder.files[0].parse is not None


def test_sidecar_breaking_the_schema_is_an_error(tmp_path: Path) -> None:
    write_step(tmp_path, "n1", "topo", exit_code="zero")
    folder = read_run_folder(tmp_path)
    assert any("exit_code" in d.message and d.level == "error" for d in folder.diagnostics)
    assert folder.files[0].sidecar is not None and folder.files[0].sidecar.exit_code is None


def test_missing_raw_file_is_an_error_but_a_skipped_step_is_not(tmp_path: Path) -> None:
    write_step(tmp_path, "n1", "lost", text=None)
    write_step(tmp_path, "n1", "skipped", text=None, raw=None, skipped="no GPU on this host")
    folder = read_run_folder(tmp_path)
    errors = [d for d in folder.diagnostics if d.level == "error"]
    assert [(d.source, "missing" in d.message) for d in errors] == [("raw/n1/lost.txt", True)]
    skipped = [f for f in folder.files if f.sidecar and f.sidecar.skipped]
    assert skipped[0].parse is None and skipped[0].sidecar is not None


def test_raw_file_without_sidecar_is_detected_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "raw/n1").mkdir(parents=True)
    (tmp_path / "raw/n1/topo.log").write_text(TOPO)
    (tmp_path / "raw/n1/notes.txt").write_text("hello\n")
    folder = read_run_folder(tmp_path)
    parsed = {f.path: f.parse.tool if f.parse else None for f in folder.files}
    assert parsed == {"raw/n1/notes.txt": None, "raw/n1/topo.log": "nvidia-smi-topo"}
    messages = [(d.source, d.message.split(":")[0]) for d in folder.diagnostics]
    assert ("raw/n1/topo.log", "raw output without a sidecar") in messages
    assert any(
        s == "raw/n1/notes.txt" and "not recognised" in m
        for s, m in [(d.source, d.message) for d in folder.diagnostics]
    )


def test_unknown_tool_hint_falls_back_to_detection(tmp_path: Path) -> None:
    write_step(tmp_path, "n1", "topo", tool="no-such-tool")
    folder = read_run_folder(tmp_path)
    assert folder.files[0].parse is not None
    assert any("unknown tool 'no-such-tool'" in d.message for d in folder.diagnostics)


def test_hosts_from_run_json_without_folder_are_unreachable(tmp_path: Path) -> None:
    write_step(tmp_path, "n1", "topo")
    (tmp_path / "run.json").write_text(
        json.dumps({"run_id": "r", "hosts": ["n1", "n2"], "expected": {"n1": ["topo"]}})
    )
    folder = read_run_folder(tmp_path)
    assert folder.hosts == ["n1", "n2"] and folder.without_folder == ["n2"]
    assert build_evidence(folder).unreachable == ["n2"]
    assert folder.expected_steps("n1") == ["topo"] and folder.expected_steps("n2") == []


def test_broken_run_json_is_a_diagnostic(tmp_path: Path) -> None:
    write_step(tmp_path, "n1", "topo")
    (tmp_path / "run.json").write_text("[1, 2")
    folder = read_run_folder(tmp_path)
    assert folder.meta == {}
    assert any(d.source == "run.json" and d.level == "error" for d in folder.diagnostics)


@pytest.mark.parametrize("layout", ["missing", "file", "no-raw"])
def test_folders_that_are_not_run_folders_raise_with_advice(tmp_path: Path, layout: str) -> None:
    target = tmp_path / "run"
    if layout == "file":
        target.write_text("x")
    elif layout == "no-raw":
        target.mkdir()
    with pytest.raises(RunFolderError, match="raw/"):
        read_run_folder(target)


# ------------------------------------------------ the nodes write raw/: nothing there is trusted

SECRET = "controller-secret-3f9c"


def planted(tmp_path: Path) -> Path:
    """A run folder inside tmp_path, a secret beside it, and node n2's own topology."""
    (tmp_path / "secret.txt").write_text(f"{SECRET}\n")
    run = tmp_path / "run"
    write_step(run, "n2", "topo")
    return run


def refused_sources(folder: RunFolder) -> list[str | None]:
    return [d.source for d in folder.refused]


@pytest.mark.parametrize(
    "raw", ["../../../secret.txt", "/etc/hostname", "../n2/topo.txt", "./topo.txt", "", ".."]
)
def test_a_raw_path_that_is_not_a_file_of_its_own_folder_is_refused(
    tmp_path: Path, raw: str
) -> None:
    run = planted(tmp_path)
    write_step(run, "n1", "topo", text=None, raw=raw)
    folder = read_run_folder(run)
    assert refused_sources(folder) == ["raw/n1/topo.meta.json"]  # names the sidecar
    (refused,) = folder.refused
    assert refused.level == "error" and ascii(raw) in refused.message
    assert [f.host for f in folder.files] == ["n2"]  # n1 judged on nothing, n2's file is n2's


def test_links_are_never_followed(tmp_path: Path) -> None:
    run = planted(tmp_path)
    (run / "raw/n1").mkdir()
    (run / "raw/n1/topo.txt").symlink_to(run / "raw/n2/topo.txt")  # a sidecar names it
    (run / "raw/n1/topo.meta.json").write_text(json.dumps(sidecar("topo", "n1")))
    (run / "raw/n1/passwd.txt").symlink_to("/etc/passwd")  # no sidecar
    (run / "raw/n1/other.meta.json").symlink_to(run / "raw/n2/topo.meta.json")
    (run / "raw/n3").symlink_to(tmp_path)  # a host folder that is a link
    folder = read_run_folder(run)
    assert sorted(refused_sources(folder)) == [
        "raw/", "raw/n1/", "raw/n1/", "raw/n1/topo.meta.json"
    ]  # fmt: skip
    assert all("symbolic link" in d.message for d in folder.refused)
    assert [(f.host, f.path) for f in folder.files] == [("n2", "raw/n2/topo.txt")]
    assert folder.hosts == ["n1", "n2"]


def test_names_that_are_not_plain_are_refused(tmp_path: Path) -> None:
    run = planted(tmp_path)
    os.mkdir(os.fsencode(run / "raw") + b"/n\xff")  # not UTF-8
    (run / "raw" / ".hidden").mkdir()
    (run / "raw/n2" / "topo\n.txt").write_text(TOPO)
    folder = read_run_folder(run)
    assert sorted(refused_sources(folder)) == ["raw/", "raw/", "raw/n2/"]
    messages = " ".join(d.message for d in folder.refused)
    assert "'n\\udcff'" in messages and "'.hidden'" in messages and "'topo\\n.txt'" in messages
    assert [f.path for f in folder.files] == ["raw/n2/topo.txt"] and folder.hosts == ["n2"]


def killed_while_writing(path: Path, content: str) -> None:
    """gpuval's writer in a child process that dies (no clean-up runs, as on SIGTERM or SIGKILL)
    after writing its temporary and before renaming it."""
    child = os.fork()
    if child == 0:  # pragma: no cover (the child never returns)
        atomic._replace = lambda temporary, path: os._exit(0)  # type: ignore[assignment]
        atomic.write_output(path, content)
        os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_temporary_left_by_a_killed_write_is_ignored_not_refused(tmp_path: Path) -> None:
    run = planted(tmp_path)
    killed_while_writing(run / "raw/n2/pair-iperf3-r2-n1--n2-try1.json", '{"start": {')
    (run / "raw/n2/.profile").write_text("")  # hidden, and no temporary: still refused
    folder = read_run_folder(run)
    assert refused_sources(folder) == ["raw/n2/"]
    (left,) = [d for d in folder.diagnostics if "interrupted write" in d.message]
    assert left.level == "warning" and left.source is not None
    assert left.source.startswith("raw/n2/.pair-iperf3-r2-n1--n2-try1.json.")
    assert [f.path for f in folder.files] == ["raw/n2/topo.txt"]  # never read


def test_a_pair_step_of_two_other_nodes_is_refused(tmp_path: Path) -> None:
    run = planted(tmp_path)
    write_step(run, "n3", "pair-iperf3-r1-n1--n2-try1")  # with a sidecar
    (run / "raw/n3/pair-nccl-r1-n1--n2-try1.txt").write_text(TOPO)  # without
    write_step(run, "n1", "pair-iperf3-r1-n1--n2-try2")  # n1's own
    folder = read_run_folder(run)
    assert sorted(refused_sources(folder)) == [
        "raw/n3/pair-iperf3-r1-n1--n2-try1.meta.json", "raw/n3/pair-nccl-r1-n1--n2-try1.txt",
    ]  # fmt: skip
    assert sorted(f.path for f in folder.files) == [
        "raw/n1/pair-iperf3-r1-n1--n2-try2.txt", "raw/n2/topo.txt",
    ]  # fmt: skip


@pytest.mark.parametrize("escape", ["\\udcff", "\\uDCFF", "\\uD83D", "\\ud800"])
def test_a_sidecar_escaping_a_lone_surrogate_reads_as_replacement_characters(
    tmp_path: Path, escape: str
) -> None:
    """JSON may escape half of a UTF-16 pair in either case; no UTF-8 output could hold it."""
    path = tmp_path / "step.meta.json"
    path.write_text(f'{{"name": "a{escape}b", "env": {{"K": ["{escape}"]}}}}')
    document, problem = load_json(path, "raw/node1/step.meta.json")
    assert problem is None
    assert document == {"name": "a\ufffdb", "env": {"K": ["\ufffd"]}}


def test_a_sidecar_with_a_whole_surrogate_pair_keeps_its_character(tmp_path: Path) -> None:
    path = tmp_path / "step.meta.json"
    path.write_text('{"name": "gpu \\ud83d\\ude80"}')
    assert load_json(path, "raw/node1/step.meta.json") == ({"name": "gpu \U0001f680"}, None)
