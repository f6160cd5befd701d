"""Per-row Shapley values of the margin: they add up, they equal the Shapley values by enumeration,
LightGBM's and XGBoost's own ``pred_contrib`` (path-dependent) and shap's exact TreeExplainer."""

from __future__ import annotations

import itertools
import math

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from sklearn.ensemble import (
    GradientBoostingClassifier, HistGradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor,
)
from sklearn.tree import DecisionTreeRegressor

import lumber
from lumber.compiler.frontends import load
from lumber.ir import InputDataError


def _data(n: int = 400, d: int = 5, nan: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Z = np.nan_to_num(X)
    y = (Z[:, 0] + Z[:, 1] * Z[:, 2] - 0.5 * (Z[:, 3] > 0.3) > 0).astype(int)
    if nan:
        X[rng.random(X.shape) < nan] = np.nan
    return X, y


def _brute(forest: lumber.Forest, x: np.ndarray, refs: np.ndarray | None) -> np.ndarray:
    """Shapley values by enumerating every coalition: interventional against ``refs``; path-dependent
    (``refs`` None) by the recursive expectation over covers."""
    F = forest.n_features

    def pd_value(z: np.ndarray, S: set[int]) -> float:
        def walk(node: int) -> float:
            if forest.left[node] < 0:
                return float(forest.value[node, 0])
            f = int(forest.feature[node])
            if f in S:
                gl = lumber_go_left(forest, node, z[f])
                return walk(int(forest.left[node] if gl else forest.right[node]))
            c = forest.count
            lo, hi = int(forest.left[node]), int(forest.right[node])
            return (c[lo] * walk(lo) + c[hi] * walk(hi)) / c[node]
        return sum(walk(int(r)) for r in forest.roots) + forest.schema.base_score[0]

    def game(S: tuple[int, ...]) -> float:
        if refs is None:
            return pd_value(x, set(S))
        z = refs.copy()
        z[:, list(S)] = x[list(S)]
        return float(forest.evaluate(z).mean())

    phi = np.zeros(F)
    for k in range(F):
        others = [j for j in range(F) if j != k]
        for s in range(F):
            w = math.factorial(s) * math.factorial(F - 1 - s) / math.factorial(F)
            for S in itertools.combinations(others, s):
                phi[k] += w * (game(S + (k,)) - game(S))
    return phi


def lumber_go_left(forest: lumber.Forest, node: int, v: float) -> bool:
    from lumber.ir.interp import go_left

    return bool(go_left(forest, np.array([node]), np.array([v]))[0])


def test_interventional_equals_enumeration_with_nan() -> None:
    X, y = _data()
    m = lgb.LGBMClassifier(n_estimators=15, num_leaves=8, verbose=-1).fit(X, y)
    f = load(m)
    rows, refs = X[:4], X[100:106]
    c = lumber.contributions(m, rows, refs)
    assert c.method == "interventional" and c.n_reference == 6 and c.values.shape == (4, 5)
    for i in range(4):
        np.testing.assert_allclose(c.values[i], _brute(f, rows[i], refs), rtol=0, atol=1e-12)
    np.testing.assert_allclose(c.base_value, f.evaluate(refs).mean(), rtol=0, atol=1e-12)


def test_histgradientboosting_equals_enumeration() -> None:
    X, y = _data(seed=9)
    m = HistGradientBoostingClassifier(max_iter=8, max_leaf_nodes=8, random_state=0).fit(X, y)
    f = load(m)
    rows, refs = X[:3], X[100:105]
    for ref in (refs, None):
        c = lumber.contributions(m, rows, ref)
        for i in range(3):
            np.testing.assert_allclose(c.values[i], _brute(f, rows[i], ref), rtol=0, atol=1e-12)
        np.testing.assert_allclose(c.base_value + c.values.sum(axis=1), m.decision_function(rows), rtol=0,
                                   atol=1e-9)


def test_path_dependent_equals_enumeration_and_lightgbm_pred_contrib() -> None:
    X, y = _data(seed=1)
    m = lgb.LGBMClassifier(n_estimators=15, num_leaves=12, verbose=-1).fit(X, y)
    f = load(m)
    rows = X[:5]
    c = lumber.contributions(m, rows)
    assert c.method == "path-dependent"
    for i in range(3):
        np.testing.assert_allclose(c.values[i], _brute(f, rows[i], None), rtol=0, atol=1e-12)
    pc = m.predict(rows, pred_contrib=True)
    np.testing.assert_allclose(c.values, pc[:, :-1], rtol=0, atol=1e-9)
    np.testing.assert_allclose(c.base_value, pc[0, -1], rtol=0, atol=1e-9)


@pytest.mark.parametrize("reference", [False, True])
def test_values_add_up_to_the_margin_on_every_row(reference: bool) -> None:
    """``base_value + values.sum(axis=1)`` is the model's own margin (1e-9), NaN rows included."""
    X, y = _data(n=600, d=6, seed=2)
    m = lgb.LGBMClassifier(n_estimators=40, num_leaves=16, verbose=-1).fit(X, y)
    c = lumber.contributions(m, X[:150], X[300:340] if reference else None)
    np.testing.assert_allclose(c.base_value + c.values.sum(axis=1), m.predict(X[:150], raw_score=True),
                               rtol=0, atol=1e-9)
    np.testing.assert_allclose(c.margin, c.base_value + c.values.sum(axis=1), rtol=0, atol=1e-9)


def test_xgboost_pred_contribs_and_categories() -> None:
    X, y = _data(seed=3)
    frame = pd.DataFrame(X, columns=list("abcde"))
    frame["c"] = pd.Categorical(np.random.default_rng(3).integers(0, 4, len(frame)))
    yy = (y ^ (frame["c"].cat.codes.to_numpy() == 2)).astype(int)
    m = xgb.XGBClassifier(n_estimators=20, max_depth=4, enable_categorical=True, tree_method="hist").fit(frame, yy)
    rows = frame.iloc[:20]
    c = lumber.contributions(m, rows)
    pc = m.get_booster().predict(xgb.DMatrix(rows, enable_categorical=True), pred_contribs=True)
    np.testing.assert_allclose(c.values, pc[:, :-1], rtol=0, atol=1e-5)  # XGBoost sums in float32
    margin = m.predict(rows, output_margin=True)
    np.testing.assert_allclose(c.base_value + c.values.sum(axis=1), margin, rtol=0, atol=1e-5)
    np.testing.assert_allclose(c.margin, c.base_value + c.values.sum(axis=1), rtol=0, atol=1e-9)


def test_multiclass_values_per_output() -> None:
    X, _ = _data(seed=4)
    y = np.digitize(np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]), [-0.5, 0.5])
    m = lgb.LGBMClassifier(n_estimators=10, num_leaves=6, verbose=-1).fit(X, y)
    c = lumber.contributions(m, X[:8], X[200:210])
    assert c.values.shape == (8, 5, 3) and np.shape(c.base_value) == (3,)
    np.testing.assert_allclose(c.base_value + c.values.sum(axis=1), m.predict(X[:8], raw_score=True),
                               rtol=0, atol=1e-9)
    p = lumber.contributions(m, X[:8])
    pc = m.predict(X[:8], pred_contrib=True).reshape(8, 3, 6)
    np.testing.assert_allclose(p.values, pc[:, :, :-1].transpose(0, 2, 1), rtol=0, atol=1e-9)


