"""Hostile run folders. The nodes under test write raw/<host>/, so a broken or compromised node
can put anything there: sidecars naming files outside its folder, links, odd names, huge or
binary outputs, fields of the wrong type. `gpuval report` must never raise, never read a file
outside the host's own folder (nor leak its text), never write outside the run folder (but for
the reports folder's history database), and never give a better verdict than the evidence.

A secret is planted beside the run folder and another in node2's own folder (a context file,
which node2's report never shows): neither may appear in any output.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.run_folders import write_run_json, write_step

from gpuval.cli import main
from gpuval.pipeline import report_run

LAMBDA = Path(__file__).parents[1] / "data" / "sample-run" / "raw" / "lambda-4xh100"
STEPS = (
    ("nvidia-smi", "nvidia-smi"),
    ("nvidia-smi-topo", "nvidia-smi-topo"),
    ("nccl-all_reduce", "nccl-tests"),
)
NCCL = (LAMBDA / "nccl-all_reduce.txt").read_text()
HOSTS = ["node1", "node2"]
MARKER_OUTSIDE = "outside-marker-5b1e0c7a"
MARKER_NODE2 = "node2-marker-9d47aa31"
WEBHOOK = "https://hooks.example/T0/B0/x"
OUTPUTS = {"results.json", "summary.json", "report.html", "junit.xml", "measurements.csv",
           "gpuval.prom"}  # fmt: skip
EXIT_CODES = {"pass": 0, "warn": 0, "fail": 1, "error": 2, "unjudged": 3}
EXIT_ERROR = EXIT_CODES["error"]


def honest_run(base: Path, with_run_json: bool = True) -> Path:
    """Two healthy nodes (the Lambda 4x H100 outputs) in base/run, a secret in base/, and one
    in node2's context file."""
    (base / "secret.txt").write_text(f"{MARKER_OUTSIDE}\n")
    run = base / "run"
    for host in HOSTS:
        for name, tool in STEPS:
            write_step(run, host, name, (LAMBDA / f"{name}.txt").read_text(), tool=tool)
    write_step(run, "node2", "notes", f"{MARKER_NODE2}\n", tool="context", phase="preflight")
    if with_run_json:
        steps = [name for name, _ in STEPS]
        write_run_json(run, "hostile", HOSTS, expected=dict.fromkeys(HOSTS, steps))
    return run


@dataclass
class Reported:
    code: int
    printed: str
    results: dict[str, Any] | None
    webhook: list[str] = field(default_factory=list)  # the payloads sent

    def checks_of(self, host: str) -> list[dict[str, Any]]:
        return [c for c in (self.results or {}).get("checks", []) if c["host"] == host]


def report(run: Path) -> Reported:
    """`gpuval report RUN` in this process (as the CLI calls it), its webhook captured."""
    printed, sent = StringIO(), []
    with (
        mock.patch("gpuval.pipeline.send", lambda _, body: sent.append(json.dumps(body)) or "sent"),
        redirect_stdout(printed),
        redirect_stderr(printed),
    ):
        code = report_run(run, webhook_url=WEBHOOK)
    path = run / "results.json"
    results = json.loads(path.read_text()) if path.is_file() else None
    return Reported(code, printed.getvalue(), results, sent)


def everything_written(base: Path, reported: Reported) -> str:
    """Every output of the run folder (not raw/), the history database, what was printed and
    what was sent, as one text."""
    run = base / "run"
    texts = [reported.printed, *reported.webhook]
    for path in sorted(run.iterdir()):
        if path.is_file() and not path.is_symlink():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    history = base / "history.sqlite"
    if history.is_file():
        with sqlite3.connect(history) as database:
            for (table,) in database.execute("select name from sqlite_master where type='table'"):
                texts += [repr(row) for row in database.execute(f"select * from {table}")]
    return "\n".join(texts)


def assert_nothing_leaked(base: Path, reported: Reported) -> None:
    written = everything_written(base, reported)
    assert MARKER_OUTSIDE not in written and MARKER_NODE2 not in written


def test_the_honest_run_passes_and_shows_no_secret(tmp_path: Path) -> None:
    run = honest_run(tmp_path)
    reported = report(run)
    assert (reported.code, reported.results and reported.results["verdict"]) == (0, "pass")
    assert_nothing_leaked(tmp_path, reported)


