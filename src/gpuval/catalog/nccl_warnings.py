"""What an NCCL WARN line means for a validation run (nccl_warnings.json, each rule sourced)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

WarningClass = Literal["fatal", "config", "benign", "unknown"]


@dataclass(frozen=True)
class WarningMeaning:
    kind: WarningClass
    meaning: str
    action: str
    source: str
    internode_only: bool = False  # about traffic between nodes: benign inside one node


@cache
def _rules() -> tuple[tuple[re.Pattern[str], WarningMeaning], ...]:
    text = resources.files("gpuval.catalog").joinpath("nccl_warnings.json").read_text("utf-8")
    document = json.loads(text)
    sources: dict[str, str] = document["sources"]
    return tuple(
        (
            re.compile(rule["pattern"], re.IGNORECASE),
            WarningMeaning(rule["class"], rule["meaning"], rule["action"],
                           sources.get(rule["source"], rule["source"]),
                           rule.get("scope") == "internode"),
        )
        for rule in document["rules"]
    )  # fmt: skip


UNKNOWN = WarningMeaning(
    "unknown",
    "a warning gpuval does not know",
    "read it: NCCL prints WARN only when something is off",
    "gpuval: an unclassified NCCL WARN is shown, never ignored",
)


def classify(message: str, across_nodes: bool = True) -> WarningMeaning:
    """The first rule whose pattern the WARN message matches, else UNKNOWN; a message about
    traffic between nodes is benign in a run inside one node."""
    for pattern, meaning in _rules():
        if pattern.search(message):
            if meaning.internode_only and not across_nodes:
                return WarningMeaning("benign", f"{meaning.meaning}; harmless inside one node",
                                      "none", meaning.source)  # fmt: skip
            return meaning
    return UNKNOWN
