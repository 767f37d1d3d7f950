"""Reading a staged search back from the dict `GroupSearch.to_dict` wrote (Ansible hands it
from one gpuval_pairs call to the next): each key checked, a malformed one a ValueError that names
it and says what to do, never a traceback."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# What a malformed search (the `search` option of gpuval_pairs) should be instead.
SEARCH_ADVICE = "hand back the `search` the previous gpuval_pairs call returned, unchanged"


def value_at(data: Mapping[str, Any], key: str, required: bool) -> Any:
    """The value at `key` (the last part of a dotted name); None where optional and absent."""
    name = key.rsplit(".", 1)[-1]
    if name not in data and required:
        raise ValueError(f"search: the key {key} is missing; {SEARCH_ADVICE}")
    return data.get(name)


def wrong(key: str, wanted: str, value: object) -> ValueError:
    found = (
        "nothing" if value is None
        else repr(value) if isinstance(value, int)
        else type(value).__name__
    )  # fmt: skip
    return ValueError(f"search: {key} must be {wanted}, not {found}; {SEARCH_ADVICE}")


def listed(data: Mapping[str, Any], key: str, kind: type, required: bool = True) -> list[Any]:
    """A list whose every item is a `kind`."""
    value = value_at(data, key, required)
    if value is None and not required:
        return []
    if not isinstance(value, list) or not all(isinstance(v, kind) for v in value):
        raise wrong(key, f"a list of {kind.__name__.lower()}s", value)
    return value


def host_list(data: Mapping[str, Any], key: str, required: bool = True) -> tuple[str, ...]:
    """A list of host names."""
    value = value_at(data, key, required)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise wrong(key, "a list of host names", value)
    return tuple(value)


def text(data: Mapping[str, Any], key: str) -> str:
    """A host name."""
    value = value_at(data, key, True)
    if not isinstance(value, str):
        raise wrong(key, "a host name", value)
    return value


def count(data: Mapping[str, Any], key: str) -> int:
    """A whole number, zero or more."""
    value = value_at(data, key, True)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)  # Ansible may hand numbers back as text
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise wrong(key, "a whole number", value)
    return value


def mapping(data: Mapping[str, Any], key: str, required: bool = False) -> Mapping[str, Any]:
    value = value_at(data, key, required)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise wrong(key, "a mapping", value)
    return value


def outcomes(data: Mapping[str, Any], index: int) -> dict[str, bool | None]:
    """A confirmation's partners: partner -> passed (null until measured)."""
    key = f"confirmations[{index}].partners"
    value = mapping(data, key, required=True)
    if not all(isinstance(v, bool) or v is None for v in value.values()):
        raise wrong(key, "a mapping of partner -> true, false or null", value)
    return dict(value)


def parent(data: Mapping[str, Any], index: int) -> tuple[str, ...] | None:
    """A pending group's parent: the group it was split from, null for the screen."""
    return host_list(data, f"pending[{index}].parent", required=False) or None
