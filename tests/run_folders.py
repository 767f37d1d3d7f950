"""Writing run folders for tests, laid out as the playbook lays them out: raw/<host>/<step>.<ext>
with a <step>.meta.json sidecar (sidecar.schema.json), pair steps named as the pair phase names
them, and iperf3 -J documents at a chosen rate; and judging pair files held in memory."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuval.checks.pairs import PairAnalysis, PairThresholds, analyse_pairs
from gpuval.evidence import build_evidence, pair_evidence
from gpuval.plan.host_order import circle_rounds
from gpuval.plan.steps import pair_step_name
from gpuval.runfolder import RawFile, RunFolder

IPERF3_OUTPUTS = Path(__file__).parent / "data" / "outputs" / "iperf3"
# A real iperf 3.9 TCP client run (-J); each pair file is this document at another rate.
IPERF3_TEMPLATE: dict[str, Any] = json.loads(
    (IPERF3_OUTPUTS / "openwisp-iperf3.9-tcp-client.json").read_text()
)
IPERF3_REFUSED = (IPERF3_OUTPUTS / "openwisp-iperf3.7-connect-refused.json").read_text()


def write_step(run: Path, host: str, name: str, text: str | None, **fields: Any) -> None:
    """raw/<host>/<name>.<ext> holding `text` (none when the step was skipped) and its sidecar;
    `fields` override the sidecar's (raw_ext: the file's ending, "txt" by default)."""
    folder = run / "raw" / host
    folder.mkdir(parents=True, exist_ok=True)
    raw = f"{name}.{fields.pop('raw_ext', 'txt')}" if text is not None else None
    if raw is not None and text is not None:
        (folder / raw).write_text(text)
    sidecar = {
        "schema_version": 1, "name": name, "host": host, "phase": "intranode", "raw": raw,
        "command": name, "tool": None, "cwd": None, "env": {}, "exit_code": 0,
        "timed_out": False, "timeout_s": None, "started_at": None, "ended_at": None,
        "duration_s": None, "skipped": None, **fields,
    }  # fmt: skip
    (folder / f"{name}.meta.json").write_text(json.dumps(sidecar))


def write_run_json(run: Path, run_id: str, hosts: list[str], **keys: Any) -> None:
    document = {"run_id": run_id, "started_at": None, "hosts": hosts, "config": {}, **keys}
    (run / "run.json").write_text(json.dumps(document, indent=2))


def _scaled(node: Any, factor: float) -> None:
    """Every bits_per_second and bytes of the document times `factor` (intervals and totals)."""
    if isinstance(node, list):
        for item in node:
            _scaled(item, factor)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "bits_per_second":
                node[key] = value * factor
            elif key == "bytes" and isinstance(value, int):
                node[key] = round(value * factor)
            else:
                _scaled(value, factor)


def iperf3_json(server: str, gbps: float | None, reverse: bool) -> str:
    """The client's document of one direction at `gbps` received; None: connection refused."""
    if gbps is None:
        return IPERF3_REFUSED
    document = copy.deepcopy(IPERF3_TEMPLATE)
    _scaled(document, gbps * 1e9 / IPERF3_TEMPLATE["end"]["sum_received"]["bits_per_second"])
    document["start"]["connecting_to"]["host"] = server
    document["start"]["test_start"]["reverse"] = int(reverse)
    return json.dumps(document, indent=2)


def iperf3_pair_steps(hosts: list[str]) -> Iterator[tuple[str, str, str, str]]:
    """(client, sender, receiver, step name) of every first try: the client (first host of the
    pair) runs `iperf3 -c peer -J` and `iperf3 -c peer -R -J`, both saved in its folder."""
    for number, pairs in enumerate(circle_rounds(hosts), start=1):
        for a, b in pairs:
            for src, dst in ((a, b), (b, a)):
                yield a, src, dst, pair_step_name("iperf3", number, src, dst, 1)


def write_iperf3_try(run: Path, client: str, name: str, server: str, gbps: float | None,
                     reverse: bool) -> None:  # fmt: skip
    """One iperf3 pair try as the pair phase saves it (exit status 1 when refused)."""
    command = f"iperf3 -J -t 10 -c {server}" + (" -R" if reverse else "")
    write_step(run, client, name, iperf3_json(server, gbps, reverse), raw_ext="json",
               phase="network", command=command, tool="iperf3", exit_code=0 if gbps else 1,
               timeout_s=60, duration_s=10.2)  # fmt: skip


def pair_analysis(
    files: list[RawFile],
    thresholds: PairThresholds | None = None,
    expected: dict[str, list[str]] | None = None,
    with_hosts: bool = False,
) -> PairAnalysis:
    """The pair analysis of raw files held in memory: of their pair tries alone, as the
    controller judges them between rounds, or `with_hosts` with every host's evidence (the
    network references), as the report does."""
    hosts = sorted({f.host for f in files} | set(expected or {}))
    folder = RunFolder(Path("."), {"expected": expected or {}}, hosts, [], files)
    evidence = build_evidence(folder) if with_hosts else pair_evidence(folder)
    return analyse_pairs(evidence, thresholds)
