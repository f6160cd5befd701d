"""The fast path of a query: a heuristic point proven optimal by a per-tree bound, without a MILP.

The warm start (``heuristic.warm_start``: the greedy walk from the case, pulled back toward it) often
finds the optimum itself; :func:`leaf_bound_proves` then shows in about a millisecond that no point
costing less reaches the target, and the driver returns the point (verified as every answer is) without
building the MILP. When the bound does not close, the point starts and prunes the MILP as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, Norm
from lumber.ir.interp import trees_per_output

from .domain import Grid
from .problem import Query
from .targets import decision_threshold

FloatArray = npt.NDArray[np.float64]


SPLIT_CELLS = 64
"""A feature with more cells than this within the cost's box is not split (each cell costs one bound)."""

SPLIT_DEPTH = 2
"""Features split in turn below one another."""

SPLIT_BUDGET = 64
"""Cells one query's proof may bound before it gives up."""


@dataclass(frozen=True)
class LeafBoxes:
    """Every leaf of a forest as a box ``lo < x <= hi`` per feature, and its tree (built once per model)."""

    leaves: npt.NDArray[np.int64]
    tree: npt.NDArray[np.int64]
    lo: FloatArray
    hi: FloatArray
    starts: npt.NDArray[np.int64]
    """First position of each tree's leaves in ``leaves`` (trees in order)."""
    split: npt.NDArray[np.bool_]
    """Features some split reads."""
    _on_grid: dict[tuple[object, ...], tuple[FloatArray, FloatArray]] = field(default_factory=dict, repr=False)

    def on_grid(self, i: int, g: Grid) -> tuple[FloatArray, FloatArray]:
        """Feature ``i``'s box ends on grid ``g``: the smallest value above ``lo`` and the largest at most
        ``hi`` (infinite ends stay infinite), once per feature and grid."""
        key = (i, g.kind, g.step, g.origin, g.single, None if g.values is None else g.values.tobytes())
        hit = self._on_grid.get(key)
        if hit is None:
            lo, hi = self.lo[:, i], self.hi[:, i]
            with np.errstate(invalid="ignore", over="ignore"):
                a = np.where(np.isfinite(lo), g.up(np.where(np.isfinite(lo), lo, 0.0)), lo)
                b = np.where(np.isfinite(hi), g.down(np.where(np.isfinite(hi), hi, 0.0)), hi)
            hit = self._on_grid[key] = (a, b)
        return hit

    @classmethod
    def of(cls, forest: Forest) -> "LeafBoxes":
        n, F = forest.n_nodes, forest.n_features
        lo, hi = np.full((n, F), -np.inf), np.full((n, F), np.inf)
        left, right, depth = forest.left.astype(np.int64), forest.right.astype(np.int64), forest.depth
        for d in range(int(depth.max()) + 1 if n else 0):
            v = np.flatnonzero((depth == d) & (left >= 0))
            f, t = forest.feature[v].astype(np.int64), forest.threshold[v]
            for kids, is_left in ((left[v], True), (right[v], False)):
                lo[kids], hi[kids] = lo[v], hi[v]
                if is_left:
                    hi[kids, f] = np.minimum(hi[v, f], t)
                else:
                    lo[kids, f] = np.maximum(lo[v, f], t)
        leaves = np.flatnonzero(left < 0)
        tree = forest.node_tree[leaves].astype(np.int64)
        order = np.argsort(tree, kind="stable")
        leaves, tree = leaves[order], tree[order]
        starts = np.flatnonzero(np.r_[True, tree[1:] != tree[:-1]])
        split = np.zeros(F, dtype=bool)
        split[forest.feature[left >= 0]] = True
        return cls(leaves, tree, lo[leaves], hi[leaves], starts, split)


@dataclass
class FastPathRecord:
    """How often the fast path proved the queries of a batch so far (one model, target and norm).

    Splitting costs a few milliseconds per query; where it rarely closes (boosted models of the credit data:
    a third of the queries) the MILP was quicker, so after :data:`RECORD_FROM` queries a batch that proves
    fewer than :data:`RECORD_SHARE` of them keeps to the plain bound."""

    tries: int = 0
    proven: int = 0

    def add(self, proven: bool) -> None:
        self.tries += 1
        self.proven += int(proven)

    def splits_pay(self) -> bool:
        return self.tries < RECORD_FROM or self.proven >= RECORD_SHARE * self.tries


RECORD_FROM = 8
RECORD_SHARE = 0.5


def plain_boxes(forest: Forest) -> bool:
    """Are the forest's leaves boxes (plain ``x <= t`` splits: no category sets, no zero-as-missing)?"""
    return not forest.is_categorical.any() and not forest.missing_zero.any()


