"""The report in a real browser: charts drawn, no script errors, and a page that is not blank.

Runs headless Chromium offline on the file; the page records in <body> how many charts
Plotly drew (`data-charts-rendered`) and every script error (`data-script-errors`).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import Browser, read_png
from test_report_html import realistic_results

from gpuval.report import write_report_files

pytestmark = pytest.mark.browser


@dataclass(frozen=True)
class Rendered:
    dom: str
    screenshot: Path


@pytest.fixture(scope="module", params=[4, 100], ids=["4-hosts", "100-hosts"])
def rendered(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, chromium: Browser
) -> Rendered:
    """The report of a realistic run, opened once: its DOM after the scripts ran, a screenshot."""
    hosts = [f"gpu{i:03d}" for i in range(request.param)]
    hosts[1] = "<script>alert(1)</script>"  # a hostile name must stay text, not run
    out = tmp_path_factory.mktemp("report")
    write_report_files(realistic_results(hosts=hosts, degraded=(hosts[2],)), out)
    shot = out / "report.png"
    done = chromium(out / "report.html", "--window-size=1400,3000", f"--screenshot={shot}",
                    "--dump-dom")  # fmt: skip
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    return Rendered(done.stdout, shot)


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
    assert "<script>alert(1)</script>" not in rendered.dom  # escaped text, never an element


def test_screenshot_is_not_blank(rendered: Rendered) -> None:
    image = read_png(rendered.screenshot)
    assert (image.width, image.height) == (1400, 3000)
    rgb = image.pixels[:, :, :3].reshape(-1, 3).astype(np.uint32)
    colours = np.unique((rgb[:, 0] << 16) | (rgb[:, 1] << 8) | rgb[:, 2])
    assert len(colours) > 500, f"only {len(colours)} colours: blank or unstyled page"
    white = np.all(rgb == 255, axis=1).mean()
    assert white < 0.9, f"{white:.0%} of the page is white"
    # the verdict banner (FAIL: red #fee2e2 background) is near the top
    top = image.pixels[:400, :, :3].reshape(-1, 3)
    assert np.any(np.all(top == (0xFE, 0xE2, 0xE2), axis=1))
