"""One row through every door of a C predictor: a (1, n) array, a DataFrame row, a Series, a dict.

Each door must give, bit for bit, what the batch path gives for the same row and what the source
library gives, and refuse bad input with the batch path's error.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from c_tools import needs_cc

import lumber
from lumber.runtime.predictors import CPredictor
from lumber.ir import InputDataError
from lumber.ir.binding import ColumnsIgnoredWarning

pytestmark = needs_cc


def _credit(n: int = 600) -> tuple[pd.DataFrame, np.ndarray]:
    d = lumber.datasets.load("credit")
    X = d.X.iloc[:n].reset_index(drop=True).copy()
    X.iloc[::7, 3] = np.nan  # missing values take the model's default directions
    return X, np.asarray(d.y)[:n]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, CPredictor, pd.DataFrame]]:
    """LightGBM (float64 compares, categorical splits), XGBoost (float32 compares), scikit-learn
    GradientBoosting (refuses NaN), LightGBM multiclass: source model, C predictor, rows."""
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import GradientBoostingClassifier

    X, y = _credit()
    out: dict[str, tuple[Any, CPredictor, pd.DataFrame]] = {}
    tmp = tmp_path_factory.mktemp("one-row")
    cats = ["EDUCATION", "MARRIAGE"] if "EDUCATION" in X.columns else []
    lg = lgb.LGBMClassifier(n_estimators=20, num_leaves=15, verbose=-1, max_cat_to_onehot=1,
                            min_data_per_group=5, cat_smooth=1.0)
    lg.fit(X, y, categorical_feature=cats or "auto")
    xg = xgb.XGBClassifier(n_estimators=20, max_depth=4).fit(X, y)
    Xf = X.fillna(0.0)
    gb = GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0).fit(Xf, y)
    y3 = (X.iloc[:, 0].rank(pct=True).to_numpy() * 3).astype(int).clip(0, 2)
    mc = lgb.LGBMClassifier(n_estimators=10, num_leaves=7, verbose=-1).fit(X, y3)
    for name, model, rows in (("lightgbm", lg, X), ("xgboost", xg, X), ("sklearn", gb, Xf), ("multiclass", mc, X)):
        out[name] = (model, lumber.compile(model, target="c", path=tmp / f"{name}.so"), rows)
    return out


def _source_margins(model: Any, rows: pd.DataFrame) -> np.ndarray:
    if hasattr(model, "booster_"):  # LightGBM
        return model.predict(rows, raw_score=True)
    if hasattr(model, "get_booster"):  # XGBoost
        return model.predict(rows, output_margin=True)
    return model.decision_function(rows)


def _doors(rows: pd.DataFrame, i: int) -> dict[str, Any]:
    X = rows.to_numpy(dtype=np.float64)
    return {
        "array": X[i:i + 1],
        "float32 array": X[i:i + 1].astype(np.float32),
        "fortran array": np.asfortranarray(X[i:i + 2])[:1],
        "dataframe": rows.iloc[i:i + 1],
        "reordered dataframe": rows.iloc[i:i + 1, ::-1],
        "series": rows.iloc[i],
        "dict": {c: float(v) for c, v in rows.iloc[i].items()},
        "list": X[i:i + 1].tolist(),
    }


@pytest.mark.parametrize("name", ["lightgbm", "xgboost", "sklearn", "multiclass"])
def test_every_door_equals_the_batch_and_the_source(models: dict[str, Any], name: str) -> None:
    model, pred, rows = models[name]
    X = rows.to_numpy(dtype=np.float64)
    assert pred.library.reads_one
    batch = {"raw": pred.predict_raw(X), "proba": pred.predict_proba(X), "label": pred.predict(X)}
    np.testing.assert_array_equal(batch["raw"], _source_margins(model, rows))
    np.testing.assert_allclose(batch["proba"], model.predict_proba(rows), rtol=1e-6)  # XGBoost: float32 probabilities
    for i in range(0, len(rows), 23):
        for door, x in _doors(rows, i).items():
            if door == "float32 array":  # rounded to float32 first: the batch of rounded rows is the reference
                want = pred.predict_raw(X.astype(np.float32))[i:i + 1]
                np.testing.assert_array_equal(pred.predict_raw(x), want, err_msg=door)
                continue
            np.testing.assert_array_equal(pred.predict_raw(x), batch["raw"][i:i + 1], err_msg=f"{door}, row {i}")
            np.testing.assert_array_equal(pred.predict_proba(x), batch["proba"][i:i + 1], err_msg=door)
            np.testing.assert_array_equal(pred.predict(x), batch["label"][i:i + 1], err_msg=door)


def test_one_row_shapes_match_the_batch(models: dict[str, Any]) -> None:
    for name in ("lightgbm", "multiclass"):
        _, pred, rows = models[name]
        X = rows.to_numpy(dtype=np.float64)
        for door, x in _doors(rows, 3).items():
            assert pred.predict_raw(x).shape == pred.predict_raw(X[:1]).shape, (name, door)
            assert pred.predict_proba(x).shape == pred.predict_proba(X[:1]).shape, (name, door)


def test_numpy_predictor_takes_dicts_too(models: dict[str, Any]) -> None:
    model, _, rows = models["lightgbm"]
    ref = lumber.compile(model, target="numpy")
    row = {c: float(v) for c, v in rows.iloc[5].items()}
    np.testing.assert_array_equal(ref.predict_raw(row), ref.predict_raw(rows.iloc[5:6]))
    cols = {c: rows[c].to_numpy()[:4] for c in rows.columns}
    np.testing.assert_array_equal(ref.predict_raw(cols), ref.predict_raw(rows.iloc[:4]))


def _error(fn: Any, x: Any) -> str:
    with pytest.raises(InputDataError) as e:
        fn(x)
    return str(e.value)


def test_refused_values_get_the_batch_error(models: dict[str, Any]) -> None:
    _, pred, rows = models["sklearn"]  # GradientBoosting refuses NaN and infinities
    bad = rows.iloc[:3].copy()
    bad.iloc[0, 4] = np.nan
    want = _error(pred.predict_raw, bad)
    assert "NaN in column" in want
    X = bad.to_numpy()
    for door, x in {"array": X[:1], "dataframe": bad.iloc[:1], "series": bad.iloc[0],
                    "dict": dict(bad.iloc[0].items())}.items():
        for fn in (pred.predict_raw, pred.predict_proba, pred.predict):
            assert _error(fn, x) == want, door
    inf = rows.iloc[:1].to_numpy().copy()
    inf[0, 2] = np.inf
    assert "infinite value in column" in _error(pred.predict_raw, inf)


def test_float32_overflow_is_refused_as_the_batch_refuses_it(models: dict[str, Any]) -> None:
    _, pred, rows = models["xgboost"]  # 1e300 rounds to an infinity in float32, which the model refuses
    X = rows.to_numpy(dtype=np.float64)[:2].copy()
    X[0, 1] = 1e300
    want = _error(pred.predict_raw, X)
    assert "after rounding to float32" in want
    assert _error(pred.predict_raw, X[:1]) == want
    assert _error(pred.predict_raw, rows.iloc[:1].assign(**{rows.columns[1]: 1e300})) == want


def test_bad_columns_get_the_batch_errors_and_warnings(models: dict[str, Any]) -> None:
    _, pred, rows = models["lightgbm"]
    one = rows.iloc[:1]
    wrong = one.rename(columns={one.columns[2]: "NOT_A_FEATURE"})
    assert _error(pred.predict_raw, wrong) == _error(pred.predict_raw, pd.concat([wrong, wrong]))
    assert "no such column" in _error(pred.predict_raw, wrong)
    row = dict(one.iloc[0].items())
    del row[one.columns[2]]
    assert _error(pred.predict_raw, row) == _error(pred.predict_raw, wrong.drop(columns="NOT_A_FEATURE"))
    assert "data has 3 columns" in _error(pred.predict_raw, np.zeros((1, 3)))
    text = dict(one.iloc[0].items())
    text[one.columns[0]] = "abc"
    assert "non-numeric value 'abc'" in _error(pred.predict_raw, text)
    extra = one.assign(EXTRA=1.0)
    for x in (extra, extra.iloc[0], dict(extra.iloc[0].items())):
        for _ in range(2):  # the second call too: a remembered binding must warn as the first
            with pytest.warns(ColumnsIgnoredWarning):
                got = pred.predict_raw(x)
            np.testing.assert_array_equal(got, pred.predict_raw(one))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pred.predict_raw(one)  # bound by name: no warning


def test_dict_of_columns_and_ragged_dicts(models: dict[str, Any]) -> None:
    _, pred, rows = models["lightgbm"]
    cols = {c: rows[c].to_numpy()[:5] for c in rows.columns}
    np.testing.assert_array_equal(pred.predict_raw(cols), pred.predict_raw(rows.iloc[:5]))
    cols[rows.columns[0]] = cols[rows.columns[0]][:3]
    assert "not a rectangular table" in _error(pred.predict_raw, cols)


def test_library_predict_one_checks_in_c(models: dict[str, Any], tmp_path: Path) -> None:
    _, pred, rows = models["sklearn"]
    lib = pred.library
    x = rows.to_numpy(dtype=lib.dtype)[0].copy()
    np.testing.assert_array_equal(lib.predict_one(x), lib.predict_row(x))
    x[1] = np.nan
    lib.predict_one(x)  # unchecked: computes
    with pytest.raises(InputDataError):
        lib.predict_one(x, check=True)
    with pytest.raises(ValueError, match="vector of"):
        lib.predict_one(x[:3])


def test_python_door_takes_only_one_float_row(models: dict[str, Any]) -> None:
    """The library's CPython builtin computes a (1, n_features) float64 or float32 array of any strides into
    a float64 array of n_outputs values, and refuses anything else untouched (-1), so predict_raw can fall
    back to its general path."""
    _, pred, rows = models["xgboost"]  # float32 compares: float64 rows are rounded in C
    door = pred.library.py_one
    assert door is not None
    X = rows.to_numpy(dtype=np.float64)
    want = pred.predict_raw(X[:4])
    for x in (X[2:3], X[2:3].astype(np.float32), np.asfortranarray(X[2:4])[:1], X[2:3, ::-1][:, ::-1]):
        out = np.empty(1)
        assert door(x, out, 0) == 0
        assert out[0] == want[2]
    out = np.full(1, 7.0)
    half = np.zeros((1, X.shape[1]), dtype=np.float16)
    for bad in (X[:2], X[:1, :-1], half, X[:1].astype(">f8"), rows.iloc[:1], [1.0]):
        assert door(bad, out, 0) == -1
    assert door(X[:1], np.empty(2), 0) == door(X[:1], np.empty(1, dtype=np.float32), 0) == -1
    assert out[0] == 7.0
    y = X[:1].copy()
    y[0, 1] = np.inf  # XGBoost refuses nothing; the check reports what the schema refuses
    assert door(y, out, 2) == (0 if pred.schema.allow_inf else 2)
