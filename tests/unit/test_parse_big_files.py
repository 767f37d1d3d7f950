"""Big raw files: read a block of lines at a time and binary content left undecoded, with the
results the whole text read at once would give."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuval import parsers
from gpuval.parsers.nccl_tests import parse, reader
from gpuval.records.base import ParseResult
from gpuval.records.nccl import NO_EXTRA, NcclRun

REAL = Path(__file__).resolve().parents[2] / "tests" / "data" / "outputs" / "nccl-tests"


@pytest.mark.parametrize("path", sorted(REAL.glob("*.txt")), ids=lambda p: p.name)
def test_lines_read_in_small_blocks_parse_as_the_whole_text(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = parsers.read_text(path)
    cut = text.rstrip("\n")  # a capture cut mid-write: its last line is judged apart
    whole, whole_cut = parse(text, source="x").to_dict(), parse(cut, source="x").to_dict()
    monkeypatch.setattr(reader, "_BLOCK", 7)  # a block boundary after nearly every line
    assert parse(text, source="x").to_dict() == whole
    assert parse(cut, source="x").to_dict() == whole_cut


def test_runs_of_a_long_log_share_what_every_run_repeats() -> None:
    """The column header, type names and an empty set of extra columns: one object each for
    the log, not one per run, row or half, and written as before."""
    text = "".join(parsers.read_text(p).rstrip("\n") + "\n" for p in sorted(REAL.glob("*.txt")))
    result = parse(text + text, source="x")
    runs: list[NcclRun] = [run for run in result.runs if run.rows and run.columns]
    first, again = runs[0], runs[len(runs) // 2]
    assert (again.columns, again.rows[0].dtype) == (first.columns, first.rows[0].dtype)
    assert again.columns is first.columns and again.rows[0].dtype is first.rows[0].dtype
    halves = [
        h for run in result.runs for row in run.rows for h in (row.out_of_place, row.in_place)
    ]
    plain = [half for half in halves if half is not None and not half.extra]
    assert plain and all(half.extra is NO_EXTRA for half in plain)
    document = json.loads(json.dumps(result.to_dict()))  # as results.json writes it
    assert document["runs"][0]["columns"] == list(result.runs[0].columns)
    written = [
        half["extra"]
        for run in document["runs"]
        for row in run["rows"]
        for half in (row["out_of_place"], row["in_place"])
        if half is not None
    ]
    assert written.count({}) == len(plain)


@pytest.mark.parametrize("text", ["a\r\nb\rc\n", "x\x0cy\u2028z", "\r\n\r", "", "tail"])
def test_blocks_split_lines_as_splitlines(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "_BLOCK", 1)
    found = reader.TextReader(ParseResult("nccl-tests"))
    lines = [line for block in found._blocks(text) for line in block]
    assert lines == text.splitlines()
    cut = len(lines) if text and text[-1] not in "\r\n" else None
    assert found.cut_line == cut


def test_text_reads_with_universal_newlines_and_replaced_bytes(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"one\r\ntwo\rthree\xff\n")
    assert parsers.read_text(path) == path.read_text(encoding="utf-8", errors="replace")
    assert parsers.read_text(path) == "one\ntwo\nthree\ufffd\n"


def test_binary_file_reads_as_empty_and_is_not_recognised(tmp_path: Path) -> None:
    path = tmp_path / "core.raw"
    path.write_bytes(os.urandom(1 << 17))
    assert parsers.read_text(path) == ""
    assert parsers.parse_file(path) is None
    named = parsers.parse_file(path, tool="nccl-tests")
    assert named is not None and not named.runs and named.errors


def test_small_file_with_bad_bytes_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "junk.bin"
    path.write_bytes(b"\x00\xff garbage \x89PNG")
    assert parsers.read_text(path) == "\x00\ufffd garbage \ufffdPNG"
