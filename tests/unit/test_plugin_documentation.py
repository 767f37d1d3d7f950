"""Every module's and plugin's DOCUMENTATION, EXAMPLES and RETURN are YAML that ansible-doc (and
ansible-lint, and the collection's docs) can read: a ": " inside a plain sentence makes one a
mapping, and the whole block unreadable."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCUMENTED = sorted([*REPO.glob("library/*.py"), *REPO.glob("plugins/*/*.py")])
BLOCKS = ("DOCUMENTATION", "EXAMPLES", "RETURN")


def _blocks(path: Path) -> dict[str, str]:
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            name = getattr(node.targets[0], "id", "")
            if name in BLOCKS and isinstance(node.value.value, str):
                found[name] = node.value.value
    return found


@pytest.mark.parametrize("path", DOCUMENTED, ids=lambda p: str(p.relative_to(REPO)))
def test_documentation_blocks_are_yaml(path: Path) -> None:
    for name, text in _blocks(path).items():
        document = yaml.safe_load(text)
        assert document is None or isinstance(document, dict | list), f"{path.name} {name}"
    if path.parent.name in ("library", "action", "inventory"):
        # An action plugin named after a module of library/ is documented by that module, as
        # ansible-doc reads it (gpuval_capture: the module and its controller side).
        module = REPO / "library" / path.name
        documented = module if path.parent.name == "action" and module.exists() else path
        documentation = yaml.safe_load(_blocks(documented).get("DOCUMENTATION", "") or "null")
        assert isinstance(documentation, dict), f"{path.name}: no DOCUMENTATION mapping"
