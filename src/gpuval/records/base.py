"""What every parser returns: the tool, its runs, and what it could not read."""

from __future__ import annotations

import dataclasses
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
            "warnings": [dataclasses.asdict(d) for d in self.warnings],
            "errors": [dataclasses.asdict(d) for d in self.errors],
        }


# Values to_jsonable returns as they are, by exact type: the bulk of every record, answered
# without the dataclass, dict and list tests (millions of calls for a thousand nodes).
_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def _field_names(kind: type) -> tuple[str, ...] | None:
    """The field names of a dataclass type, in order; None for any other type."""
    if kind not in _FIELD_NAMES:
        dataclass_type = dataclasses.is_dataclass(kind)
        _FIELD_NAMES[kind] = (
            tuple(f.name for f in dataclasses.fields(kind)) if dataclass_type else None
        )
    return _FIELD_NAMES[kind]


def to_jsonable(value: Any) -> Any:
    """Dataclasses to plain dicts, recursively; everything else as it is."""
    kind = type(value)
    if kind in _LEAF_TYPES:
        return value
    names = _field_names(kind)
    if names is not None:
        return {name: to_jsonable(getattr(value, name)) for name in names}
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value
