"""The role variables a plan is made from: the roles' defaults, then what the inventory, the
profile and -e set over them (Ansible's order: extra variables win)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

# A checkout's roles (src/gpuval/plan/ is three folders below it), else those of the folder the
# command runs in.
CHECKOUT_ROLES = Path(__file__).resolve().parents[3] / "roles"


def roles_dir() -> Path:
    for candidate in (CHECKOUT_ROLES, Path.cwd() / "roles"):
        if candidate.is_dir():
            return candidate
    raise ValueError(
        f"no roles folder ({CHECKOUT_ROLES}, ./roles) to read the defaults from: run gpuval plan "
        "from a checkout of gpuval or the folder of its Ansible collection"
    )


def role_defaults(roles_dir: Path) -> dict[str, Any]:
    """Every role's defaults/main.yml merged; a templated value ("{{ ... }}") is left out, as
    only Ansible can fill it in (the plan's own fallback holds for it)."""
    merged: dict[str, Any] = {}
    for path in sorted(roles_dir.glob("*/defaults/main.yml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(document, dict):
            raise ValueError(f"{path}: not a mapping of role variables")
        merged |= {k: v for k, v in document.items() if not _templated(v)}
    return merged


def _templated(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def extra_vars(items: Iterable[str]) -> dict[str, Any]:
    """ansible-playbook's -e: KEY=VALUE words (values read as YAML: numbers, true, lists), a
    JSON or YAML mapping, or @FILE."""
    found: dict[str, Any] = {}
    for item in items:
        text = item.strip()
        if text.startswith("@"):
            path = Path(text[1:])
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as problem:
                raise ValueError(f"-e {item}: cannot read {path} ({problem.strerror})") from None
        if text.startswith(("{", "---")) or item.startswith("@"):
            try:
                document = yaml.safe_load(text)
            except yaml.YAMLError as problem:
                raise ValueError(f"-e {item}: not a JSON or YAML mapping ({problem})") from None
            if not isinstance(document, dict):
                raise ValueError(f"-e {item}: not a mapping of variables")
            found |= document
            continue
        for word in text.split():
            key, equals, value = word.partition("=")
            if not equals or not key:
                raise ValueError(f"-e {word!r}: write KEY=VALUE, a JSON mapping, or @FILE")
            found[key] = _scalar(value)
    return found


def _scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text) if text else ""
    except yaml.YAMLError:
        return text


def hca_count(value: Any) -> int:
    """Rails from gpuval_ib_hcas / bench_pairs_rdma_hcas: a list, or names joined by commas."""
    if isinstance(value, str):
        return len([name for name in value.replace(" ", ",").split(",") if name])
    if isinstance(value, list | tuple):
        return len(value)
    return 0


def merged(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Later layers over earlier ones, as Ansible's precedence puts them."""
    result: dict[str, Any] = {}
    for layer in layers:
        result |= {k: v for k, v in layer.items() if not _templated(v)}
    return result
