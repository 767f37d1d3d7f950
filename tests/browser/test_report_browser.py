"""The report in a real browser: charts drawn, no script errors, and a page that is not blank.

Runs headless Chromium offline on the file; the page records in <body> how many charts
Plotly drew (`data-charts-rendered`) and every script error (`data-script-errors`).
"""

from __future__ import annotations

import html
import json
import re
import struct
import subprocess
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from tests.report_fixtures import judge, write_run

from gpuval.report.writers import write_report_files

pytestmark = pytest.mark.browser

Browser = Callable[..., subprocess.CompletedProcess[str]]  # the `chromium` fixture (conftest)


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
    """An 8-bit RGB or RGBA, non-interlaced PNG, as Chromium writes its screenshots (read
    here with zlib, so no imaging library is needed)."""
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


@dataclass(frozen=True)
class Rendered:
    dom: str
    screenshot: Path
    pairs: bool  # whether the run had pair tests (and so a pair matrix to draw)


@pytest.fixture(scope="module", params=[4, 100], ids=["4-hosts", "100-hosts"])
def rendered(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, chromium: Browser
) -> Rendered:
    """The report of a judged run (tests/report_fixtures.py), opened once: its DOM after the
    scripts ran, and a screenshot. One host's collectives run at half speed; with 4 hosts,
    pair tests find another's slow NIC (100 hosts would have 9,900 pairs)."""
    hosts = [f"gpu{i:03d}" for i in range(request.param)]
    hosts[1] = "<img src=x onerror=alert(1)>"  # a hostile name must stay text, not run
    pairs = len(hosts) == 4
    run = write_run(tmp_path_factory.mktemp("run"), hosts=hosts, slow_collectives=(hosts[2],),
                    slow_nic=hosts[1] if pairs else None, pairs=pairs)  # fmt: skip
    out = tmp_path_factory.mktemp("report")
    write_report_files(judge(run), out)
    shot = out / "report.png"
    done = chromium(out / "report.html", "--window-size=1400,3000", f"--screenshot={shot}",
                    "--dump-dom")  # fmt: skip
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    return Rendered(done.stdout, shot, pairs)


def body_attributes(dom: str) -> dict[str, str]:
    match = re.search(r"<body([^>]*)>", dom)
    assert match, "no <body> in the dumped DOM"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', match.group(1)))


def test_every_chart_renders_without_script_errors(rendered: Rendered) -> None:
    body = body_attributes(rendered.dom)
    expected = int(body["data-charts-expected"])
    assert expected > 0
    assert json.loads(html.unescape(body["data-script-errors"])) == []
    assert int(body["data-charts-rendered"]) == expected
    # Plotly drew into every placeholder (each gets an SVG of class main-svg)
    assert rendered.dom.count('class="main-svg"') >= expected
    assert "<img src=x" not in rendered.dom  # escaped text, never an element
    drew_pairs = re.search(r'class="gtitle"[^>]*>iperf3 TCP per pair', rendered.dom)
    assert bool(drew_pairs) == rendered.pairs  # Plotly drew the pair matrix


def test_screenshot_is_not_blank(rendered: Rendered) -> None:
    image = read_png(rendered.screenshot)
    assert (image.width, image.height) == (1400, 3000)
    rgb = image.pixels[:, :, :3].reshape(-1, 3).astype(np.uint32)
    colours = np.unique((rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2])
    assert len(colours) > 500, f"only {len(colours)} colours: blank or unstyled page"
    white = np.all(rgb == 255, axis=1).mean()
    assert white < 0.9, f"{white:.0%} of the page is white"
    # the verdict banner (FAIL: red #fee2e2 background) is near the top, and in it the count
    # of unjudged checks on a badge of its own colour (slate #cbd5e1)
    top = image.pixels[:400, :, :3].reshape(-1, 3)
    assert np.any(np.all(top == (0xFE, 0xE2, 0xE2), axis=1))
    assert np.any(np.all(top == (0xCB, 0xD5, 0xE1), axis=1))


def test_hosts_that_did_not_fail_are_shown_as_warned(rendered: Rendered) -> None:
    """No host that did not fail passes: ibstat was skipped on every host (a warning, no RDMA
    evidence) and p2p's output is cut short. The host table shows the badge, never a pass."""
    hosts = rendered.dom[rendered.dom.index('<section id="hosts">') :]
    hosts = hosts[: hosts.index("</section>")]
    badges = re.findall(r'<span class="status status-(\w+)">(\w+)</span>', hosts)
    assert all(kind == label for kind, label in badges)
    assert {label for _, label in badges} == {"fail", "warn"}


def test_a_host_named_like_a_link_is_text_in_the_charts(tmp_path: Path, chromium: Browser) -> None:
    """Plotly reads tags in legends and tick labels: a node that names itself like a link must
    show as that text, never as a link in the drawn chart."""
    link = '<a href="https:evil.example">node2'  # no '/': it names a folder of raw/
    run = write_run(tmp_path / "run", hosts=["node1", link, "node3", "node4"],
                    slow_collectives=(link,), slow_nic=link, pairs=True)  # fmt: skip
    out = tmp_path / "report"
    out.mkdir()
    write_report_files(judge(run), out)
    done = chromium(out / "report.html", "--window-size=1400,3000", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'data-charts-rendered="' in done.stdout
    assert "evil.example" in done.stdout  # the name is shown ...
    assert not re.search(r"<a[^>]*evil\.example", done.stdout)  # ... and is no link
