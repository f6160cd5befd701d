"""``lumber.equivalent(a, b)``: do two models compute the same function?

Decided on canonical polynomials (MonoForest Theorem 1) by the ``equivalence``
analysis (:mod:`lumber.passes.analyses.equivalence`); when they differ, the
result carries a counterexample row, verified by evaluating both models on it.
Raw margins are compared; models whose post-transforms differ are reported
unequal even when their margins agree.
"""

from __future__ import annotations

from lumber.compiler.api.pipeline import as_ir
from lumber.ir import ModelLike
from lumber.passes.analyses.equivalence import Equivalence, EquivalenceResult
from lumber.passes.manager import run_analysis
from lumber.passes.transforms.polynomial import DEFAULT_MAX_MONOMIALS


def equivalent(a: ModelLike, b: ModelLike, *, rtol: float = 1e-9,
               max_monomials: int = DEFAULT_MAX_MONOMIALS) -> EquivalenceResult:
    """Whether ``a`` and ``b`` (models, paths, Forests or Polynomials) give the same raw margins
    on every input, up to ``rtol`` times the larger model's scale per monomial weight."""
    return run_analysis(Equivalence(rtol=rtol, max_monomials=max_monomials), as_ir(b),  # type: ignore[no-any-return]
                        source=as_ir(a))


__all__ = ["EquivalenceResult", "equivalent"]
