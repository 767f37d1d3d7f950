"""Line and number helpers shared by the parsers: the noise every tool's output carries in the
wild."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# Line prefixes of launchers: Open MPI `mpirun --tag-output` ("[1,0]<stdout>:"), torchrun
# `--tee` ("[host:0]:"), Intel MPI / MPICH `-prepend-rank` ("[0] ").
_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<(?:stdout|stderr)>:\s?|\[[^\]\s]+:\d+\]:\s?|\[\d+\](?: |$))")


# How much of a file the detectors of inventory tools (p2pBandwidthLatencyTest, nvidia-smi) read:
# their whole output fits well within it, while a benchmark log can run to 100 MB and would cost
# each detector a full scan. Benchmark detectors still scan everything: their markers may follow
# megabytes of NCCL INFO lines.
DETECT_WINDOW = 1 << 20


@dataclass(frozen=True, slots=True)
class Line:
    """One line of input, with its 1-based number in the file and launcher prefixes removed."""

    number: int
    text: str


def strip_launcher_prefix(text: str) -> str:
    """Remove one launcher prefix (mpirun tag, torchrun tee, prepended rank) if present."""
    if text[:1] != "[":
        return text
    return _PREFIX.sub("", text, count=1)


# Terminal control sequences: nvidia-smi 580 underlines the `topo` header ("\x1b[4mGPU0"),
# also when its output goes to a file.
_ANSI_SEQUENCE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def clean_lines(text: str) -> list[str]:
    """Each line's text (line N at index N - 1) with terminal control sequences and launcher
    prefixes removed: what `iter_lines` yields, without an object per line, for parsers whose
    loop sees every line of large files."""
    lines = text.splitlines()  # splits at carriage returns too: none is left at a line's end
    # The whole-text tests skip the per-line work for the usual text, which has neither.
    if "\x1b" in text:
        lines = [_ANSI_SEQUENCE.sub("", line) if "\x1b" in line else line for line in lines]
    if "[" in text:
        return [strip_launcher_prefix(line) if line[:1] == "[" else line for line in lines]
    return lines


def iter_lines(text: str) -> Iterator[Line]:
    """Yield each line with carriage returns, terminal control sequences and launcher prefixes
    removed."""
    for number, line in enumerate(clean_lines(text), start=1):
        yield Line(number, line)


# How much of a line a diagnostic quotes: it names the line, so a person can open the file there;
# copying all of it would make results.json grow with the text (a binary or minified file can
# be one line of megabytes).
QUOTED_CHARS = 160


def quoted(text: str, limit: int = QUOTED_CHARS) -> str:
    """`repr(text)`, of its first `limit` characters only (and how many more there were)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text) - limit} more characters)"


def clipped(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


_NUMBER_NOISE = str.maketrans("", "", "_,")


def parse_number(token: str) -> float | None:
    """A float from a printed cell ('1_073_741_824', '1.5e+02', '202818'); None for N/A or junk."""
    cleaned = token.strip().translate(_NUMBER_NOISE)
    if not cleaned or cleaned.upper() in {"N/A", "NA", "-", "NAN"}:
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def parse_int(token: str) -> int | None:
    """An integer from a printed cell; None for N/A, junk or a non-integral value."""
    value = parse_number(token)
    if value is None or value != int(value):
        return None
    return int(value)
