"""Equivalence of two models through their canonical polynomials (MonoForest, Theorem 1).

Both polynomials are brought to one basis, then subtracted:

1. float32-input polynomials get the float64 thresholds that split float64
   inputs exactly as rounding to float32 would (:func:`widen_to_float64`);
2. every feature goes to explicit NaN mode (``x > b or missing`` becomes
   ``[x > b] + [x is missing]``), so the per-feature basis is the same on both
   sides (:func:`to_explicit_missing`); on a domain without NaN, monomials with
   a MISSING condition vanish;
3. the condition tables are united and ``P_a - P_b`` is merged; weights within
   ``atol`` of zero are dropped, and conditions no monomial uses go with them
   (a redundant split, one whose monomials cancel, disappears this way).

For a fixed condition set the basis functions are linearly independent, so the
models are equal iff nothing is left (Theorem 1). Otherwise a minimal nonzero
monomial M (fewest conditions, then lowest thresholds; the constant when the
biases differ) gives a counterexample:
x satisfies exactly the conditions of M (each feature of M just above M's
threshold, or NaN for MISSING) and every other feature sits below all its
thresholds; then every other monomial that holds at x is smaller than M and
has weight zero, so ``P_a(x) - P_b(x) = w_M``. Callers verify it by
evaluating both models at x.

Limits: equality is up to ``atol`` on each monomial weight (float sums of leaf
values differ in the last bits between tree shapes); category conditions compare
only under one category rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from lumber.ir import CompileError, Forest, UnsupportedModelError
from lumber.ir.polynomial import ConditionKind, Polynomial, expand_products, from_terms

from ..base import Analysis, PassContext
from ..transforms.polynomial import DEFAULT_MAX_MONOMIALS, forest_to_polynomial


@dataclass(frozen=True, eq=False)
class EquivalenceResult:
    """``equal``; otherwise a ``counterexample`` row and both models' outputs there."""

    equal: bool
    counterexample: npt.NDArray[np.float64] | None = None
    output_a: npt.NDArray[np.float64] | None = None
    output_b: npt.NDArray[np.float64] | None = None
    difference: float | None = None
    """max |output_a - output_b| at the counterexample."""
    verified: bool = False
    """The counterexample was evaluated with both models and they differ by more than ``tolerance``."""
    differing_monomials: int = 0
    tolerance: float = 0.0
    reason: str = ""

    def __bool__(self) -> bool:
        return self.equal


def widen_to_float64(poly: Polynomial) -> Polynomial:
    """A float64-input polynomial equal to ``poly`` (float32 inputs) on every float64 input:
    ``float32(x) > t`` iff ``x > t'`` with ``t'`` the largest double that rounds to at most ``t``."""
    if poly.schema.input_dtype != "float32":
        return poly
    gt = poly.cond_kind == ConditionKind.GREATER
    t32 = poly.cond_threshold[gt].astype(np.float32)
    t = t32.astype(np.float64)
    nxt = np.nextafter(t32, np.float32(np.inf)).astype(np.float64)
    mid = np.where(np.isinf(nxt), t + 2.0 ** 103, (t + nxt) / 2)  # 2**103: half an ulp at float32 max
    with np.errstate(over="ignore"):
        down = mid.astype(np.float32) == t32
    thr = poly.cond_threshold.copy()
    thr[gt] = np.where(down, mid, np.nextafter(mid, -np.inf))
    return poly.replace(schema=poly.schema.with_(input_dtype="float64"), cond_threshold=thr)


