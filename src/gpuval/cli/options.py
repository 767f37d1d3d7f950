"""argparse types for the options of `gpuval`: an input rule broken is a usage error (exit 2)
naming the option, before anything is read or written."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

from gpuval.files.slugs import slug


def slug_option(what: str) -> Callable[[str], str]:
    """An argparse type: the value when it is a slug (gpuval.files.slugs), else a usage error."""

    def checked(text: str) -> str:
        try:
            return slug(text, what)
        except ValueError as problem:
            raise argparse.ArgumentTypeError(str(problem)) from problem

    return checked


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed: a whole number, {least} or more"
        )
    return value


def count(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    return _whole_number(text, 0)


def positive_count(text: str) -> int:
    """An argparse type: a whole number, 1 or more (a machine has at least one core)."""
    return _whole_number(text, 1)


def change_fraction(text: str) -> float:
    """An argparse type: a finite fraction, 0 or more (a change of 0 is none; a NaN or negative
    threshold would make no change, or every change, a regression)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed: a finite fraction, 0 or more (0.05 is 5 %)"
        )
    return value


def positive_number(text: str) -> float:
    """An argparse type: a finite number above 0 (a budget or a price of 0 or less means
    nothing a plan can be held to)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: a finite number above 0")
    return value


_NODE_COUNT = re.compile(r"[1-9][0-9]*(?:-[1-9][0-9]*)?")


def node_count(text: str) -> str:
    """An argparse type: sbatch's --nodes, N or MIN-MAX, each at least 1 and MIN <= MAX."""
    low, _, high = text.partition("-")
    if not _NODE_COUNT.fullmatch(text) or (high and int(high) < int(low)):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not allowed: a node count N or a range MIN-MAX (e.g. 2-16), from 1"
        )
    return text