@pytest.mark.parametrize(
    ("raw", "secret"),
    [("../../../secret.txt", MARKER_OUTSIDE), ("../node2/notes.txt", MARKER_NODE2)],
)
def test_a_failure_record_naming_a_file_outside_its_folder_leaks_nothing(
    tmp_path: Path, raw: str, secret: str
) -> None:
    run = honest_run(tmp_path)
    write_step(run, "node1", "failed-preflight", None, raw=raw, exit_code=1, tool="context",
               phase="preflight")  # fmt: skip
    reported = report(run)
    assert secret not in everything_written(tmp_path, reported)
    assert reported.code == EXIT_ERROR and reported.webhook  # error: the webhook is told
    assert_nothing_leaked(tmp_path, reported)


def test_an_absolute_raw_path_is_an_error_naming_the_sidecar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = honest_run(tmp_path)
    write_step(run, "node1", "failed-preflight", None, raw="/etc/hostname", exit_code=1,
               tool="context", phase="preflight")  # fmt: skip
    assert main(["report", str(run)]) == EXIT_ERROR
    printed = capsys.readouterr().err
    assert "verdict: ERROR" in printed
    (line,) = [line for line in printed.splitlines() if "run-folder.refused" in line]
    assert "'/etc/hostname'" in line and "[raw/node1/failed-preflight.meta.json]" in line


@pytest.mark.parametrize("how", ["sidecar", "link"])
def test_a_node_is_never_judged_on_its_neighbours_output(tmp_path: Path, how: str) -> None:
    run = honest_run(tmp_path)
    own = run / "raw/node1/nccl-all_reduce.txt"
    own.unlink()
    if how == "sidecar":
        write_step(run, "node1", "nccl-all_reduce", None, raw="../node2/nccl-all_reduce.txt",
                   tool="nccl-tests")  # fmt: skip
    else:
        own.symlink_to("../node2/nccl-all_reduce.txt")
    reported = report(run)
    assert reported.code == EXIT_ERROR and reported.results is not None
    judged = [c["check_id"] for c in reported.checks_of("node1") if c["status"] == "pass"]
    assert [c for c in judged if c.startswith("nccl")] == []  # nothing of node2's is node1's
    assert sorted(f["path"] for f in reported.results["files"] if f["host"] == "node1") == [
        "raw/node1/nvidia-smi-topo.txt", "raw/node1/nvidia-smi.txt",
    ]  # fmt: skip


def test_sidecar_strings_no_utf_8_can_hold_are_replaced(tmp_path: Path) -> None:
    run = honest_run(tmp_path)
    write_step(run, "node1", "odd", "\0\n", exit_code=3, tool="context", cwd="\0",
               env={"\ud800": "\udfff"}, command="\ud800 </script>")  # fmt: skip
    path = run / "raw/node1/odd.meta.json"  # JSON escapes: "\udcff" decodes to a lone surrogate
    path.write_text(path.read_text().replace('"name": "odd"', '"name": "a\\udcffb"'))
    reported = report(run)
    assert "a gpuval bug" not in reported.printed
    assert reported.code == EXIT_CODES["fail"] and reported.results is not None
    assert "step.a\ufffdb" in [c["check_id"] for c in reported.checks_of("node1")]
    assert all((run / name).is_file() for name in OUTPUTS)


# ------------------------------------------------------------ generated hostile run folders

SIDECAR = b".meta.json"
OWN_STEPS = ["nccl-all_reduce", "failed-preflight", "pair-iperf3-r1-node1--node2-try1", "x"]
FOREIGN_STEPS = ["pair-nccl-r1-node2--node3-try1"]  # a pair node1 is no part of
ABSOLUTE_SECRET = "<absolute path of the planted secret>"  # replaced when the folder is made
TARGETS = [  # where a sidecar's raw or a link points, seen from raw/node1/
    "../../../secret.txt", ABSOLUTE_SECRET, "../node2/notes.txt", "../node2/nccl-all_reduce.txt",
    "../node2", "/etc/passwd", "/", "..", ".", "nccl-all_reduce.txt", "missing.txt",
    "",  # last: a sidecar's raw only (no link can point nowhere)
]  # fmt: skip
HUGE = NCCL.encode() * 150  # ~1.6 MB of real nccl-tests output


def _plain(name: bytes) -> bool:
    """A name a node may give a file, and an inventory a host: printable, no `/`, not hidden."""
    text = name.decode("utf-8", "surrogateescape")
    return 0 < len(text) <= 255 and text.isprintable() and "/" not in text and text[0] != "."


plain_names = st.sampled_from([f"{s}.{e}".encode() for s in OWN_STEPS + FOREIGN_STEPS
                               for e in ("txt", "json")])  # fmt: skip
