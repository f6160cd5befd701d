"""Each leaf of a tree as a box: the set of inputs the tree routes to it.

With axis-parallel tests the inputs reaching a leaf are a product over
features (Alvarez, section 3.3). Per feature that set is

* an interval ``lo < x <= hi`` from the threshold tests on the path (the IR's
  tests are ``x <= t``, so lower bounds are open and upper bounds closed);
* NaN when every test on the feature sends missing values the path's way;
* for LightGBM zero-as-missing tests (``missing_zero``), the zero band
  ``|x| <= ZERO_THRESHOLD`` when every such test sends missing values the
  path's way and the other tests accept the band (``zero_ok``), while the
  interval then only describes values outside the band;
* for categorical tests, a set of allowed category codes.

Boxes are computed per tree, one numpy step per tree level (no loop over
nodes). Analyses (sensitive tests, counterfactual search, rule extraction)
read them; nothing here depends on a metric.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lumber.ir import Forest, UnsupportedModelError
from lumber.ir.forest import ZERO_THRESHOLD

MAX_CATEGORY_CODE = 1 << 16
"""Largest category code kept in dense masks; larger codes in a split are refused."""


@dataclass(frozen=True, eq=False)
class LeafBoxes:
    """Boxes of the leaves of one tree (rows follow node order within the tree).

    leaf : int64[L]
        Global node id of each row: the leaves (:func:`tree_boxes`), or every node of the
        tree (:func:`node_boxes`).
    depth : int32[L]
        Path length (number of tests from the root).
    lo, hi : float64[L, d]
        Threshold tests on the path: ``lo < x <= hi`` (``-inf``/``inf`` when unbounded).
        ``lo_open``/``hi_open`` record strictness; with the IR's ``x <= t`` tests lower
        bounds are always open and upper bounds closed.
    lo_node, hi_node : int64[L, d]
        Global id of the test defining the tightest bound, -1 when unbounded.
    tested : bool[L, d]
        The path tests the feature (threshold or category).
    nan_ok : bool[L, d]
        A NaN in this feature reaches the leaf.
    zero_sensitive : bool[L, d]
        The path has a zero-as-missing test on the feature: values in the zero band
        are missing there, and ``lo``/``hi`` describe values outside the band only.
    zero_ok : bool[L, d]
        Values in the zero band reach the leaf (meaningful where ``zero_sensitive``).
    zlo, zhi : float64[L, d]
        Bounds from the tests that are not zero-as-missing (what the zero band must
        also satisfy when ``zero_ok``).
    cat_features : int64[Kc]
        Features with categorical tests anywhere in the forest (same for every tree).
    cat_allowed : bool[L, Kc, C + 1]
        Category codes ``0..C-1`` the categorical tests accept; slot ``C`` stands for every
        valid code ``>= C`` (members of no set).
    cat_invalid_ok : bool[L, Kc]
        Values that are not valid codes (negative, too large) reach the leaf.
    cat_node : int64[L, Kc]
        Deepest categorical test on the feature along the path, -1 when none.
    """

    tree: int
    leaf: npt.NDArray[np.int64]
    depth: npt.NDArray[np.int32]
    lo: npt.NDArray[np.float64]
    hi: npt.NDArray[np.float64]
    lo_open: npt.NDArray[np.bool_]
    hi_open: npt.NDArray[np.bool_]
    lo_node: npt.NDArray[np.int64]
    hi_node: npt.NDArray[np.int64]
    tested: npt.NDArray[np.bool_]
    nan_ok: npt.NDArray[np.bool_]
    zero_sensitive: npt.NDArray[np.bool_]
    zero_ok: npt.NDArray[np.bool_]
    zlo: npt.NDArray[np.float64]
    zhi: npt.NDArray[np.float64]
    cat_features: npt.NDArray[np.int64]
    cat_allowed: npt.NDArray[np.bool_]
    cat_invalid_ok: npt.NDArray[np.bool_]
    cat_node: npt.NDArray[np.int64]

    @property
    def n_leaves(self) -> int:
        return int(self.leaf.shape[0])

    @property
    def n_codes(self) -> int:
        """``C``: codes with their own slot in ``cat_allowed``."""
        return int(self.cat_allowed.shape[2] - 1)

    def member(self, f: int, x: npt.NDArray[np.float64], codes: npt.NDArray[np.int64] | None = None
               ) -> npt.NDArray[np.bool_]:
        """``(n, L)``: value ``x[i]`` of feature ``f`` passes leaf l's tests on ``f`` (exact routing).

        ``codes`` are the category codes of ``x`` (``interp.category_codes``), needed when
        ``f`` has categorical tests.
        """

        col = x[:, None]
        with np.errstate(invalid="ignore"):
            inside = (col > self.lo[:, f]) & (col <= self.hi[:, f])
            zband = np.abs(col) <= ZERO_THRESHOLD
            zin = (col > self.zlo[:, f]) & (col <= self.zhi[:, f]) & self.zero_ok[:, f]
        inside = np.where(self.zero_sensitive[:, f] & zband, zin, inside)
        hit = np.flatnonzero(self.cat_features == f)
        if hit.size:
            if codes is None:
                raise ValueError("categorical boxes need the category codes of x")
            j = int(hit[0])
            slot = np.where(codes >= self.n_codes, self.n_codes, np.maximum(codes, 0))
            in_set = self.cat_allowed[:, j, :][:, slot].T
            inside &= np.where((codes < 0)[:, None], self.cat_invalid_ok[:, j][None, :], in_set)
        return np.where(np.isnan(col), self.nan_ok[:, f][None, :], inside)

    def contains(self, X: npt.NDArray[np.float64], category_codes: npt.NDArray[np.int64] | None = None
                 ) -> npt.NDArray[np.bool_]:
        """``(n, L)``: row i lies in leaf l's box (the routing the tree would give; for tests)."""
        out = np.ones((X.shape[0], self.n_leaves), dtype=bool)
        for f in range(X.shape[1]):
            if self.tested[:, f].any():
                out &= self.member(f, X[:, f], None if category_codes is None else category_codes[:, f])
        return out


