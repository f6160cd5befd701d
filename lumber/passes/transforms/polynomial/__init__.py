"""Forest -> Polynomial: the pass and the helpers only it uses (category cells, zero-as-missing)."""

from .to_polynomial import (
    DEFAULT_MAX_MONOMIALS,
    ToPolynomial,
    canonical_thresholds,
    expand_forest,
    forest_to_polynomial,
)

__all__ = ["DEFAULT_MAX_MONOMIALS", "ToPolynomial", "canonical_thresholds", "expand_forest", "forest_to_polynomial"]
