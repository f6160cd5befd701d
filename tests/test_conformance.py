"""One conformance suite over every frontend x backend, judged by the source library itself.

For each model in the zoo (scikit-learn, LightGBM, XGBoost; binary, multiclass,
regression; NaN and categorical inputs) and each target (the reference
evaluator, the C shared library, ONNX): raw margins equal the library's own to
1e-12 relative, and every compiled backend is bit-identical to the reference
evaluator. A backend that cannot express a model exactly must refuse it with a
CompileError naming the node, never return something close.
"""

from __future__ import annotations

import numpy as np
import pytest

import lumber
from lumber.ir import CompileError, LumberError
from zoo import ZOO_NAMES, get

TARGETS = ["numpy", "c", "onnx"]


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))) if a.size else 0.0


@pytest.mark.parametrize("name", ZOO_NAMES)
def test_frontend_matches_source(name: str) -> None:
    z = get(name)
    forest = lumber.load(z.model)
    ours = forest.evaluate(z.X).reshape(len(z.X), -1)
    theirs = np.asarray(z.raw(z.X), dtype=np.float64).reshape(len(z.X), -1)
    assert ours.shape == theirs.shape
    assert _rel(ours, theirs) <= z.rtol


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ZOO_NAMES)
def test_backend_matches_reference_and_source(name: str, target: str) -> None:
    z = get(name)
    forest = lumber.load(z.model)
    try:
        pred = lumber.compile(forest, target=target)
    except CompileError as exc:
        # refusing is allowed only with a clear, located reason
        assert "node" in str(exc) or "tree" in str(exc), str(exc)
        pytest.skip(f"{target} refuses {name}: {str(exc).splitlines()[0]}")
    except LumberError as exc:  # e.g. no C compiler on this machine
        pytest.skip(str(exc).splitlines()[0])
    got = np.asarray(pred.predict_raw(z.X)).reshape(len(z.X), -1)
    ref = forest.evaluate(z.X).reshape(len(z.X), -1)
    theirs = np.asarray(z.raw(z.X), dtype=np.float64).reshape(len(z.X), -1)
    np.testing.assert_array_equal(got, ref)
    assert _rel(got, theirs) <= z.rtol
    np.testing.assert_array_equal(pred.predict(z.X), forest.predict(z.X))
