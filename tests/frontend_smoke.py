"""Every backend and explainer must accept a forest a frontend lowered (one smoke check per form)."""

from __future__ import annotations

import shutil

import numpy as np

import lumber
from lumber.ir import Forest, Task


def assert_backends_accept(forest: Forest, X: np.ndarray) -> None:
    """C (when a compiler exists) and ONNX reproduce ``forest.evaluate`` bit for bit; tables (re-composed
    through the polynomial form, float64 sums) to 1e-12."""
    ref = forest.evaluate(X).reshape(len(X), -1)
    targets = ["onnx", "table"] + (["c"] if shutil.which("cc") or shutil.which("gcc") else [])
    for target in targets:
        if target == "table" and forest.schema.accumulate_dtype == "float32":
            # tables sum in float64: a float32-summing model compiles only with exact=False, to float32 rounding
            pred = lumber.compile(forest, target=target, options=lumber.TableOptions(exact=False))
            got = np.asarray(pred.predict_raw(X), dtype=np.float64).reshape(len(X), -1)
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6, err_msg="target table")
            continue
        pred = lumber.compile(forest, target=target)
        got = np.asarray(pred.predict_raw(X), dtype=np.float64).reshape(len(X), -1)
        if target == "table":
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12, err_msg="target table")
        else:
            np.testing.assert_array_equal(got, ref, err_msg=f"target {target}")


def assert_explainers_accept(forest: Forest, X: np.ndarray) -> None:
    """Attribution, sensitive tests and (for classifiers) a counterfactual run and re-check on the forest."""
    att = lumber.attribution(forest, X[:20])
    assert att.nu.shape[0] == forest.n_features
    res = lumber.sensitive_tests(forest, X[:2], reference=X, options=lumber.SensitiveOptions(scale="std"))
    assert len(res) == 2
    if forest.schema.task in (Task.BINARY, Task.MULTICLASS):
        cf = lumber.counterfactual(forest, X[0], reference=X, options=lumber.CounterfactualOptions(time_limit=20.0))
        assert cf.to_dict()
