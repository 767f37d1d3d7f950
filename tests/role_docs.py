"""Each role's variable table, generated from its `meta/argument_specs.yml` into its README.md
between the argument_specs markers, so the README cannot drift from what the role validates.

    python -m tests.role_docs            # rewrite every role's table
    python -m tests.role_docs --check    # exit 1 naming each README whose table is not current

A default the specs leave out comes from the role's `defaults/main.yml` (the value the role
really starts from). Needs only PyYAML, not the gpuval package.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROLES_DIR = Path(__file__).resolve().parent.parent / "roles"
BEGIN = (
    "<!-- BEGIN argument_specs: generated from meta/argument_specs.yml by "
    "`python -m tests.role_docs`; edit the specs, not this table -->"
)
BEGIN_PREFIX = "<!-- BEGIN argument_specs"
END = "<!-- END argument_specs -->"
REGENERATE = "python -m tests.role_docs"
# A default longer than this is left to defaults/main.yml: a table cell is no place for it.
LONGEST_DEFAULT = 100
HEADER = "| Variable | Type | Default | Required | Description |\n|---|---|---|---|---|"
# Ansible's documentation markup: C(code), O(option), V(value), I(italic), B(bold), U(url), ...
MARKUP = re.compile(r"\b([A-Z])\(([^()]*)\)")
CODE_SPAN = re.compile(r"(`[^`]*`)")


class MarkersMissing(ValueError):
    """The README has no (or an unbalanced) pair of argument_specs markers."""


def _markdown(text: str) -> str:
    """Ansible markup as Markdown, on one line, safe inside a table cell."""

    def macro(match: re.Match[str]) -> str:
        kind, body = match.groups()
        if kind == "I":
            return f"*{body}*"
        if kind == "B":
            return f"**{body}**"
        if kind in "UR":
            return body.split(",")[0].strip()
        if kind == "L":
            label, _, url = body.partition(",")
            return f"[{label.strip()}]({url.strip()})"
        return f"`{body}`"

    flat = " ".join(text.split())
    parts = CODE_SPAN.split(MARKUP.sub(macro, flat))
    # Outside code, < would open an HTML tag and * emphasis; anywhere, | would end the cell.
    return "".join(
        part if part.startswith("`") else part.replace("<", "\\<").replace("*", "\\*")
        for part in parts
    ).replace("|", "\\|")


def _flow(value: Any, nested: bool = False) -> str:
    """A default as YAML flow text: [a, b], {k: v}, "" for the empty string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(item, nested=True) for item in value) + "]"
    if isinstance(value, dict):
        items = (f"{key}: {_flow(item, nested=True)}" for key, item in value.items())
        return "{" + ", ".join(items) + "}"
    text = " ".join(str(value).split())
    if isinstance(value, str) and (not text or (nested and not _reads_back(text))):
        return json.dumps(text)
    return text


def _reads_back(text: str) -> bool:
    """Whether YAML reads the bare text back as that string (so "0", "*", "a,b" need quotes)."""
    if re.search(r"[,\[\]{}]", text):
        return False
    try:
        return bool(yaml.safe_load(text) == text)
    except yaml.YAMLError:
        return False


def _default_cell(option: dict[str, Any], name: str, role_defaults: dict[str, Any]) -> str:
    if "default" in option:
        value = option["default"]
    elif name in role_defaults:
        value = role_defaults[name]
    else:
        return ""
    text = _flow(value)
    if len(text) > LONGEST_DEFAULT:
        return "see `defaults/main.yml`"
    return "`" + text.replace("|", "\\|") + "`"


def _type_cell(option: dict[str, Any]) -> str:
    kind = str(option.get("type", "str"))
    return f"{kind} of {option['elements']}" if "elements" in option else kind


def _description_cell(option: dict[str, Any]) -> str:
    description = option.get("description", "")
    text = " ".join(description) if isinstance(description, list) else str(description)
    if "choices" in option:
        text += " Choices: " + ", ".join(f"C({_flow(choice)})" for choice in option["choices"])
        text += "."
    if option.get("no_log"):
        text += " Never logged."
    return _markdown(text)


def render_block(role_dir: Path) -> str:
    """The Markdown between the markers: one table per entry point of the role's specs."""
    specs = yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text())
    defaults_file = role_dir / "defaults" / "main.yml"
    loaded = yaml.safe_load(defaults_file.read_text()) if defaults_file.is_file() else None
    role_defaults: dict[str, Any] = loaded or {}
    sections = []
    for entry, spec in specs["argument_specs"].items():
        rows = [
            f"| `{name}` | {_type_cell(option)} | {_default_cell(option, name, role_defaults)}"
            f" | {'yes' if option.get('required') else 'no'} | {_description_cell(option)} |"
            for name, option in spec.get("options", {}).items()
        ]
        title = _markdown(spec.get("short_description", ""))
        sections.append(f"Entry point `{entry}`: {title}\n\n{HEADER}\n" + "\n".join(rows))
    return "\n\n".join(sections)


def with_block(readme: str, block: str) -> str:
    """The README with everything between its markers replaced by the block."""
    lines = readme.split("\n")
    begins = [i for i, line in enumerate(lines) if line.startswith(BEGIN_PREFIX)]
    ends = [i for i, line in enumerate(lines) if line == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise MarkersMissing(f"needs one line starting {BEGIN_PREFIX!r} and one {END!r} after it")
    return "\n".join([*lines[: begins[0]], BEGIN, "", block, "", *lines[ends[0] :]])


def role_dirs(roles_dir: Path) -> list[Path]:
    return sorted(p.parent.parent for p in roles_dir.glob("*/meta/argument_specs.yml"))


def stale_readmes(roles_dir: Path) -> list[str]:
    """One line per role whose README.md is not what the generator would write."""
    problems = []
    for role_dir in role_dirs(roles_dir):
        readme = role_dir / "README.md"
        try:
            current = readme.read_text()
            if with_block(current, render_block(role_dir)) != current:
                problems.append(
                    f"{readme}: the argument_specs table of role {role_dir.name} is stale"
                )
        except (OSError, MarkersMissing) as error:
            problems.append(f"{readme}: role {role_dir.name}: {error}")
    return problems


def regenerate(roles_dir: Path) -> list[str]:
    """Rewrite every role's table; the READMEs that changed."""
    changed = []
    for role_dir in role_dirs(roles_dir):
        readme = role_dir / "README.md"
        current = readme.read_text()
        try:
            updated = with_block(current, render_block(role_dir))
        except MarkersMissing as error:
            raise MarkersMissing(f"{readme}: {error}") from error
        if updated != current:
            readme.write_text(updated)
            changed.append(str(readme))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    parser.add_argument("--roles-dir", type=Path, default=ROLES_DIR)
    args = parser.parse_args(argv)
    if args.check:
        problems = stale_readmes(args.roles_dir)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print(f"regenerate them with: {REGENERATE}", file=sys.stderr)
        return 1 if problems else 0
    try:
        changed = regenerate(args.roles_dir)
    except MarkersMissing as error:
        print(error, file=sys.stderr)
        return 1
    for readme in changed:
        print(f"rewrote {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