def test_averaged_forest_adds_up() -> None:
    X, y = _data(nan=0.0, seed=5)
    m = RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0).fit(X, y + X[:, 4])
    for ref in (None, X[50:60]):
        c = lumber.contributions(m, X[:10], ref)
        np.testing.assert_allclose(c.base_value + c.values.sum(axis=1), m.predict(X[:10]), rtol=0, atol=1e-9)


def test_errors_are_clear() -> None:
    X, y = _data(nan=0.0)
    m = lgb.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1).fit(X, y)
    with pytest.raises(InputDataError, match="reference set has no rows"):
        lumber.contributions(m, X[:2], X[:0])
    f = load(m)
    with pytest.raises(InputDataError, match="records no node covers"):
        lumber.contributions(f.replace(count=None), X[:2])
    with pytest.raises(InputDataError, match="columns"):
        lumber.contributions(m, X[:2, :3])


def test_bundled_schema_binds_labels() -> None:
    """``features=`` lets category labels bind, as for every explainer."""
    ds = lumber.datasets.load("credit")
    X, y = ds.X.iloc[:1500], ds.y[:1500]
    m = lgb.LGBMClassifier(n_estimators=10, num_leaves=8, verbose=-1).fit(X, y)
    c = lumber.contributions(m, X.iloc[:5], X.iloc[500:520], features=ds.features)
    np.testing.assert_allclose(c.base_value + c.values.sum(axis=1), m.predict(X.iloc[:5], raw_score=True),
                               rtol=0, atol=1e-9)


# -- shap's exact TreeExplainer -----------------------------------------------------------------


