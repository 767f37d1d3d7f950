"""Headless Chromium for the browser tests, and a PNG reader so no imaging library is needed."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

# The realistic hand-built run lives with the HTML unit tests; the browser test renders it too.
sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--virtual-time-budget=5000",
)

Browser = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Browser:
    """Run headless Chromium on a page with extra flags; skip when it is not installed."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("chromium is not installed (tests/setup/system-packages.sh installs it)")

    def run(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
        profile = tmp_path_factory.mktemp("chromium-profile")
        command = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *flags]
        return subprocess.run(
            [*command, page.resolve().as_uri()], capture_output=True, text=True, timeout=120
        )

    return run


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    pixels: NDArray[np.uint8]  # height x width x channels (RGB or RGBA)


def _unfilter(kind: int, line: NDArray[np.int64], previous: NDArray[np.int64], step: int) -> None:
    """Undo one PNG row filter in place (PNG spec, section 9). Sub and Up, the common ones in
    Chromium's screenshots, are vectorised; Average and Paeth go pixel by pixel."""
    if kind == 1:
        pixels = line.reshape(-1, step)
        pixels[:] = np.cumsum(pixels, axis=0) & 0xFF
    elif kind == 2:
        line[:] = (line + previous) & 0xFF
    elif kind in (3, 4):
        out, up_row = line.tolist(), previous.tolist()  # plain ints: much faster per element
        for i, value in enumerate(out):
            left = out[i - step] if i >= step else 0
            up = up_row[i]
            if kind == 3:
                out[i] = (value + (left + up) // 2) & 0xFF
                continue
            corner = up_row[i - step] if i >= step else 0
            guess = left + up - corner
            pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
            nearest = left if pa <= pb and pa <= pc else up if pb <= pc else corner
            out[i] = (value + nearest) & 0xFF
        line[:] = out


def read_png(path: Path) -> Image:
    """An 8-bit RGB or RGBA, non-interlaced PNG, as Chromium writes its screenshots."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    offset, compressed, header = 8, b"", b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            compressed += body
        offset += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, "unsupported PNG layout"
    channels = 3 if colour == 2 else 4
    stride = width * channels
    raw = np.frombuffer(zlib.decompress(compressed), dtype=np.uint8).reshape(height, stride + 1)
    rows = raw[:, 1:].astype(np.int64)
    previous = np.zeros(stride, dtype=np.int64)
    for y in range(height):
        _unfilter(int(raw[y, 0]), rows[y], previous, channels)
        previous = rows[y]
    return Image(width, height, rows.astype(np.uint8).reshape(height, width, channels))
