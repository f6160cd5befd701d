"""``lumber.attribution(model, X)``: MonoForest nu(k) per feature and output (signed).

The model is lowered to its polynomial (exact, the ``polynomial`` pass), then
the ``attribution`` pass (:class:`~lumber.passes.analyses.attribution.Attribution`)
averages formula (8) of the paper over the rows ``X``. Pass ``polynomial=`` to
reuse one, e.g. a pruned polynomial from ``lumber.run``.
"""

from __future__ import annotations

from typing import Any

from lumber.compiler.explain import warn_positional
from lumber.compiler.api.pipeline import as_ir
from lumber.ir import ArrayLike, CompileError, Forest, ModelLike, Polynomial
from lumber.passes.analyses.attribution import Attribution, AttributionResult
from lumber.passes.base import PassContext, PassData
from lumber.passes.manager import run_passes
from lumber.passes.transforms.polynomial import DEFAULT_MAX_MONOMIALS, ToPolynomial


def attribution(model: ModelLike, X: ArrayLike, *, polynomial: Polynomial | None = None,
                max_monomials: int = DEFAULT_MAX_MONOMIALS) -> AttributionResult:
    """nu per feature (``.nu``, ``[n_features, n_outputs]``) and per condition (``.condition_nu``)."""
    ir: Any = polynomial
    if ir is None:
        ir = as_ir(model)
        warn_positional(model, ir, X, "X")
        if not isinstance(ir, (Polynomial, Forest)):
            raise CompileError(f"attribution needs a tree model or a Polynomial, got {type(ir).__name__}")
    passes = ([ToPolynomial(max_monomials=max_monomials)] if isinstance(ir, Forest) else []) + [Attribution()]
    ctx = PassContext(data=PassData(X_train=X))
    run_passes(passes, ir, ctx)
    return ctx.results["attribution"]  # type: ignore[no-any-return]


__all__ = ["AttributionResult", "attribution"]
