"""The webhook notification of a failing run: a JSON POST to the URL in $GPUVAL_WEBHOOK_URL.

The URL often carries a secret (Slack and Teams incoming webhooks do), so it is never printed,
logged or written anywhere: messages about the notification name only what went wrong (never
an exception's text, which can quote the URL), a malformed URL is refused before the run starts
with what is wrong with it, and `gpuval run` takes the variable out of the environment before
Ansible starts, so neither ansible-runner's artifacts nor any node ever see it.

The body has Slack's `text` (one line) and the run's verdict, counts, failing checks and report
path for any other receiver.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections import Counter
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from gpuval.records.base import to_jsonable

if TYPE_CHECKING:
    from gpuval.judgement.model import RunJudgement

WEBHOOK_ENV = "GPUVAL_WEBHOOK_URL"
TIMEOUT_S = 10
MAX_CHECKS = 20


class WebhookUrlError(ValueError):
    """$GPUVAL_WEBHOOK_URL is no URL a notification can be posted to (the message says why,
    without the URL)."""


def _problem_of(url: str) -> str | None:
    """What makes `url` unusable, in words that quote none of it; None when it is usable."""
    for position, character in enumerate(url, start=1):
        if not character.isascii():
            return f"character {position} is not ASCII (percent-encode it)"
        if not character.isprintable() or character.isspace():
            return f"character {position} is a space or a control character"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "its host or port cannot be read (a port is a number from 1 to 65535)"
    if parts.scheme not in ("http", "https"):
        return "it does not start with https:// (or http://)"
    if not parts.hostname:
        return "it names no host"
    if port == 0:
        return "a port is a number from 1 to 65535"
    return None


def take_webhook_url() -> str | None:
    """The webhook URL (surrounding whitespace dropped), removed from this process'
    environment (children never inherit it); WebhookUrlError when it is malformed."""
    url = os.environ.pop(WEBHOOK_ENV, "").strip() or None
    if url is not None and (problem := _problem_of(url)) is not None:
        raise WebhookUrlError(
            f"${WEBHOOK_ENV} is not a usable URL: {problem} (the URL is not shown: it may "
            "hold a secret)"
        )
    return url


def payload(judgement: RunJudgement, report: str) -> dict[str, Any]:
    """The notification of a judged run whose report is at `report`."""
    run_id, verdict = judgement.run_id, judgement.verdict
    failing = [to_jsonable(c) for c in judgement.checks if c.status in ("fail", "error")]
    counts = Counter(c.status for c in judgement.checks)
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
    try:
        request = urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "User-Agent": "gpuval"},
            method="POST",
        )
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
    except Exception as problem:  # never fatal; never its text, which may quote the URL
        return f"webhook notification failed: {type(problem).__name__}"
