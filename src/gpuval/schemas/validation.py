"""The JSON Schemas shipped in the package, and validation against them.

Every `*.schema.json` under `gpuval/schemas/` is registered under its `$id` (its file name), so a
schema refers to another by file name.

Two validators read the same schemas: jsonschema_rs (compiled, Rust) answers whether a document
matches, and only a document it rejects goes through jsonschema, whose errors (path, message) are
the ones every diagnostic and SchemaError quotes. A valid document, the common case (thousands of
sidecars, the whole results.json), thus costs milliseconds instead of seconds.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource


class SchemaError(ValueError):
    """A document that does not match its schema; the message lists every violation."""


@cache
def _schema_documents() -> dict[str, Any]:
    """Every shipped schema by file name (its `$id`)."""
    return {
        entry.name: json.loads(entry.read_text(encoding="utf-8"))
        for entry in resources.files("gpuval.schemas").iterdir()
        if entry.name.endswith(".schema.json")
    }


@cache
def _registry() -> Registry[Any]:
    return Registry().with_resources(
        (name, Resource.from_contents(contents)) for name, contents in _schema_documents().items()
    )


@cache
def validator(name: str) -> Draft202012Validator:
    """The validator for `NAME.schema.json`, e.g. `parse-result`."""
    schema = _registry().contents(f"{name}.schema.json")
    return Draft202012Validator(schema, registry=_registry())


@cache
def _compiled_registry() -> jsonschema_rs.Registry:
    return jsonschema_rs.Registry(list(_schema_documents().items()))


@cache
def _compiled_validator(name: str) -> jsonschema_rs.Validator:
    """`NAME.schema.json` compiled; `format` is an annotation, as for jsonschema's validator."""
    return jsonschema_rs.Draft202012Validator(
        _schema_documents()[f"{name}.schema.json"],
        registry=_compiled_registry(),
        validate_formats=False,
    )


def _matches(document: Any, name: str) -> bool:
    """Whether `document` matches `NAME.schema.json`, by the compiled validator. False also where
    it cannot say (a value JSON has no type for: a set, bytes, a non-string key), and where it is
    stricter than jsonschema (`$` before a trailing newline, NaN against a bound): jsonschema then
    decides."""
    try:
        return _compiled_validator(name).is_valid(document)
    except ValueError:
        return False


def schema_problems(document: Any, name: str) -> list[ValidationError]:
    """Every place where `document` breaks `NAME.schema.json`, as jsonschema's errors (in its
    order); [] at compiled speed for a document that matches."""
    if _matches(document, name):
        return []
    return list(validator(name).iter_errors(document))


def validate(document: Any, name: str) -> None:
    """Raise SchemaError naming every place where `document` breaks `NAME.schema.json`."""
    problems = sorted(schema_problems(document, name), key=lambda e: list(e.absolute_path))
    if problems:
        lines = [
            f"{'/'.join(map(str, p.absolute_path)) or '<root>'}: {p.message}" for p in problems
        ]
        raise SchemaError(f"{name}: {len(problems)} violation(s):\n  " + "\n  ".join(lines[:20]))


@cache
def fragment_validator(reference: str) -> Draft202012Validator:
    """The validator for a part of a schema, e.g. `profile.schema.json#/properties/thresholds`."""
    return Draft202012Validator({"$ref": reference}, registry=_registry())
