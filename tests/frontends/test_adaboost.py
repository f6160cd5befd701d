"""AdaBoostClassifier (SAMME) against scikit-learn's decision_function, predict_proba and predict.

Leaves hold each tree's vote divided by the sum of the estimator weights, so margins
agree to rounding (rtol 1e-12), not bit for bit: scikit-learn divides the summed votes.
AdaBoost refuses NaN and infinities, and so does the lowered forest.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import ensemble as E
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.linear_model import LogisticRegression

import lumber
from lumber.compiler.frontends.sklearn import from_sklearn
from lumber.ir import InputDataError, PostTransform, Task, UnsupportedModelError

from frontend_smoke import assert_backends_accept, assert_explainers_accept

RTOL = 1e-12


def boundary(forest: lumber.Forest, X: np.ndarray) -> np.ndarray:
    """Rows on every threshold and its float32 neighbours (other columns from real rows)."""
    rows = []
    rng = np.random.default_rng(0)
    for i in np.flatnonzero(~forest.is_leaf)[:200]:
        t = np.float32(forest.threshold[i])
        for v in (t, np.nextafter(t, np.float32(np.inf)), np.nextafter(t, np.float32(-np.inf))):
            r = X[rng.integers(len(X))].copy()
            r[forest.feature[i]] = v
            rows.append(r)
    return np.vstack([X, np.array(rows)])


def assert_matches(model: E.AdaBoostClassifier, X: np.ndarray) -> lumber.Forest:
    f = from_sklearn(model)
    X = boundary(f, X)
    d = model.decision_function(X)
    K = len(model.classes_)
    np.testing.assert_allclose(f.evaluate(X), d if K == 2 else d / (K - 1), rtol=RTOL, atol=1e-15)
    np.testing.assert_allclose(f.predict_proba(X), model.predict_proba(X), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(f.predict(X), model.predict(X))
    # each tree's leaf is the estimator's leaf
    np.testing.assert_array_equal(f.apply(X), np.column_stack([e.apply(X.astype(np.float32))
                                                              for e in model.estimators_]))
    return f


@pytest.mark.parametrize("depth", [1, 3])
def test_binary_on_real_data(depth: int) -> None:
    X, y = load_breast_cancer(return_X_y=True)
    from sklearn.tree import DecisionTreeClassifier

    m = E.AdaBoostClassifier(DecisionTreeClassifier(max_depth=depth), n_estimators=25, random_state=0).fit(X, y)
    f = assert_matches(m, X)
    assert f.schema.task == Task.BINARY and f.schema.post_transform == PostTransform.SIGMOID
    assert f.schema.input_dtype == "float32" and not f.schema.allow_nan


def test_multiclass_on_real_data() -> None:
    X, y = load_wine(return_X_y=True)
    m = E.AdaBoostClassifier(n_estimators=30, random_state=0).fit(X, y)
    f = assert_matches(m, X)
    assert f.schema.task == Task.MULTICLASS and f.n_outputs == 3 and f.schema.post_transform == PostTransform.SOFTMAX


def test_string_labels_and_early_stop() -> None:
    X, y = load_wine(return_X_y=True)
    labels = np.array(["a", "b", "c"])[y]
    m = E.AdaBoostClassifier(n_estimators=200, learning_rate=3.0, random_state=0).fit(X, labels)
    f = assert_matches(m, X)
    assert f.schema.classes == ("a", "b", "c")


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), K=st.integers(2, 4), depth=st.integers(1, 4), n=st.integers(2, 12))
def test_hypothesis_fitted_models(seed: int, K: int, depth: int, n: int) -> None:
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(150, 3)), 1)  # repeated values: rows on the thresholds
    y = (rng.integers(0, K, size=150) + (X[:, 0] > 0)) % K
    m = E.AdaBoostClassifier(DecisionTreeClassifier(max_depth=depth), n_estimators=n, random_state=seed).fit(X, y)
    if len(m.classes_) < 2:
        return
    assert_matches(m, X)


def test_nan_is_refused_like_scikit_learn() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    f = from_sklearn(E.AdaBoostClassifier(n_estimators=3, random_state=0).fit(X, y))
    Xn = X[:3].copy()
    Xn[0, 0] = np.nan
    with pytest.raises(InputDataError, match="NaN"):
        f.evaluate(Xn)


def test_regressor_and_other_estimators_are_refused() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    r = E.AdaBoostRegressor(n_estimators=3, random_state=0).fit(X, y.astype(float))
    with pytest.raises(UnsupportedModelError, match="(?s)weighted median.*not a sum"):
        lumber.load(r)
    lr = E.AdaBoostClassifier(LogisticRegression(max_iter=200), n_estimators=2).fit(X[:, :3], y)
    with pytest.raises(UnsupportedModelError, match="estimator 0 is a LogisticRegression"):
        lumber.load(lr)


def test_backends_and_explainers_accept_the_lowered_forest() -> None:
    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :6]
    f = from_sklearn(E.AdaBoostClassifier(n_estimators=8, random_state=0).fit(X, y))
    assert_backends_accept(f, X)
    assert_explainers_accept(f, X)
