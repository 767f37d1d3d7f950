"""The node health catalog: what each Xid and SXid means and what to do (xid.json), and what a
GPU model computes and whether its memory has ECC (compute.json); every entry with its source."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

XidClass = Literal["hardware", "application", "informational", "unknown"]


@dataclass(frozen=True)
class XidMeaning:
    code: int | None
    mnemonic: str | None
    meaning: str
    immediate: str | None  # NVIDIA's immediate resolution bucket (RESET_GPU, RESTART_APP, ...)
    kind: XidClass
    action: str  # with {gpu} / {switch} to fill in
    source: str  # the URL and what it says
    # NVIDIA's investigatory bucket: what to look into when it recurs (CONTACT_SUPPORT, ...)
    investigatory: str | None = None


@dataclass(frozen=True)
class Compute:
    model: str
    dense_tflops: dict[str, float]  # dtype ("bf16", "fp16") -> dense tensor TFLOPS
    ecc: bool
    source: str
    hbm_gb: float | None = None  # HBM per GPU, where the source gives it
    hbm_tbps: float | None = None


def _load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        resources.files("gpuval.catalog").joinpath(name).read_text(encoding="utf-8")
    )
    return document


def _source(sources: dict[str, str], keys: str) -> str:
    return "; ".join(sources.get(key.strip(), key.strip()) for key in keys.split(";"))


def _meaning(entry: dict[str, Any], sources: dict[str, str]) -> XidMeaning:
    return XidMeaning(entry.get("code"), entry.get("mnemonic"), entry["meaning"],
                      entry.get("immediate"), entry["class"], entry["action"],
                      _source(sources, entry["source"]), entry.get("investigatory"))  # fmt: skip


@cache
def _xid_catalog() -> tuple[dict[int, XidMeaning], dict[str, XidMeaning], XidMeaning]:
    document = _load("xid.json")
    sources: dict[str, str] = document["sources"]
    xids = {entry["code"]: _meaning(entry, sources) for entry in document["xid"]}
    sxids = {key: _meaning(entry, sources) for key, entry in document["sxid"].items()}
    return xids, sxids, _meaning(document["unknown"], sources)


def xid_meaning(code: int | None) -> XidMeaning:
    """The catalog entry of an Xid; the `unknown` entry (warn, read it) for codes not listed."""
    xids, _, unknown = _xid_catalog()
    return xids.get(code, unknown) if code is not None else unknown


def driver_event_meaning(kind: str) -> XidMeaning:
    """A GPU problem the driver reports without an Xid number ("init-failed")."""
    document = _load("xid.json")
    return _meaning(document["driver"][kind], document["sources"])


def sxid_meaning(severity: str | None) -> XidMeaning:
    """An SXid by the severity its line prints ("fatal", "non-fatal", or none)."""
    _, sxids, _ = _xid_catalog()
    return sxids.get(severity or "unknown", sxids["unknown"])


@cache
def _compute() -> dict[str, Compute]:
    document = _load("compute.json")
    sources: dict[str, str] = document["sources"]
    return {
        model: Compute(model, {k: float(v) for k, v in entry["dense_tflops"].items()},
                       bool(entry["ecc"]), _source(sources, entry["source"]),
                       entry.get("hbm_gb"), entry.get("hbm_tbps"))
        for model, entry in document["gpus"].items()
    }  # fmt: skip


def compute_of(model: str | None) -> Compute | None:
    """The compute entry of a hardware-catalog model name; None when the catalog lacks it."""
    return _compute().get(model or "")