def to_explicit_missing(poly: Polynomial, allow_nan: bool = True) -> Polynomial:
    """The same function with no condition true on NaN except ``MISSING`` ones.

    With ``allow_nan=False`` the result only has to agree on NaN-free inputs:
    MISSING conditions vanish and so do the monomials that hold them. Category
    conditions (false on NaN already) pass through unchanged.
    """
    F = poly.n_features
    kind = poly.cond_kind
    gt = kind == ConditionKind.GREATER
    miss = kind == ConditionKind.MISSING
    cat = kind >= ConditionKind.EQUAL
    f = poly.cond_feature.astype(np.int64)
    need = np.zeros(F, dtype=bool)
    if allow_nan:
        need[f[miss]] = True
        need[f[gt & poly.cond_nan_true]] = True
    # the new table: thresholds (false on NaN), category conditions, one MISSING per feature that needs it
    g_idx, c_idx, m_feat = np.flatnonzero(gt), np.flatnonzero(cat), np.flatnonzero(need)
    feat = np.concatenate([f[g_idx], f[c_idx], m_feat])
    knd = np.concatenate([kind[g_idx], kind[c_idx], np.full(m_feat.size, ConditionKind.MISSING)]).astype(np.int8)
    thr = np.concatenate([poly.cond_threshold[g_idx], poly.cond_threshold[c_idx], np.full(m_feat.size, np.nan)])
    order = np.lexsort((np.nan_to_num(thr, nan=np.inf), knd, feat))
    pos = np.empty(order.size, dtype=np.int64)
    pos[order] = np.arange(order.size)
    n_new = int(order.size)
    new_id = np.full(poly.n_conditions, -1, dtype=np.int64)
    new_id[g_idx] = pos[:g_idx.size]
    new_id[c_idx] = pos[g_idx.size:g_idx.size + c_idx.size]
    miss_of = np.full(F, -1, dtype=np.int64)
    miss_of[m_feat] = pos[g_idx.size + c_idx.size:]
    # one factor per monomial entry: [G'] or [G', MISSING] (x > b or missing), [MISSING], [category], or nothing
    tc = np.full((poly.n_conditions, 2), -2, dtype=np.int64)
    tw = np.zeros((poly.n_conditions, 2))
    keep = gt | cat
    tc[keep, 0] = new_id[keep]
    tw[keep, 0] = 1.0
    split = gt & poly.cond_nan_true & allow_nan
    tc[split, 1] = miss_of[f[split]]
    tw[split, 1] = 1.0
    if allow_nan:
        tc[miss, 0] = miss_of[f[miss]]
        tw[miss, 0] = 1.0
    nt_c = (tc != -2).sum(axis=1)
    entry_tc, entry_tw, entry_nt = tc[poly.mono_cond], tw[poly.mono_cond], nt_c[poly.mono_cond]
    ids, w = expand_products(np.arange(poly.n_monomials), poly.degree, poly.mono_offset[:-1], entry_nt,
                             entry_tc, entry_tw, poly.weight, max(1, poly.max_degree), n_new)
    schema = poly.schema if allow_nan == poly.schema.allow_nan else poly.schema.with_(allow_nan=allow_nan)
    return from_terms(schema, feat[order].astype(np.int32), knd[order], thr[order], knd[order] == ConditionKind.MISSING,
                      ids, w, poly.bias)


def polynomial_difference(a: Polynomial, b: Polynomial, atol: float = 0.0) -> Polynomial:
    """Canonical ``a - b`` in one basis (explicit NaN mode, common input dtype, united conditions)."""
    if a.schema.category_rule != b.schema.category_rule and (
            (a.cond_kind >= ConditionKind.EQUAL).any() or (b.cond_kind >= ConditionKind.EQUAL).any()):
        raise UnsupportedModelError(
            f"the models read category codes differently ({a.schema.category_rule.name} vs "
            f"{b.schema.category_rule.name} rules), so their category conditions are not comparable",
            "compare models from the same library, or encode the categories as numbers")
    if a.schema.input_dtype != b.schema.input_dtype:
        a, b = widen_to_float64(a), widen_to_float64(b)
    allow_nan = a.schema.allow_nan and b.schema.allow_nan
    ea, eb = to_explicit_missing(a, allow_nan), to_explicit_missing(b, allow_nan)
    feat = np.concatenate([ea.cond_feature, eb.cond_feature]).astype(np.int64)
    kind = np.concatenate([ea.cond_kind, eb.cond_kind]).astype(np.int64)
    thr = np.concatenate([ea.cond_threshold, eb.cond_threshold])
    key_thr = np.nan_to_num(thr, nan=np.inf)
    order = np.lexsort((key_thr, kind, feat))
    new = np.ones(order.shape[0], dtype=bool)
    new[1:] = ((feat[order][1:] != feat[order][:-1]) | (kind[order][1:] != kind[order][:-1])
               | (key_thr[order][1:] != key_thr[order][:-1]))
    pos = np.empty(order.shape[0], dtype=np.int64)
    pos[order] = np.cumsum(new) - 1
    n_u = int(new.sum())
    u = order[new]
    W = max(ea.padded_ids.shape[1], eb.padded_ids.shape[1])

    def mapped(p: Polynomial, shift: int) -> npt.NDArray[np.int32]:
        ids = p.padded_ids
        out = np.full((ids.shape[0], W), n_u, dtype=np.int32)
        real = ids < p.n_conditions
        out[:, :ids.shape[1]] = np.where(real, pos[np.minimum(ids, p.n_conditions - 1) + shift] if p.n_conditions
                                         else n_u, n_u)
        return out

    ids = np.concatenate([mapped(ea, 0), mapped(eb, ea.n_conditions)])
    w = np.concatenate([ea.weight, -eb.weight])
    nan_true = np.concatenate([ea.cond_nan_true, eb.cond_nan_true])[u]
    return from_terms(ea.schema, feat[u].astype(np.int32), kind[u].astype(np.int8), thr[u], nan_true, ids, w,
                      ea.bias - eb.bias, atol=atol)