def leaf_bound_proves(q: Query, cost: float, lo: FloatArray | None = None, hi: FloatArray | None = None,
                      boxes: LeafBoxes | None = None) -> bool:
    """Is every point of ``q``'s bounds that costs at most ``cost`` off the target, by the per-tree bound?

    Such a point lies within the cost's box (:meth:`CaseCost.box`) and in one leaf per tree whose cheapest
    point costs at most ``cost``. Letting each tree take its best such leaf on its own bounds the target's
    score from above; when even that misses the target, no point within ``cost`` reaches it, and a known
    point costing ``cost / (1 - gap)`` is optimal within ``gap``. A leaf's cheapest point is its box's value
    nearest the case on the feature's grid (categories: the case's code, or any other at the change's
    price); a query's bounds off the grid are not rounded, which can only lower a price. Only single-output
    thresholds and argmax classes, on forests of plain splits (:func:`plain_boxes`) and cases without
    missing values, have this form; anything else returns False. ``lo``, ``hi``: narrower bounds than the
    query's (one side of a split, :func:`split_bound_proves`).
    """
    bound = _Bound.of(q, cost, boxes)
    if bound is None:
        return False
    qlo, qhi = bound.bounds(lo, hi)
    if np.any(qlo > qhi):
        return True  # some feature has no value within the cost: no point is that cheap
    ok, d = bound.full(qlo, qhi)
    return bound.proves(np.all(ok, axis=1), bound.combine(d))


class _Bound:
    """The per-tree bound of one query and cost: what every cell of a split shares."""

    def __init__(self, q: Query, cost: float, bx: LeafBoxes) -> None:
        f, s = q.forest, q.forest.schema
        self.q, self.bx, self.cost = q, bx, cost
        self.limit = q.cost.to_objective(cost) * (1 + 1e-9) + 1e-12
        self.norm_is_max, self.norm_is_l2 = q.cost.norm == Norm.LINF, q.cost.norm == Norm.L2
        blo, bhi = q.cost.box(cost)
        self.lo, self.hi = np.maximum(q.lo, blo), np.minimum(q.hi, bhi)
        self.div = max(float(trees_per_output(f)[0]), 1.0) if s.average else 1.0
        base = np.asarray(s.base_score, dtype=np.float64).reshape(-1)
        self.rows: list[tuple[FloatArray, float, float, float]] = []  # (per-leaf score, constant, lo, hi)
        if s.n_outputs == 1:
            theta = decision_threshold(s)
            val = f.value[bx.leaves, 0].astype(np.float64)
            self.rows.append((val, float(base[0]), theta, np.inf) if q.spec.index == 1
                             else (val, float(base[0]), -np.inf, theta))
        else:
            k = q.spec.index
            for o in range(s.n_outputs):
                if o != k:
                    self.rows.append((f.value[bx.leaves, k].astype(np.float64) - f.value[bx.leaves, o],
                                      float(base[k] - base[o]), 0.0, np.inf))

    @classmethod
    def of(cls, q: Query, cost: float, boxes: LeafBoxes | None) -> "_Bound | None":
        f, spec, s = q.forest, q.spec, q.forest.schema
        if (spec.kind != "class" or spec.index is None or (s.n_outputs > 1 and s.cutoff is not None)
                or np.isnan(q.x0).any() or not plain_boxes(f)):
            return None
        return cls(q, cost, boxes if boxes is not None else LeafBoxes.of(f))

    def bounds(self, lo: FloatArray | None, hi: FloatArray | None) -> tuple[FloatArray, FloatArray]:
        return (self.lo if lo is None else np.maximum(self.lo, lo)), (self.hi if hi is None else np.minimum(self.hi, hi))

    def column(self, i: int, a: float, b: float) -> tuple[npt.NDArray[np.bool_], FloatArray]:
        """Per leaf: can feature ``i`` lie in both the leaf's box and ``[a, b]``, and the cheapest such value's
        cost (objective units before the norm combines them)."""
        q, bx, c = self.q, self.bx, self.q.cost.cost
        lo, hi, x0 = bx.lo[:, i], bx.hi[:, i], float(q.x0[i])
        ok = (lo < b) & (a <= hi)
        if q.categorical[i]:  # a leaf not holding the case's code costs the change (its codes may all cost it)
            t0 = float(np.trunc(x0))
            inside = (lo < t0) & (t0 <= hi) & (a <= t0) & (t0 <= b)
            return ok, np.where(inside, 0.0, c.w_up[i])
        if bx.split[i]:
            ga, gb = bx.on_grid(i, q.grid(i))  # the values the feature may take: the box's ends on its grid
            A, B = np.maximum(ga, a), np.minimum(gb, b)
            ok = ok & (A <= B)
            v = np.clip(x0, A, B)
        else:
            v = np.full(lo.shape[0], min(max(x0, a), b))
        if q.cost.norm == Norm.L0:
            return ok, np.where(v > x0, c.w_up[i], 0.0) + np.where(v < x0, c.w_down[i], 0.0)
        return ok, np.where(v > x0, c.w_up[i], c.w_down[i]) * np.abs(v - x0) / c.scale[i]

    def full(self, lo: FloatArray, hi: FloatArray) -> tuple[npt.NDArray[np.bool_], FloatArray]:
        cols = [self.column(i, float(lo[i]), float(hi[i])) for i in range(self.q.x0.shape[0])]
        return np.stack([o for o, _ in cols], axis=1), np.stack([d for _, d in cols], axis=1)

    def combine(self, d: FloatArray, axis: int = 1) -> FloatArray:
        n = self.q.cost.norm
        if n == Norm.LINF:
            return d.max(axis=axis, initial=0.0)
        return np.square(d).sum(axis=axis) if n == Norm.L2 else d.sum(axis=axis)

    def proves(self, ok: npt.NDArray[np.bool_], total: FloatArray) -> bool:
        """Do the leaves ``ok`` within the cost (``total``) leave the target out of reach?"""
        bx, f = self.bx, self.q.forest
        ok = ok & (total <= self.limit)
        if np.any(np.add.reduceat(ok.astype(np.int64), bx.starts) == 0):
            return True  # some tree has no leaf within the cost
        for val, const, a, b in self.rows:
            top = (const + float(np.maximum.reduceat(np.where(ok, val, -np.inf), bx.starts).sum())) / self.div
            low = (const + float(np.minimum.reduceat(np.where(ok, val, np.inf), bx.starts).sum())) / self.div
            tol = 1e-6 * (abs(const) + float(np.abs(val).max(initial=0.0)) * f.n_trees) / self.div + 1e-12
            if top < a - tol or low > b + tol:
                return True
        return False


