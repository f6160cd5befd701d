"""Readable conditions: ``lo < x <= hi`` printed the way a person would write it.

Integer-coded features (binary, ordinal) print as the integer values the
interval holds (``Sex = 1``, ``PriorsCount in 1..3``); a categorical feature
prints as set membership by label (``WorkClass in {Private, Self-emp-inc}``, or
``not in {...}`` when fewer than half as many are left out), never as an order on its codes.
Numerical bounds print through the request's
:class:`lumber.ir.display.Display` (the shortest decimal in the same model
cells: ``a < 0.4982``, not ``0.4982340186834336``); without one, whichever of
the two exactly equivalent forms is shorter: ``x > a`` or
``x >= nextafter(a)``, ``x <= b`` or ``x < nextafter(b)``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from lumber.ir import Feature, FeatureKind
from lumber.ir.display import SHORT_DIGITS, digits
from lumber.ir.domains import DomainKind

if TYPE_CHECKING:
    from lumber.ir.display import Display

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


def _codes(feature: Feature, shown: "Display | None", index: int) -> Sequence[float] | None:
    """The codes a categorical feature takes (schema categories, else the domain's), None if unknown."""
    if feature.categories is not None:
        return [float(c) for c in range(len(feature.categories))]
    dom = shown.domains[index] if shown is not None and shown.domains is not None and index >= 0 else None
    return None if dom is None or dom.codes is None else list(dom.codes)


def _is_categorical(feature: Feature, shown: "Display | None", index: int) -> bool:
    dom = shown.domains[index] if shown is not None and shown.domains is not None and index >= 0 else None
    return feature.kind == FeatureKind.CATEGORICAL or (dom is not None and dom.kind == DomainKind.CATEGORICAL)


def member_text(feature: Feature, codes: Sequence[float], lo: float, hi: float,
                shown: "Display | None" = None, index: int = -1) -> str:
    """The ``codes`` in ``lo < code <= hi`` as set membership, by label when known (``not in {...}`` when
    fewer than half as many codes are left out)."""
    def text(c: float) -> str:
        return shown.value(index, c) if shown is not None and index >= 0 else _label(feature.categories, int(c))

    name = feature.name
    inside = [c for c in codes if lo < c <= hi]
    outside = [c for c in codes if not lo < c <= hi]
    if not inside:
        return f"{name} in (empty)"
    if len(inside) == 1:
        return f"{name} = {text(inside[0])}"
    if len(outside) == 1:
        return f"{name} != {text(outside[0])}"
    if 2 * len(outside) < len(inside):
        return f"{name} not in {{{', '.join(text(c) for c in outside)}}}"
    return f"{name} in {{{', '.join(text(c) for c in inside)}}}"


def spans_domain(feature: Feature, lo: float, hi: float, shown: "Display | None" = None, index: int = -1) -> bool:
    """Whether ``lo < x <= hi`` holds for every value ``feature`` can take: both bounds open, every category
    code inside, or both values of a 0/1 feature. Such a condition constrains nothing, so rules print
    the feature as free ("any value") instead of as a condition."""
    if np.isneginf(lo) and np.isposinf(hi):
        return True
    codes = _codes(feature, shown, index) if _is_categorical(feature, shown, index) else None
    if codes is not None:
        return bool(codes) and all(lo < c <= hi for c in codes)
    if feature.kind == FeatureKind.BINARY:
        return lo < 0.0 and hi >= 1.0
    return False


def condition(feature: Feature, lo: float, hi: float, shown: "Display | None" = None, index: int = -1) -> str:
    """``lo < x <= hi`` for ``feature`` (column ``index`` of ``shown``'s model) as text."""
    name = feature.name
    if np.isneginf(lo) and np.isposinf(hi):
        return f"{name} is any value"
    codes = _codes(feature, shown, index) if _is_categorical(feature, shown, index) else None
    if codes is not None:
        return member_text(feature, codes, lo, hi, shown, index)
    if feature.kind in INTEGER_KINDS:
        first, last = _int_range(lo, hi)
        if first > last:
            return f"{name} in (empty)"
        labels = feature.categories
        if math.isfinite(first) and math.isfinite(last) and last - first + 1 <= MAX_LISTED:
            vals = [int(v) for v in range(int(first), int(last) + 1)]
            texts = [_label(labels, v) for v in vals]
            if len(texts) == 1:
                return f"{name} = {texts[0]}"
            return f"{name} in {texts[0]}..{texts[-1]}"
        if not math.isfinite(first):
            return f"{name} <= {_label(labels, int(last))}"
        if not math.isfinite(last):
            return f"{name} >= {_label(labels, int(first))}"
        return f"{name} in {_label(labels, int(first))}..{_label(labels, int(last))}"
    if float(np.nextafter(lo, np.inf)) == hi:
        return f"{name} = {num(hi)}"
    if np.isneginf(lo):
        return f"{name} {_shown(_upper(hi), '<=', hi, shown, index)}"
    if np.isposinf(hi):
        return f"{name} {_shown(_lower(lo), '>', lo, shown, index)}"
    low = _shown(_lower(lo), ">", lo, shown, index)
    if low.startswith(">="):
        left = f"{low[3:]} <="
    else:
        left = f"{low[2:]} <"
    return f"{left} {name} {_shown(_upper(hi), '<=', hi, shown, index)}"


def _shown(exact: str, op: str, t: float, shown: "Display | None", index: int) -> str:
    """An exact bound text (``> a``, ``>= nextafter(a)``, ...) when its number is short, else ``op`` and the
    display's threshold text (the shortest decimal of the same model cells)."""

    if shown is None or index < 0 or digits(float(exact.split()[-1])) <= SHORT_DIGITS:
        return exact
    return f"{op} {shown.threshold(index, t)}"


def _label(labels: tuple[Any, ...] | None, code: int) -> str:
    if labels is not None and 0 <= code < len(labels):
        return str(labels[code])
    return str(code)


def value_text(feature: Feature, v: float) -> str:
    """One value of a feature (its words, ``Feature.words``, or its category label when known)."""
    if np.isnan(v):
        return "NaN"
    if feature.word(float(v)) is not None:
        return str(feature.word(float(v)))
    if feature.kind == FeatureKind.CATEGORICAL and feature.categories is not None and v == int(v):
        return _label(feature.categories, int(v))
    return num(v)  # sample values are training values: print them exactly (".6g" rounded 123456789)


__all__ = ["condition", "member_text", "num", "spans_domain", "value_text"]
