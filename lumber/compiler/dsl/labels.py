"""Literals to values: category labels to codes, class labels, parameter values.

Shared by the checker (which adds the diagnostics) and the printers (which
check that what they print reads back to the same value).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from lumber.ir import Feature, FeatureKind

from . import ast as A
from .names import quote_string


def param_value(label: A.Label) -> Any:
    """A literal as a Python value: int for integer literals, float for other numbers, bool, or text."""
    if label.kind == "number":
        t = label.text.lstrip("-")
        if t.isdigit():
            return int(label.text)
        return float(label.text)
    if label.kind == "name" and label.text in ("true", "false"):
        return label.text == "true"
    return label.text


def lookup_code(f: Feature | None, kind: str, text: str) -> float | None:
    """The code a label denotes for feature ``f`` (None: no such category; see docs/constraints.md).

    Words and strings match category labels by text; numbers match numeric labels,
    then labels that read as that number, then codes ``0..n-1``. Without categories
    a number is the value itself (0/1 for binary, a non-negative integer for categorical).
    """
    if kind == "number":
        v = float(text)
        if not math.isfinite(v):
            return None
    if f is None:
        return v if kind == "number" else None
    cats = f.categories
    if kind != "number":
        for i, c in enumerate(cats or ()):
            if str(c) == text:
                return float(i)
        return None
    if cats:
        for i, c in enumerate(cats):
            if is_number(c) and float(c) == v:
                return float(i)
        for i, c in enumerate(cats):
            if isinstance(c, str) and as_float(c) == v:
                return float(i)
        return v if v == int(v) and 0 <= v < len(cats) else None
    if f.kind == FeatureKind.BINARY:
        return v if v in (0.0, 1.0) else None
    if f.kind == FeatureKind.CATEGORICAL:
        return v if v == int(v) and v >= 0 else None
    return v


def shown(label: A.Label) -> str:
    return quote_string(label.text) if label.kind == "string" else label.text


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def as_float(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def short_list(values: Sequence[Any], limit: int = 12) -> str:
    shown = [str(v) for v in values[:limit]]
    return ", ".join(shown) + (", ..." if len(values) > limit else "")
