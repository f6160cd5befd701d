"""A small zoo of fitted models from every supported library, with their own raw predictions.

Each entry trains in well under a second and knows how to ask its own library
for raw margins, so the conformance suite can compare every frontend x backend
against the source model rather than against lumber itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class ZooModel:
    name: str
    model: Any
    X: npt.NDArray[np.float64]
    raw: Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]
    """The source library's raw margins for rows X (shape (n,) or (n, k))."""
    rtol: float = 1e-12


def _data(kind: str, seed: int = 0) -> tuple[npt.NDArray[np.float64], npt.NDArray[Any]]:
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine

    if kind == "binary":
        X, y = load_breast_cancer(return_X_y=True)
    elif kind == "multiclass":
        X, y = load_wine(return_X_y=True)
    else:
        X, y = load_diabetes(return_X_y=True)
    return X.astype(np.float64), y


def _with_nans(X: npt.NDArray[np.float64], seed: int = 1) -> npt.NDArray[np.float64]:
    rng = np.random.default_rng(seed)
    X = X.copy()
    X[rng.random(X.shape) < 0.05] = np.nan
    return X


def _sklearn() -> list[ZooModel]:
    from sklearn.ensemble import (
        GradientBoostingClassifier, GradientBoostingRegressor, HistGradientBoostingClassifier,
        HistGradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor,
    )
    from sklearn.tree import DecisionTreeClassifier

    out = []
    Xb, yb = _data("binary")
    Xm, ym = _data("multiclass")
    Xr, yr = _data("regression")
    Xbn = _with_nans(Xb)
    rf = RandomForestClassifier(n_estimators=8, max_depth=6, random_state=0).fit(Xbn, yb)
    out.append(ZooModel("sklearn-rf-binary-nan", rf, Xbn, lambda X: rf.predict_proba(X)))
    rfr = RandomForestRegressor(n_estimators=8, max_depth=6, random_state=0).fit(Xr, yr)
    out.append(ZooModel("sklearn-rf-regression", rfr, Xr, lambda X: rfr.predict(X)))
    dt = DecisionTreeClassifier(max_depth=5, random_state=0).fit(Xm, ym)
    out.append(ZooModel("sklearn-dt-multiclass", dt, Xm, lambda X: dt.predict_proba(X)))
    gb = GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0).fit(Xb, yb)
    out.append(ZooModel("sklearn-gb-binary", gb, Xb, lambda X: gb.decision_function(X)))
    gbm = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(Xm, ym)
    out.append(ZooModel("sklearn-gb-multiclass", gbm, Xm, lambda X: gbm.decision_function(X)))
    gbr = GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0).fit(Xr, yr)
    out.append(ZooModel("sklearn-gb-regression", gbr, Xr, lambda X: gbr.predict(X)))
    hgb = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(Xbn, yb)
    out.append(ZooModel("sklearn-hgb-binary-nan", hgb, Xbn, lambda X: hgb.decision_function(X)))
    hgr = HistGradientBoostingRegressor(max_iter=10, random_state=0).fit(Xr, yr)
    out.append(ZooModel("sklearn-hgb-regression", hgr, Xr, lambda X: hgr.predict(X)))
    return out


def _lightgbm() -> list[ZooModel]:
    import lightgbm as lgb

    from lumber import datasets

    out = []
    Xb, yb = _data("binary")
    Xm, ym = _data("multiclass")
    Xr, yr = _data("regression")
    p = {"n_estimators": 10, "num_leaves": 8, "verbose": -1, "random_state": 0, "n_jobs": 1}
    Xbn = _with_nans(Xb)
    b = lgb.LGBMClassifier(**p).fit(Xbn, yb)
    out.append(ZooModel("lightgbm-binary-nan", b, Xbn, lambda X: b.booster_.predict(X, raw_score=True)))
    m = lgb.LGBMClassifier(**p).fit(Xm, ym)
    out.append(ZooModel("lightgbm-multiclass", m, Xm, lambda X: m.booster_.predict(X, raw_score=True)))
    r = lgb.LGBMRegressor(**p).fit(Xr, yr)
    out.append(ZooModel("lightgbm-regression", r, Xr, lambda X: r.booster_.predict(X, raw_score=True)))
    d = datasets.load("compas")
    Xc = d.X.to_numpy()[:2000]
    yc = d.y[:2000]
    # treat PriorsCount as categorical to exercise bitset splits
    c = lgb.LGBMClassifier(**p, min_data_per_group=5, cat_smooth=1).fit(Xc, yc, categorical_feature=[2])
    Xcp = Xc.copy()
    Xcp[::11, 2] = -0.5
    Xcp[::13, 2] = np.nan
    out.append(ZooModel("lightgbm-categorical", c, Xcp, lambda X: c.booster_.predict(X, raw_score=True)))
    return out


def _xgboost() -> list[ZooModel]:
    import xgboost as xgb

    out = []
    Xb, yb = _data("binary")
    Xm, ym = _data("multiclass")
    Xr, yr = _data("regression")
    p = {"n_estimators": 10, "max_depth": 3, "random_state": 0, "n_jobs": 1}
    Xbn = _with_nans(Xb)
    b = xgb.XGBClassifier(**p).fit(Xbn, yb)
    out.append(ZooModel("xgboost-binary-nan", b, Xbn, lambda X: b.predict(X, output_margin=True)))
    m = xgb.XGBClassifier(**p).fit(Xm, ym)
    out.append(ZooModel("xgboost-multiclass", m, Xm, lambda X: m.predict(X, output_margin=True)))
    r = xgb.XGBRegressor(**p).fit(Xr, yr)
    out.append(ZooModel("xgboost-regression", r, Xr, lambda X: r.predict(X, output_margin=True)))
    return out


@lru_cache(maxsize=1)
def zoo() -> tuple[ZooModel, ...]:
    return tuple(_sklearn() + _lightgbm() + _xgboost())


ZOO_NAMES = [
    "sklearn-rf-binary-nan", "sklearn-rf-regression", "sklearn-dt-multiclass", "sklearn-gb-binary",
    "sklearn-gb-multiclass", "sklearn-gb-regression", "sklearn-hgb-binary-nan", "sklearn-hgb-regression",
    "lightgbm-binary-nan", "lightgbm-multiclass", "lightgbm-regression", "lightgbm-categorical",
    "xgboost-binary-nan", "xgboost-multiclass", "xgboost-regression",
]


def get(name: str) -> ZooModel:
    for z in zoo():
        if z.name == name:
            return z
    raise KeyError(name)
