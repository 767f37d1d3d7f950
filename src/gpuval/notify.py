"""The webhook notification of a failing run: a JSON POST to the URL in $GPUVAL_WEBHOOK_URL.

The URL often carries a secret (Slack and Teams incoming webhooks do), so it is never printed,
logged or written anywhere: messages about the notification name only what went wrong, and
`gpuval run` takes the variable out of the environment before Ansible starts, so neither
ansible-runner's artifacts nor any node ever see it.

The body has Slack's `text` (one line) and the run's verdict, counts, failing checks and report
path for any other receiver.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections import Counter
from typing import Any

WEBHOOK_ENV = "GPUVAL_WEBHOOK_URL"
TIMEOUT_S = 10
MAX_CHECKS = 20


def take_webhook_url() -> str | None:
    """The webhook URL, removed from this process' environment (children never inherit it)."""
    return os.environ.pop(WEBHOOK_ENV, None) or None


def payload(run_id: str, verdict: str, checks: list[dict[str, Any]], report: str) -> dict[str, Any]:
    failing = [c for c in checks if c["status"] in ("fail", "error")]
    counts = Counter(c["status"] for c in checks)
    return {
        "text": (
            f"gpuval run {run_id}: {verdict.upper()}, {len(failing)} failing check(s); "
            f"report {report}"
        ),
        "run_id": run_id,
        "verdict": verdict,
        "counts": dict(sorted(counts.items())),
        "failing_checks": failing[:MAX_CHECKS],
        "report": report,
    }


def send(url: str, body: dict[str, Any]) -> str:
    """POST `body`; a line saying how it went that never contains the URL."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "gpuval"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return f"webhook notified (HTTP {answer.status})"
    except urllib.error.HTTPError as problem:
        return f"webhook notification failed: the receiver answered HTTP {problem.code}"
    except urllib.error.URLError as problem:
        reason = problem.reason
        why = (
            reason.strerror
            if isinstance(reason, OSError) and reason.strerror
            else type(reason).__name__
        )
        return f"webhook notification failed: {why}"
    except (OSError, ValueError) as problem:
        return f"webhook notification failed: {type(problem).__name__}"
