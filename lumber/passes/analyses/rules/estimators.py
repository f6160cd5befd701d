"""Projected Forest (CDP) and Regional Random Forest (CRP) estimators (papers.md section 4).

A query fixes some features at a point (routed exactly, NaN included) and
constrains the others to intervals ``lo < x <= hi`` (free = the whole line). In
every tree it reaches the leaves its constraints meet: a split on a point
feature goes one way, a split on an interval feature goes left, right or both.
With ``W_t`` the training rows in the leaves reached in tree ``t`` and ``H_t``
those whose decision is in the target set, the estimate is the mean over trees
with ``W_t > 0`` of ``H_t / W_t``. That is ``sum_i w_i 1[Y_i in Y*]`` with the
forest weights ``w_i = mean_t 1[i in reached_t] / W_t`` (:func:`projected_weights`).

* ``CDP_S(x)``: point on the features outside S, S free (Projected Forest).
* ``CRP_S(x, C)``: point outside S, the box C on S (Regional RF).
* Regional versions: intervals from a region R instead of points.

Everything is vectorized over queries and leaves; per-tree sums are one
``np.add.reduceat`` over the leaf axis (leaves are grouped by tree).

For the subset search the point/interval test of each feature is packed into a
bit per feature: ``bad_fixed[l]`` has bit ``b(j)`` set when leaf l violates the
fixed value of feature j, ``bad_action[l]`` when it misses feature j's
actionable interval. Leaf l is reached for subset mask ``M`` iff
``bad_fixed & ~M == 0`` and ``bad_action & M == 0``: all subsets at once.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import numpy.typing as npt

from .table import LeafTable

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
BitArray = npt.NDArray[np.uint64]

SENTINEL_BIT = 63
"""Bit of every feature that is not a search candidate (never part of a subset mask)."""
MAX_CANDIDATES = 63
CHUNK_ENTRIES = 1 << 22
"""Queries x leaves evaluated together; bounds temporaries to tens of MB."""


# -- generic queries ---------------------------------------------------------------------------

def reach_mask(tab: LeafTable, X: FloatArray | None, lo: FloatArray | None, hi: FloatArray | None,
               is_point: BoolArray) -> BoolArray:
    """``(q, L)``: leaves each query reaches.

    Features with ``is_point[j]`` are routed at ``X[:, j]``; the others must meet
    ``lo[:, j] < x <= hi[:, j]`` (``None`` bounds mean free).
    """
    q = (X if X is not None else lo if lo is not None else hi).shape[0]  # type: ignore[union-attr]
    out = np.ones((q, tab.n_leaves), dtype=bool)
    for j in range(tab.n_features):
        if not tab.tested[:, j].any():
            continue
        if is_point[j]:
            assert X is not None
            out &= tab.point_ok(j, X[:, j])
            continue
        a = np.full(q, -np.inf) if lo is None else lo[:, j]
        b = np.full(q, np.inf) if hi is None else hi[:, j]
        if np.all(np.isneginf(a)) and np.all(np.isposinf(b)):
            continue
        out &= tab.interval_ok(j, a, b)
    return out


def tree_average(tab: LeafTable, reach: BoolArray, hits_leaf: FloatArray) -> tuple[FloatArray, IntArray]:
    """Mean over trees of (target rows / rows) in the reached leaves; and the trees that count.

    ``reach`` is ``(..., L)``; trees whose reached leaves hold no training row are
    left out of the mean. With no such tree the estimate is 0.
    """
    shape = reach.shape[:-1]
    r2 = reach.reshape(-1, tab.n_leaves)
    prob = np.empty(r2.shape[0])
    used = np.empty(r2.shape[0], dtype=np.int64)
    starts = tab.tree_start[:-1]
    step = max(1, CHUNK_ENTRIES // max(tab.n_leaves, 1))
    n_rows = tab.n_rows.astype(np.float32)
    hits = hits_leaf.astype(np.float32)
    for s in range(0, r2.shape[0], step):
        blk = r2[s:s + step]
        W = np.add.reduceat(blk * n_rows, starts, axis=1).astype(np.float64)
        H = np.add.reduceat(blk * hits, starts, axis=1).astype(np.float64)
        valid = W > 0
        ratio = np.divide(H, W, out=np.zeros_like(H), where=valid)
        nv = valid.sum(axis=1)
        prob[s:s + step] = ratio.sum(axis=1) / np.maximum(nv, 1)
        used[s:s + step] = nv
    return prob.reshape(shape), used.reshape(shape)


def projected_weights(tab: LeafTable, reach: BoolArray) -> FloatArray:
    """Forest weights ``w_i`` of the training rows for one query's reached leaves ``reach[L]``."""
    W = np.add.reduceat(reach * tab.n_rows, tab.tree_start[:-1])
    valid = W > 0
    if not valid.any():
        return np.zeros(tab.X.shape[0])
    inv = np.divide(1.0, W, out=np.zeros_like(W), where=valid)
    contrib = reach[tab.row_leaf] * inv[None, :]
    return contrib.sum(axis=1) / float(valid.sum())  # type: ignore[no-any-return]


