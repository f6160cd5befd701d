"""Actionability for rules: which features may move, and within which interval.

A rule moves the features of S from their current values (a case ``x0``, or
any case of a region ``lo0 <= x0 <= hi0``) into a box. The constraint model
(``lumber.ir.Constraints``) says what is allowed; for a region a move must be
allowed for *every* case in it, so an ``increase`` feature must end above the
region's upper end and a relative bound ``x0 + v`` is taken at its tightest.
Immutable features are never candidates. The resulting closed interval
``[a, b]`` is stored half-open, ``nextafter(a, -inf) < x <= b``, like the
forest's leaf boxes, so one intersection test serves both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import numpy.typing as npt

from lumber.ir import Constraints
from lumber.ir.constraints import MoveLimits

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class ActionSpace:
    """Per feature: may it be resampled, and into which half-open interval ``lo < x <= hi``."""

    movable: BoolArray
    lo: FloatArray
    hi: FloatArray
    reason: tuple[str, ...]
    """Why a feature cannot move ('' when it can)."""


def action_space(cons: Constraints | None, names: Sequence[str], lo0: FloatArray, hi0: FloatArray) -> ActionSpace:
    """The moves allowed from every case ``lo0 <= x0 <= hi0`` (``lo0 == hi0`` for one case)."""
    d = len(names)
    if cons is None:
        cons = Constraints()
    limits = MoveLimits.of(cons, names)
    unknown = np.isnan(lo0) | np.isnan(hi0)  # an unknown value bounds nothing relative to it, in neither end
    a, b = limits.interval(np.where(unknown, np.nan, lo0), np.where(unknown, np.nan, hi0))
    movable = np.ones(d, dtype=bool)
    reason = [""] * d
    for i, n in enumerate(names):
        r = cons.rule(n)
        if r.immutable:
            movable[i], reason[i] = False, "immutable"
            a[i], b[i] = -np.inf, np.inf
            continue
        if r.allowed is not None and len(r.allowed):
            a[i] = max(a[i], float(min(r.allowed)))
            b[i] = min(b[i], float(max(r.allowed)))
        if not a[i] <= b[i] or np.isposinf(a[i]) or np.isneginf(b[i]):
            movable[i], reason[i] = False, "no room to move"
    lo = np.where(np.isneginf(a), -np.inf, np.nextafter(a, -np.inf))
    return ActionSpace(movable, lo, b, tuple(reason))


def allowed_values(cons: Constraints | None, name: str) -> FloatArray | None:
    """The explicit value set of a feature (categorical/ordinal ``allowed``), if any."""
    if cons is None:
        return None
    r = cons.rule(name)
    return None if r.allowed is None else np.asarray(r.allowed, dtype=np.float64)


__all__ = ["ActionSpace", "action_space", "allowed_values"]
