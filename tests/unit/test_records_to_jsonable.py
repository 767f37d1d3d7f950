"""to_jsonable: a record as the plain JSON values that results.json and `gpuval parse` print."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from gpuval.records.base import Diagnostic, ParseResult, to_jsonable


@dataclass(slots=True)
class Half:
    time_us: float | None = None
    extra: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    size_bytes: int
    halves: tuple[Half, ...] = ()


@dataclass
class Run:
    rows: list[Row] = field(default_factory=list)
    tags: dict[str, Any] = field(default_factory=dict)
    ok: bool = True


@dataclass
class OneField:
    name: str


@dataclass
class NoField:
    pass


class Opaque:
    """Neither a dataclass nor a container: kept as it is."""


def _record() -> Run:
    return Run(
        rows=[Row(8, (Half(1.5, {"i_min": None}), Half())), Row(0)],
        tags={"where": [Row(1)], "n": 3},
        ok=False,
    )


def test_nested_records_become_the_dicts_dataclasses_asdict_makes_them():
    record = _record()
    assert to_jsonable(record) == json.loads(json.dumps(dataclasses.asdict(record)))


def test_members_come_in_field_order():
    assert list(to_jsonable(Run())) == ["rows", "tags", "ok"]
    assert list(to_jsonable(Half())) == ["time_us", "extra"]


def test_tuples_become_lists_and_scalars_stay_as_they_are():
    converted = to_jsonable(Row(4, (Half(2.0),)))
    assert converted == {"size_bytes": 4, "halves": [{"time_us": 2.0, "extra": {}}]}
    assert isinstance(converted["halves"], list)
    assert [to_jsonable(v) for v in ("x", 1, 1.5, True, None)] == ["x", 1, 1.5, True, None]


def test_records_of_one_field_and_of_none():
    assert to_jsonable(OneField("a")) == {"name": "a"}
    assert to_jsonable(NoField()) == {}


def test_other_values_are_kept_as_they_are():
    opaque = Opaque()
    assert to_jsonable({"x": opaque})["x"] is opaque


def test_a_conversion_is_new_dicts_never_the_record_s_own():
    record = _record()
    converted = to_jsonable(record)
    converted["tags"]["n"] = 4
    converted["rows"][0]["halves"][0]["extra"]["i_min"] = 1.0
    assert record.tags["n"] == 3
    assert record.rows[0].halves[0].extra == {"i_min": None}


def test_parse_result_document_holds_diagnostics_as_dataclasses_asdict_does():
    result = ParseResult("demo", "raw/n1/x.txt", runs=[_record()])
    result.warn("odd line", 3)
    result.errors.append(Diagnostic("error", "no table"))
    document = result.to_dict()
    assert document["warnings"] == [dataclasses.asdict(d) for d in result.warnings]
    assert document["errors"] == [dataclasses.asdict(d) for d in result.errors]
    assert document["runs"] == [json.loads(json.dumps(dataclasses.asdict(_record())))]
