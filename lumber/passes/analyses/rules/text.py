"""Readable conditions: ``lo < x <= hi`` printed the way a person would write it.

Integer-coded features (binary, ordinal, categorical) print as the integer
values the interval holds (``Sex = 1``, ``PriorsCount in 1..3``, category
labels when the schema names them). Numerical bounds print whichever of the
two exactly equivalent forms is shorter: ``x > a`` or ``x >= nextafter(a)``,
``x <= b`` or ``x < nextafter(b)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lumber.ir import Feature, FeatureKind

INTEGER_KINDS = (FeatureKind.BINARY, FeatureKind.ORDINAL, FeatureKind.CATEGORICAL)
MAX_LISTED = 6


def num(v: float) -> str:
    """Shortest round-trip text of a float (integers without ``.0``)."""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def _lower(a: float) -> str:
    up = float(np.nextafter(a, np.inf))
    return f">= {num(up)}" if len(num(up)) < len(num(a)) else f"> {num(a)}"


def _upper(b: float) -> str:
    up = float(np.nextafter(b, np.inf))
    return f"< {num(up)}" if len(num(up)) < len(num(b)) else f"<= {num(b)}"


def _int_range(lo: float, hi: float) -> tuple[float, float]:
    first = -math.inf if np.isneginf(lo) else math.floor(lo) + 1
    last = math.inf if np.isposinf(hi) else math.floor(hi)
    return first, last


def condition(feature: Feature, lo: float, hi: float) -> str:
    """``lo < x <= hi`` for ``feature`` as text."""
    name = feature.name
    if np.isneginf(lo) and np.isposinf(hi):
        return f"{name} is any value"
    if feature.kind in INTEGER_KINDS:
        first, last = _int_range(lo, hi)
        if first > last:
            return f"{name} in (empty)"
        labels = feature.categories
        if math.isfinite(first) and math.isfinite(last) and last - first + 1 <= MAX_LISTED:
            vals = [int(v) for v in range(int(first), int(last) + 1)]
            shown = [_label(labels, v) for v in vals]
            if len(shown) == 1:
                return f"{name} = {shown[0]}"
            if labels is not None and feature.kind == FeatureKind.CATEGORICAL:
                return f"{name} in {{{', '.join(shown)}}}"
            return f"{name} in {shown[0]}..{shown[-1]}"
        if not math.isfinite(first):
            return f"{name} <= {_label(labels, int(last))}"
        if not math.isfinite(last):
            return f"{name} >= {_label(labels, int(first))}"
        return f"{name} in {_label(labels, int(first))}..{_label(labels, int(last))}"
    if float(np.nextafter(lo, np.inf)) == hi:
        return f"{name} = {num(hi)}"
    if np.isneginf(lo):
        return f"{name} {_upper(hi)}"
    if np.isposinf(hi):
        return f"{name} {_lower(lo)}"
    low = _lower(lo)
    if low.startswith(">="):
        left = f"{low[3:]} <="
    else:
        left = f"{low[2:]} <"
    return f"{left} {name} {_upper(hi)}"


def _label(labels: tuple[Any, ...] | None, code: int) -> str:
    if labels is not None and 0 <= code < len(labels):
        return str(labels[code])
    return str(code)


def value_text(feature: Feature, v: float) -> str:
    """One value of a feature (category label when known)."""
    if np.isnan(v):
        return "NaN"
    if feature.kind == FeatureKind.CATEGORICAL and feature.categories is not None and v == int(v):
        return _label(feature.categories, int(v))
    return num(v)  # sample values are training values: print them exactly (".6g" rounded 123456789)


__all__ = ["condition", "num", "value_text"]