def counterexample_row(diff: Polynomial, atol: float = 0.0) -> npt.NDArray[np.float64]:
    """A row where ``diff`` (canonical, explicit NaN mode) equals the weight of a minimal monomial.

    The empty monomial is the smallest: when the bias differs by more than ``atol`` (or no
    monomial is left) the row lies below every threshold, where ``diff`` is its bias.
    """
    F = diff.n_features
    dtype = np.float32 if diff.schema.input_dtype == "float32" else np.float64
    gt = diff.cond_kind == ConditionKind.GREATER
    f = diff.cond_feature.astype(np.int64)
    m_f = np.bincount(f[gt], minlength=F)
    g_off = np.concatenate([[0], np.cumsum(m_f)])
    g_idx = np.flatnonzero(gt)
    rank = np.zeros(diff.n_conditions, dtype=np.int64)
    rank[g_idx] = np.arange(g_idx.shape[0]) - g_off[f[g_idx]]
    thr_sorted = diff.cond_threshold[g_idx]  # by feature then threshold
    x = np.zeros(F, dtype=np.float64)
    has = m_f > 0
    x[has] = thr_sorted[g_off[:-1][has]]  # the lowest threshold: no condition on the feature holds
    eq = diff.cond_kind == ConditionKind.EQUAL
    for fc in np.unique(f[eq]):  # a valid code no EQUAL condition names: no category condition holds
        named = set(diff.cond_threshold[eq & (f == fc)].astype(np.int64).tolist())
        x[fc] = float(min(set(range(len(named) + 1)) - named))
    if diff.n_monomials and not np.any(np.abs(diff.bias) > atol):
        ranksum = np.bincount(diff.mono_of_entry, weights=rank[diff.mono_cond], minlength=diff.n_monomials)
        j = int(np.lexsort((ranksum, diff.degree))[0])
        for c in diff.mono_cond[diff.mono_offset[j]:diff.mono_offset[j + 1]]:
            fc = int(f[c])
            if diff.cond_kind[c] == ConditionKind.EQUAL:
                x[fc] = float(diff.cond_threshold[c])
                continue
            if diff.cond_kind[c] == ConditionKind.INVALID:
                x[fc] = -1.0  # negative: an invalid code under every category rule
                continue
            if not gt[c]:
                x[fc] = np.nan
                continue
            r = int(rank[c])
            if r + 1 < m_f[fc]:
                x[fc] = thr_sorted[g_off[fc] + r + 1]
            else:
                x[fc] = float(np.nextafter(dtype(diff.cond_threshold[c]), dtype(np.inf)))
    return x


