"""What every parser returns: the tool, its runs, and what it could not read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Level = Literal["warning", "error"]


@dataclass(frozen=True)
class Diagnostic:
    """A problem found while reading a file, located so a person can open the file at that line."""

    level: Level
    message: str
    source: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = self.source or "<input>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.level}: {self.message}"


@dataclass
class ParseResult:
    """One parsed file. `runs` holds tool-specific run records (dataclasses from
    `gpuval.records`)."""

    tool: str
    source: str | None = None
    runs: list[Any] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    errors: list[Diagnostic] = field(default_factory=list)

    def warn(self, message: str, line: int | None = None) -> None:
        self.warnings.append(Diagnostic("warning", message, self.source, line))

    def error(self, message: str, line: int | None = None) -> None:
        self.errors.append(Diagnostic("error", message, self.source, line))

    def to_dict(self) -> dict[str, Any]:
        """The JSON document `gpuval parse` prints (schema: parse-result.schema.json)."""
        return {
            "tool": self.tool,
            "source": self.source,
            "runs": [to_jsonable(run) for run in self.runs],
            "warnings": [to_jsonable(d) for d in self.warnings],
            "errors": [to_jsonable(d) for d in self.errors],
        }


# Values to_jsonable returns as they are, by exact type: the bulk of every record, answered
# inline, without a call and without the dataclass, dict and list tests (millions of values for
# a thousand nodes).
_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})
Converter = Callable[[Any], dict[str, Any] | list[Any]]
# Per type seen: the converter of a dataclass type, None for any other type.
_CONVERTERS: dict[type, Converter | None] = {}


def _dataclass_converter(kind: type) -> Converter | None:
    """A function that turns an object of the dataclass type `kind` into its dict (None for any
    other type), written for the type's fields once: it reads each field by name and keeps a
    leaf inline, where a loop over dataclasses.fields with getattr per field and object cost
    twice the time at a thousand nodes (the way `dataclasses` writes __init__ for its fields)."""
    if not dataclasses.is_dataclass(kind):
        return None
    if issubclass(kind, Sequence):  # a record stored otherwise than it reads (a columnar table)
        return _items
    names = [f.name for f in dataclasses.fields(kind)]  # identifiers: safe to write as code
    reads = "".join(f"    v{i} = value.{name}\n" for i, name in enumerate(names))
    items = ", ".join(
        f"{name!r}: v{i} if type(v{i}) in leaf_types else to_jsonable(v{i})"
        for i, name in enumerate(names)
    )
    namespace: dict[str, Any] = {"leaf_types": _LEAF_TYPES, "to_jsonable": to_jsonable}
    exec(f"def convert(value):\n{reads}    return {{{items}}}\n", namespace)
    converter: Converter = namespace["convert"]
    return converter


def _items(value: Sequence[Any]) -> list[Any]:
    return [v if type(v) in _LEAF_TYPES else to_jsonable(v) for v in value]


def to_jsonable(value: Any) -> Any:
    """Dataclasses to plain dicts, recursively; everything else as it is."""
    kind = type(value)
    if kind in _LEAF_TYPES:
        return value
    try:
        converter = _CONVERTERS[kind]
    except KeyError:
        converter = _CONVERTERS[kind] = _dataclass_converter(kind)
    if converter is not None:
        return converter(value)
    if isinstance(value, dict):
        return {k: v if type(v) in _LEAF_TYPES else to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [v if type(v) in _LEAF_TYPES else to_jsonable(v) for v in value]
    return value
