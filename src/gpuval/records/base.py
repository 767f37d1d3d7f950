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


def to_jsonable(value: Any) -> Any:
    """Dataclasses to plain dicts, recursively; everything else as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value
