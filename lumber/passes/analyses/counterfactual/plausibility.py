"""Plausibility through an isolation forest (papers.md section 3, equation 33).

An isolation forest trained on rows of the target class, lowered to a Forest
(scikit-learn's frontend stores ``depth + c(n)`` in each leaf, averaged, with
``PostTransform.ISOLATION``), scores a point by its mean path length: short
paths mean outliers. The MILP encodes it with the same branch variables as the
model (``problem.py``) and requires a mean path length of at least ``delta``;
``delta`` is the ``contamination`` quantile of the training rows' lengths, so
that share of the target class would count as implausible.

Before encoding, :func:`collapse_uniform` turns every subtree whose leaves all
hold the same path length into one leaf (on credit about a fifth of an
isolation forest's splits: sibling leaves at the depth limit that isolate
equally many rows); the score is the same for every input, with fewer MILP
variables. Verification still evaluates the forest as given.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, InputDataError, PostTransform, Task

FloatArray = npt.NDArray[np.float64]


def path_lengths(isolation: Forest, X: Any) -> FloatArray:
    """Mean path length (with the ``c(n)`` leaf correction) of each row."""
    _check(isolation)
    return np.asarray(isolation.evaluate(X), dtype=np.float64).reshape(-1)


def isolation_threshold(isolation: Forest, X_target: Any, contamination: float = 0.1) -> float:
    """``delta`` such that a ``contamination`` share of ``X_target`` has a shorter mean path."""
    if not 0.0 <= contamination < 1.0:
        raise InputDataError(f"contamination must be in [0, 1), got {contamination!r}")
    lengths = path_lengths(isolation, X_target)
    if lengths.size == 0:
        raise InputDataError("no rows of the target class to calibrate the isolation forest on")
    return float(np.quantile(lengths, contamination))


def collapse_uniform(forest: Forest) -> Forest:
    """``forest`` with every subtree whose leaves all hold equal values replaced by one such leaf.

    Exact: each tree gives every input the same value as before (no routing changes the value
    reached), so ``evaluate`` is bit-identical. Node ids are renumbered in their order, which keeps
    children after their parent within the same tree."""
    left, right = forest.left.astype(np.int64), forest.right.astype(np.int64)
    n = forest.n_nodes
    uniform = left < 0
    val = np.array(forest.value)
    depth = forest.depth
    inner = np.flatnonzero(left >= 0)
    for d in range(int(depth.max()) - 1 if n else -1, -1, -1):  # bottom-up; a uniform node takes its leaves' value
        v = inner[depth[inner] == d]
        li, ri = left[v], right[v]
        same = uniform[li] & uniform[ri] & np.all(val[li] == val[ri], axis=1)
        uniform[v] = same
        val[v[same]] = val[li[same]]
    internal_uniform = uniform & (left >= 0)
    if not internal_uniform.any():
        return forest
    keep = np.ones(n, dtype=bool)
    for d in range(int(depth.max()) if n else 0):  # top-down: children of a collapsed or dropped node go
        v = inner[(depth[inner] == d)]
        gone = ~keep[v] | internal_uniform[v]
        keep[left[v[gone]]] = False
        keep[right[v[gone]]] = False
    new_id = np.cumsum(keep) - 1
    leaf = internal_uniform | (left < 0)
    k = np.flatnonzero(keep)
    kl = np.where(leaf[k], -1, new_id[np.maximum(left[k], 0)])
    kr = np.where(leaf[k], -1, new_id[np.maximum(right[k], 0)])
    offs = np.searchsorted(k, forest.tree_offset)
    cat = forest.is_categorical[k] & ~leaf[k]
    sizes = np.where(cat, np.diff(forest.cat_offset)[k], 0)
    cat_offset = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    cat_values = (np.concatenate([forest.cat_values[forest.cat_offset[j]:forest.cat_offset[j + 1]]
                                  for j in k[cat]]) if cat.any() else np.zeros(0, dtype=np.int64))
    value = np.where(leaf[k][:, None], val[k], 0.0)
    return forest.replace(
        tree_offset=offs, left=kl, right=kr, feature=np.where(leaf[k], -1, forest.feature[k]),
        threshold=np.where(leaf[k], np.nan, forest.threshold[k]),
        missing_left=forest.missing_left[k] & ~leaf[k], missing_zero=forest.missing_zero[k] & ~leaf[k],
        is_categorical=cat, cat_offset=cat_offset, cat_values=cat_values,
        cat_in_set_left=forest.cat_in_set_left[k] & cat, cat_invalid_left=forest.cat_invalid_left[k] & cat,
        value=value, count=None if forest.count is None else forest.count[k])


def _check(isolation: Forest) -> None:
    s = isolation.schema
    if s.task != Task.ANOMALY or s.post_transform != PostTransform.ISOLATION or s.n_outputs != 1:
        raise InputDataError("the plausibility model must be a lowered isolation forest",
                             "pass lumber.load(sklearn.ensemble.IsolationForest(...).fit(X_target))")


class BoxBound:
    """Upper bounds of the isolation score over boxes of feature values, and implausible boxes around points.

    The cut loop of ``solve.py`` solves the query without the isolation forest, and when the optimum is
    not plausible cuts off a box around it in which no point is plausible: the box is the point's cell in
    the split partition, widened one feature bound at a time while the bound below stays under ``delta``.
    The bound over a box is, per tree, the largest leaf value among the leaves some point of the box
    reaches (routing decided per split from the box's lowest and highest value on its feature), averaged
    like the score; it is at least the score of every point in the box, so the box holds none that is
    plausible. Only plain ``x <= t`` splits (scikit-learn's) are supported: see :meth:`supported`.
    """

    def __init__(self, isolation: Forest, domains: list[Any], delta: float) -> None:
        f = isolation
        self.forest, self.domains, self.delta = f, domains, delta
        inner = f.left >= 0
        self.feature = np.where(inner, f.feature, 0).astype(np.int64)
        self.threshold = np.where(inner, f.threshold, 0.0)
        self.levels = [np.flatnonzero(inner & (f.depth == d)) for d in range(int(f.depth.max()) + 1 if f.n_nodes else 0)]
        self.leaves = np.flatnonzero(~inner)
        self.leaf_tree = f.node_tree[self.leaves].astype(np.int64)
        self.leaf_value = np.asarray(f.value[self.leaves, 0], dtype=np.float64)

    @staticmethod
    def supported(isolation: Forest, x0: FloatArray) -> bool:
        """Plain numeric splits only, and no missing value among the features it reads."""
        used = np.unique(isolation.feature[isolation.left >= 0])
        return not (isolation.is_categorical.any() or isolation.missing_zero.any()
                    or not np.all(np.isfinite(x0[used])))

    def upper(self, lo: FloatArray, hi: FloatArray) -> float:
        """The bound over the box of points with ``lo <= x <= hi`` (per feature, values a point can take)."""
        f = self.forest
        reach = np.zeros(f.n_nodes, dtype=bool)
        reach[f.roots] = True
        left, right, feat, thr = f.left, f.right, self.feature, self.threshold
        for v in self.levels:
            v = v[reach[v]]
            reach[left[v]] = lo[feat[v]] <= thr[v]
            reach[right[v]] = hi[feat[v]] > thr[v]
        best = np.full(f.n_trees, -np.inf)
        on = reach[self.leaves]
        np.maximum.at(best, self.leaf_tree[on], self.leaf_value[on])
        return float(best.mean())

    def implausible(self, lo: FloatArray, hi: FloatArray) -> bool:
        return self.upper(lo, hi) < self.delta - 1e-9


def leave_box(bound: BoxBound, domains: list[Any], x: FloatArray) -> tuple[Any, list[int]] | None:
    """The no-good row "leave this box" around the implausible point ``x``, and the columns it needs integral.

    Returns ``(expr, cols)`` with the row ``expr >= 1``: per bounded numeric feature ``(1 - [x > a]) + [x > b]``
    for the box ``a < x <= b`` (both split levels of the shared MILP variables), per kept category
    ``1 - [x == code]``. None when ``x``'s own cell is not provably implausible (then no cut is valid).
    """
    from .domain import CategoricalDomain, NumericDomain
    from .model import LinExpr

    lo = np.array([float(getattr(d, "value", x[d.index])) for d in domains], dtype=np.float64)
    hi = lo.copy()
    cuts: dict[int, FloatArray] = {}
    box: dict[int, list[int]] = {}
    cats = [d for d in domains if isinstance(d, CategoricalDomain)]
    nums = [d for d in domains if isinstance(d, NumericDomain)]

    def place(d: NumericDomain) -> None:
        c, (a, b) = cuts[d.index], box[d.index]
        lo[d.index] = d.lo if a < 0 else max(d.lo, float(d.grid.up(np.array([c[a]]))[0]))
        hi[d.index] = d.hi if b >= c.shape[0] else min(d.hi, float(c[b]))

    for d in nums:
        lv = d.levels
        c = np.array(sorted(u for u in d.cuts if lv[0] <= u < lv[-1]), dtype=np.float64)
        j = int(np.searchsorted(c, x[d.index], side="left"))  # c[j-1] < x <= c[j]
        cuts[d.index], box[d.index] = c, [j - 1, j]
        place(d)
    if not bound.implausible(lo, hi):
        return None
    free_cats: set[int] = set()
    for dc in cats:  # a category the box need not keep
        lo[dc.index], hi[dc.index] = float(dc.codes.min()), float(dc.codes.max())
        if bound.implausible(lo, hi):
            free_cats.add(dc.index)
        else:
            lo[dc.index] = hi[dc.index] = x[dc.index]
    for d in nums:  # a feature the box need not bound
        old = box[d.index]
        box[d.index] = [-1, cuts[d.index].shape[0]]
        place(d)
        if not bound.implausible(lo, hi):
            box[d.index] = old
            place(d)
    for d in nums:  # then each bound as far out as it can go (the bound only grows with the box)
        n = cuts[d.index].shape[0]
        for side, past in ((1, n + 1), (0, -2)):  # past: one beyond "unbounded", never tried
            good = box[d.index][side]
            while abs(past - good) > 1:
                mid = (good + past) // 2
                box[d.index][side] = mid
                place(d)
                if bound.implausible(lo, hi):
                    good = mid
                else:
                    past = mid
            box[d.index][side] = good
            place(d)
    expr = LinExpr()
    need: list[int] = []
    for d in nums:
        c, (a, b) = cuts[d.index], box[d.index]
        for u, inside in ((a, True), (b, False)):
            if 0 <= u < c.shape[0]:
                g = d.gt(float(c[u]))
                expr = expr + ((1.0 - g) if inside else g)
                need += g.cols
    for dc in cats:
        if dc.index not in free_cats:
            expr = expr + (1.0 - dc.member_expr(np.array([x[dc.index]])))
    return expr, need
