"""Big raw files: read a block of lines at a time and binary content left undecoded, with the
results the whole text read at once would give."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuval import parsers
from gpuval.parsers.nccl_tests import parse, parse_path, reader
from gpuval.records.nccl import NO_EXTRA, NcclRun

REAL = Path(__file__).resolve().parents[2] / "tests" / "data" / "outputs" / "nccl-tests"


@pytest.mark.parametrize("path", sorted(REAL.glob("*.txt")), ids=lambda p: p.name)
def test_lines_read_in_small_blocks_parse_as_the_whole_text(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = parsers.read_text(path)
    cut = text.rstrip("\n")  # a capture cut mid-write: its last line is judged apart
    whole, whole_cut = parse(text, source="x").to_dict(), parse(cut, source="x").to_dict()
    monkeypatch.setattr(reader, "BLOCK", 7)  # a block boundary after nearly every line
    assert parse(text, source="x").to_dict() == whole
    assert parse(cut, source="x").to_dict() == whole_cut
    assert parse_path(path, source="x", tool=whole["tool"]).to_dict() == whole


@pytest.mark.parametrize("block", [1, 2, 3, 5, 64])
def test_a_file_read_a_block_at_a_time_parses_as_its_whole_text(
    block: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Universal newlines, bytes that are no UTF-8 and multi-byte characters wherever a block
    ends: the lines, their numbers and the result are those of the text read whole."""
    log = "".join(parsers.read_text(p) for p in sorted(REAL.glob("*.txt"))[:6])
    data = log.encode().replace(b"\n", b"\r\n", 40).replace(b"\n", b"\r", 20)
    data = data.replace(b"# ", b"# \xe2\x82\xac \xff\xc3 ", 30) + b"#  1024 \xe2\x82"
    path = tmp_path / "log.txt"
    path.write_bytes(data)
    whole = parsers.parse_text(parsers.read_text(path), source="x", tool="nccl-tests")
    monkeypatch.setattr(reader, "BLOCK", block)
    streamed = parsers.parse_file(path, tool="nccl-tests", source="x")
    assert whole is not None and streamed is not None
    assert streamed.to_dict() == whole.to_dict()
    detected = parsers.parse_file(path, source="x")
    assert detected is not None and detected.to_dict() == whole.to_dict()


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


@pytest.mark.parametrize("text", ["a\r\nb\rc\n", "x\x0cy\u2028z", "\r\n\r", "", "tail", "a\nb\r"])
@pytest.mark.parametrize("block", [1, 2, 1 << 20])
def test_blocks_split_lines_as_splitlines(
    text: str, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "BLOCK", block)
    blocks = list(reader.line_blocks(reader.text_chunks(text)))
    lines = [line for block_lines, _ in blocks for line in block_lines]
    assert lines == text.splitlines()
    cut = bool(text) and text[-1] not in "\r\n"
    assert [ends_cut for _, ends_cut in blocks] == [False] * (len(blocks) - 1) + [cut] * bool(
        blocks
    )


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
