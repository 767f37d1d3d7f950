"""iperf3 JSON parser: real -J documents, error documents, several per file, streams, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuval.parsers import iperf3
from gpuval.records.base import ParseResult
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs" / "iperf3"
REAL_FILES = sorted(p for p in DATA.iterdir() if p.name != "README.md")
TCP = (DATA / "openwisp-iperf3.9-tcp-client.json").read_text()
REFUSED = (DATA / "openwisp-iperf3.7-connect-refused.json").read_text()


def parse(text: str) -> ParseResult:
    result = iperf3.parse(text, source="test.json")
    validate(result.to_dict(), "parse-result")
    return result


def test_tcp_client_totals_as_in_the_json() -> None:
    result = parse(TCP)
    assert not result.warnings and not result.errors
    (run,) = result.runs
    assert (run.role, run.version, run.protocol, run.num_streams, run.duration) == (
        "client",
        "iperf 3.9",
        "TCP",
        1,
        10.0,
    )
    assert (run.remote_host, run.remote_port, run.local_host) == ("localhost", 5201, "127.0.0.1")
    assert run.sent is not None and run.received is not None
    assert (run.sent.bytes, run.sent.bits_per_second, run.sent.retransmits) == (
        55054172160,
        44042377604.16823,
        0,
    )
    assert run.received.bits_per_second == 44042139781.797935
    assert len(run.intervals) == 10 and run.intervals[0].bytes == 5790760960
    assert run.host_cpu_percent == 99.49882081069975 and run.sender_tcp_congestion == "cubic"
    assert run.complete and not run.reverse and not run.bidir


def test_udp_client_jitter_and_loss() -> None:
    (run,) = parse((DATA / "openwisp-iperf3.9-udp-client.json").read_text()).runs
    assert run.protocol == "UDP" and run.sent is None
    assert run.udp_sum is not None
    assert (run.udp_sum.packets, run.udp_sum.lost_packets, run.udp_sum.jitter_ms) == (
        40,
        0,
        0.011259258240784126,
    )
    assert run.complete


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("openwisp-iperf3.7-connect-refused.json", "unable to connect to server"),
        ("openwisp-iperf3.7-auth-failed.json", "test authorization failed"),
    ],
)
def test_error_documents_become_failed_runs(name: str, message: str) -> None:
    result = parse((DATA / name).read_text())
    (run,) = result.runs
    assert run.error is not None and message in run.error and not run.complete
    assert [e.line for e in result.errors] == [1]


def test_bare_error_object() -> None:
    result = parse('{"error": "error - unable to connect to server: Connection refused"}')
    assert result.runs[0].error == "error - unable to connect to server: Connection refused"


def test_concatenated_documents_and_text_between_them() -> None:
    text = TCP + "iperf3: interrupt - the client has terminated\n" + REFUSED
    result = parse(text)
    assert [r.complete for r in result.runs] == [True, False]
    tcp_lines = TCP.count("\n")
    assert result.runs[1].line == tcp_lines + 2
    assert [w.line for w in result.warnings] == [tcp_lines + 1]


def test_bidirectional_client_keeps_both_directions() -> None:
    (run,) = parse((DATA / "SYNTHETIC-iperf3.17-bidir-client.json").read_text()).runs
    assert run.bidir and run.remote_host == "node-b"
    assert run.sent_bidir_reverse is not None and run.sent_bidir_reverse.retransmits == 12
    assert [i.bidir_reverse for i in run.intervals] == [False, True, False, True]


def _document(**start: object) -> dict[str, object]:
    """SYNTHETIC: the iperf_api.c layout with the fields the tests vary."""
    return {
        "start": {
            "connected": [
                {"local_host": "10.0.0.2", "remote_host": "10.0.0.1", "remote_port": 40000}
            ],
            "version": "iperf 3.16",
            **start,
        },
        "intervals": [],
        "end": {
            "sum_sent": {"bytes": 10, "bits_per_second": 8.0, "retransmits": 1},
            "sum_received": {"bytes": 10, "bits_per_second": 8.0},
        },
    }


def test_reverse_client_and_server_side_documents() -> None:
    reverse = _document(
        connecting_to={"host": "node-b", "port": 5201},
        test_start={"protocol": "TCP", "reverse": 1, "bidir": 0},
    )
    server = _document(
        accepted_connection={"host": "10.0.0.1", "port": 40000},
        test_start={"protocol": "TCP", "reverse": 0},
    )
    runs = parse(json.dumps(reverse) + "\n" + json.dumps(server, indent=1)).runs
    assert [(r.role, r.reverse, r.remote_host, r.remote_port) for r in runs] == [
        ("client", True, "node-b", 5201),
        ("server", False, "10.0.0.1", 40000),
    ]


def test_json_stream_events_are_put_back_together() -> None:
    start = _document(connecting_to={"host": "node-b", "port": 5201})["start"]
    events = [
        {"event": "start", "data": start},
        {
            "event": "interval",
            "data": {
                "sum": {
                    "start": 0,
                    "end": 1.0,
                    "bytes": 5,
                    "bits_per_second": 40.0,
                    "omitted": False,
                }
            },
        },
        {"event": "end", "data": {"sum_sent": {"bytes": 5, "bits_per_second": 40.0}}},
    ]  # SYNTHETIC, in the --json-stream shape shown in esnet/iperf PR #1098
    (run,) = parse("\n".join(json.dumps(e) for e in events)).runs
    assert run.remote_host == "node-b" and run.complete
    assert [(i.bytes, i.omitted) for i in run.intervals] == [(5, False)]


def test_truncated_document_is_an_error_with_the_line() -> None:
    cut = TCP[: TCP.index('"end": {')]
    result = parse(cut)
    assert result.runs == [] and result.errors[0].line == cut.count("\n") + 1


def test_document_without_end_is_warned() -> None:
    result = parse(json.dumps({"start": {"connecting_to": {"host": "x", "port": 1}}}))
    assert not result.runs[0].complete and [w.line for w in result.warnings] == [1]


@pytest.mark.parametrize("text", ["", "Connecting to host 10.0.0.2, port 5201\n", "[1, 2]", "{"])
def test_bad_input_never_raises(text: str) -> None:
    result = parse(text)
    assert result.errors or result.warnings
