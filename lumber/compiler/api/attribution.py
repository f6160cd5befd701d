"""``lumber.attribution(model, X)``: MonoForest nu(k) per feature and output (signed).

The model is lowered to its polynomial (exact), then
:func:`lumber.passes.analyses.attribution.attribution` averages formula (8)
of the paper over the rows ``X``. Pass ``polynomial=`` to reuse one, e.g. a
pruned polynomial from ``lumber.run``.
"""

from __future__ import annotations

from lumber.compiler.explain import warn_positional
from lumber.compiler.api.pipeline import as_ir
from lumber.ir import ArrayLike, CompileError, Forest, ModelLike, Polynomial
from lumber.passes.analyses.attribution import AttributionResult
from lumber.passes.analyses.attribution import attribution as _attribution
from lumber.passes.transforms.polynomial import DEFAULT_MAX_MONOMIALS, forest_to_polynomial


def attribution(model: ModelLike, X: ArrayLike, *, polynomial: Polynomial | None = None,
                max_monomials: int = DEFAULT_MAX_MONOMIALS) -> AttributionResult:
    """nu per feature (``.nu``, ``[n_features, n_outputs]``) and per condition (``.condition_nu``)."""
    if polynomial is None:
        ir = as_ir(model)
        warn_positional(model, ir, X, "X")
        if isinstance(ir, Polynomial):
            polynomial = ir
        elif isinstance(ir, Forest):
            polynomial = forest_to_polynomial(ir, max_monomials=max_monomials)
        else:
            raise CompileError(f"attribution needs a tree model or a Polynomial, got {type(ir).__name__}")
    return _attribution(polynomial, X)


__all__ = ["AttributionResult", "attribution"]
