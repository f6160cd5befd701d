"""Probabilities and decisions of one row equal the batch's bit for bit.

The one-row path computes the link on a Python float (``Schema.transform``'s scalar branch) and
builds ``predict_proba``'s row without stacking; these tests hold it to the array path over varied
and extreme margins, through every door of a C predictor, with and without a threshold.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

from c_tools import needs_cc

import lumber
from lumber.ir import Cutoff, InputDataError, PostTransform, Schema, Task
from lumber.ir.schema import default_features

pytestmark = needs_cc


def _margins() -> np.ndarray:
    rng = np.random.default_rng(7)
    edges = [0.0, -0.0, 1e-300, -1e-300, 5e-324, 36.0, -36.0, 37.5, 700.0, -700.0, 708.99, -708.99, 709.0,
             -709.0, 709.5, -709.5, 709.78, -709.78, 709.7827128933840, -709.7827128933840, 709.79, -709.79,
             710.0, -710.0, 745.2, -745.2, 800.0, -800.0, 1e300, -1e300, 1.7e308, -1.7e308,
             np.inf, -np.inf, np.nan]
    return np.concatenate([edges, rng.normal(0, 1, 3000), rng.normal(0, 40, 3000), rng.uniform(-1000, 1000, 3000)])


def _bits(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.int64)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 2.0, 1e-3])
def test_scalar_sigmoid_equals_the_array_sigmoid(alpha: float) -> None:
    schema = Schema(features=default_features(3), task=Task.BINARY, n_outputs=1, base_score=(0.0,), post_transform=PostTransform.SIGMOID,
                    sigmoid_alpha=alpha)
    m = _margins()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither path warns, even where exp overflows
        batch = schema.transform(m)
        one = np.array([schema.transform(float(v)) for v in m])
        proba = np.concatenate([schema.proba(m[i:i + 1]) for i in range(len(m))])
    np.testing.assert_array_equal(_bits(one), _bits(batch))
    np.testing.assert_array_equal(_bits(proba), _bits(schema.proba(m)))
    np.testing.assert_array_equal(np.concatenate([schema.class_index(m[i:i + 1]) for i in range(len(m))]),
                                  schema.class_index(m))
    assert proba.shape == (len(m), 2) and proba.dtype == np.float64


def test_exp_link_of_one_margin_warns_as_the_batch_does() -> None:
    schema = Schema(features=default_features(2), task=Task.REGRESSION, n_outputs=1, base_score=(0.0,), post_transform=PostTransform.EXP)
    m = np.array([-3.0, 0.5, 700.0])
    np.testing.assert_array_equal(_bits([schema.transform(float(v)) for v in m]), _bits(schema.transform(m)))
    with pytest.warns(RuntimeWarning):
        schema.transform(np.array([800.0]))
    with pytest.warns(RuntimeWarning):
        schema.transform(800.0)


def _credit(n: int = 400) -> pd.DataFrame:
    d = lumber.datasets.load("credit")
    X = d.X.iloc[:n].reset_index(drop=True).copy()
    X.iloc[::5, 2] = np.nan
    return X


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, pd.DataFrame]]:
    """LightGBM binary (learning rate 1: margins in the tens), LightGBM multiclass (softmax),
    XGBoost binary, XGBoost logistic regressor, LightGBM regressor."""
    import lightgbm as lgb
    import xgboost as xgb

    X = _credit()
    y = np.asarray(lumber.datasets.load("credit").y)[:len(X)]
    y3 = (X.iloc[:, 0].rank(pct=True).to_numpy() * 3).astype(int).clip(0, 2)
    yr = X.iloc[:, 0].fillna(0).to_numpy() / 1e5 + y
    tmp = tmp_path_factory.mktemp("one-row-proba")
    made = {
        "lightgbm": lgb.LGBMClassifier(n_estimators=40, num_leaves=15, learning_rate=1.0, min_child_samples=2,
                                       verbose=-1).fit(X, y),
        "multiclass": lgb.LGBMClassifier(n_estimators=30, num_leaves=7, learning_rate=0.8, verbose=-1).fit(X, y3),
        "xgboost": xgb.XGBClassifier(n_estimators=30, max_depth=5, learning_rate=1.0).fit(X, y),
        "xgboost-logistic": xgb.XGBRegressor(n_estimators=20, max_depth=4, objective="reg:logistic").fit(X, y * 0.8),
        "regressor": lgb.LGBMRegressor(n_estimators=20, num_leaves=15, verbose=-1).fit(X, yr),
    }
    return {k: (lumber.compile(m, target="c", path=tmp / f"{k}.so"), X) for k, m in made.items()}


def _doors(rows: pd.DataFrame, i: int) -> dict[str, Any]:
    X = rows.to_numpy(dtype=np.float64)
    return {"array": X[i:i + 1], "dataframe": rows.iloc[i:i + 1], "series": rows.iloc[i],
            "dict": {c: float(v) for c, v in rows.iloc[i].items()}}


@pytest.mark.parametrize("name", ["lightgbm", "multiclass", "xgboost", "xgboost-logistic", "regressor"])
def test_one_row_proba_and_predict_equal_the_batch(models: dict[str, Any], name: str) -> None:
    pred, rows = models[name]
    X = rows.to_numpy(dtype=np.float64)
    classifier = pred.schema.task in (Task.BINARY, Task.MULTICLASS)
    raw = pred.predict_raw(X)
    if name == "lightgbm":
        assert np.nanmax(np.abs(raw)) > 20  # margins far out on the sigmoid's flat ends
    want = {"label": pred.predict(X)}
    if classifier:
        want["proba"] = pred.predict_proba(X)
    cuts: list[Any] = []
    if pred.schema.task == Task.BINARY:
        cuts = [0.3, 0.9, Cutoff(0.5, inclusive=True), Cutoff(float(np.median(raw)), on="margin")]
        for c in cuts:
            want[repr(c)] = pred.predict(X, threshold=c)
    for i in range(0, len(rows), 3):
        for door, x in _doors(rows, i).items():
            got = {"label": pred.predict(x)}
            if classifier:
                got["proba"] = pred.predict_proba(x)
            for c in cuts:
                got[repr(c)] = pred.predict(x, threshold=c)
            for k, v in got.items():
                assert v.dtype == want[k].dtype and v.shape == want[k][i:i + 1].shape, (door, k)
                if v.dtype.kind == "f":
                    np.testing.assert_array_equal(_bits(v), _bits(want[k][i:i + 1]), err_msg=f"{door} {k} row {i}")
                else:
                    np.testing.assert_array_equal(v, want[k][i:i + 1], err_msg=f"{door} {k} row {i}")


def test_threshold_changes_between_calls_and_bad_ones_still_fail(models: dict[str, Any]) -> None:
    pred, rows = models["lightgbm"]
    X = rows.to_numpy(dtype=np.float64)
    p1 = pred.predict_proba(X)[:, 1]
    for t in (0.2, 0.8, 0.2, np.float64(0.5), 0.5):
        assert np.array_equal(np.concatenate([pred.predict(X[i:i + 1], threshold=t) for i in range(len(X))]),
                              np.asarray(pred.schema.classes)[(p1 > t).astype(int)])
    for bad in (1.5, "x", 0.0):
        with pytest.raises(InputDataError):
            pred.predict(X[:1], threshold=bad)
    multi, _ = models["multiclass"]
    with pytest.raises(InputDataError):
        multi.predict(X[:1], threshold=0.5)