def model_scale(ir: Any) -> float:
    """A bound on |margin| used to scale the tolerance: base score + sum over trees of max |leaf|."""
    if isinstance(ir, Polynomial):
        return float(np.abs(ir.bias).max(initial=0.0) + np.abs(ir.weight).max(axis=1, initial=0.0).sum())
    if isinstance(ir, Forest):
        leaf = ir.value[ir.is_leaf]
        per_tree = np.zeros(ir.n_trees)
        np.maximum.at(per_tree, ir.node_tree[ir.is_leaf], np.abs(leaf).max(axis=1, initial=0.0))
        return float(np.abs(ir.schema.base_score).max(initial=0.0) + per_tree.sum())
    raise CompileError(f"cannot compare objects of type {type(ir).__name__}", "pass models, Forests or Polynomials")


def _polynomial(ir: Any, max_monomials: int) -> Polynomial:
    if isinstance(ir, Polynomial):
        return ir
    if isinstance(ir, Forest):
        return forest_to_polynomial(ir, max_monomials=max_monomials)
    raise CompileError(f"cannot compare a {type(ir).__name__}", "pass models, Forests or Polynomials")


def _outputs(ir: Any, x: np.ndarray) -> np.ndarray:
    return np.asarray(ir.evaluate(x[None, :]), dtype=np.float64).reshape(-1)


def compare(A: Any, B: Any, *, rtol: float = 1e-9, max_monomials: int = DEFAULT_MAX_MONOMIALS) -> EquivalenceResult:
    """Whether Forests or Polynomials ``A`` and ``B`` give the same raw margins on every input, up to ``rtol``
    times the larger model's scale per monomial weight; a verified counterexample row when they do not."""
    sa, sb = A.schema, B.schema
    if sa.n_features != sb.n_features:
        return EquivalenceResult(False, reason=f"the models read {sa.n_features} and {sb.n_features} features")
    if sa.n_outputs != sb.n_outputs:
        return EquivalenceResult(False, reason=f"the models have {sa.n_outputs} and {sb.n_outputs} outputs")
    atol = rtol * max(model_scale(A), model_scale(B), 1e-300)
    diff = polynomial_difference(_polynomial(A, max_monomials), _polynomial(B, max_monomials), atol=atol)
    x = counterexample_row(diff, atol)
    margins_equal = diff.n_monomials == 0 and bool(np.all(np.abs(diff.bias) <= atol))
    same_transform = (sa.post_transform, sa.sigmoid_alpha) == (sb.post_transform, sb.sigmoid_alpha)
    if margins_equal and same_transform:
        return EquivalenceResult(True, tolerance=atol, reason="same canonical polynomial")
    ya, yb = _outputs(A, x), _outputs(B, x)
    if margins_equal:
        pa, pb = sa.transform(ya), sb.transform(yb)
        d = float(np.abs(pa - pb).max())
        return EquivalenceResult(False, x, pa, pb, d, d > 0, 0, atol,
                                 f"same raw margins but different post-transforms "
                                 f"({sa.post_transform.name.lower()} vs {sb.post_transform.name.lower()})")
    d = float(np.abs(ya - yb).max())
    return EquivalenceResult(False, x, ya, yb, d, d > atol / 2, diff.n_monomials + int(np.any(np.abs(diff.bias) > atol)),
                             atol, f"{diff.n_monomials} monomial weight(s) differ")

@dataclass(frozen=True)
class Equivalence(Analysis[object, EquivalenceResult]):
    """``equivalence``: does the IR here compute the pipeline's input (``polynomial,prune,equivalence``: what
    pruning changed)? The result, with a counterexample row when not, is ``ctx.results["equivalence"]``."""

    name: ClassVar[str] = "equivalence"
    rtol: float = 1e-9
    """Monomial weights may differ by this times the larger model's scale (float sums differ in the last bits)."""
    max_monomials: int = DEFAULT_MAX_MONOMIALS
    """A Forest's polynomial may have at most this many monomials."""

    def compute(self, ir: object, ctx: PassContext) -> EquivalenceResult:
        if ctx.source is None:
            raise CompileError("pass 'equivalence' compares the IR with the pipeline's input, and there is none",
                               "run it in a pipeline (lumber.run), or call lumber.equivalent(a, b)")
        return compare(ctx.source, ir, rtol=self.rtol, max_monomials=self.max_monomials)


__all__ = ["Equivalence", "EquivalenceResult", "compare", "counterexample_row", "model_scale", "polynomial_difference",
           "to_explicit_missing", "widen_to_float64"]
