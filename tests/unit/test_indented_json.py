"""summary.json's writer lays out containers itself for speed: it must write what
json.dumps(indent=2, ensure_ascii=False, allow_nan=False) writes, character for character."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuval.report.writers import indented_json

LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.dictionaries(st.integers() | st.booleans() | st.none(), inner, max_size=3)
    ),
    max_leaves=30,
)


def reference(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_it_writes_what_json_writes(value: Any) -> None:
    assert indented_json(value) == reference(value)


@pytest.mark.parametrize("value", [math.nan, {"a": [math.inf]}, [{"b": -math.inf}]])
def test_a_number_json_cannot_hold_is_refused_as_json_refuses_it(value: Any) -> None:
    with pytest.raises(ValueError):
        indented_json(value)