def split_bound_proves(q: Query, cost: float, features: list[int], depth: int = SPLIT_DEPTH,
                       boxes: LeafBoxes | None = None, budget: int = SPLIT_BUDGET) -> bool:
    """:func:`leaf_bound_proves`, and where it does not close, the same on every cell of one feature of
    ``features`` (between consecutive split levels within the cost's box; categories one by one), each cell
    split again on another of them, up to ``depth`` levels and ``budget`` cells in all. Fixing a feature's
    cell charges every tree the same value of it, which the plain bound lets each tree choose on its own."""
    bound = _Bound.of(q, cost, boxes)
    if bound is None:
        return False
    return _split(bound, bound.lo, bound.hi, features, depth, [budget])


def _split(bound: _Bound, lo: FloatArray, hi: FloatArray, features: list[int], depth: int, left: list[int]) -> bool:
    if np.any(lo > hi):
        return True
    q = bound.q
    OK, D = bound.full(lo, hi)
    if bound.proves(np.all(OK, axis=1), bound.combine(D)):
        return True
    if depth <= 0:
        return False
    f = q.forest
    for i in features:
        if left[0] <= 0:
            return False
        if not (np.isfinite(q.x0[i]) and lo[i] < hi[i]):
            continue
        if q.categorical[i]:
            codes = q.cat_codes[i][(q.cat_codes[i] >= lo[i]) & (q.cat_codes[i] <= hi[i])]
            cells = [(float(c), float(c)) for c in codes]
        else:
            g = q.grid(i)
            t = f.threshold[(f.feature == i) & (f.left >= 0)]
            cuts = np.unique(g.down(t[(t >= lo[i]) & (t < hi[i])]))
            ends = np.r_[lo[i], cuts], np.r_[cuts, hi[i]]
            cells = [(float(g.up(np.array([a]))[0]) if k else float(a), float(b))
                     for k, (a, b) in enumerate(zip(*ends))]
        if len(cells) < 2 or len(cells) > SPLIT_CELLS:
            continue
        rest = [j for j in features if j != i]
        others_ok = np.delete(OK, i, axis=1).all(axis=1)
        others = np.delete(D, i, axis=1)
        proven = True
        for a, b in cells:
            if a > b:
                continue
            left[0] -= 1
            ok_i, d_i = bound.column(i, a, b)
            if bound.norm_is_max:
                total = np.maximum(others.max(axis=1, initial=0.0), d_i)
            else:
                total = bound.combine(others) + (np.square(d_i) if bound.norm_is_l2 else d_i)
            if bound.proves(others_ok & ok_i, total):
                continue
            cl, ch = lo.copy(), hi.copy()
            cl[i], ch[i] = a, b
            if left[0] <= 0 or depth <= 1 or not _split(bound, cl, ch, rest, depth - 1, left):
                proven = False
                break
        if proven:
            return True
    return False
