"""Validity on real data for every model kind: the library itself predicts the target at each counterfactual.

Each model is small so the whole file stays in a few seconds; ``lumber.counterfactual``
verifies every point with the source model's own ``predict``, and the test checks it
again here, independently, in the library's own input format.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine

import lumber
from lumber.ir import Constraints


@pytest.fixture(scope="module")
def cancer() -> tuple[pd.DataFrame, np.ndarray]:
    d = load_breast_cancer(as_frame=True)
    return d.data.iloc[:, :8], d.target.to_numpy()  # 8 features keep every MILP well under a second


def _check(model, X: pd.DataFrame, rows, target=None, reference=None, **kw):
    res = lumber.counterfactual(model, X.iloc[rows], target=target, reference=reference,
                                options=lumber.CounterfactualOptions(time_limit=30, **kw))
    res = res if isinstance(res, list) else [res]
    for r, row in zip(res, rows):
        assert r.status == "optimal", (r.status, r.message)
        assert r.verified and not r.violations
        assert r.cost > 0
        got = model.predict(pd.DataFrame(r.x[None, :], columns=X.columns))[0]
        if target is None:
            assert got != model.predict(X.iloc[[row]])[0]
        elif isinstance(target, tuple):
            assert target[0] <= got <= target[1]
        else:
            assert got == target
    return res


def test_sklearn_random_forest(cancer) -> None:
    from sklearn.ensemble import RandomForestClassifier

    X, y = cancer
    m = RandomForestClassifier(n_estimators=10, max_depth=3, random_state=0).fit(X, y)
    res = _check(m, X, [0, 20], scale="std", reference=X)
    # float32 model: every changed value sits on the float32 grid
    for r in res:
        assert np.all(r.x.astype(np.float32).astype(np.float64) == r.x)


def test_sklearn_gradient_boosting(cancer) -> None:
    from sklearn.ensemble import GradientBoostingClassifier

    X, y = cancer
    m = GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0).fit(X, y)
    _check(m, X, [0, 5], norm="l2", scale="minmax", reference=X)


def test_sklearn_hist_gradient_boosting_multiclass() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    d = load_wine(as_frame=True)
    X = d.data.iloc[:, :6]
    m = HistGradientBoostingClassifier(max_iter=5, max_depth=3, random_state=0).fit(X, d.target)
    _check(m, X, [0, 70], target=2, norm="linf", scale="std", reference=X)


def test_sklearn_regressor_interval() -> None:
    from sklearn.ensemble import RandomForestRegressor

    d = load_diabetes(as_frame=True)
    m = RandomForestRegressor(n_estimators=10, max_depth=4, random_state=0).fit(d.data, d.target)
    p = float(m.predict(d.data.iloc[[0]])[0])
    _check(m, d.data, [0], target=(p + 30.0, np.inf), norm="l1", scale="std", reference=d.data)


def test_lightgbm_binary_with_categories() -> None:
    import lightgbm as lgb
    data = lumber.datasets.load("adult")
    X = data.X.iloc[:3000].copy()
    y = data.y[:3000]
    cats = ["MaritalStatus", "Occupation", "Relationship", "WorkClass"]
    for c in cats:
        X[c] = X[c].astype("category")
    m = lgb.LGBMClassifier(n_estimators=20, num_leaves=8, min_child_samples=20, verbose=-1,
                           random_state=0).fit(X, y)
    f = lumber.load(m)
    assert f.is_categorical.any()
    neg = np.flatnonzero(m.predict(X) == 0)[:2]
    cons = Constraints.from_mapping({"immutable": ["Sex"], "increase": ["Age"]})
    res = lumber.counterfactual(m, X.iloc[neg], target=1, constraints=cons, reference=X, options=lumber.CounterfactualOptions(scale="std", time_limit=30))
    for r in res:
        assert r.status == "optimal" and r.verified and not r.violations
        assert r.x[list(X.columns).index("Sex")] == r.x0[list(X.columns).index("Sex")]
        assert r.x[0] >= r.x0[0]


def test_lightgbm_multiclass_booster() -> None:
    import lightgbm as lgb
    d = load_iris(as_frame=True)
    b = lgb.train({"objective": "multiclass", "num_class": 3, "num_leaves": 4, "verbose": -1},
                  lgb.Dataset(d.data, d.target), num_boost_round=8)
    res = lumber.counterfactual(b, d.data.iloc[0].to_numpy(), target=2, options=lumber.CounterfactualOptions(time_limit=30))
    assert res.status == "optimal" and res.verified
    assert int(np.argmax(b.predict(res.x[None, :]), axis=1)[0]) == 2


def test_xgboost_binary_and_multiclass(cancer) -> None:
    import xgboost as xgb
    X, y = cancer
    m = xgb.XGBClassifier(n_estimators=15, max_depth=3, random_state=0, n_jobs=1).fit(X, y)
    _check(m, X, [0, 3], norm="l1", scale="std", reference=X)
    d = load_iris(as_frame=True)
    mc = xgb.XGBClassifier(n_estimators=6, max_depth=2, random_state=0, n_jobs=1).fit(d.data, d.target)
    _check(mc, d.data, [0], target=1)


@pytest.mark.slow  # worker start-up (imports) dominates on a shared 2-core machine
def test_batch_in_parallel_matches_serial() -> None:
    from sklearn.ensemble import RandomForestClassifier

    d = lumber.datasets.load("compas")
    m = RandomForestClassifier(n_estimators=10, max_depth=4, random_state=1).fit(d.X, d.y)
    rows = d.X.iloc[np.flatnonzero(m.predict(d.X) == 1)[:4]]
    serial = lumber.counterfactual(m, rows, reference=d.X, options=lumber.CounterfactualOptions(scale="std", time_limit=30))
    parallel = lumber.counterfactual(m, rows, reference=d.X, n_jobs=2, options=lumber.CounterfactualOptions(scale="std", time_limit=30))
    assert [r.cost for r in serial] == pytest.approx([r.cost for r in parallel], rel=1e-9)
    assert all(r.verified and r.status == "optimal" for r in parallel)


def test_xgboost_categorical_verified_by_xgboost() -> None:
    import xgboost as xgb
    data = lumber.datasets.load("adult")
    X = data.X.iloc[:2000].copy()
    for c in ["MaritalStatus", "Relationship"]:
        X[c] = X[c].astype(int).astype("category")
    m = xgb.XGBClassifier(n_estimators=8, max_depth=3, enable_categorical=True, tree_method="hist",
                          n_jobs=1).fit(X, data.y[:2000])
    assert lumber.load(m).is_categorical.any()
    row = int(np.flatnonzero(m.predict(X) == 0)[0])
    r = lumber.counterfactual(m, X.iloc[[row]], target=1, reference=X, options=lumber.CounterfactualOptions(scale="std", time_limit=30))
    assert r.status == "optimal" and r.verified
    z = X.iloc[[row]].copy()
    for j, c in enumerate(X.columns):  # the same point, fed to XGBoost as a categorical DataFrame
        if isinstance(X[c].dtype, pd.CategoricalDtype):
            z[c] = pd.Categorical([int(r.x[j])], categories=X[c].cat.categories)
        else:
            z[c] = r.x[j]
    assert m.predict(z)[0] == 1
