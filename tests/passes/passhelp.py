"""Helpers for pass tests: tolerance of polynomial-vs-forest comparisons, NaN injection."""

from __future__ import annotations

import numpy as np

from lumber.ir import Forest, Polynomial
from lumber.passes.analyses.equivalence import model_scale


def assert_matches_forest(poly: Polynomial, forest: Forest, X: np.ndarray, rtol: float = 1e-12) -> None:
    """Polynomial == Forest (summed in float64) to ``rtol`` relative to the model's scale."""
    f64 = forest.replace(schema=forest.schema.with_(accumulate_dtype="float64"))
    want = f64.evaluate(X)
    got = poly.evaluate(X)
    assert got.shape == want.shape
    scale = model_scale(forest)
    if forest.schema.average:
        scale /= max(forest.n_trees, 1)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(scale, 1.0))


def with_nan(X: np.ndarray, frac: float, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = np.array(X, dtype=np.float64, copy=True)
    X[rng.random(X.shape) < frac] = np.nan
    return X
