"""What every HTML page of gpuval shares: Plotly embedded once (the page works offline), JSON that
is safe inside <script>, numbers as measured, and the Jinja2 environment of the templates.

Cheap to import (no plotly, pandas or judge): `gpuval history` must answer in under a second.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

TEMPLATES = Path(__file__).parent / "templates"


def json_for_script(value: Any) -> Markup:
    """JSON safe inside a <script> element: no '<', '>' or '&' can end it or open a comment."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


def plotly_text(text: str) -> str:
    """Text that Plotly shows as written. Plotly reads tags in trace names, tick labels, titles
    and hover text (<a href> makes a live link), so a name a node chose must reach it with its
    markup characters as entities, which Plotly shows as the characters themselves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@cache
def plotly_js() -> Markup:
    """plotly.min.js as the plotly package ships it, read without importing plotly (slow)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the plotly package is not installed (pip install plotly)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    text = (folder / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    # '<\/script' is the same string to JavaScript but cannot close the element early.
    return Markup(text.replace("</script", "<\\/script"))


def format_value(value: object) -> str:
    """Numbers as measured (no float noise, at most 4 decimals); None as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else str(round(value, 4))
    return str(value)


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["value"] = format_value
    env.filters["script_json"] = json_for_script
    env.globals["plotly_js"] = plotly_js
    return env


def render_page(template: str, context: dict[str, Any]) -> str:
    return environment().get_template(template).render(context)
