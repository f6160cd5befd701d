"""``lumber.equivalent(a, b)``: do two models compute the same function?

Decided on canonical polynomials (MonoForest Theorem 1, see
:mod:`lumber.passes.analyses.equivalence`); when they differ, the result
carries a counterexample row, verified by evaluating both models on it.
Raw margins are compared; models whose post-transforms differ are reported
unequal even when their margins agree.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lumber.compiler.api.pipeline import as_ir
from lumber.ir import CompileError, Forest, ModelLike, Polynomial
from lumber.passes.analyses.equivalence import EquivalenceResult, counterexample_row, polynomial_difference
from lumber.passes.transforms.polynomial import DEFAULT_MAX_MONOMIALS, forest_to_polynomial


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


def equivalent(a: ModelLike, b: ModelLike, *, rtol: float = 1e-9,
               max_monomials: int = DEFAULT_MAX_MONOMIALS) -> EquivalenceResult:
    """Whether ``a`` and ``b`` (models, paths, Forests or Polynomials) give the same raw margins
    on every input, up to ``rtol`` times the larger model's scale per monomial weight."""
    A, B = as_ir(a), as_ir(b)
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


__all__ = ["EquivalenceResult", "equivalent", "model_scale"]
