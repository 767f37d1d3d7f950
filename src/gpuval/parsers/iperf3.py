"""iperf3 JSON output (`-J`, and `--json-stream` events), client or server side.

Structure (esnet/iperf src/iperf_api.c): `start` {connected: [{local_host, remote_host, ...}],
version, system_info, timestamp {time}, connecting_to {host, port} (client) or
accepted_connection {host, port} (server), test_start {protocol, num_streams, duration,
reverse, bidir, ...}}, `intervals` [{streams, sum, and with --bidir sum_bidir_reverse}],
`end` {streams, sum_sent, sum_received (TCP; UDP since 3.x too), sum (UDP: jitter_ms,
lost_packets, packets, lost_percent), with --bidir sum_sent_bidir_reverse /
sum_received_bidir_reverse, cpu_utilization_percent, sender/receiver_tcp_congestion}, and
`error` when the test failed (often with empty `end`, or a document holding only `error`).
A file may hold several documents one after another; text between them is reported.
`--json-stream` (3.10+) prints one {"event": start|interval|end|error, "data": ...} per line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from gpuval.records.base import ParseResult
from gpuval.records.network import Iperf3Run, IperfInterval, IperfSum

TOOLS = ("iperf3",)

_DECODER = json.JSONDecoder()


def detect(text: str) -> tuple[str, int] | None:
    head = text[:1_000_000]
    if '"start"' in head and any(
        key in head for key in ('"test_start"', '"connecting_to"', '"accepted_connection"')
    ):
        return "iperf3", 90
    if '"event"' in head and '"data"' in head and '"interval"' in head:
        return "iperf3", 85
    if '"error - ' in head or ('"version"' in head and '"iperf 3' in head):
        return "iperf3", 60
    return None


def parse(text: str, source: str | None = None, tool: str | None = None) -> ParseResult:
    result = ParseResult(tool="iperf3", source=source)
    stream: dict[str, Any] | None = None
    stream_line = 0
    for line, document in _documents(text, result):
        if not isinstance(document, dict):
            result.warn(f"JSON value is not an object: {str(document)[:60]!r}", line)
            continue
        if "event" in document and "data" in document:
            if document["event"] == "start" and stream is not None:
                result.runs.append(_run(stream, stream_line, result))
                stream = None
            if stream is None:
                stream, stream_line = {"intervals": []}, line
            _add_event(stream, document, line, result)
            continue
        result.runs.append(_run(document, line, result))
    if stream is not None:
        result.runs.append(_run(stream, stream_line, result))
    if not result.runs and not result.errors:
        result.error("no iperf3 JSON document found (run iperf3 with -J)")
    return result


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _documents(text: str, result: ParseResult) -> Iterator[tuple[int, Any]]:
    """Every top-level JSON value in `text`; text between them is reported, not dropped."""
    position = 0
    while True:
        brace = text.find("{", position)
        between = text[position : len(text) if brace == -1 else brace].strip()
        if between:
            offset = position + text[position:].index(between[0])
            result.warn(
                f"text outside the JSON documents: {between[:80]!r}", _line_of(text, offset)
            )
        if brace == -1:
            return
        try:
            document, position = _DECODER.raw_decode(text, brace)
        except json.JSONDecodeError as problem:
            result.error(
                f"JSON document cut short or malformed: {problem.msg}", _line_of(text, problem.pos)
            )
            return
        yield _line_of(text, brace), document


def _add_event(
    stream: dict[str, Any], event: dict[str, Any], line: int, result: ParseResult
) -> None:
    kind, data = event["event"], event["data"]
    if kind == "start":
        stream["start"] = data
    elif kind == "interval":
        stream["intervals"].append(data)
    elif kind == "end":
        stream["end"] = data
    elif kind == "error":
        stream["error"] = data
    elif kind != "server_output_json":
        result.warn(f"unknown --json-stream event {kind!r}", line)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _integer(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        return None
    return int(value)


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _sum(value: Any) -> IperfSum | None:
    if not isinstance(value, dict):
        return None
    return IperfSum(
        bytes=_integer(value.get("bytes")),
        bits_per_second=_number(value.get("bits_per_second")),
        seconds=_number(value.get("seconds")),
        retransmits=_integer(value.get("retransmits")),
        jitter_ms=_number(value.get("jitter_ms")),
        lost_packets=_integer(value.get("lost_packets")),
        packets=_integer(value.get("packets")),
        lost_percent=_number(value.get("lost_percent")),
    )


def _intervals(entries: Any) -> list[IperfInterval]:
    intervals = []
    for entry in entries if isinstance(entries, list) else []:
        for key, reverse in (("sum", False), ("sum_bidir_reverse", True)):
            total = _dict(_dict(entry).get(key))
            if total:
                intervals.append(
                    IperfInterval(
                        start=_number(total.get("start")),
                        end=_number(total.get("end")),
                        bytes=_integer(total.get("bytes")),
                        bits_per_second=_number(total.get("bits_per_second")),
                        retransmits=_integer(total.get("retransmits")),
                        omitted=total.get("omitted")
                        if isinstance(total.get("omitted"), bool)
                        else None,
                        bidir_reverse=reverse,
                    )
                )
    return intervals


def _run(document: dict[str, Any], line: int, result: ParseResult) -> Iperf3Run:
    start = _dict(document.get("start"))
    test_start = _dict(start.get("test_start"))
    connecting_to = _dict(start.get("connecting_to"))
    accepted = _dict(start.get("accepted_connection"))
    connected = start.get("connected")
    first = _dict(connected[0]) if isinstance(connected, list) and connected else {}
    peer = connecting_to or accepted
    end = _dict(document.get("end"))
    cpu = _dict(end.get("cpu_utilization_percent"))
    error = document.get("error")
    run = Iperf3Run(
        role="client" if connecting_to else "server" if accepted else None,
        version=_string(start.get("version")),
        system_info=_string(start.get("system_info")),
        timestamp=_string(_dict(start.get("timestamp")).get("time")),
        title=_string(document.get("title")),
        remote_host=_string(peer.get("host")) or _string(first.get("remote_host")),
        remote_port=_integer(peer.get("port")) or _integer(first.get("remote_port")),
        local_host=_string(first.get("local_host")),
        protocol=_string(test_start.get("protocol")),
        num_streams=_integer(test_start.get("num_streams")),
        duration=_number(test_start.get("duration")),
        reverse=bool(test_start.get("reverse")),
        bidir=bool(test_start.get("bidir")),
        sent=_sum(end.get("sum_sent")),
        received=_sum(end.get("sum_received")),
        sent_bidir_reverse=_sum(end.get("sum_sent_bidir_reverse")),
        received_bidir_reverse=_sum(end.get("sum_received_bidir_reverse")),
        udp_sum=_sum(end.get("sum")),
        intervals=_intervals(document.get("intervals")),
        host_cpu_percent=_number(cpu.get("host_total")),
        remote_cpu_percent=_number(cpu.get("remote_total")),
        sender_tcp_congestion=_string(end.get("sender_tcp_congestion")),
        receiver_tcp_congestion=_string(end.get("receiver_tcp_congestion")),
        error=str(error) if error is not None else None,
        complete=False,
        line=line,
    )
    has_totals = any(t is not None for t in (run.sent, run.received, run.udp_sum))
    run.complete = run.error is None and has_totals
    if run.error is not None:
        result.error(f"iperf3 reported: {run.error}", line)
    elif not has_totals:
        result.warn("iperf3 document has no end totals (test cut short?)", line)
    return run
