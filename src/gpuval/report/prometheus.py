"""gpuval.prom: the run's key gauges in Prometheus' text format, for node_exporter's textfile
collector (https://github.com/prometheus/node_exporter#textfile-collector): point
`--collector.textfile.directory` at the folder the file is copied to (`--prometheus FILE`).

One sample per host and figure; the verdict and each host's status as one-hot state gauges, so
an alert is `gpuval_run_verdict{verdict="fail"} == 1`.
"""

from __future__ import annotations

from datetime import datetime

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from gpuval.checks.model import STATUS_ORDER, worst
from gpuval.judgement.model import RunJudgement
from gpuval.report.summary import checks_by_host, status_counts

PROMETHEUS_FILE = "gpuval.prom"


def _timestamp(judgement: RunJudgement) -> float:
    """When the run started (run.json), else when it was judged; unix seconds."""
    started = judgement.meta.get("started_at")
    for text in (started if isinstance(started, str) else None, judgement.generated_at):
        if text:
            try:
                return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return 0.0


def build_registry(judgement: RunJudgement) -> CollectorRegistry:
    registry = CollectorRegistry()
    Gauge(
        "gpuval_run_info",
        "The run the other gpuval samples come from (value 1)",
        ["run_id", "profile", "baseline", "gpuval_version"],
        registry=registry,
    ).labels(
        judgement.run_id,
        judgement.profile_name or "",
        judgement.baseline_name or "",
        judgement.gpuval_version,
    ).set(1)
    Gauge(
        "gpuval_run_timestamp_seconds", "When the run started (unix time)", registry=registry
    ).set(_timestamp(judgement))
    verdict = Gauge(
        "gpuval_run_verdict",
        "1 for the run's verdict, 0 for the others",
        ["verdict"],
        registry=registry,
    )
    for status in STATUS_ORDER:
        verdict.labels(status).set(int(status == judgement.verdict))
    host_status = Gauge(
        "gpuval_host_status",
        "1 for the host's worst check status, 0 for the others",
        ["host", "status"],
        registry=registry,
    )
    findings = Gauge(
        "gpuval_host_checks",
        "Checks of the host per status (findings: all but pass)",
        ["host", "status"],
        registry=registry,
    )
    for host, checks in sorted(checks_by_host(judgement.checks).items()):
        counts = status_counts(checks)
        host_worst = worst([c.status for c in checks])
        for status in STATUS_ORDER:
            host_status.labels(host, status).set(int(status == host_worst))
            findings.labels(host, status).set(counts[status])
    busbw = Gauge(
        "gpuval_busbw_gbps",
        "Large-message busbw per collective (GB/s)",
        ["host", "collective"],
        registry=registry,
    )
    p2p = Gauge(
        "gpuval_p2p_min_gbps", "Lowest unidirectional P2P cell (GB/s)", ["host"], registry=registry
    )
    pairs = Gauge(
        "gpuval_pair_rate",
        "Median of the node's pair tests (iperf3 Gbit/s, busbw GB/s)",
        ["host", "kind", "unit"],
        registry=registry,
    )
    health = Gauge(
        "gpuval_health_counter",
        "nvidia-smi error counters summed over the node's GPUs",
        ["host", "counter"],
        registry=registry,
    )
    for figure in judgement.figures:
        family, _, rest = figure.name.partition(".")
        if family == "busbw":
            busbw.labels(figure.host, rest).set(figure.value)
        elif family == "p2p":
            p2p.labels(figure.host).set(figure.value)
        elif family == "pair":
            pairs.labels(figure.host, rest, figure.unit).set(figure.value)
        elif family == "health":
            health.labels(figure.host, rest).set(figure.value)
    return registry


def prometheus_text(judgement: RunJudgement) -> bytes:
    """The content of gpuval.prom (written through gpuval.files.atomic, renamed into place, so the
    collector never reads half a file)."""
    return generate_latest(build_registry(judgement))