def _shap_models() -> list[tuple[str, object, np.ndarray]]:
    X, y = _data(n=500, d=5, nan=0.0, seed=7)
    Xn, yn = _data(n=500, d=5, nan=0.1, seed=8)
    return [
        ("lightgbm", lgb.LGBMClassifier(n_estimators=25, num_leaves=10, verbose=-1).fit(Xn, yn), Xn),
        ("xgboost", xgb.XGBClassifier(n_estimators=20, max_depth=4).fit(Xn, yn), Xn),
        ("sklearn-gb", GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0).fit(X, y), X),
        ("sklearn-rf", RandomForestClassifier(n_estimators=6, max_depth=5, random_state=0).fit(X, y), X),
        ("sklearn-tree", DecisionTreeRegressor(max_depth=6, random_state=0).fit(X, X[:, 0] * y), X),
    ]
"""HistGradientBoosting is checked by enumeration instead: shap's values for it do not add up to its
``decision_function`` (differences near 1e-4 without NaN, 4e-3 with)."""


@pytest.mark.parametrize("perturbation", ["interventional", "tree_path_dependent"])
def test_equals_shap_tree_explainer(perturbation: str) -> None:
    shap = pytest.importorskip("shap", reason="shap comes with the test extra: pip install -e '.[test]'")
    for name, model, X in _shap_models():
        rows, refs = X[:12], X[200:260]
        if perturbation == "interventional":
            ex = shap.TreeExplainer(model, data=refs, feature_perturbation="interventional",
                                    model_output="raw")
            ours = lumber.contributions(model, rows, refs)
        else:
            ex = shap.TreeExplainer(model, feature_perturbation="tree_path_dependent", model_output="raw")
            ours = lumber.contributions(model, rows)
        sv = np.asarray(ex.shap_values(rows, check_additivity=False))
        if name == "sklearn-rf":  # one output per class (averaged probabilities), as shap
            base = np.asarray(ex.expected_value)
        else:
            base = np.atleast_1d(ex.expected_value)[0]
        tol = 1e-5 if name == "xgboost" else 1e-6
        np.testing.assert_allclose(ours.values, sv, rtol=0, atol=tol, err_msg=name)
        np.testing.assert_allclose(ours.base_value, base, rtol=0, atol=tol, err_msg=name)


@pytest.fixture(scope="module")
def credit_lgb() -> tuple[object, pd.DataFrame]:
    """The issue's model: LightGBM 300 trees x 31 leaves on the bundled credit data (category codes, which
    shap's TreeExplainer reads)."""
    ds = lumber.datasets.load("credit")
    X, y = ds.X.iloc[:4000], ds.y[:4000]
    model = lgb.LGBMClassifier(n_estimators=300, num_leaves=31, random_state=0, n_jobs=1, verbose=-1)
    return model.fit(X, y), ds.X


def test_credit_model_adds_up_on_every_row(credit_lgb: tuple[object, pd.DataFrame]) -> None:
    model, X = credit_lgb
    rows, refs = X.iloc[7000:7020], X.iloc[8000:8020]
    for ref in (refs, None):
        c = lumber.contributions(model, rows, ref)
        margin = model.predict(rows, raw_score=True)  # type: ignore[attr-defined]
        np.testing.assert_allclose(c.base_value + c.values.sum(axis=1), margin, rtol=0, atol=1e-9)
        if ref is not None:
            np.testing.assert_allclose(c.base_value, model.predict(refs, raw_score=True).mean(),  # type: ignore[attr-defined]
                                       rtol=0, atol=1e-9)
    pc = model.predict(rows, pred_contrib=True)  # type: ignore[attr-defined]
    np.testing.assert_allclose(lumber.contributions(model, rows).values, pc[:, :-1], rtol=0, atol=1e-9)


def test_credit_model_equals_shap_interventional(credit_lgb: tuple[object, pd.DataFrame]) -> None:
    shap = pytest.importorskip("shap", reason="shap comes with the test extra: pip install -e '.[test]'")
    model, X = credit_lgb
    rows, refs = X.iloc[7000:7020], X.iloc[8000:8050]
    ex = shap.TreeExplainer(model, data=refs, feature_perturbation="interventional", model_output="raw")
    sv = np.asarray(ex.shap_values(rows, check_additivity=False))
    c = lumber.contributions(model, rows, refs)
    np.testing.assert_allclose(c.values, sv, rtol=0, atol=1e-6)
    np.testing.assert_allclose(c.base_value, np.atleast_1d(ex.expected_value)[0], rtol=0, atol=1e-6)
