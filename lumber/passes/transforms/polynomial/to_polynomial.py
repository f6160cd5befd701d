"""``polynomial``: Forest -> Polynomial, exact (MonoForest leaf expansion).

A leaf is a box: per feature on its path an interval of the feature's cells
(the cells between the forest's sorted thresholds), plus whether NaN reaches
it. Per feature that box factor is ``c_lo - c_hi`` (``1 - c_hi`` when
unbounded below), plus ``I{NaN}`` in explicit NaN mode (see
:mod:`lumber.ir.polynomial`), so two splits on one feature have already
collapsed to the stronger condition. The leaf's monomials are the product of
its factors: at most ``2^f`` terms (``3^f`` in explicit mode) for ``f``
features on the path. Expansion is vectorized over leaves, one numpy step per
factor; monomials are packed into int64 keys and merged with a stable sort, in
batches that bound memory. Exact zeros are dropped.

A ``+inf`` threshold (scikit-learn's split of NaN from every number) needs no
condition: numbers go left, so only the NaN term remains. Categorical splits
become category-cell factors (:mod:`.categorical_factors`), LightGBM
zero-as-missing splits sums of up to three cell intervals (:mod:`.zero_as_missing`).
Unsupported, with a clear error: a feature split both by thresholds and by
category sets, zero-as-missing categorical splits, ``-inf`` thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, DiagnosticSink, Forest, IRLocation
from lumber.ir.graph import parents
from lumber.ir.interp import trees_per_output
from lumber.ir.polynomial import ConditionKind, Polynomial, expand_products, from_terms, merge_terms

from ...base import PassContext, PassReport, Transform
from .categorical_factors import categorical_factors, category_cells
from .zero_as_missing import zero_boundaries, zero_feature_factors

DEFAULT_MAX_MONOMIALS = 50_000_000
"""Terms (before merging) the expansion may create; about 40 bytes each while a batch is merged."""
BATCH_TERMS = 1 << 21
"""Terms expanded and merged together (memory bound of one batch)."""


@dataclass(frozen=True)
class ToPolynomial(Transform[Forest, Polynomial]):
    """Expand every tree into monomials of split indicators and merge them (exact)."""

    name: ClassVar[str] = "polynomial"
    max_monomials: int = DEFAULT_MAX_MONOMIALS
    """Fail (CompileError) when the expansion would create more terms than this."""

    def __post_init__(self) -> None:
        if self.max_monomials < 1:
            raise CompileError(f"max-monomials must be at least 1, got {self.max_monomials}")

    def run(self, ir: Forest, ctx: PassContext) -> Polynomial:
        poly, stats = expand_forest(ir, max_monomials=self.max_monomials)
        ctx.report(PassReport(self.name, (
            f"{stats['leaves']:,} leaves -> {stats['terms']:,} terms -> {poly.n_monomials:,} monomials "
            f"(max degree {poly.max_degree}), {poly.n_conditions:,} conditions "
            f"({stats['explicit_nan_features']} features with an explicit NaN condition)"), stats))
        return poly


def forest_to_polynomial(forest: Forest, *, max_monomials: int = DEFAULT_MAX_MONOMIALS) -> Polynomial:
    """The canonical polynomial of ``forest`` (see module docstring)."""
    return expand_forest(forest, max_monomials=max_monomials)[0]


def canonical_thresholds(t: npt.NDArray[np.float64], input_dtype: str) -> npt.NDArray[np.float64]:
    """Thresholds that split inputs of ``input_dtype`` identically and are values of that dtype:
    for float32 inputs the largest float32 <= t (``x <= t`` iff ``x <= that`` for float32 ``x``)."""
    t = np.asarray(t, dtype=np.float64)
    if input_dtype != "float32":
        return t.copy()
    with np.errstate(over="ignore"):
        f = t.astype(np.float32)
    up = f.astype(np.float64) > t
    f[up] = np.nextafter(f[up], np.float32(-np.inf))
    return f.astype(np.float64)


def _check_supported(forest: Forest, internal: npt.NDArray[np.int64], thr: npt.NDArray[np.float64]) -> None:
    sink = DiagnosticSink()
    names = forest.schema.feature_names

    def report(mask: npt.NDArray[np.bool_], what: str, note: str) -> None:
        nodes = internal[mask]
        for node in nodes[:3]:
            t = int(forest.node_tree[node])
            sink.error(f"{what} on feature '{names[forest.feature[node]]}' is not supported by the polynomial form",
                       IRLocation(tree=t, node=int(node - forest.tree_offset[t])), note)
        if nodes.size > 3:
            sink.error(f"... and {nodes.size - 3} more such splits")

    cat = forest.is_categorical[internal]
    mixed = np.intersect1d(forest.feature[internal][cat], forest.feature[internal][~cat])
    report(cat & np.isin(forest.feature[internal], mixed), "categorical split (the feature also has threshold splits)",
           "a feature is either categorical or numerical in the polynomial form; keep the Forest form")
    report(forest.missing_zero[internal] & cat, "zero-as-missing categorical split",
           "keep the Forest form")
    report((thr == -np.inf) & ~forest.is_categorical[internal], "threshold -inf",
           f"thresholds must be finite {forest.schema.input_dtype} values or +inf (a NaN-only split)")
    sink.raise_if_errors(CompileError)


def expand_forest(forest: Forest, *, max_monomials: int = DEFAULT_MAX_MONOMIALS) -> tuple[Polynomial, dict[str, Any]]:
    """The polynomial and expansion statistics (leaves, terms before merging, NaN modes)."""
    schema = forest.schema
    F, K = schema.n_features, schema.n_outputs
    internal = np.flatnonzero(forest.left >= 0).astype(np.int64)
    thr = canonical_thresholds(forest.threshold[internal], schema.input_dtype)
    _check_supported(forest, internal, thr)
    is_cat = forest.is_categorical[internal]
    cells = category_cells(forest, internal[is_cat])
    thr = np.where(is_cat, np.nan, thr)  # categorical splits take no part in the threshold tables

    # GREATER conditions: the unique (feature, finite threshold) pairs, sorted. A +inf threshold
    # (scikit-learn's NaN-only split) sends every number left: it gets index m_f, past every cell.
    # A feature with zero-as-missing splits also gets the two bounds of its zero region.
    feat = forest.feature[internal].astype(np.int64)
    fin = np.isfinite(thr)
    num = ~is_cat
    zero_node = forest.missing_zero[internal] & num
    zf = np.unique(feat[zero_node])
    zl, zh = zero_boundaries(schema.input_dtype)
    n_fin = int(fin.sum())
    pair_f = np.concatenate([feat[fin], np.repeat(zf, 2)])
    pair_t = np.concatenate([thr[fin], np.tile([zl, zh], zf.size)])
    order = np.lexsort((pair_t, pair_f))
    fs, ts = pair_f[order], pair_t[order]
    first = np.ones(order.shape[0], dtype=bool)
    first[1:] = (fs[1:] != fs[:-1]) | (ts[1:] != ts[:-1])
    g_pair = np.empty(order.shape[0], dtype=np.int64)
    g_pair[order] = np.cumsum(first) - 1
    g_of = np.zeros(internal.shape[0], dtype=np.int64)
    g_of[fin] = g_pair[:n_fin]
    g_feat, g_thr = fs[first], ts[first]
    m_f = np.bincount(g_feat, minlength=F).astype(np.int64)  # thresholds per feature
    off_f = np.concatenate([[0], np.cumsum(m_f)])
    k_of = np.where(fin, g_of - off_f[feat], m_f[feat])  # threshold index within its feature
    z_idx = g_pair[n_fin:].reshape(-1, 2) - off_f[zf][:, None]  # per zero feature: indices of zl, zh

    # NaN mode per feature: point mode iff one cell p routes like NaN at every split on the feature
    ml = forest.missing_left[internal]
    lower = np.zeros(F, dtype=np.int64)
    np.maximum.at(lower, feat[~ml & num], k_of[~ml & num] + 1)
    upper = m_f.copy()
    np.minimum.at(upper, feat[ml & num], k_of[ml & num])
    point = (lower <= upper) | (not schema.allow_nan)
    point[zf] = not schema.allow_nan  # zero-as-missing features use the explicit NaN mode
    p_cell = lower if schema.allow_nan else np.zeros(F, dtype=np.int64)
    explicit = ~point  # a feature split only at +inf (NaN right) still needs its MISSING condition

    # condition table: per feature its GREATER conditions, then MISSING if explicit; a categorical
    # feature's block holds its cells instead (see categorical_factors)
    block = m_f + explicit
    for f in cells.codes:
        block[f] = cells.block_size(f)
    c_off = np.concatenate([[0], np.cumsum(block)])
    n_cond = int(c_off[-1])
    j_in_f = np.arange(g_feat.shape[0]) - off_f[g_feat]
    g_id = c_off[g_feat] + j_in_f
    miss_id = c_off[:-1] + m_f  # valid where explicit
    cond_feature = np.repeat(np.arange(F, dtype=np.int32), block)
    cond_kind = np.full(n_cond, ConditionKind.MISSING, dtype=np.int8)
    cond_threshold = np.full(n_cond, np.nan)
    cond_nan_true = np.ones(n_cond, dtype=bool)
    cond_kind[g_id] = ConditionKind.GREATER
    cond_threshold[g_id] = g_thr
    cond_nan_true[g_id] = point[g_feat] & (j_in_f < p_cell[g_feat])
    for f in cells.codes:
        sl = slice(int(c_off[f]), int(c_off[f + 1]))
        cond_kind[sl], cond_threshold[sl], cond_nan_true[sl] = cells.block(f)

    # root-to-leaf paths as (leaf, ancestor, went_left) pairs, one numpy step per level
    leaves = np.flatnonzero(forest.left < 0).astype(np.int64)
    par = parents(forest)
    node_pos = np.full(forest.n_nodes, -1, dtype=np.int64)
    node_pos[internal] = np.arange(internal.shape[0])
    p_leaf, p_node, p_left = [], [], []
    cur = leaves.copy()
    idx = np.arange(leaves.shape[0])
    while idx.size:
        c = cur[idx]
        p = par[c]
        keep = p >= 0
        idx, c, p = idx[keep], c[keep], p[keep]
        p_leaf.append(idx)
        p_node.append(p)
        p_left.append(forest.left[p] == c)
        cur[idx] = p
    pl = np.concatenate(p_leaf) if p_leaf else np.zeros(0, dtype=np.int64)
    pn = node_pos[np.concatenate(p_node)] if p_node else np.zeros(0, dtype=np.int64)
    pw = np.concatenate(p_left) if p_left else np.zeros(0, dtype=bool)

    # per (leaf, feature) group: the cell interval [lo, hi] and whether NaN reaches the leaf
    pf = feat[pn]
    key = pl * F + pf
    o = np.argsort(key, kind="stable")
    pl, pn, pw, pf, key = pl[o], pn[o], pw[o], pf[o], key[o]
    starts = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if key.size else np.zeros(0, np.int64)
    k = k_of[pn]
    lo = np.maximum.reduceat(np.where(pw, 0, k + 1), starts) if starts.size else np.zeros(0, np.int64)
    hi = np.minimum.reduceat(np.where(pw, k, m_f[pf]), starts) if starts.size else np.zeros(0, np.int64)
    nan_in = np.logical_and.reduceat(ml[pn] == pw, starts) if starts.size else np.zeros(0, bool)
    gl, gf = pl[starts], pf[starts]
    G = starts.shape[0]
    empty = lo > hi
    expl = explicit[gf]
    gcat = np.zeros(G, dtype=bool)
    if cells.codes:
        gcat = np.isin(gf, np.fromiter(cells.codes, dtype=np.int64))
        empty &= ~gcat
    ctc, ctw, _ = categorical_factors(forest, cells, c_off, internal[pn], pw, np.cumsum(
        np.isin(np.arange(key.size), starts)) - 1, gf)
    NONE = -2
    gzero = np.isin(gf, zf)
    width = max(3, ctc.shape[1], 7 if gzero.any() else 0)
    tc = np.full((G, width), NONE, dtype=np.int64)
    tw = np.zeros((G, width), dtype=np.float64)
    live = ~empty
    tc[live, 0] = np.where(lo[live] == 0, -1, c_off[gf[live]] + lo[live] - 1)
    tw[live, 0] = 1.0
    bounded = live & (hi < m_f[gf])
    tc[bounded, 1] = c_off[gf[bounded]] + hi[bounded]
    tw[bounded, 1] = -1.0
    mcoef = np.where(empty, nan_in.astype(float), nan_in.astype(float) - (lo == 0))
    has_m = expl & (mcoef != 0)
    tc[has_m, 2] = miss_id[gf[has_m]]
    tw[has_m, 2] = mcoef[has_m]
    if gzero.any():
        gnum = np.cumsum(np.isin(np.arange(key.size), starts)) - 1  # group of each path entry
        zg = np.flatnonzero(gzero)
        local = np.full(G, -1, dtype=np.int64)
        local[zg] = np.arange(zg.size)
        ent = np.flatnonzero(gzero[gnum])
        zpos = np.searchsorted(zf, gf[zg])
        ztc, ztw = zero_feature_factors(
            k[ent], pw[ent], zero_node[pn[ent]], ml[pn[ent]], local[gnum[ent]], zg.size, m_f[gf[zg]],
            z_idx[zpos, 0], z_idx[zpos, 1], c_off[gf[zg]], miss_id[gf[zg]], bool(schema.allow_nan))
        tc[zg], tw[zg] = NONE, 0.0
        tc[zg, :7], tw[zg, :7] = ztc, ztw
    tc[gcat], tw[gcat] = NONE, 0.0
    tc[gcat, :ctc.shape[1]] = ctc[gcat]
    tw[gcat, :ctw.shape[1]] = ctw[gcat]
    cols = np.argsort(tc == NONE, axis=1, kind="stable")
    tc, tw = np.take_along_axis(tc, cols, 1), np.take_along_axis(tw, cols, 1)
    nt = (tc != NONE).sum(axis=1)

    # terms per leaf (checked against the budget before expanding)
    n_leaves = leaves.shape[0]
    ng = np.bincount(gl, minlength=n_leaves)
    g_first = np.concatenate([[0], np.cumsum(ng)[:-1]])
    dead = np.bincount(gl[nt == 0], minlength=n_leaves) > 0
    vals = forest.value[leaves].astype(np.float64)
    divisor = np.ones(K)
    if schema.average:
        divisor = np.maximum(trees_per_output(forest), 1.0)
        vals = vals / divisor[None, :]
    count = np.ones(n_leaves)
    with_groups = ng > 0
    if G:
        prod = np.multiply.reduceat(nt.astype(np.float64), g_first[with_groups])
        count[with_groups] = prod
    count[dead | ~(vals != 0).any(axis=1)] = 0.0
    total = float(count.sum())
    if total > max_monomials:
        tree_terms = np.bincount(forest.node_tree[leaves], weights=count, minlength=forest.n_trees)
        worst = int(np.argmax(tree_terms))
        raise CompileError(
            f"expanding {forest.n_trees} trees into monomials would create {total:,.0f} terms "
            f"(max-monomials={max_monomials:,})",
            f"tree {worst} alone expands to {tree_terms[worst]:,.0f} terms; a leaf with f distinct features "
            f"on its path gives up to 2^f terms (MonoForest's O(|L| 2^d) cost)",
            "raise the budget with polynomial{max-monomials=N} if time and memory allow, "
            "or use shallower trees")

    W = max(1, int(ng.max()) if n_leaves else 1)
    pad = n_cond
    live_leaves = np.flatnonzero(count > 0)
    parts_ids: list[npt.NDArray[np.int32]] = []
    parts_w: list[npt.NDArray[np.float64]] = []
    csum = np.cumsum(count[live_leaves])
    b0 = 0
    while b0 < live_leaves.shape[0]:
        base = csum[b0 - 1] if b0 else 0.0
        b1 = max(b0 + 1, int(np.searchsorted(csum, base + BATCH_TERMS, side="right")))
        ids, w = merge_terms(*expand_products(live_leaves[b0:b1], ng, g_first, nt, tc, tw, vals, W, pad), pad)
        parts_ids.append(ids)
        parts_w.append(w)
        b0 = b1
    ids = np.concatenate(parts_ids) if parts_ids else np.zeros((0, W), dtype=np.int32)
    w = np.concatenate(parts_w) if parts_w else np.zeros((0, K))
    bias = np.asarray(schema.base_score, dtype=np.float64) / divisor
    out_schema = schema.with_(average=False, accumulate_dtype="float64", base_score=(0.0,) * K)
    poly = from_terms(out_schema, cond_feature, cond_kind, cond_threshold, cond_nan_true, ids, w, bias,
                      merged=len(parts_ids) <= 1)
    stats = {"leaves": int(n_leaves), "terms": int(total), "monomials": poly.n_monomials,
             "conditions": poly.n_conditions, "explicit_nan_features": int(explicit.sum()),
             "batches": len(parts_ids)}
    return poly, stats


__all__ = ["DEFAULT_MAX_MONOMIALS", "ToPolynomial", "canonical_thresholds", "expand_forest", "forest_to_polynomial"]