def _as_index(tab: LeafTable, S: Sequence[int] | Sequence[str]) -> IntArray:
    names = tab.feature_names
    return np.array([names.index(s) if isinstance(s, str) else int(s) for s in S], dtype=np.int64)


def cdp(tab: LeafTable, hits: BoolArray, X: FloatArray, S: Sequence[int] | Sequence[str]) -> FloatArray:
    """``CDP_S(x, Y*)`` for every row of ``X`` (prepared for the rule forest): S resampled, the rest fixed."""
    idx = _as_index(tab, S)
    is_point = np.ones(tab.n_features, dtype=bool)
    is_point[idx] = False
    reach = reach_mask(tab, X, None, None, is_point)
    return tree_average(tab, reach, tab.hits_per_leaf(hits))[0]


def crp(tab: LeafTable, hits: BoolArray, X: FloatArray, S: Sequence[int] | Sequence[str],
        box_lo: FloatArray, box_hi: FloatArray) -> FloatArray:
    """``CRP_S(x, C)`` for every row of ``X``: S in the box ``box_lo < x_S <= box_hi``, the rest fixed."""
    idx = _as_index(tab, S)
    n = X.shape[0]
    is_point = np.ones(tab.n_features, dtype=bool)
    is_point[idx] = False
    lo = np.full((n, tab.n_features), -np.inf)
    hi = np.full((n, tab.n_features), np.inf)
    lo[:, idx] = np.asarray(box_lo, dtype=np.float64)
    hi[:, idx] = np.asarray(box_hi, dtype=np.float64)
    reach = reach_mask(tab, X, lo, hi, is_point)
    return tree_average(tab, reach, tab.hits_per_leaf(hits))[0]


def regional_probability(tab: LeafTable, hits: BoolArray, lo: FloatArray, hi: FloatArray) -> FloatArray:
    """Regional RF estimate for boxes ``lo[q] < x <= hi[q]`` (every feature an interval).

    ``CDP_S(R)`` is this with R's intervals outside S and S free; ``CRP_S(R, C)``
    with R outside S and C on S.
    """
    lo2, hi2 = np.atleast_2d(lo), np.atleast_2d(hi)
    reach = reach_mask(tab, None, lo2, hi2, np.zeros(tab.n_features, dtype=bool))
    return tree_average(tab, reach, tab.hits_per_leaf(hits))[0]


# -- bit-packed fast path for the subset search ------------------------------------------------

def feature_bits(n_features: int, candidates: IntArray) -> BitArray:
    """Bit of each feature: candidates get bits 0..K-1, every other feature the sentinel bit."""
    if candidates.shape[0] > MAX_CANDIDATES:
        raise ValueError(f"at most {MAX_CANDIDATES} candidate features")
    bits = np.full(n_features, np.uint64(1) << np.uint64(SENTINEL_BIT), dtype=np.uint64)
    bits[candidates] = np.left_shift(np.uint64(1), np.arange(candidates.shape[0], dtype=np.uint64))
    return bits