odd_names = st.builds(  # hidden, a control character, or not UTF-8: never plain
    bytes.__add__, st.sampled_from([b".", b"\n", b"\xff", b"a\x1b"]), st.binary(max_size=8)
).filter(lambda n: b"/" not in n and b"\0" not in n and n not in (b".", b".."))
contents = st.one_of(
    st.binary(max_size=300),
    st.just(NCCL.encode()),
    st.integers(0, len(NCCL)).map(lambda cut: NCCL.encode()[:cut]),  # cut short
    st.just(NCCL.encode().replace(b"\n", b"\n\0", 5)),  # NULs
    st.just(NCCL.encode("utf-16")),  # not UTF-8
    st.just(HUGE),
)
odd_text = st.one_of(st.sampled_from(["\ud800", "a\udcffb</script>", "\x00", "\x1b["]), st.text())
wrong_types = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
sidecar_documents = st.fixed_dictionaries(
    {"schema_version": st.one_of(st.just(1), wrong_types)},
    optional={
        "name": st.one_of(st.sampled_from(OWN_STEPS + FOREIGN_STEPS), odd_text, wrong_types),
        "host": st.one_of(st.sampled_from(HOSTS), odd_text, wrong_types),
        "phase": st.one_of(st.sampled_from(["preflight", "intranode", "pairs"]), odd_text),
        "raw": st.one_of(
            st.sampled_from(TARGETS), plain_names.map(bytes.decode), odd_text, wrong_types
        ),
        "command": st.one_of(odd_text, wrong_types),
        "tool": st.one_of(
            st.sampled_from(["context", "nccl-tests", "iperf3", "nope"]), wrong_types
        ),
        "env": st.one_of(st.dictionaries(odd_text, odd_text, max_size=2), wrong_types),
        "exit_code": st.one_of(st.integers(-3, 300), wrong_types, odd_text),
        "timed_out": st.one_of(st.booleans(), wrong_types),
        "timeout_s": wrong_types,
        "duration_s": wrong_types,
        "skipped": st.one_of(odd_text, wrong_types),
    },
)


@dataclass(frozen=True)
class Entry:
    """One entry of raw/node1/: a file, a sidecar (a JSON value, or raw bytes), a link or a
    folder."""

    name: bytes
    kind: str
    content: Any = None


entries = st.one_of(
    st.builds(Entry, st.one_of(plain_names, odd_names), st.just("file"), contents),
    st.builds(
        Entry,
        st.one_of(plain_names.map(lambda n: n.rsplit(b".", 1)[0] + SIDECAR), odd_names),
        st.just("sidecar"),
        st.one_of(sidecar_documents, wrong_types, st.binary(max_size=40)),
    ),
    st.builds(
        Entry, st.one_of(plain_names, odd_names), st.just("link"), st.sampled_from(TARGETS[:-1])
    ),
    st.builds(Entry, st.one_of(plain_names, odd_names), st.just("folder")),
)


@dataclass(frozen=True)
class Hostile:
    entries: list[Entry]
    node1: str  # "folder", or a link: "link-node2", "link-outside"
    odd_host: bytes | None  # another host folder by a name no host has
    run_json: bool

    def breaks_the_rule(self) -> bool:
        """Whether the folder holds something gpuval must refuse (so the verdict is error): a
        link, a name that is not plain, a readable sidecar whose raw is not a plain name or
        whose step is a pair of two other nodes, or such a pair's output no sidecar claims."""
        if self.node1 != "folder" or self.odd_host is not None:
            return True
        entries = self._last_of_each_name()
        if any(entry.kind == "link" or not _plain(entry.name) for entry in entries):
            return True
        sidecars = [e for e in entries if e.kind == "sidecar" and isinstance(e.content, dict)]
        for sidecar in sidecars:
            raw, name = sidecar.content.get("raw"), sidecar.content.get("name")
            if isinstance(raw, str) and not _plain(raw.encode("utf-8", "replace")):
                return True
            stem = sidecar.name[: -len(SIDECAR)].decode()  # plain: ASCII
            if (name if isinstance(name, str) and name else stem) in FOREIGN_STEPS:
                return True
        claimed = {s.content.get("raw") for s in sidecars}
        return any(
            e.kind == "file"
            and e.name.decode() not in claimed
            and e.name.decode().split(".")[0] in FOREIGN_STEPS
            for e in entries
        )

    def _last_of_each_name(self) -> list[Entry]:
        return list({entry.name: entry for entry in self.entries}.values())

    def own_nccl(self) -> bool:
        """Whether node1 holds a whole nccl-tests output of its own."""
        return self.node1 == "folder" and any(
            e.kind == "file" and e.content in (NCCL.encode(), HUGE)
            for e in self._last_of_each_name()
        )


