"""Rule boxes: candidate boxes from the forest's leaves, and merging them into rules.

Section 5 of the paper: the training rows of the target that fall in the
query's projected leaves (positive Projected Forest weight) point at the
forest's leaves (in every tree) where the decision is the target. Each such
leaf, cut down to the features of S and to the actionable space, is a
candidate box; a box qualifies when its CRP reaches ``pi_c``. Qualifying boxes
that touch are merged greedily into their bounding box as long as the merged
box still qualifies (its CRP is re-estimated, never assumed), preferring the
merge with the highest plausibility. What remains are disjoint rules, most
plausible first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import numpy.typing as npt

from .table import LeafTable

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
BoxScore = Callable[[FloatArray, FloatArray], FloatArray]


@dataclass(frozen=True)
class ScoredBox:
    """One rule box over S: ``lo < x_S <= hi`` with its CRP and plausibility."""

    lo: FloatArray
    hi: FloatArray
    crp: float
    plausibility: float


def candidate_boxes(tab: LeafTable, S: IntArray, weights: FloatArray, hit: npt.NDArray[np.bool_],
                    act_lo: FloatArray, act_hi: FloatArray, max_rows: int = 256) -> tuple[FloatArray, FloatArray]:
    """Candidate boxes over S from the target rows with positive weight (deduplicated).

    Two kinds: every leaf (of any tree) holding such a row, and each row's cell
    of the forest's partition (the intersection of its leaves over all trees,
    the paper's Figure 1a), which is purer where many correlated features
    stay fixed. Only the ``max_rows`` rows of highest weight (the closest to
    the query on its fixed part) are used. Boxes are clipped to the actionable
    space; empty boxes and the whole actionable space are dropped.
    """
    rows = np.flatnonzero((weights > 0) & hit)
    if rows.size > max_rows:
        rows = np.sort(rows[np.argsort(-weights[rows], kind="stable")[:max_rows]])
    if rows.size == 0 or S.size == 0:
        return np.zeros((0, S.size)), np.zeros((0, S.size))
    rl = tab.row_leaf[rows]
    leaves = np.unique(rl.reshape(-1))
    cell_lo = np.empty((rows.size, S.size))
    cell_hi = np.empty((rows.size, S.size))
    for k, j in enumerate(S):
        cell_lo[:, k] = tab.lo[rl, j].max(axis=1)
        cell_hi[:, k] = tab.hi[rl, j].min(axis=1)
    lo = np.concatenate([tab.lo[np.ix_(leaves, S)], cell_lo])
    hi = np.concatenate([tab.hi[np.ix_(leaves, S)], cell_hi])
    lo = np.maximum(lo, act_lo[S][None, :])
    hi = np.minimum(hi, act_hi[S][None, :])
    trivial = np.all((lo == act_lo[S][None, :]) & (hi == act_hi[S][None, :]), axis=1)
    keep = np.all(lo < hi, axis=1) & ~trivial
    both, _ = unique_rows(np.concatenate([lo[keep], hi[keep]], axis=1))
    return both[:, :S.size].copy(), both[:, S.size:].copy()


BLOCK_CELLS = 1 << 18
"""(box, row) pairs tested at once by :func:`in_boxes`: the block's temporaries stay in the L2 cache
(all boxes at once streamed every comparison through memory, 7x slower on Adult's 24k values)."""


def in_boxes(values: FloatArray, lo: FloatArray, hi: FloatArray) -> BoolArray:
    """``(b, r)``: row ``values[r]`` (over S) lies in box b."""
    b, n = lo.shape[0], values.shape[0]
    out = np.empty((b, n), dtype=bool)
    cols = [np.ascontiguousarray(values[:, k]) for k in range(lo.shape[1])]
    step = max(1, BLOCK_CELLS // max(n, 1))
    tmp = np.empty((min(step, b), n), dtype=bool)
    with np.errstate(invalid="ignore"):
        for s in range(0, b, step):
            e = min(b, s + step)
            o, t = out[s:e], tmp[:e - s]
            o[:] = True
            for k, col in enumerate(cols):
                np.greater(col, lo[s:e, k][:, None], out=t)
                o &= t
                np.less_equal(col, hi[s:e, k][:, None], out=t)
                o &= t
    return out


def unique_rows(values: FloatArray) -> tuple[FloatArray, IntArray]:
    """Distinct rows (in sorted order) and the inverse map, via one integer key per row.

    Columns are coded by hashing (``pandas.factorize``, -0.0 as 0.0, NaN one value) rather than
    sorted, and the row keys likewise; only the distinct keys are sorted. The same result as
    ``np.unique(values, axis=0, return_index=True, return_inverse=True)`` (first occurrence of each
    row), several times faster on the training rows rule construction compresses.
    """
    import pandas as pd

    n, d = values.shape
    if n == 0:
        return values[:0].copy(), np.zeros(0, dtype=np.int64)
    key = np.zeros(n, dtype=np.int64)
    span = 1
    for k in range(d):
        codes, u = pd.factorize(values[:, k] + 0.0, sort=True, use_na_sentinel=False)
        span *= max(len(u), 1)
        if span >= 1 << 62:
            uniq, inv2 = np.unique(values, axis=0, return_inverse=True)
            return uniq, inv2.reshape(-1).astype(np.int64)
        key = key * len(u) + codes
    codes = pd.factorize(key, sort=False)[0].astype(np.int64)  # in order of first appearance
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = codes[1:] > np.maximum.accumulate(codes)[:-1]
    first = np.flatnonzero(new)
    order = np.argsort(key[first], kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return values[first[order]], rank[codes].astype(np.int64)


def compress(values: FloatArray, weights: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Merge equal rows (summing their weights): box counts then cost per distinct value, not per row."""
    if values.shape[0] == 0:
        return values, weights
    uniq, inv = unique_rows(values)
    return uniq, np.bincount(inv, weights=weights, minlength=uniq.shape[0]).astype(np.float64, copy=False)


def weighted_share(values: FloatArray, weights: FloatArray, lo: FloatArray, hi: FloatArray,
                   chunk: int = 256) -> FloatArray:
    """``sum_r weights[r] * 1[values[r] in box b]`` for every box (rows already restricted)."""
    out = np.empty(lo.shape[0])
    for s in range(0, lo.shape[0], chunk):
        out[s:s + chunk] = in_boxes(values, lo[s:s + chunk], hi[s:s + chunk]) @ weights
    return out


def _touch(lo: FloatArray, hi: FloatArray, slo: FloatArray, shi: FloatArray) -> BoolArray:
    return np.all(np.maximum(lo, slo) <= np.minimum(hi, shi), axis=1)  # type: ignore[no-any-return]


def _overlap(lo: FloatArray, hi: FloatArray, slo: FloatArray, shi: FloatArray) -> BoolArray:
    return np.all(np.maximum(lo, slo) < np.minimum(hi, shi), axis=1)  # type: ignore[no-any-return]


def _inside(lo: FloatArray, hi: FloatArray, slo: FloatArray, shi: FloatArray) -> BoolArray:
    return np.all((lo >= slo) & (hi <= shi), axis=1)  # type: ignore[no-any-return]


def merge_boxes(lo: FloatArray, hi: FloatArray, crp: FloatArray, plaus: FloatArray, *, crp_of: BoxScore,
                plaus_of: BoxScore, pi_c: float, max_rules: int = 5, max_steps: int = 64,
                allowed: Callable[[FloatArray, FloatArray], BoolArray] | None = None,
                prefer: FloatArray | BoolArray | None = None) -> list[ScoredBox]:
    """Greedy merge of qualifying boxes into at most ``max_rules`` disjoint rules (most plausible first).

    ``allowed(lo, hi)`` vetoes merged boxes (e.g. one holding the case's own values).
    ``prefer[b]`` (bool, or a score: higher first): how much box b holds values whose
    counterfactual points are plausible ones (inliers reaching the target); preferred boxes
    seed rules first, so they are never crowded out by ``max_rules``, and rank first.
    """
    pref = np.zeros(lo.shape[0]) if prefer is None else np.asarray(prefer, dtype=np.float64)
    order = np.lexsort((-crp, -plaus, -pref))
    lo, hi, crp, plaus, pref = lo[order], hi[order], crp[order], plaus[order], pref[order]
    alive = np.ones(lo.shape[0], dtype=bool)
    out: list[ScoredBox] = []
    first_pref: list[float] = []
    for i in range(lo.shape[0]):
        if not alive[i] or len(out) >= max_rules:
            continue
        alive[i] = False
        seed = ScoredBox(lo[i], hi[i], float(crp[i]), float(plaus[i]))
        if any(_overlap(seed.lo[None], seed.hi[None], r.lo, r.hi)[0] for r in out):
            continue
        for _ in range(max_steps):
            idx = np.flatnonzero(alive & _touch(lo, hi, seed.lo, seed.hi))
            if idx.size == 0:
                break
            mlo = np.minimum(lo[idx], seed.lo[None, :])
            mhi = np.maximum(hi[idx], seed.hi[None, :])
            free = np.ones(idx.size, dtype=bool)
            for r in out:
                free &= ~_overlap(mlo, mhi, r.lo, r.hi)
            if allowed is not None:
                free &= allowed(mlo, mhi)
            if not free.any():
                break
            mlo, mhi = mlo[free], mhi[free]
            c = crp_of(mlo, mhi)
            ok = np.flatnonzero(c >= pi_c)
            if ok.size == 0:
                break
            p = plaus_of(mlo[ok], mhi[ok])
            k = int(np.lexsort((-c[ok], -p))[0])
            seed = ScoredBox(mlo[ok[k]], mhi[ok[k]], float(c[ok[k]]), float(p[k]))
            alive &= ~_inside(lo, hi, seed.lo, seed.hi)
        alive &= ~_inside(lo, hi, seed.lo, seed.hi)
        out.append(seed)
        first_pref.append(float(pref[i]))
    ranked = sorted(zip(out, first_pref), key=lambda t: (-t[1], -t[0].plausibility, -t[0].crp))
    return [b for b, _ in ranked]


__all__ = ["ScoredBox", "candidate_boxes", "compress", "in_boxes", "unique_rows", "merge_boxes", "weighted_share"]
