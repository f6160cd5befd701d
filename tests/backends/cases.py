"""Hand-built forests covering every node kind a backend must reproduce, and their probe rows."""

from __future__ import annotations

from typing import Callable

import numpy as np

from builders import categorical, make_forest
from strategies import boundary_rows

from lumber.ir import CategoryRule, Forest, PostTransform, Task
from lumber.ir.forest import ZERO_THRESHOLD

SPECIALS = [np.inf, -np.inf, 2.5, -2.5, -0.0, ZERO_THRESHOLD, -ZERO_THRESHOLD,
            float(np.nextafter(ZERO_THRESHOLD, 1.0)), float(np.nextafter(-ZERO_THRESHOLD, -1.0)),
            2.0**24 + 1, 2.0**32, 2.0**31 - 0.5, -0.999, 3e38, 4e38, 1e-45, 16777217.0, 99999.0, 100000.0,
            2999999.5, 3000000.0]


def corpus(forest: Forest, seed: int = 0) -> np.ndarray:
    """``boundary_rows`` plus infinities, non-integer and huge category values, zero-band edges."""
    rows = [boundary_rows(forest, seed=seed)]
    rng = np.random.default_rng(seed + 1)
    base = rows[0][: max(1, min(8, rows[0].shape[0]))]
    for f in range(forest.n_features):
        for v in SPECIALS:
            r = base[rng.integers(0, base.shape[0])].copy()
            r[f] = v
            rows.append(r[None, :])
    return np.concatenate(rows)


def _with(forest: Forest, **arrays: np.ndarray) -> Forest:
    return forest.replace(**arrays).validate()


def numeric_nan() -> Forest:
    return make_forest(
        [("x0", 0.5, ("x1", 1.5, 1.0, 2.0, True), 3.0),
         ("x1", -2.0, 0.25, ("x0", 0.1, -1.0, ("x1", 7.25, 0.125, 0.75, True), True))],
        ["x0", "x1"], base_score=[0.5])


def float32_average() -> Forest:
    """scikit-learn style: float32 inputs, float64 midpoint thresholds, vector leaves, averaged."""
    mid = float((np.float64(np.float32(1.0)) + np.float64(np.nextafter(np.float32(1.0), np.float32(2)))) / 2)
    return make_forest(
        [("x0", mid, [0.2, 0.8], ("x1", 0.1, [0.6, 0.4], [1.0, 0.0], True)),
         ("x1", 1e-8, [0.5, 0.5], [0.3, 0.7]),
         ("x0", 3.4e38, [0.1, 0.9], [0.9, 0.1])],
        ["x0", "x1"], task=Task.REGRESSION, n_outputs=2, average=True, input_dtype="float32")


def _cat_forest(rule: CategoryRule, in_set_left: bool, invalid_left: bool, **kw: object) -> Forest:
    f = make_forest(
        [("c", {0, 2, 5}, ("x0", 0.5, 1.0, 2.0), ("c", {1}, -1.0, -2.0, True)),
         ("x0", 1.0, ("c", {3, 4}, 0.5, 0.25), -0.5)],
        ["x0", categorical("c", range(6))], category_rule=rule, **kw)  # type: ignore[arg-type]
    cat = f.is_categorical
    return _with(f, cat_in_set_left=cat & in_set_left, cat_invalid_left=cat & invalid_left)


def categorical_lightgbm() -> Forest:
    return _cat_forest(CategoryRule.LIGHTGBM, True, False)


def categorical_xgboost() -> Forest:
    """XGBoost: members go right, invalid (incl. -0.5) left, float32 inputs and sums, nonzero base, sigmoid."""
    f = _cat_forest(CategoryRule.XGBOOST, False, True, task=Task.BINARY, base_score=[-0.3],
                    post_transform=PostTransform.SIGMOID, input_dtype="float32")
    return f.replace(schema=f.schema.with_(accumulate_dtype="float32")).validate()


def categorical_sklearn() -> Forest:
    return _cat_forest(CategoryRule.SKLEARN, True, False)


def categorical_treelite() -> Forest:
    return _cat_forest(CategoryRule.TREELITE, True, False)


def categorical_mixed_directions() -> Forest:
    """Invalid values go left while non-members go right: C can, ONNX cannot."""
    return _cat_forest(CategoryRule.LIGHTGBM, True, True)