hostile_folders = st.builds(
    Hostile,
    st.lists(entries, max_size=6),
    st.sampled_from(["folder", "folder", "folder", "link-node2", "link-outside"]),
    st.one_of(st.none(), odd_names),
    st.booleans(),
)


def make(base: Path, hostile: Hostile) -> Path:
    """The honest two-node run with node1's folder replaced by the hostile one."""
    run = honest_run(base, hostile.run_json)
    node1 = run / "raw" / "node1"
    for path in node1.iterdir():
        path.unlink()
    if hostile.node1 != "folder":
        node1.rmdir()
        node1.symlink_to(run / "raw" / "node2" if hostile.node1 == "link-node2" else base)
    else:
        for entry in hostile.entries:
            _write(os.fsencode(node1) + b"/" + entry.name, entry, base)
    if hostile.odd_host is not None:
        os.mkdir(os.fsencode(run / "raw") + b"/" + hostile.odd_host)
    return run


def _write(path: bytes, entry: Entry, base: Path) -> None:
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.unlink(path)
    if entry.kind == "folder":
        os.mkdir(path)
    elif entry.kind == "link":
        os.symlink(str(entry.content).replace(ABSOLUTE_SECRET, str(base / "secret.txt")), path)
    else:
        content = entry.content
        if entry.kind == "sidecar" and not isinstance(content, bytes):
            raw = content.get("raw") if isinstance(content, dict) else None
            if raw == ABSOLUTE_SECRET:
                content = {**content, "raw": str(base / "secret.txt")}
            content = json.dumps(content).encode()
        with open(path, "wb") as file:
            file.write(content)


def snapshot(base: Path) -> dict[str, bytes | str]:
    """Every entry under base but the run folder's outputs and the history database: a
    file's bytes, a link's target, a folder."""
    found: dict[str, bytes | str] = {}
    for folder, folders, files in os.walk(os.fsencode(base)):
        for name in folders + files:
            path = os.path.join(folder, name)
            key = os.fsdecode(os.path.relpath(path, os.fsencode(base)))
            if os.path.islink(path):
                found[key] = "-> " + os.fsdecode(os.readlink(path))
            elif os.path.isfile(path):
                found[key] = Path(os.fsdecode(path)).read_bytes()
            else:
                found[key] = "folder"
    return found


HISTORY = {"history.sqlite", "history.sqlite-journal"}


def parse_cache_entries(paths: set[str]) -> set[str]:
    """The controller's own parse cache (run/parse-cache/<host>.pickle, beside raw/, never in
    it): a report into the run folder keeps what it parsed there, one plain file per host."""
    return {
        path for path in paths
        if path == "run/parse-cache"
        or (path.startswith("run/parse-cache/") and "/" not in path.removeprefix("run/parse-cache/")
            and path.endswith(".pickle"))
    }  # fmt: skip


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(hostile=hostile_folders)
def test_a_hostile_run_folder_is_judged_without_reading_outside_it(hostile: Hostile) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        run = make(base, hostile)
        before = snapshot(base)
        reported = report(run)
        after = snapshot(base)

        # never writes outside the run folder (but the reports folder's history), nor into raw/
        changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        assert (
            changed - parse_cache_entries(changed) <= {f"run/{name}" for name in OUTPUTS} | HISTORY
        )
        # never reads outside the host's own folder: no planted secret reaches any output
        assert_nothing_leaked(base, reported)
        # every output written whole
        assert "a gpuval bug" not in reported.printed
        assert all((run / name).is_file() for name in OUTPUTS)
        # a verdict no better than the evidence
        assert reported.results is not None
        verdict = reported.results["verdict"]
        assert reported.code == EXIT_CODES[verdict]
        for entry in reported.results["files"]:
            assert entry["path"].startswith(f"raw/{entry['host']}/")
        for attempt in reported.results["pairs"].get("tries", []):
            assert attempt["path"] in ("run.json", f"raw/{attempt['host']}") or attempt[
                "path"
            ].startswith(f"raw/{attempt['host']}/")
        if hostile.breaks_the_rule():
            assert verdict == "error"
        if not hostile.run_json:
            assert verdict not in ("pass", "warn")
        for check in reported.checks_of("node1"):  # judged on its own files only
            assert not (check["source"] or "raw/node1/").startswith(("raw/node2", "raw/node3"))
        if not hostile.own_nccl():
            assert verdict != "pass"
