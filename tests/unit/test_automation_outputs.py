"""Outputs for schedulers and dashboards: the Prometheus textfile (read back with
prometheus-client's own parser) and the webhook on a failing run, whose URL is never printed
or written."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.sample_runs import sample_copy

from gpuval.cli import main
from gpuval.report.webhook import WEBHOOK_ENV, send


def samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_the_prometheus_file_holds_the_key_gauges_per_host(tmp_path: Path) -> None:
    run = sample_copy(tmp_path, "nightly", "2026-11-22T02:00:00Z")
    textfile = tmp_path / "textfile" / "gpuval.prom"
    assert main(["report", str(run), "--quiet", "--prometheus", str(textfile)]) == 1
    assert textfile.read_text() == (run / "gpuval.prom").read_text()
    found = samples(textfile)
    # published outputs: the plateau floors (256 MiB and up) of the 4x H100 all_reduce, 339.81
    # GB/s, and of the 8x A100 one, 222.72 (at 512 MiB); the 8x H100 p2p minimum, 363.43
    assert (
        found[("gpuval_busbw_gbps", (("collective", "all_reduce"), ("host", "lambda-4xh100")))]
        == 339.81
    )
    assert (
        found[("gpuval_busbw_gbps", (("collective", "all_reduce"), ("host", "dgx-8xa100")))]
        == 222.72
    )
    assert found[("gpuval_p2p_min_gbps", (("host", "dgx-8xh100"),))] == 363.43
    assert found[("gpuval_run_verdict", (("verdict", "fail"),))] == 1
    assert found[("gpuval_run_verdict", (("verdict", "pass"),))] == 0
    assert found[("gpuval_host_status", (("host", "dgx-8xa100"), ("status", "fail")))] == 1
    assert found[("gpuval_host_checks", (("host", "dgx-8xa100"), ("status", "fail")))] == 2
    # 2026-11-22T02:00:00Z
    assert found[("gpuval_run_timestamp_seconds", ())] == 1795312800.0
    info = [labels for (name, labels) in found if name == "gpuval_run_info"]
    assert dict(info[0])["run_id"] == "nightly"


class Receiver(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict[str, Any]]] = []
    status: ClassVar[int] = 200

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        Receiver.bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(Receiver.status)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.bodies, Receiver.status = [], 200
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hooks/T000/B000/secret-token"
    server.shutdown()


def test_a_failing_run_is_posted_to_the_webhook_which_is_never_printed_or_written(
    tmp_path: Path, receiver: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    run = sample_copy(tmp_path, "nightly", "2026-11-22T02:00:00Z")
    monkeypatch.setenv(WEBHOOK_ENV, receiver)
    assert main(["report", str(run)]) == 1
    output = capsys.readouterr()
    assert "webhook notified (HTTP 200)" in output.err
    (body,) = Receiver.bodies
    assert body["verdict"] == "fail" and body["run_id"] == "nightly"
    assert body["text"].startswith("gpuval run nightly: FAIL, 2 failing check(s)")
    assert {c["check_id"] for c in body["failing_checks"]} == {
        "nccl-tests.all_reduce.complete", "nccl-tests.all_reduce.correctness",
    }  # fmt: skip
    assert "secret-token" not in output.out + output.err
    for path in run.rglob("*"):
        if path.is_file():
            assert b"secret-token" not in path.read_bytes(), path


def test_a_passing_run_notifies_nobody_and_a_broken_receiver_is_reported_without_its_url(
    tmp_path: Path, receiver: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    good = sample_copy(tmp_path, "good", "2026-11-22T02:00:00Z", hosts=["lambda-4xh100"])
    bad = sample_copy(tmp_path, "bad", "2026-11-22T03:00:00Z")
    monkeypatch.setenv(WEBHOOK_ENV, receiver)
    assert main(["report", str(good), "--quiet"]) == 0
    assert Receiver.bodies == []
    Receiver.status = 500
    monkeypatch.setenv(WEBHOOK_ENV, receiver)
    assert main(["report", str(bad), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "webhook notification failed: the receiver answered HTTP 500" in err
    closed = receiver.rsplit(":", 1)[0] + ":9/hooks/secret-token"  # the discard port: refused
    monkeypatch.setenv(WEBHOOK_ENV, closed)
    assert main(["report", str(bad), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "webhook notification failed: Connection refused" in err
    assert "secret-token" not in err


MALFORMED_URLS = {
    "no scheme": "127.0.0.1/hooks/secret-token",
    "port out of range": "https://127.0.0.1:99999/hooks/secret-token",
    "port not a number": "https://127.0.0.1:4x3/hooks/secret-token",
    "a space": "https://127.0.0.1/hooks/secret-token and-more",
    "a newline inside": "https://127.0.0.1/hooks/secret\n-token",
    "non-ASCII": "https://127.0.0.1/hooks/sécret-token",
    "broken IPv6 address": "https://[::1/hooks/secret-token",
}


@pytest.mark.parametrize("url", MALFORMED_URLS.values(), ids=MALFORMED_URLS.keys())
@pytest.mark.parametrize("command", ["report", "run"])
def test_a_malformed_webhook_url_is_refused_before_anything_without_showing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    url: str, command: str,
) -> None:  # fmt: skip
    run = sample_copy(tmp_path, "nightly", "2026-11-22T02:00:00Z")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    monkeypatch.setenv(WEBHOOK_ENV, url)
    arguments = {
        "report": ["report", str(run)],
        "run": ["run", "-i", str(tmp_path / "hosts.ini"), "--reports", str(tmp_path)],
    }[command]
    assert main(arguments) == 2
    output = capsys.readouterr()
    assert f"gpuval {command}: $GPUVAL_WEBHOOK_URL is not a usable URL: " in output.err
    assert "Traceback" not in output.err
    for part in ("hooks", "-token", "127.0.0.1", "::1"):
        assert part not in output.out + output.err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("url", MALFORMED_URLS.values(), ids=MALFORMED_URLS.keys())
def test_sending_to_a_malformed_url_says_so_without_it(url: str) -> None:
    said = send(url, {"text": "x"})
    assert said.startswith("webhook notification failed: ")
    assert "hooks" not in said and "-token" not in said