def point_bits(tab: LeafTable, X: FloatArray, bits: BitArray) -> BitArray:
    """``(n, L)``: features whose fixed value at ``X[i]`` leaf l's path contradicts."""
    out = np.zeros((X.shape[0], tab.n_leaves), dtype=np.uint64)
    zero = np.uint64(0)
    for j in range(tab.n_features):
        if tab.tested[:, j].any():
            out |= np.where(tab.point_ok(j, X[:, j]), zero, bits[j])
    return out


def interval_bits(tab: LeafTable, lo: FloatArray, hi: FloatArray, bits: BitArray,
                  features: IntArray | None = None) -> BitArray:
    """``(q, L)``: features whose interval ``lo[q, j] < x <= hi[q, j]`` misses leaf l's box."""
    out = np.zeros((lo.shape[0], tab.n_leaves), dtype=np.uint64)
    zero = np.uint64(0)
    feats = range(tab.n_features) if features is None else features
    for j in feats:
        j = int(j)
        if not tab.tested[:, j].any():
            continue
        if np.all(np.isneginf(lo[:, j])) and np.all(np.isposinf(hi[:, j])):
            continue
        out |= np.where(tab.interval_ok(j, lo[:, j], hi[:, j]), zero, bits[j])
    return out


def subset_reach(bad_fixed: BitArray, bad_action: BitArray, masks: BitArray) -> BoolArray:
    """``(m, L)``: leaves reached when the features of ``masks[m]`` are resampled, for one query."""
    M = masks[:, None]
    return ((bad_fixed[None, :] & ~M) == 0) & ((bad_action[None, :] & M) == 0)  # type: ignore[no-any-return]


def subset_cdp(tab: LeafTable, hits_leaf: FloatArray, bad_fixed: BitArray, bad_action: BitArray,
               masks: BitArray) -> FloatArray:
    """CDP of every subset mask for one query, in chunks of subsets."""
    out = np.empty(masks.shape[0])
    step = max(1, CHUNK_ENTRIES // max(tab.n_leaves, 1))
    for s in range(0, masks.shape[0], step):
        out[s:s + step] = tree_average(tab, subset_reach(bad_fixed, bad_action, masks[s:s + step]), hits_leaf)[0]
    return out


def box_crp(tab: LeafTable, hits_leaf: FloatArray, fixed_ok: BoolArray, S: IntArray,
            box_lo: FloatArray, box_hi: FloatArray) -> FloatArray:
    """CRP of many boxes ``box_lo[b] < x_S <= box_hi[b]`` for one query whose other features
    leave the leaves ``fixed_ok[L]`` reachable (only those leaves are looked at)."""
    idx = np.flatnonzero(fixed_ok)
    nb = box_lo.shape[0]
    if idx.size == 0:
        return np.zeros(nb)
    tree = np.searchsorted(tab.tree_start, idx, side="right") - 1
    _, first = np.unique(tree, return_index=True)
    n_rows = tab.n_rows[idx]
    hits = hits_leaf[idx]
    lo = tab.lo[idx][:, S]
    hi = tab.hi[idx][:, S]
    out = np.empty(nb)
    step = max(1, CHUNK_ENTRIES // max(idx.size * max(len(S), 1), 1))
    for s in range(0, nb, step):
        blo, bhi = box_lo[s:s + step], box_hi[s:s + step]
        reach = np.ones((blo.shape[0], idx.size), dtype=bool)
        for k in range(len(S)):
            reach &= np.maximum(lo[None, :, k], blo[:, k][:, None]) < np.minimum(hi[None, :, k], bhi[:, k][:, None])
        W = np.add.reduceat(reach * n_rows, first, axis=1)
        H = np.add.reduceat(reach * hits, first, axis=1)
        valid = W > 0
        ratio = np.divide(H, W, out=np.zeros_like(H), where=valid)
        out[s:s + step] = ratio.sum(axis=1) / np.maximum(valid.sum(axis=1), 1)
    return out


__all__ = [
    "MAX_CANDIDATES", "SENTINEL_BIT", "box_crp", "cdp", "crp", "feature_bits", "interval_bits", "point_bits",
    "projected_weights", "reach_mask", "regional_probability", "subset_cdp", "subset_reach", "tree_average",
]
