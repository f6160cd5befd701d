"""Projected Forest (CDP) and Regional Random Forest (CRP) estimators (Amoukou and Brunel).

A query fixes some features at a point (routed exactly, NaN included) and
constrains the others to intervals ``lo < x <= hi`` (free = the whole line). In
every tree it reaches the leaves its constraints meet: a split on a point
feature goes one way, a split on an interval feature goes left, right or both.
The training rows that count are those of the query's *cell*: the rows that go
the query's way at every reached split the query determines (the intersection
of the reached leaves, the paper's Projected Forest). With ``W_t`` the cell's
rows in tree ``t`` and ``H_t`` those whose decision is in the target set, the
estimate is the mean over trees with ``W_t > 0`` of ``H_t / W_t``: that is
``sum_i w_i 1[Y_i in Y*]`` with ``w_i = mean_t 1[i in cell_t] / W_t``
(:func:`projected_weights`). The work is done on bitsets, :mod:`cells`.

* ``CDP_S(x)``: point on the features outside S, S free (Projected Forest).
* ``CRP_S(x, C)``: point outside S, the box C on S (Regional RF).
* Regional versions: intervals from a region R instead of points.

For the subset search every feature gets a bit (:func:`feature_bits`); a subset
is a mask and its query routes are the fixed routes with the mask's features
switched to their actionable interval (``core.subset_routes``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import numpy.typing as npt

from .cells import BOTH, CellIndex

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
BitArray = npt.NDArray[np.uint64]

SENTINEL_BIT = 63
"""Bit of every feature that is not a search candidate (never part of a subset mask)."""
MAX_CANDIDATES = 63


# -- generic queries ---------------------------------------------------------------------------

def _as_index(names: Sequence[str], S: Sequence[int] | Sequence[str]) -> IntArray:
    return np.array([names.index(s) if isinstance(s, str) else int(s) for s in S], dtype=np.int64)


def _names(cells: CellIndex) -> list[str]:
    return list(cells.forest.schema.feature_names)


def cdp(cells: CellIndex, hits: BoolArray, X: FloatArray, S: Sequence[int] | Sequence[str]) -> FloatArray:
    """``CDP_S(x, Y*)`` for every row of ``X`` (as the rule forest reads it): S resampled, the rest fixed."""
    idx = _as_index(_names(cells), S)
    routes = np.where(np.isin(cells.feature, idx)[None, :], BOTH, cells.point_routes(X)).astype(np.int8)
    return cells.estimate(routes, cells.hit_bits(hits))[0]


def crp(cells: CellIndex, hits: BoolArray, X: FloatArray, S: Sequence[int] | Sequence[str],
        box_lo: FloatArray, box_hi: FloatArray) -> FloatArray:
    """``CRP_S(x, C)`` for every row of ``X``: S in the box ``box_lo < x_S <= box_hi``, the rest fixed."""
    idx = _as_index(_names(cells), S)
    X = np.atleast_2d(X)
    n, d = X.shape
    lo = np.full((n, d), -np.inf)
    hi = np.full((n, d), np.inf)
    lo[:, idx] = np.asarray(box_lo, dtype=np.float64)
    hi[:, idx] = np.asarray(box_hi, dtype=np.float64)
    on = np.isin(cells.feature, idx)[None, :]
    routes = np.where(on, cells.interval_routes(lo, hi), cells.point_routes(X)).astype(np.int8)
    return cells.estimate(routes, cells.hit_bits(hits))[0]


def regional_probability(cells: CellIndex, hits: BoolArray, lo: FloatArray, hi: FloatArray) -> FloatArray:
    """Regional RF estimate for boxes ``lo[q] < x <= hi[q]`` (every feature an interval).

    ``CDP_S(R)`` is this with R's intervals outside S and S free; ``CRP_S(R, C)``
    with R outside S and C on S.
    """
    return cells.estimate(cells.interval_routes(np.atleast_2d(lo), np.atleast_2d(hi)), cells.hit_bits(hits))[0]


def projected_weights(cells: CellIndex, route: npt.NDArray[np.int8]) -> FloatArray:
    """Forest weights ``w_i`` of the training rows for one query's routes (``(V,)``)."""
    return cells.weights(route)


# -- subset masks ------------------------------------------------------------------------------

def feature_bits(n_features: int, candidates: IntArray) -> BitArray:
    """Bit of each feature: candidates get bits 0..K-1, every other feature the sentinel bit."""
    if candidates.shape[0] > MAX_CANDIDATES:
        raise ValueError(f"at most {MAX_CANDIDATES} candidate features")
    bits = np.full(n_features, np.uint64(1) << np.uint64(SENTINEL_BIT), dtype=np.uint64)
    bits[candidates] = np.left_shift(np.uint64(1), np.arange(candidates.shape[0], dtype=np.uint64))
    return bits


__all__ = ["MAX_CANDIDATES", "SENTINEL_BIT", "cdp", "crp", "feature_bits", "projected_weights", "regional_probability"]