def category_slots(forest: Forest) -> tuple[npt.NDArray[np.int64], int]:
    """Features with categorical tests and ``C`` = 1 + the largest code any set names."""
    cat_nodes = np.flatnonzero(forest.is_categorical)
    feats = np.unique(forest.feature[cat_nodes]).astype(np.int64)
    C = int(forest.cat_values.max()) + 1 if forest.cat_values.size else 0
    if C > MAX_CATEGORY_CODE:
        raise UnsupportedModelError(
            f"a categorical split names category code {C - 1}; leaf boxes support codes below {MAX_CATEGORY_CODE}")
    return feats, C


def tree_boxes(forest: Forest, t: int) -> LeafBoxes:
    """The boxes of every leaf of tree ``t``, one vectorized step per level."""
    return _boxes(forest, t, leaves_only=True)


def node_boxes(forest: Forest, t: int) -> LeafBoxes:
    """The box of every node of tree ``t`` (row ``i`` is local node ``i``): the inputs reaching it."""
    return _boxes(forest, t, leaves_only=False)


def _boxes(forest: Forest, t: int, leaves_only: bool) -> LeafBoxes:
    s, e = int(forest.tree_offset[t]), int(forest.tree_offset[t + 1])
    n, d = e - s, forest.n_features
    cat_feats, C = category_slots(forest)
    Kc = cat_feats.shape[0]
    cat_col = np.full(d, -1, dtype=np.int64)
    cat_col[cat_feats] = np.arange(Kc)

    lo = np.full((n, d), -np.inf)
    hi = np.full((n, d), np.inf)
    zlo = np.full((n, d), -np.inf)
    zhi = np.full((n, d), np.inf)
    lo_node = np.full((n, d), -1, dtype=np.int64)
    hi_node = np.full((n, d), -1, dtype=np.int64)
    tested = np.zeros((n, d), dtype=bool)
    nan_ok = np.ones((n, d), dtype=bool)
    zsens = np.zeros((n, d), dtype=bool)
    zok = np.ones((n, d), dtype=bool)
    allowed = np.ones((n, Kc, C + 1), dtype=bool)
    invalid_ok = np.ones((n, Kc), dtype=bool)
    cat_node = np.full((n, Kc), -1, dtype=np.int64)
    per_node = (lo, hi, zlo, zhi, lo_node, hi_node, tested, nan_ok, zsens, zok, allowed, invalid_ok, cat_node)

    left = forest.left[s:e].astype(np.int64) - s
    right = forest.right[s:e].astype(np.int64) - s
    depth = forest.depth[s:e]
    for level in range(int(depth.max()) + 1 if n else 0):
        P = np.flatnonzero((depth == level) & (left >= 0))
        if P.size == 0:
            continue
        Lc, Rc = left[P], right[P]
        for arr in per_node:
            arr[Lc] = arr[P]
            arr[Rc] = arr[P]
        g = P + s  # global ids
        f = forest.feature[g].astype(np.int64)
        ml = forest.missing_left[g]
        mz = forest.missing_zero[g]
        tested[Lc, f] = True
        tested[Rc, f] = True
        nan_ok[Lc, f] &= ml
        nan_ok[Rc, f] &= ~ml
        # a zero-as-missing test sends the zero band the missing way
        zsens[Lc[mz], f[mz]] = True
        zsens[Rc[mz], f[mz]] = True
        zok[Lc[mz], f[mz]] &= ml[mz]
        zok[Rc[mz], f[mz]] &= ~ml[mz]

        num = ~forest.is_categorical[g]
        if num.any():
            Ln, Rn, fn, gn = Lc[num], Rc[num], f[num], g[num]
            thr = forest.threshold[gn]
            tighter = thr < hi[Ln, fn]
            hi_node[Ln, fn] = np.where(tighter, gn, hi_node[Ln, fn])
            hi[Ln, fn] = np.minimum(hi[Ln, fn], thr)
            tighter = thr > lo[Rn, fn]
            lo_node[Rn, fn] = np.where(tighter, gn, lo_node[Rn, fn])
            lo[Rn, fn] = np.maximum(lo[Rn, fn], thr)
            plain = ~mz[num]
            zhi[Ln[plain], fn[plain]] = np.minimum(zhi[Ln[plain], fn[plain]], thr[plain])
            zlo[Rn[plain], fn[plain]] = np.maximum(zlo[Rn[plain], fn[plain]], thr[plain])
        cat = ~num
        if cat.any():
            _apply_categorical(forest, Lc[cat], Rc[cat], g[cat], cat_col[f[cat]], C,
                               allowed, invalid_ok, cat_node)

    leaves = np.flatnonzero(left < 0) if leaves_only else np.arange(n)
    return LeafBoxes(
        tree=t, leaf=(leaves + s).astype(np.int64), depth=depth[leaves].astype(np.int32),
        lo=lo[leaves], hi=hi[leaves],
        lo_open=np.isfinite(lo[leaves]), hi_open=np.zeros((leaves.size, d), dtype=bool),
        lo_node=lo_node[leaves], hi_node=hi_node[leaves], tested=tested[leaves], nan_ok=nan_ok[leaves],
        zero_sensitive=zsens[leaves], zero_ok=zok[leaves] | ~zsens[leaves], zlo=zlo[leaves], zhi=zhi[leaves],
        cat_features=cat_feats, cat_allowed=allowed[leaves], cat_invalid_ok=invalid_ok[leaves],
        cat_node=cat_node[leaves],
    )


