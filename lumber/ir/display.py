"""Values and thresholds as people read them: the shortest decimal that means the same to the model.

A model stores ``Age <= 20.500000000000004`` and a solver returns
``CapitalGain = 5036.500000000001``; neither is what a person would write.
:class:`Display` prints

- a split threshold ``t`` as the shortest decimal ``d`` that splits the
  feature's domain exactly as ``t`` does (no domain value between them):
  ``Age <= 20.5`` for a whole-number age, ``CapitalGain <= 0.5`` for LightGBM's
  ``1e-35``. A continuous feature (no step; with or without a domain) has no
  domain values to split, only the model's cells: ``t`` prints as itself when
  it is short (at most ``SHORT_DIGITS`` significant digits), else as the
  shortest decimal of ``t``'s own model cell at most ``NEAR`` (1e-4, relative)
  below ``t`` and nearer ``t`` than half-way to the cut below (``a <= 0.4982``
  for ``0.4982340186834336``, ``20.5`` for ``20.500000000000004``);
  LightGBM's zero band ``1e-35`` (the model's "is zero" test) prints as ``0``;
- a value ``v`` (moved from a case's ``x0``) as the shortest decimal in the
  same model cell as ``v`` (every split of the model routes it alike), in the
  feature's domain, and no farther from ``x0`` -- so it is still a valid,
  no costlier explanation; when there is none (a continuous feature without a
  step, ``v`` the first float past a split: ``5036.500000000001``), the shortest
  decimal of the same cell at most ``PAST`` (1e-4) of the change farther
  (``5037``): the same prediction, a cost higher by at most 0.01%;
- a category code as its label wherever one is known, and a value with words
  (``Feature.words``: credit's flag ``PAY_0_Pay_delay>=1 = 1`` is "payment
  delayed 1+ month") as its words.

JSON output keeps the exact numbers beside these texts. Every explainer and
report prints through this one helper.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .domains import DomainKind, Domains
from .interp import ZERO_THRESHOLD
from .schema import FeatureKind

if TYPE_CHECKING:
    from .forest import Forest

FloatArray = npt.NDArray[np.float64]

PAST = 1e-4
"""How far past a continuous value (relative to its change) a printed decimal may lie, in the same cell."""

NEAR = 1e-4
"""How far (relative to itself) a printed continuous threshold may lie from the model's own."""

SHORT_DIGITS = 6
"""A continuous threshold with at most this many significant digits prints as itself."""

ZERO_BAND = 1e-30
"""Positive thresholds at most this small whose lower cell holds 0 are LightGBM's zero test: print 0."""


def number_text(v: float) -> str:
    """A float as Python's shortest round-trip text, whole numbers without ``.0``."""
    if not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if v == int(v) and abs(v) < 1e16:
        return str(int(v))
    return repr(float(v))


SMALLEST = 1e-4
"""Below this magnitude :func:`readable` keeps one significant digit."""


