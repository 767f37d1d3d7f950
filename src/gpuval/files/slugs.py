"""The one rule for names that become file or folder names: run ids (reports/<run-id>/),
baseline names (reports/baselines/<name>.json) and shipped profile names.

A name is a slug: it cannot climb out of its folder ('..', '/'), hide ('.x'), be empty, or be
longer than a file name may be once '.json' is added. The run_context role asserts the same
pattern on the run ids Ansible is given (a unit test keeps the two equal).
"""

from __future__ import annotations

import re

SLUG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z"
SLUG_RULE = "1 to 100 letters, digits, '.', '_' or '-', the first a letter or digit"
_SLUG = re.compile(SLUG_PATTERN)


def is_slug(name: str) -> bool:
    return _SLUG.match(name) is not None


def slug(name: str, what: str) -> str:
    """`name` when it is a slug; else a ValueError naming `what`, the name and the rule."""
    if not is_slug(name):
        raise ValueError(f"{what} {name!r} is not allowed: use {SLUG_RULE}")
    return name
