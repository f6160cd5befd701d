"""``polynomial``: Forest -> Polynomial is exact (hand-built, hypothesis and real models), canonical, guarded."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given

import lumber
from builders import categorical, make_forest
from passhelp import assert_matches_forest, with_nan
from lumber.ir import CompileError, ConditionKind, PostTransform, Task
from lumber.passes.transforms.polynomial import canonical_thresholds, expand_forest, forest_to_polynomial
from strategies import boundary_rows, forests


def monomials(p: lumber.ir.Polynomial) -> list[str]:
    return [p.describe_monomial(j) for j in range(p.n_monomials)]


# -- before / expected ----------------------------------------------------------------------------


def test_single_tree_expands_as_in_the_paper() -> None:
    # leaf values: (x0<=0.5, x1<=1) 1, (x0<=0.5, x1>1) 2, (x0>0.5) 4; NaN goes right everywhere
    f = make_forest([("x0", 0.5, ("x1", 1.0, 1.0, 2.0), 4.0)], ["x0", "x1"])
    p = forest_to_polynomial(f).validate()
    # (1-a)(1 + b) + 4a = 1 + b + 3a - ab
    assert p.bias.tolist() == [1.0]
    assert monomials(p) == ["[3] * [x0 > 0.5 or missing]", "[1] * [x1 > 1 or missing]",
                            "[-1] * [x0 > 0.5 or missing] * [x1 > 1 or missing]"]


def test_two_splits_on_one_feature_collapse_to_the_stronger() -> None:
    # x0 in (0, 1] -> 5 else 0: I{x>0} - I{x>1}, never a product of two x0 conditions
    f = make_forest([("x0", 1.0, ("x0", 0.0, 0.0, 5.0), 0.0)], ["x0"])
    p = forest_to_polynomial(f).validate()
    assert p.max_degree == 1
    assert monomials(p) == ["[5] * [x0 > 0 or missing]", "[-5] * [x0 > 1 or missing]"]
    assert p.bias.tolist() == [0.0]


def test_equal_monomials_merge_across_trees_and_exact_zeros_vanish() -> None:
    t = ("x0", 0.5, 1.0, 3.0)
    p = forest_to_polynomial(make_forest([t, t, ("x1", 2.0, 7.0, 7.0)], ["x0", "x1"])).validate()
    assert monomials(p) == ["[4] * [x0 > 0.5 or missing]"]  # x1's split changes nothing: no condition left
    assert p.bias.tolist() == [9.0] and p.n_conditions == 1


def test_base_score_and_averaging_fold_into_bias_and_weights() -> None:
    f = make_forest([("x0", 0.5, 1.0, 3.0), ("x0", 0.5, 2.0, 2.0)], ["x0"], base_score=[4.0], average=True)
    p = forest_to_polynomial(f).validate()
    assert p.bias.tolist() == [(4.0 + 1.0 + 2.0) / 2] and p.weight.tolist() == [[1.0]]
    assert not p.schema.average and p.schema.base_score == (0.0,)
    assert_matches_forest(p, f, np.array([[0.0], [1.0], [np.nan]]))


def test_vector_leaves_fill_every_output() -> None:
    f = make_forest([("x0", 0.0, [1.0, 0.0, 0.0], [0.0, 0.5, 0.5])], ["x0"], task=Task.MULTICLASS, n_outputs=3,
                    post_transform=PostTransform.SOFTMAX)
    p = forest_to_polynomial(f).validate()
    assert p.weight.tolist() == [[-1.0, 0.5, 0.5]] and p.bias.tolist() == [1.0, 0.0, 0.0]


# -- missing values ---------------------------------------------------------------------------------


def test_nan_left_everywhere_needs_no_nan_terms() -> None:
    f = make_forest([("x0", 0.5, ("x0", -1.0, 1.0, 2.0, True), 3.0, True)], ["x0"])
    p = forest_to_polynomial(f).validate()
    assert not p.cond_nan_true.any() and (p.cond_kind == ConditionKind.GREATER).all()
    assert_matches_forest(p, f, np.array([[np.nan], [-2.0], [0.0], [1.0]]))


def test_nan_routed_like_zero_is_a_point_inside_the_feature() -> None:
    # LightGBM missing_type=None: NaN -> 0.0; splits below 0 send NaN right, splits above send it left
    f = make_forest([("x0", -1.0, 1.0, ("x0", 2.0, 2.0, 3.0, True), False)], ["x0"])
    p = forest_to_polynomial(f).validate()
    assert p.cond_nan_true.tolist() == [True, False]
    assert (p.cond_kind == ConditionKind.GREATER).all()
    X = np.array([[np.nan], [0.0], [-5.0], [5.0]])
    assert_matches_forest(p, f, X)
    assert p.evaluate(X)[0] == p.evaluate(X)[1]


def test_inconsistent_nan_directions_get_an_explicit_missing_condition() -> None:
    # x0 <= 0.5 sends NaN left, x0 <= 2 sends NaN right: no value routes like NaN at both
    f = make_forest([("x0", 0.5, 1.0, 2.0, True), ("x0", 2.0, 10.0, 20.0, False)], ["x0"])
    p = forest_to_polynomial(f).validate()
    assert ConditionKind.MISSING in p.cond_kind.tolist()
    assert not p.cond_nan_true[p.cond_kind == ConditionKind.GREATER].any()
    assert_matches_forest(p, f, np.array([[np.nan], [0.0], [1.0], [3.0]]))


def test_infinite_threshold_is_a_nan_only_split() -> None:
    # scikit-learn's missing-value split: every number left, NaN right
    f = make_forest([("x0", np.inf, ("x0", 1.0, 1.0, 2.0), 5.0)], ["x0"])
    p = forest_to_polynomial(f).validate()
    assert np.isfinite(p.cond_threshold[p.cond_kind == ConditionKind.GREATER]).all()
    assert_matches_forest(p, f, np.array([[np.nan], [0.0], [3.0], [np.inf], [-np.inf]]))


def test_thresholds_are_canonical_in_the_input_dtype() -> None:
    t = float(np.float32(0.1))
    between = [np.nextafter(t, 1.0), (t + float(np.nextafter(np.float32(t), np.float32(1)))) / 2]
    assert np.all(canonical_thresholds(np.array(between), "float32") == t)
    f = make_forest([("x0", between[0], 0.0, 1.0), ("x0", between[1], 0.0, 2.0)], ["x0"], input_dtype="float32")
    p = forest_to_polynomial(f).validate()
    assert p.n_conditions == 1 and p.weight.tolist() == [[3.0]]  # both splits are the same test on float32 x
    assert_matches_forest(p, f, np.array([[t], [between[0]], [between[1]], [0.2]]))


# -- random forests of every shape ----------------------------------------------------------------


@given(forests())
def test_polynomial_equals_forest_on_boundary_rows(forest: lumber.ir.Forest) -> None:
    """Numerical, zero-as-missing and categorical splits, every category rule; NaN, zeros and invalid
    codes in the rows."""
    p = forest_to_polynomial(forest).validate()
    assert_matches_forest(p, forest, boundary_rows(forest, n_random=8))
    assert p.n_outputs == forest.n_outputs


# -- real models (differential against the library too) --------------------------------------------


def _lgb(params: dict, X: np.ndarray, y: np.ndarray, rounds: int = 30):  # type: ignore[no-untyped-def]
    import lightgbm as lgb
    return lgb.train({"verbose": -1, "num_threads": 1, "seed": 0, "deterministic": True, **params},
                     lgb.Dataset(X, y), num_boost_round=rounds)


def test_lightgbm_binary_with_nan_matches_booster() -> None:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    Xn = with_nan(X, 0.1)
    bst = _lgb({"objective": "binary", "num_leaves": 15}, Xn, y)
    forest = lumber.load(bst)
    p = forest_to_polynomial(forest).validate()
    rows = np.concatenate([with_nan(X, 0.3, seed=1), boundary_rows(forest, n_random=4)])
    assert_matches_forest(p, forest, rows)
    np.testing.assert_allclose(p.evaluate(rows), bst.predict(rows, raw_score=True), rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(p.predict_proba(rows)[:, 1], bst.predict(rows), rtol=1e-11)


def test_lightgbm_zero_as_missing_matches_booster() -> None:
    """missing_type=Zero: zeros (and |x| <= 1e-35) route like NaN; the polynomial matches LightGBM."""
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X = np.where(np.random.default_rng(0).random(X.shape) < 0.2, 0.0, X)
    bst = _lgb({"objective": "regression", "num_leaves": 15, "zero_as_missing": True}, X, y, 30)
    forest = lumber.load(bst)
    assert forest.missing_zero[forest.left >= 0].any()
    p = forest_to_polynomial(forest).validate()
    rows = np.concatenate([with_nan(X, 0.2, seed=4), boundary_rows(forest, n_random=4)])
    assert_matches_forest(p, forest, rows)
    np.testing.assert_allclose(p.evaluate(rows), bst.predict(rows, raw_score=True), rtol=1e-12, atol=1e-9)


def test_lightgbm_multiclass_and_regression() -> None:
    from sklearn.datasets import load_diabetes, load_wine

    X, y = load_wine(return_X_y=True)
    bst = _lgb({"objective": "multiclass", "num_class": 3, "num_leaves": 7, "min_data_in_leaf": 5}, X, y, 15)
    f = lumber.load(bst)
    p = forest_to_polynomial(f).validate()
    assert_matches_forest(p, f, with_nan(X, 0.2))
    Xd, yd = load_diabetes(return_X_y=True)
    bst = _lgb({"objective": "regression", "num_leaves": 31}, Xd, yd, 40)
    f = lumber.load(bst)
    p = forest_to_polynomial(f).validate()
    assert_matches_forest(p, f, with_nan(Xd, 0.2))
    np.testing.assert_allclose(p.evaluate(Xd), bst.predict(Xd), rtol=1e-12, atol=1e-9)


def test_xgboost_float32_inputs() -> None:
    import xgboost as xgb
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    m = xgb.XGBClassifier(n_estimators=20, max_depth=4, n_jobs=1, random_state=0).fit(with_nan(X, 0.1), y)
    f = lumber.load(m)
    p = forest_to_polynomial(f).validate()
    rows = np.concatenate([with_nan(X, 0.3, seed=2), boundary_rows(f, n_random=4)])
    assert_matches_forest(p, f, rows)
    # XGBoost sums in float32; the polynomial is the float64 sum of the same leaves
    np.testing.assert_allclose(p.evaluate(rows), m.predict(rows, output_margin=True), rtol=1e-5, atol=1e-5)


def test_sklearn_forests_average_and_boosting() -> None:
    from sklearn.datasets import load_diabetes, load_iris
    from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingClassifier, RandomForestClassifier

    X, y = load_iris(return_X_y=True)
    rf = RandomForestClassifier(n_estimators=10, max_depth=4, random_state=0).fit(with_nan(X, 0.1), y)
    f = lumber.load(rf)
    p = forest_to_polynomial(f).validate()
    rows = with_nan(X, 0.3, seed=3)
    assert_matches_forest(p, f, rows)
    np.testing.assert_allclose(p.predict_proba(rows), rf.predict_proba(rows), rtol=1e-12, atol=1e-12)
    hgb = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(with_nan(X, 0.1), y)
    f = lumber.load(hgb)
    assert_matches_forest(forest_to_polynomial(f).validate(), f, rows)
    Xd, yd = load_diabetes(return_X_y=True)
    gb = GradientBoostingRegressor(n_estimators=15, max_depth=3, random_state=0).fit(Xd, yd)
    f = lumber.load(gb)
    p = forest_to_polynomial(f).validate()
    np.testing.assert_allclose(p.evaluate(Xd), gb.predict(Xd), rtol=1e-12, atol=1e-9)


def _categorical_data(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two categorical columns (12 and 5 codes) that matter, one numeric; NaN in every column."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=n), rng.integers(0, 12, n), rng.integers(0, 5, n)]).astype(np.float64)
    y = ((X[:, 0] + 1.5 * (X[:, 1] % 3 == 0) - (X[:, 2] == 2) + 0.3 * rng.normal(size=n)) > 0.5).astype(int)
    return with_nan(X, 0.05, seed=seed), y


def _odd_category_rows(X: np.ndarray) -> np.ndarray:
    """Rows with unseen, negative, fractional and huge codes in the categorical columns."""
    R = X[:300].copy()
    R[0::5, 1], R[1::5, 1], R[2::5, 2], R[3::5, 2], R[4::5, 1] = 40.0, -1.0, 2.5, 1e10, np.nan
    return np.concatenate([X, R])


def test_lightgbm_and_xgboost_categorical_splits_match_the_library() -> None:
    import lightgbm as lgb
    import xgboost as xgb
    X, y = _categorical_data()
    rows = _odd_category_rows(X)
    bst = lgb.train({"objective": "binary", "num_leaves": 8, "verbose": -1, "num_threads": 1, "seed": 0,
                     "min_data_per_group": 5, "cat_smooth": 1.0},
                    lgb.Dataset(X, y, categorical_feature=[1, 2]), num_boost_round=20)
    f = lumber.load(bst)
    assert f.is_categorical.any()
    p = forest_to_polynomial(f).validate()
    assert (p.cond_kind == ConditionKind.EQUAL).any()
    np.testing.assert_allclose(p.evaluate(rows), bst.predict(rows, raw_score=True), rtol=1e-12, atol=1e-11)
    import pandas as pd

    frame = pd.DataFrame({"a": X[:, 0], "b": pd.Categorical(pd.array(X[:, 1], dtype="Int64"), categories=range(12)),
                          "c": pd.Categorical(pd.array(X[:, 2], dtype="Int64"), categories=range(5))})
    m = xgb.XGBClassifier(n_estimators=15, max_depth=3, enable_categorical=True, tree_method="hist",
                          max_cat_to_onehot=1, n_jobs=1, random_state=0).fit(frame, y)
    f = lumber.load(m)
    assert f.is_categorical.any()
    p = forest_to_polynomial(f).validate()
    assert_matches_forest(p, f, rows)
    np.testing.assert_allclose(p.evaluate(X), m.predict(frame, output_margin=True), rtol=1e-5, atol=1e-5)


def test_sklearn_hgb_native_categories_match_the_library() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = _categorical_data(seed=1)
    hgb = HistGradientBoostingClassifier(max_iter=15, categorical_features=[1, 2], random_state=0).fit(X, y)
    f = lumber.load(hgb)
    assert f.is_categorical.any()
    p = forest_to_polynomial(f).validate()
    rows = _odd_category_rows(X)
    rows = rows[~(rows[:, 1:] > 1e9).any(axis=1) & ~((rows[:, 1:] < 0).any(axis=1))]  # sklearn rejects those
    np.testing.assert_allclose(p.evaluate(rows), hgb.decision_function(rows), rtol=1e-12, atol=1e-11)


# -- errors -------------------------------------------------------------------------------------------


def test_categorical_sets_become_category_cells(tmp_path: Any) -> None:
    """``c in {1, 3}`` then ``c in {3}``: cells 1 and 3 get indicators, the rest is the constant."""
    f = make_forest([("c", {1, 3}, ("c", {3}, 10.0, 20.0), 30.0)], [categorical("c", range(5))])
    p = forest_to_polynomial(f).validate()
    # leaf 10: c = 3; leaf 20: c = 1; leaf 30: 1 - [c=1] - [c=3] (NaN and invalid codes go right)
    assert p.bias.tolist() == [30.0]
    got = sorted(p.describe_monomial(j) for j in range(p.n_monomials))
    assert got == ["[-10] * [c = 1]", "[-20] * [c = 3]"]
    X = np.array([[0.0], [1.0], [3.0], [3.7], [4.0], [np.nan], [-1.0], [1e12]])
    np.testing.assert_array_equal(p.evaluate(X), f.evaluate(X))
    p.save(tmp_path / "p.lumber")
    np.testing.assert_array_equal(lumber.ir.Polynomial.load(tmp_path / "p.lumber").evaluate(X), p.evaluate(X))


def test_invalid_codes_and_nan_get_their_own_cells_when_they_route_apart() -> None:
    f = make_forest([("c", {2}, 1.0, 2.0)], [categorical("c", range(4))])
    f = f.replace(cat_invalid_left=np.array([True, False, False]), missing_left=np.array([False, False, False]))
    p = forest_to_polynomial(f).validate()
    assert {p.describe_condition(c) for c in range(p.n_conditions)} == {"c = 2", "c is not a valid category"}
    X = np.array([[2.0], [0.0], [-1.0], [np.nan], [2.5]])
    np.testing.assert_array_equal(p.evaluate(X), f.evaluate(X))


def test_a_feature_with_threshold_and_category_splits_is_rejected_with_its_location() -> None:
    f = make_forest([("c", 0.5, ("c", {1, 3}, 1.0, 2.0), 3.0)], [categorical("c", range(4))])
    with pytest.raises(CompileError, match=r"tree 0, node 1: error: categorical split \(the feature also has"):
        forest_to_polynomial(f)


def test_zero_as_missing_splits_make_the_zero_region_a_cell() -> None:
    """LightGBM missing_type=Zero: |x| <= 1e-35 goes where NaN goes (here left of a split at -1)."""
    f = make_forest([("x0", -1.0, 1.0, ("x0", 2.0, 2.0, 3.0), True)], ["x0"])
    mz = f.missing_zero.copy()
    mz[0] = True
    f = f.replace(missing_zero=mz)
    p = forest_to_polynomial(f).validate()
    X = np.array([[-2.0], [-1.0], [-0.5], [-1e-35], [0.0], [1e-36], [1e-35], [1e-34], [0.5], [2.0], [3.0],
                  [np.nan]])
    np.testing.assert_array_equal(p.evaluate(X), f.evaluate(X))
    assert p.evaluate([[0.0]])[0] == 1.0 and p.evaluate([[1e-34]])[0] == 2.0


def test_expansion_budget_is_checked_before_expanding() -> None:
    deep = 1.0
    for i in reversed(range(6)):
        deep = (f"x{i}", 0.0, deep, 2.0)
    f = make_forest([deep], [f"x{i}" for i in range(6)])
    _, stats = expand_forest(f)
    assert stats["terms"] == 1 + 2 + 4 + 8 + 16 + 32 + 64
    with pytest.raises(CompileError, match=r"would create 127 terms \(max-monomials=100\)"):
        forest_to_polynomial(f, max_monomials=100)