def _apply_categorical(forest: Forest, Lc: npt.NDArray[np.int64], Rc: npt.NDArray[np.int64],
                       g: npt.NDArray[np.int64], col: npt.NDArray[np.int64], C: int,
                       allowed: npt.NDArray[np.bool_], invalid_ok: npt.NDArray[np.bool_],
                       cat_node: npt.NDArray[np.int64]) -> None:
    """Narrow the allowed codes of the children of categorical tests ``g``."""
    sizes = forest.cat_offset[g + 1] - forest.cat_offset[g]
    member = np.zeros((g.shape[0], C + 1), dtype=bool)
    rows = np.repeat(np.arange(g.shape[0]), sizes)
    vals = np.concatenate([forest.cat_values[forest.cat_offset[i]:forest.cat_offset[i + 1]] for i in g]) \
        if g.size else np.zeros(0, dtype=np.int64)
    member[rows, vals] = True
    in_left = forest.cat_in_set_left[g][:, None]
    goes_left = np.where(in_left, member, ~member)
    # code 0 is the zero band for a zero-as-missing test: it follows the missing direction
    mz = forest.missing_zero[g]
    if mz.any() and C > 0:
        goes_left[mz, 0] = forest.missing_left[g][mz]
    allowed[Lc, col] &= goes_left
    allowed[Rc, col] &= ~goes_left
    inv_left = forest.cat_invalid_left[g]
    invalid_ok[Lc, col] &= inv_left
    invalid_ok[Rc, col] &= ~inv_left
    cat_node[Lc, col] = g
    cat_node[Rc, col] = g


def forest_boxes(forest: Forest) -> list[LeafBoxes]:
    """Boxes of every tree (a Python loop over trees only)."""
    return [tree_boxes(forest, t) for t in range(forest.n_trees)]


__all__ = ["LeafBoxes", "tree_boxes", "node_boxes", "forest_boxes", "category_slots", "MAX_CATEGORY_CODE"]
