"""Projection of cases onto the leaves of one tree, vectorized over cases and leaves.

For a case ``x`` and a leaf box, the nearest point of the box is the clip of
``x`` into it, coordinate by coordinate (Alvarez, Algorithm 2); it is the
nearest point under any of our metrics because each coordinate's move is
independently minimal. :class:`TreePlan` prepares, once per tree and metric,
the realizable interval of every node, leaf and feature (strict bounds moved to
the next value the model can see, integer features to integers), then computes
the cost of every (leaf, case) pair without a Python loop over cases or leaves.

The main kernel walks the tree one level at a time: a child's box differs from
its parent's only on the feature its split tests, so its cost is the parent's
updated on that one feature (L1/L2: plus the change of that feature's term;
L-infinity: the maximum with the child's term, which can only grow). That is
O(nodes) work per case instead of O(leaves x path length). Batches with missing
values or non-integer values of integer features, and ``max_changes``, use the
per-feature kernel instead (each feature over only the leaves that test it).

Features fall in three groups:

* *fast*: numerical, unconstrained, no zero-as-missing test; work proportional to
  the leaves testing the feature;
* *general*: numerical with per-case bounds (frozen feature or direction,
  bounds) or zero-as-missing tests; dense over leaves, up to three pieces per
  leaf (below the zero band, the band, above it);
* *categorical*: nominal features; staying costs nothing when the case's own
  value reaches the leaf, otherwise a change to an allowed code costs the
  feature's weight.

A missing value (NaN) in a case never moves: only leaves that NaN reaches are
admissible for that feature (there is no metric distance to or from "missing").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, Norm
from lumber.ir.forest import ZERO_THRESHOLD
from lumber.ir.interp import category_codes

from .leaf_boxes import LeafBoxes, node_boxes
from .metrics import Metric
from .realizable import above, below, empty

Bounds = dict[int, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]
"""Per-case realizable bounds ``(lo, hi)`` of the constrained features, keyed by feature."""

TARGET_ENTRIES = 1 << 19
"""Leaves x cases handled per block (keeps temporaries in cache)."""


@dataclass(frozen=True, eq=False)
class _Fast:
    f: int
    idx: npt.NDArray[np.int64] | None  # None: every leaf
    Aw: npt.NDArray[np.float64]
    Bw: npt.NDArray[np.float64]
    lo_raw: npt.NDArray[np.float64]
    hi_raw: npt.NDArray[np.float64]
    nan_ok: npt.NDArray[np.bool_]
    integer: bool


@dataclass(frozen=True, eq=False)
class _Level:
    """One tree level of the incremental kernel: each internal node's split feature and the
    weighted realizable bounds of the node (``Ap``, ``Bp``) and of its children on that feature."""

    P: npt.NDArray[np.int64]
    f: npt.NDArray[np.int64]
    Lc: npt.NDArray[np.int64]
    Rc: npt.NDArray[np.int64]
    Apu: npt.NDArray[np.float64]
    Bpd: npt.NDArray[np.float64]
    Bld: npt.NDArray[np.float64]
    Aru: npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class _General:
    f: int
    pieces: npt.NDArray[np.float64]  # (L, P, 2) realizable closed intervals, empty as (inf, -inf)


@dataclass(frozen=True, eq=False)
class _Categorical:
    f: int
    targets: npt.NDArray[np.bool_]  # (L, C): codes a moved value may take in each leaf


class TreePlan:
    """Per tree and metric: the realizable boxes and the per-feature cost kernels."""

    def __init__(self, forest: Forest, boxes: LeafBoxes, metric: Metric) -> None:
        self.forest = forest
        self.boxes = boxes
        self.metric = metric
        self.L = boxes.n_leaves
        dtype = metric.input_dtype
        integer = metric.integer[None, :]
        tested = boxes.tested
        A = above(boxes.lo, boxes.lo_open, dtype, integer)
        B = below(boxes.hi, boxes.hi_open, dtype, integer)
        A = np.where(tested, np.maximum(A, metric.domain_lo), A)
        B = np.where(tested, np.minimum(B, metric.domain_hi), B)
        E = empty(A, B)
        self.A = np.where(E, np.inf, A)
        self.B = np.where(E, -np.inf, B)
        self.fast: list[_Fast] = []
        self.general: list[_General] = []
        self.cats: list[_Categorical] = []
        zs_any = np.asarray(boxes.zero_sensitive.any(axis=0), dtype=bool)
        constrained = metric.constrained
        for f in range(forest.n_features):
            used = bool(tested[:, f].any())
            if metric.categorical[f]:
                if used or f in metric.allowed:
                    self.cats.append(_Categorical(f, self._category_targets(f)))
            elif constrained[f] or zs_any[f]:
                self.general.append(_General(f, self._pieces(f)))
            elif used:
                idx = np.flatnonzero(tested[:, f])
                sel = None if idx.size == self.L else idx
                rows = slice(None) if sel is None else idx
                self.fast.append(_Fast(
                    f, sel, self.A[rows, f] * metric.up[f], self.B[rows, f] * metric.down[f],
                    boxes.lo[rows, f], boxes.hi[rows, f], boxes.nan_ok[rows, f], bool(metric.integer[f])))
        self.fast_features = np.array([k.f for k in self.fast], dtype=np.int64)
        self._build_levels()

    # -- preparation ------------------------------------------------------------------------

    def _build_levels(self) -> None:
        """Node boxes for the incremental kernel: a child's cost is its parent's updated on the one
        feature its split tests, so each tree level costs one vectorized step."""

        forest, m = self.forest, self.metric
        t = self.boxes.tree
        s = int(forest.tree_offset[t])
        nb = node_boxes(forest, t)
        integer = m.integer[None, :]
        A = above(nb.lo, nb.lo_open, m.input_dtype, integer)
        B = below(nb.hi, nb.hi_open, m.input_dtype, integer)
        A = np.where(nb.tested, np.maximum(A, m.domain_lo), A)
        B = np.where(nb.tested, np.minimum(B, m.domain_hi), B)
        fast = np.zeros(forest.n_features, dtype=bool)
        fast[self.fast_features] = True
        dead = np.asarray((empty(A, B) & fast[None, :]).any(axis=1), dtype=bool)
        left = forest.left[s:s + nb.n_leaves].astype(np.int64) - s
        right = forest.right[s:s + nb.n_leaves].astype(np.int64) - s
        feat = forest.feature[s:s + nb.n_leaves].astype(np.int64)
        self.n_nodes = nb.n_leaves
        self.leaf_local = self.boxes.leaf - s
        self.dead_leaf = dead[self.leaf_local]
        self.levels: list[_Level] = []
        for level in range(int(nb.depth.max()) if nb.n_leaves else 0):
            P = np.flatnonzero((nb.depth == level) & (left >= 0))
            if P.size == 0:
                continue
            f = feat[P]
            on = fast[f]
            Lc, Rc = left[P], right[P]
            up, down = m.up[f], m.down[f]
            self.levels.append(_Level(
                P, f, Lc, Rc,
                Apu=np.where(on, A[P, f] * up, -np.inf), Bpd=np.where(on, B[P, f] * down, np.inf),
                Bld=np.where(on, B[Lc, f] * down, np.inf), Aru=np.where(on, A[Rc, f] * up, -np.inf)))

    def _incremental(self, X: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """``(L, m)`` costs of the fast features, level by level (L1 sums, L2 sums of squares,
        L-infinity maxima)."""
        m = self.metric
        square = m.norm == Norm.L2
        Xt = np.zeros((X.shape[1], X.shape[0]))
        Xt[self.fast_features] = X[:, self.fast_features].T  # other features contribute 0 here
        XU = Xt * m.up[:, None]
        XD = Xt * m.down[:, None]
        C = np.empty((self.n_nodes, X.shape[0]))
        C[0] = 0.0
        with np.errstate(invalid="ignore"):
            for lv in self.levels:
                xu = XU[lv.f]
                xd = XD[lv.f]
                base = C[lv.P]
                if m.norm == Norm.LINF:
                    # a child's interval lies inside its parent's, so its cost on f only grows:
                    # max(parent cost, child's cost on f) is the child's L-infinity cost
                    C[lv.Lc] = np.maximum(base, np.subtract(xd, lv.Bld[:, None], out=xd))
                    C[lv.Rc] = np.maximum(base, np.subtract(lv.Aru[:, None], xu, out=xu))
                    continue
                dl = xd - lv.Bld[:, None]
                pl = np.subtract(xd, lv.Bpd[:, None], out=xd)
                dr = lv.Aru[:, None] - xu
                pr = np.subtract(lv.Apu[:, None], xu, out=xu)
                for a in (dl, pl, dr, pr):
                    np.maximum(a, 0.0, out=a)
                    if square:
                        np.multiply(a, a, out=a)
                dl -= pl
                dl += base
                C[lv.Lc] = dl
                dr -= pr
                dr += base
                C[lv.Rc] = dr
        acc = C[self.leaf_local]
        acc[self.dead_leaf] = np.inf
        return acc

    def _incremental_ok(self, X: npt.NDArray[np.float64]) -> bool:
        """The incremental kernel needs no change count and plain values (no NaN, integers where
        the feature is integer) in the fast features."""
        m = self.metric
        if m.max_changes is not None or not self.levels:
            return False
        Xf = X[:, self.fast_features]
        if np.isnan(Xf).any():
            return False
        ints = m.integer[self.fast_features]
        if ints.any():
            xi = Xf[:, ints]
            lo, hi = m.domain_lo[self.fast_features][ints], m.domain_hi[self.fast_features][ints]
            if ((xi != np.round(xi)) | (xi < lo) | (xi > hi)).any():
                return False
        return True

    def _pieces(self, f: int) -> npt.NDArray[np.float64]:
        """Realizable pieces of each leaf's set on feature ``f`` (zero band split out)."""
        b, m = self.boxes, self.metric
        dtype, integer = m.input_dtype, bool(m.integer[f])
        A, B = self.A[:, f], self.B[:, f]
        if not b.zero_sensitive[:, f].any():
            return np.stack([A, B], axis=1)[:, None, :]
        zs = b.zero_sensitive[:, f]
        neg_hi = np.minimum(B, below(-ZERO_THRESHOLD, True, dtype, integer))
        pos_lo = np.maximum(A, above(ZERO_THRESHOLD, True, dtype, integer))
        z_lo = np.maximum(above(b.zlo[:, f], True, dtype, integer), above(-ZERO_THRESHOLD, False, dtype, integer))
        z_hi = np.minimum(below(b.zhi[:, f], False, dtype, integer), below(ZERO_THRESHOLD, False, dtype, integer))
        tested = b.tested[:, f]
        z_lo = np.where(tested, np.maximum(z_lo, m.domain_lo[f]), z_lo)
        z_hi = np.where(tested, np.minimum(z_hi, m.domain_hi[f]), z_hi)
        zero_ok = zs & b.zero_ok[:, f] & ~empty(z_lo, z_hi)
        pieces = np.empty((self.L, 3, 2))
        pieces[:, 0, 0] = A
        pieces[:, 0, 1] = np.where(zs, neg_hi, B)
        pieces[:, 1, 0] = np.where(zs, pos_lo, np.inf)
        pieces[:, 1, 1] = np.where(zs, B, -np.inf)
        pieces[:, 2, 0] = np.where(zero_ok, z_lo, np.inf)
        pieces[:, 2, 1] = np.where(zero_ok, z_hi, -np.inf)
        bad = empty(pieces[..., 0], pieces[..., 1])
        pieces[..., 0] = np.where(bad, np.inf, pieces[..., 0])
        pieces[..., 1] = np.where(bad, -np.inf, pieces[..., 1])
        return pieces

    def _category_targets(self, f: int) -> npt.NDArray[np.bool_]:
        """``(L, C)``: codes a categorical feature may move to in each leaf."""
        m = self.metric
        C = int(m.n_codes[f])
        codes = np.arange(C, dtype=np.int64)
        ok = self.boxes.member(f, codes.astype(np.float64), codes).T
        if f in m.allowed:
            ok &= np.isin(codes, m.allowed[f])[None, :]
        if m.immutable[f]:
            ok[:] = False
        return ok

    def codes(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        return category_codes(x, self.forest.schema.category_rule)

    # -- costs ------------------------------------------------------------------------------

    def costs(self, X: npt.NDArray[np.float64], bounds: Bounds) -> npt.NDArray[np.float64]:
        """``(L, m)`` cost of moving each case into each leaf (before the norm's root).

        L2 returns sums of squared feature costs, L1 sums, LINF maxima; ``inf`` marks
        leaves a case cannot reach.
        """
        m = self.metric
        norm = m.norm
        acc = np.zeros((self.L, X.shape[0]))
        cnt = np.zeros((self.L, X.shape[0]), dtype=np.int32) if m.max_changes is not None else None

        def add(c: npt.NDArray[np.float64], idx: npt.NDArray[np.int64] | None) -> None:
            if cnt is not None:
                if idx is None:
                    cnt[...] += c > 0
                else:
                    cnt[idx] += c > 0
            if norm == Norm.L2:
                np.multiply(c, c, out=c)
            if norm == Norm.LINF:
                if idx is None:
                    np.maximum(acc, c, out=acc)
                else:
                    acc[idx] = np.maximum(acc[idx], c)
            elif idx is None:
                np.add(acc, c, out=acc)
            else:
                acc[idx] += c

        fast = self.fast
        if self._incremental_ok(X):
            acc = self._incremental(X)
            fast = []
        for k in fast:
            x = X[:, k.f]
            c = k.Aw[:, None] - (x * m.up[k.f])[None, :]
            down = (x * m.down[k.f])[None, :] - k.Bw[:, None]
            np.maximum(c, down, out=c)
            np.maximum(c, 0.0, out=c)
            isnan = np.isnan(x)
            if k.integer:
                odd = ~isnan & ((x != np.round(x)) | (x < m.domain_lo[k.f]) | (x > m.domain_hi[k.f]))
                if odd.any():
                    inside = (x[None, odd] > k.lo_raw[:, None]) & (x[None, odd] <= k.hi_raw[:, None])
                    c[:, odd] = np.where(inside, 0.0, c[:, odd])
            if isnan.any():
                c[:, isnan] = np.where(k.nan_ok[:, None], 0.0, np.inf)
            add(c, k.idx)
        for g in self.general:
            add(self._general_cost(g, X[:, g.f], bounds.get(g.f))[0], None)
        for k2 in self.cats:
            add(self._category_cost(k2, X[:, k2.f]), None)
        if cnt is not None:
            assert m.max_changes is not None
            acc[cnt > m.max_changes] = np.inf
        return acc

    def _general_cost(self, g: _General, x: npt.NDArray[np.float64],
                      bnd: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None,
                      rows: npt.NDArray[np.int64] | None = None
                      ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Cost ``(L, m)`` (or ``(m,)`` for given leaf ``rows``), chosen piece and the moved value."""
        m = self.metric
        up, down = m.up[g.f], m.down[g.f]
        pieces = g.pieces if rows is None else g.pieces[rows]
        if rows is None:
            lo_all, hi_all = pieces[:, None, :, 0], pieces[:, None, :, 1]  # (L, 1, P)
            xs = x[None, :, None]
        else:
            lo_all, hi_all = pieces[:, :, 0], pieces[:, :, 1]  # (m, P)
            xs = x[:, None]
        if bnd is not None:
            blo, bhi = bnd
            bshape = (1, -1, 1) if rows is None else (-1, 1)
            lo_all = np.maximum(lo_all, blo.reshape(bshape))
            hi_all = np.minimum(hi_all, bhi.reshape(bshape))
        with np.errstate(invalid="ignore"):
            c = np.maximum(np.maximum((lo_all - xs) * up, (xs - hi_all) * down), 0.0)
        c = np.where(lo_all > hi_all, np.inf, c)
        choice = np.argmin(c, axis=-1)
        best = np.take_along_axis(c, choice[..., None], axis=-1)[..., 0]
        lo_c = np.take_along_axis(np.broadcast_to(lo_all, c.shape), choice[..., None], axis=-1)[..., 0]
        hi_c = np.take_along_axis(np.broadcast_to(hi_all, c.shape), choice[..., None], axis=-1)[..., 0]
        # the case's own value: free when it reaches the leaf and meets its bounds
        if rows is None:
            stay = self.boxes.member(g.f, x).T
            xv = x[None, :]
        else:
            stay = self.boxes.member(g.f, x)[np.arange(x.shape[0]), rows]
            xv = x
        isnan = np.isnan(xv)
        if bnd is not None:
            blo_v, bhi_v = (bnd[0][None, :], bnd[1][None, :]) if rows is None else bnd
            with np.errstate(invalid="ignore"):
                stay &= ((xv >= blo_v) & (xv <= bhi_v)) | isnan
        cost = np.where(stay, 0.0, np.where(isnan, np.inf, best))
        with np.errstate(invalid="ignore"):
            moved = np.clip(xv, lo_c, hi_c)
        value = np.where(stay, xv, moved)
        return cost, choice, value

    def _category_cost(self, k: _Categorical, x: npt.NDArray[np.float64],
                       rows: npt.NDArray[np.int64] | None = None) -> npt.NDArray[np.float64]:
        m = self.metric
        codes = self.codes(x)
        stay = self.boxes.member(k.f, x, codes)
        if k.f in m.allowed:
            stay &= np.isin(codes, m.allowed[k.f])[:, None] | np.isnan(x)[:, None]
        isnan = np.isnan(x)
        if rows is None:
            can = np.asarray(k.targets.any(axis=1), dtype=bool)[:, None] & ~isnan[None, :]
            return np.where(stay.T, 0.0, np.where(can, m.up[k.f], np.inf))
        can = k.targets[rows].any(axis=1) & ~isnan
        stay_r = stay[np.arange(x.shape[0]), rows]
        return np.where(stay_r, 0.0, np.where(can, m.up[k.f], np.inf))

    # -- witnesses --------------------------------------------------------------------------

    def witness(self, X: npt.NDArray[np.float64], rows: npt.NDArray[np.int64],
                bounds: Bounds) -> npt.NDArray[np.float64]:
        """The projection of case ``i`` onto leaf ``rows[i]``: a point the tree routes there."""
        P = X.copy()
        for k in self.fast:
            x = X[:, k.f]
            a, b = self.A[rows, k.f], self.B[rows, k.f]
            with np.errstate(invalid="ignore"):
                inside = (x > self.boxes.lo[rows, k.f]) & (x <= self.boxes.hi[rows, k.f])
                P[:, k.f] = np.where(inside | np.isnan(x), x, np.clip(x, a, b))
        for g in self.general:
            P[:, g.f] = self._general_cost(g, X[:, g.f], bounds.get(g.f), rows)[2]
        for c in self.cats:
            P[:, c.f] = self._category_witness(c, X[:, c.f], rows)
        return P

    def _category_witness(self, k: _Categorical, x: npt.NDArray[np.float64],
                          rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Stay when the case's category reaches the leaf; else the allowed code nearest to it."""
        codes = self.codes(x)
        stay = self.boxes.member(k.f, x, codes)[np.arange(x.shape[0]), rows]
        if k.f in self.metric.allowed:
            stay &= np.isin(codes, self.metric.allowed[k.f]) | np.isnan(x)
        t = k.targets[rows]
        C = t.shape[1]
        gap = np.abs(np.arange(C)[None, :] - np.nan_to_num(x, nan=0.0)[:, None])
        pick = np.argmin(np.where(t, gap, np.inf), axis=1)
        return np.where(stay | np.isnan(x), x, pick.astype(np.float64))


def block_size(n_leaves: int) -> int:
    return int(max(8, min(4096, TARGET_ENTRIES // max(n_leaves, 1))))


__all__ = ["TreePlan", "Bounds", "block_size"]