def sparse_categories() -> Forest:
    """Sets with huge codes are stored as sorted lists, not bitsets."""
    return make_forest([("c", {5, 99999, 3000000, 2**31 - 1}, 1.0, ("c", {0}, 2.0, 3.0))],
                       [categorical("c")], category_rule=CategoryRule.LIGHTGBM)


def missing_zero() -> Forest:
    f = make_forest(
        [("x0", 0.5, ("x1", -1.0, 1.0, 2.0), ("x1", 2.0, 3.0, 4.0, True), True),
         ("x0", 1e-35, 0.5, 0.25)],
        ["x0", "x1"])
    return _with(f, missing_zero=~f.is_leaf)


def missing_zero_onnx_safe() -> Forest:
    """Zero-as-missing nodes whose zero band goes the missing way anyway (expressible in ONNX)."""
    f = make_forest([("x0", 0.5, ("x1", -1.0, 1.0, 2.0), 3.0, True), ("x1", -0.5, 0.5, 0.25)], ["x0", "x1"])
    return _with(f, missing_zero=~f.is_leaf)


def multiclass() -> Forest:
    trees = [("x0", 0.5, [1.0, 0, 0], [-1.0, 0, 0]), ("x1", 0.5, [0, 0.5, 0], [0, 2.0, 0], True),
             ("x0", -0.5, [0, 0, 0.3], [0, 0, -0.3]), ("x1", 1.5, [0.1, 0, 0], [0.2, 0, 0])]
    f = make_forest(trees, ["x0", "x1"], task=Task.MULTICLASS, n_outputs=3, base_score=[0.1, -0.2, 0.3],
                    post_transform=PostTransform.SOFTMAX)
    return _with(f, tree_output=np.array([0, 1, 2, 0], dtype=np.int32))


def single_leaves() -> Forest:
    return make_forest([1.5, ("x0", 0.0, 1.0, -1.0), -0.25], ["x0"], base_score=[2.0],
                       post_transform=PostTransform.EXP)


def lopsided() -> Forest:
    """A deep chain (depth 30) beside shallow leaves: walked until every row is on a leaf."""
    spec: object = 0.0
    for d in range(30):
        spec = ("x0", float(d), float(d + 1), spec, d % 2 == 0)
    return make_forest([spec, ("x1", 0.0, 1.0, 2.0)], ["x0", "x1"])


def isolation() -> Forest:
    f = make_forest([("x0", 0.5, 3.0, 5.5), ("x0", 1.5, 2.0, 4.0)], ["x0"], task=Task.ANOMALY, average=True,
                    post_transform=PostTransform.ISOLATION)
    return f.replace(schema=f.schema.with_(isolation_c=4.5, isolation_offset=-0.5))


def sigmoid_alpha() -> Forest:
    f = make_forest([("x0", 0.5, -1.0, 1.0)], ["x0"], task=Task.BINARY, post_transform=PostTransform.SIGMOID)
    return f.replace(schema=f.schema.with_(sigmoid_alpha=2.0))


def infinite_thresholds() -> Forest:
    """Thresholds at +-inf with NaN sent either way: in a binned walk NaN must not pass for an infinity."""
    inf = float("inf")
    return make_forest(
        [("x0", inf, ("x1", -inf, 1.0, 2.0, True), 3.0, False),
         ("x0", -inf, 0.5, ("x1", inf, 0.25, 0.125), True),
         ("x1", inf, -1.0, -2.0, True), ("x1", -inf, -4.0, -8.0, False)],
        ["x0", "x1"])


def many_thresholds() -> Forest:
    """300 stumps on one feature: more thresholds than one byte codes (two-byte codes)."""
    return make_forest([("x0", k / 7.0 - 20.0, float(k), -float(k), k % 2 == 0) for k in range(300)]
                       + [("x1", 0.5, 0.25, -0.25)], ["x0", "x1"])


CASES: dict[str, Callable[[], Forest]] = {
    f.__name__: f for f in (
        numeric_nan, float32_average, categorical_lightgbm, categorical_xgboost, categorical_sklearn,
        categorical_treelite, categorical_mixed_directions, sparse_categories, missing_zero,
        missing_zero_onnx_safe, multiclass, single_leaves, lopsided, isolation, sigmoid_alpha, infinite_thresholds,
        many_thresholds)
}
ONNX_REFUSED = {"categorical_mixed_directions": "non-members go", "missing_zero": "zero-as-missing"}
