"""The JSON Schemas shipped in the package, and validation against them.

Every `*.schema.json` under `gpuval/schemas/` is registered under its `$id` (its file name), so a
schema refers to another by file name.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource


class SchemaError(ValueError):
    """A document that does not match its schema; the message lists every violation."""


@cache
def _registry() -> Registry[Any]:
    registry: Registry[Any] = Registry()
    for entry in resources.files("gpuval.schemas").iterdir():
        if entry.name.endswith(".schema.json"):
            contents = json.loads(entry.read_text(encoding="utf-8"))
            registry = registry.with_resource(entry.name, Resource.from_contents(contents))
    return registry


@cache
def validator(name: str) -> Draft202012Validator:
    """The validator for `NAME.schema.json`, e.g. `parse-result`."""
    schema = _registry().contents(f"{name}.schema.json")
    return Draft202012Validator(schema, registry=_registry())


def validate(document: Any, name: str) -> None:
    """Raise SchemaError naming every place where `document` breaks `NAME.schema.json`."""
    problems = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    if problems:
        lines = [
            f"{'/'.join(map(str, p.absolute_path)) or '<root>'}: {p.message}" for p in problems
        ]
        raise SchemaError(f"{name}: {len(problems)} violation(s):\n  " + "\n  ".join(lines[:20]))


@cache
def fragment_validator(reference: str) -> Draft202012Validator:
    """The validator for a part of a schema, e.g. `profile.schema.json#/properties/thresholds`."""
    return Draft202012Validator({"$ref": reference}, registry=_registry())