def readable(v: float, digits: int = 4) -> str:
    """A float for reading (a distance, a cost, a contribution; never a value to act on): ``digits``
    significant digits in plain decimal notation (never ``1e-08``), thousands grouped from 10,000 up,
    trailing zeros dropped; magnitudes below ``SMALLEST`` keep one significant digit (``0.00000006``)."""
    if v == 0 or not math.isfinite(v):
        return number_text(v) if v != 0 else "0"
    if abs(v) < SMALLEST:
        return f"{v:.{-math.floor(math.log10(abs(v)))}f}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    text = f"{round(v, decimals):,.{decimals}f}" if abs(v) >= 1e4 else f"{round(v, decimals):.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _rounded(v: float, p: int) -> list[float]:
    """``v`` rounded to ``p`` significant digits: nearest, and one unit of the last digit below and above."""
    if v == 0 or not math.isfinite(v):
        return [v]
    e = math.floor(math.log10(abs(v))) - p + 1
    if abs(e) > 290:
        return [float(f"{v:.{p}g}")]
    q = 10.0 ** e
    n = round(v / q)
    return [float(f"{k * q:.{p}g}") for k in (n, n - 1, n + 1)]


def shortest_in(a: float, b: float, *, closed_low: bool) -> float | None:
    """The shortest decimal in ``[a, b)`` (``closed_low``) or ``(a, b)``, nearest the middle; None if none
    has at most 17 significant digits."""
    if not (math.isfinite(a) or math.isfinite(b)):
        return 0.0
    if not math.isfinite(b):
        mid = a + max(1.0, abs(a))
    elif not math.isfinite(a):
        mid = b - max(1.0, abs(b))
    else:
        mid = a + (b - a) / 2
    for p in range(1, 18):
        cands = [c for c in _rounded(mid, p) + ([a] if closed_low else [])
                 if (a <= c if closed_low else a < c) and c < b]
        if cands:
            return min(cands, key=lambda c: (len(number_text(c)), abs(c - mid)))
    return None


class Display:
    """Texts for one model's values and thresholds (see the module docstring)."""

    def __init__(self, forest: "Forest", domains: Domains | None = None) -> None:
        self.forest = forest
        self.domains = domains
        self.schema = forest.schema
        self._cuts: dict[int, FloatArray] = {}

    # -- model cells ---------------------------------------------------------------------

    def cuts(self, i: int) -> FloatArray:
        """Sorted thresholds of numeric splits on feature ``i`` (with LightGBM's zero band)."""
        if i not in self._cuts:
            f = self.forest
            if not hasattr(f, "feature"):  # a Polynomial: its ``x > t`` conditions are the cuts
                p: Any = f
                self._cuts[i] = p.threshold_cuts(i)
                return self._cuts[i]
            sel = (f.feature == i) & ~f.is_categorical & (f.left >= 0)
            t = f.threshold[sel]
            if f.missing_zero[sel].any():
                t = np.concatenate([t, [ZERO_THRESHOLD, -ZERO_THRESHOLD]])
            self._cuts[i] = np.unique(t[np.isfinite(t)])
        return self._cuts[i]

    def _model_value(self, v: float) -> float:
        return float(np.float32(v)) if self.schema.input_dtype == "float32" else float(v)

    def cell(self, i: int, v: float) -> int:
        """Which model cell of feature ``i`` holds ``v`` (splits are ``x <= t``)."""
        return int(np.searchsorted(self.cuts(i), self._model_value(v), side="left"))

    # -- texts ---------------------------------------------------------------------------

    def _categorical(self, i: int) -> bool:
        d = self.domains[i] if self.domains is not None else None
        return self.schema.features[i].kind == FeatureKind.CATEGORICAL or (
            d is not None and d.kind == DomainKind.CATEGORICAL)

    def label(self, i: int, v: float) -> Any:
        """The category label of code ``v`` when the schema or the domains name it, else None."""
        labels = self.schema.features[i].categories
        if labels is None and self.domains is not None:
            labels = self.domains[i].labels
        if labels is not None and math.isfinite(v) and 0 <= int(math.trunc(v)) < len(labels):
            if self._categorical(i) or float(v).is_integer():
                return labels[int(math.trunc(v))]
        return None

    def value(self, i: int, v: float, x0: float | None = None) -> str:
        """``v`` for people (see the module docstring); ``x0``: the case's original value when ``v`` is a
        changed value (None: ``v`` is a case's own value, printed exactly)."""
        v = float(v)
        word = self.schema.features[i].word(v)
        if word is not None:
            return word
        lab = self.label(i, v)
        if lab is not None:
            return str(lab)
        if x0 is None or not math.isfinite(v) or float(v).is_integer() or v == x0:
            return number_text(v)  # a case's own value is printed as it is
        dom = self.domains[i] if self.domains is not None else None
        cell = self.cell(i, v)
        far = abs(v - x0) if math.isfinite(x0) else math.inf
        # a continuous value may print a hair past itself (at most PAST of the change) when nothing shorter lies
        # between the case and it in its cell (the first float past a split)
        tol = PAST * (far if math.isfinite(far) else abs(v)) if dom is None or dom.resolution == 0 else 0.0
        for p in range(1, 17):
            for c in _rounded(v, p):
                if c == v:
                    return number_text(v)  # v is already this short
                if self.cell(i, c) != cell:
                    continue
                if math.isfinite(x0) and ((c - x0) * (v - x0) <= 0 or (abs(c - x0) > far and abs(c - v) > tol)):
                    continue
                if dom is not None and not dom.contains(c, x0):
                    continue
                return number_text(c)
        return number_text(v)

    def threshold(self, i: int, t: float) -> str:
        """Split threshold ``t`` of ``x <= t`` for people: splits the domain's values exactly as ``t`` does."""
        t = float(t)
        if not math.isfinite(t):
            return number_text(t)
        dom = self.domains[i] if self.domains is not None else None
        res = dom.resolution if dom is not None else 0.0
        if dom is not None and dom.kind == DomainKind.BINARY and 0 <= t < 1:
            return "0.5"
        if res > 0:
            o = 0.0  # a grid anchored at 0 (a case's own off-grid value is the exception, not the domain)
            k = math.floor((t - o) / res)
            a, b = o + k * res, o + (k + 1) * res
            c = shortest_in(a, b, closed_low=False)
            if c is not None:
                return number_text(c)
        if self.schema.input_dtype == "float32":
            t32 = float(np.float32(t)) if float(np.float32(t)) <= t else float(
                np.nextafter(np.float32(t), np.float32(-np.inf)))
            nxt = float(np.nextafter(np.float32(t32), np.float32(np.inf)))
            c = shortest_in(t32, nxt, closed_low=True)
            exact = c if c is not None else t32
        else:
            c = shortest_in(t, float(np.nextafter(t, np.inf)), closed_low=False)
            exact = c if c is not None and len(number_text(c)) < len(number_text(t)) else t
        return number_text(self._near(i, t, exact))

    def _near(self, i: int, t: float, exact: float) -> float:
        """A continuous threshold: ``exact`` (the shortest decimal meaning exactly ``t`` to the model) when it
        is short, else the shortest decimal ``d`` in ``[t - NEAR * |t|, t]`` nearer ``t`` than half-way to the
        cut below. ``d`` lies in ``t``'s own cell (``x <= t`` holds at ``d``), so every value past ``t`` is
        also past ``d``: a witness just across the split never prints on the wrong side of the test."""
        cuts = self.cuts(i)
        k = int(np.searchsorted(cuts, t))
        lower = float(cuts[k - 1]) if k > 0 else -math.inf
        if 0 < t <= ZERO_BAND and lower < 0:
            return 0.0  # LightGBM's "is zero" split: x <= 1e-35 holds for 0 and the zero band
        if digits(exact) <= SHORT_DIGITS:
            return exact
        tol = NEAR * abs(t)
        a = max(t - tol, lower + (t - lower) / 2) if math.isfinite(lower) else t - tol
        for p in range(1, digits(exact)):
            cands = [c for c in _rounded(t, p) if a < c <= t]
            if cands:
                return max(cands)  # the nearest t
        return exact


def digits(v: float) -> int:
    """Significant digits of ``v``'s shortest round-trip text."""
    if v == 0 or not math.isfinite(v):
        return 1
    mant = repr(abs(float(v))).split("e")[0].replace(".", "").lstrip("0").rstrip("0")
    return max(1, len(mant))


__all__ = ["Display", "digits", "number_text", "readable", "shortest_in"]
