"""Values an input can actually take: the input dtype's grid, integers, domains.

A test ``x > t`` is met by the smallest value above ``t`` that the model can
see. For a float32 model (scikit-learn trees, XGBoost) that is the smallest
float32 ``v`` with ``float64(v) > t``; for integer-valued features (binary,
ordinal) the next integer. These helpers turn an interval's real bounds into
the closed interval of realizable values, vectorized.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32 = np.float32


def _round_up32(a: npt.NDArray[np.float64], strict: npt.NDArray[np.bool_] | bool) -> npt.NDArray[np.float64]:
    """Smallest float32 (as float64) above ``a`` (``>`` when strict, ``>=`` otherwise)."""
    with np.errstate(over="ignore"):
        y32 = a.astype(F32)
    y = y32.astype(np.float64)
    ok = np.where(strict, y > a, y >= a)
    up = np.nextafter(y32, F32(np.inf)).astype(np.float64)
    return np.where(ok, y, up)


def _round_down32(b: npt.NDArray[np.float64], strict: npt.NDArray[np.bool_] | bool) -> npt.NDArray[np.float64]:
    """Largest float32 (as float64) below ``b`` (``<`` when strict, ``<=`` otherwise)."""
    with np.errstate(over="ignore"):
        y32 = b.astype(F32)
    y = y32.astype(np.float64)
    ok = np.where(strict, y < b, y <= b)
    down = np.nextafter(y32, F32(-np.inf)).astype(np.float64)
    return np.where(ok, y, down)


def above(a: npt.ArrayLike, strict: npt.ArrayLike, dtype: str,
          integer: npt.ArrayLike = False) -> npt.NDArray[np.float64]:
    """Smallest realizable value ``v > a`` (strict) or ``v >= a``; ``-inf`` stays ``-inf``.

    ``integer`` (broadcast) asks for integer values; ``dtype`` is the model's input
    dtype (``"float32"`` or ``"float64"``).
    """
    a = np.asarray(a, dtype=np.float64)
    strict = np.asarray(strict, dtype=bool)
    integer = np.asarray(integer, dtype=bool)
    with np.errstate(invalid="ignore"):
        ints = np.where(strict, np.floor(a) + 1.0, np.ceil(a))
    v = np.where(integer, ints, a)
    s = strict & ~integer
    if dtype == "float32":
        out = _round_up32(v, s)
    else:
        out = np.where(s, np.nextafter(v, np.inf), v)
    return np.where(np.isneginf(a), -np.inf, out)


def below(b: npt.ArrayLike, strict: npt.ArrayLike, dtype: str,
          integer: npt.ArrayLike = False) -> npt.NDArray[np.float64]:
    """Largest realizable value ``v < b`` (strict) or ``v <= b``; ``inf`` stays ``inf``."""
    b = np.asarray(b, dtype=np.float64)
    strict = np.asarray(strict, dtype=bool)
    integer = np.asarray(integer, dtype=bool)
    with np.errstate(invalid="ignore"):
        ints = np.where(strict, np.ceil(b) - 1.0, np.floor(b))
    v = np.where(integer, ints, b)
    s = strict & ~integer
    if dtype == "float32":
        out = _round_down32(v, s)
    else:
        out = np.where(s, np.nextafter(v, -np.inf), v)
    return np.where(np.isposinf(b), np.inf, out)


def empty(lo: npt.NDArray[np.float64], hi: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """A closed realizable interval ``[lo, hi]`` holds no finite value."""
    return (lo > hi) | np.isposinf(lo) | np.isneginf(hi)


__all__ = ["above", "below", "empty"]
