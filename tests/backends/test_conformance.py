"""The conformance suite: every frontend x task x backend against the source library itself.

Models: the zoo (``tests/zoo.py``: scikit-learn, LightGBM, XGBoost; binary,
multiclass, regression; NaN and categories) and real-data cases (adult,
diabetes, wine, ...; zero-as-missing, isolation forests). Rows: the model's
own data plus the boundary corpus. Each frontend's ``Forest.evaluate`` equals
the library's raw output; each backend (the C library, ONNX) equals
``Forest.evaluate`` bit for bit and so the library's output: exactly where its
summation order is reproducible (LightGBM, XGBoost), else to 1e-12 relative.

Nothing here turns a failure into a skip: the only skip is a missing C
compiler, and a backend may refuse a model only where :data:`REFUSALS` says it
must (with a CompileError naming the tree and node).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from cases import corpus
from c_tools import build_many
from zoo import ZOO_NAMES, get

import lumber
from lumber.backends.onnx import OnnxOptions, check, emit_onnx
from lumber.runtime.predictors import OnnxPredictor, as_rows
from lumber.ir import CompileError, Forest, FeatureKind

import lightgbm as lgb
import xgboost as xgb


@dataclass
class Case:
    model: Any
    X: np.ndarray
    raw: Callable[[np.ndarray], np.ndarray]
    """The library's own output, comparable to ``transform_of(margins)``."""
    exact: bool
    transform: bool = False
    """Compare ``schema.transform(margin)`` (IsolationForest's score_samples) instead of margins."""
    rtol: float = 1e-12
    """Tolerance against the library where its summation order is not reproduced (``exact`` False)."""


def _nan(X: np.ndarray, frac: float, seed: int = 0) -> np.ndarray:
    X = X.astype(np.float64).copy()
    X[np.random.default_rng(seed).random(X.shape) < frac] = np.nan
    return X


def _adult(n: int = 3000) -> tuple[np.ndarray, np.ndarray, list[int], list[str]]:
    ds = lumber.datasets.load("adult")
    X = ds.X.to_numpy(dtype=np.float64)[:n]
    cats = [i for i, f in enumerate(ds.features) if f.kind == FeatureKind.CATEGORICAL]
    return X, np.asarray(ds.y)[:n], cats, list(ds.X.columns)


def _cases() -> dict[str, Case]:
    from sklearn import ensemble as E
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, load_wine

    out: dict[str, Case] = {}
    Xd, yd = load_diabetes(return_X_y=True)
    Xd = _nan(Xd, 0.05)
    Xb, yb = load_breast_cancer(return_X_y=True)
    Xw, yw = load_wine(return_X_y=True)
    Xi, yi = load_iris(return_X_y=True)
    Xa, ya, cats, names = _adult()
    Xa = _nan(Xa, 0.03)
    p1 = {"verbose": -1, "num_threads": 1, "num_leaves": 15, "min_data_in_leaf": 5}

    def lgb_case(params: dict[str, Any], X: np.ndarray, y: np.ndarray, rounds: int = 12, **ds: Any) -> Case:
        bst = lgb.train({**p1, **params}, lgb.Dataset(X, y, **ds), rounds)
        return Case(bst, X, lambda R: bst.predict(R, raw_score=True, num_threads=1), True)

    out["lightgbm-regression"] = lgb_case({"objective": "regression"}, Xd, yd)
    out["lightgbm-zero-as-missing"] = lgb_case({"objective": "regression", "zero_as_missing": True},
                                               np.where(np.isnan(Xd), 0.0, Xd), yd)
    out["lightgbm-binary-categorical"] = lgb_case({"objective": "binary", "max_cat_to_onehot": 1}, Xa, ya,
                                                  categorical_feature=cats)
    out["lightgbm-multiclass"] = lgb_case({"objective": "multiclass", "num_class": 3}, Xw, yw, rounds=6)

    dm = {"feature_names": names, "enable_categorical": True,
          "feature_types": ["c" if i in cats else "q" for i in range(len(names))]}

    def xgb_case(params: dict[str, Any], X: np.ndarray, y: np.ndarray, rounds: int = 12, **kw: Any) -> Case:
        bst = xgb.train({"max_depth": 4, "seed": 0, "nthread": 1, **params}, xgb.DMatrix(X, y, **kw), rounds)
        return Case(bst, X, lambda R: bst.predict(xgb.DMatrix(R, **kw), output_margin=True), True)

    out["xgboost-regression"] = xgb_case({"objective": "reg:squarederror"}, Xd, yd)
    out["xgboost-binary-categorical"] = xgb_case({"objective": "binary:logistic", "max_cat_to_onehot": 1}, Xa, ya,
                                                 **dm)
    out["xgboost-multiclass"] = xgb_case({"objective": "multi:softprob", "num_class": 3}, Xw, yw, rounds=6)

    def sk(model: Any, X: np.ndarray, y: Any, raw: str, transform: bool = False) -> Case:
        model.fit(X, y)
        return Case(model, X, getattr(model, raw), False, transform)

    out["sklearn-rf-binary-nan"] = sk(E.RandomForestClassifier(8, max_depth=6, random_state=0), _nan(Xb, 0.03), yb,
                                      "predict_proba")
    out["sklearn-extratrees-regression"] = sk(E.ExtraTreesRegressor(6, max_depth=6, random_state=0), Xd, yd,
                                              "predict")
    out["sklearn-gbm-multiclass"] = sk(E.GradientBoostingClassifier(n_estimators=5, max_depth=3, random_state=0),
                                       Xi, yi, "decision_function")
    out["sklearn-hgb-categorical"] = sk(E.HistGradientBoostingClassifier(max_iter=8, categorical_features=cats,
                                                                         random_state=0), Xa, ya,
                                        "decision_function")
    out["sklearn-isolation"] = sk(E.IsolationForest(n_estimators=10, random_state=0), Xb[:, :4],
                                  None, "score_samples", transform=True)
    for name in ZOO_NAMES:
        z = get(name)
        out[f"zoo-{name}"] = Case(z.model, z.X, z.raw, False, rtol=z.rtol)
    return out


@pytest.fixture(scope="module")
def cases() -> dict[str, Case]:
    return _cases()


@pytest.fixture(scope="module")
def forests(cases: dict[str, Case]) -> dict[str, Forest]:
    return {name: lumber.load(c.model) for name, c in cases.items()}


@pytest.fixture(scope="module")
def c_libs(forests: dict[str, Forest], tmp_path_factory: pytest.TempPathFactory, c_compiler: str) -> dict[str, Any]:
    named = {name: f"m{i}" for i, name in enumerate(forests)}
    libs = build_many([(named[n], f, False) for n, f in forests.items()], tmp_path_factory.mktemp("real") / "m.so")
    return {n: libs[p] for n, p in named.items()}


NAMES = ["lightgbm-regression", "lightgbm-zero-as-missing", "lightgbm-binary-categorical", "lightgbm-multiclass",
         "xgboost-regression", "xgboost-binary-categorical", "xgboost-multiclass", "sklearn-rf-binary-nan",
         "sklearn-extratrees-regression", "sklearn-gbm-multiclass", "sklearn-hgb-categorical", "sklearn-isolation",
         *(f"zoo-{name}" for name in ZOO_NAMES)]
REFUSALS = {("onnx", "lightgbm-zero-as-missing")}
"""(backend, model) pairs the backend must refuse: ONNX cannot express LightGBM's zero-as-missing rule."""


@pytest.mark.parametrize("name", ZOO_NAMES)
def test_frontend_matches_source(name: str) -> None:
    z = get(name)
    forest = lumber.load(z.model)
    ours = forest.evaluate(z.X).reshape(len(z.X), -1)
    theirs = np.asarray(z.raw(z.X), dtype=np.float64).reshape(len(z.X), -1)
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=z.rtol, atol=0)


def probe_rows(case: Case, forest: Forest) -> np.ndarray:
    """Real rows plus the boundary corpus, minus values the library itself refuses."""
    R = np.vstack([case.X[:400], corpus(forest)[:, : case.X.shape[1]]])
    s = forest.schema
    with np.errstate(over="ignore"):
        seen = R.astype(np.float32) if s.input_dtype == "float32" else R
    keep = np.ones(len(R), dtype=bool)
    if not s.allow_inf:  # e.g. scikit-learn's single trees and forests reject inf; HGB and IsolationForest take it
        keep &= ~np.isinf(seen).any(axis=1)
    if not s.allow_nan:
        keep &= ~np.isnan(seen).any(axis=1)
    return R[keep]


def library_view(case: Case, forest: Forest, margins: np.ndarray) -> np.ndarray:
    m = margins.reshape(len(margins), -1) if forest.n_outputs > 1 else margins.reshape(-1)
    return forest.schema.transform(m) if case.transform else m


@pytest.mark.parametrize("backend", ["c", "onnx"])
@pytest.mark.parametrize("name", NAMES)
def test_backend_matches_library(name: str, backend: str, cases: dict[str, Case], forests: dict[str, Forest],
                                 request: pytest.FixtureRequest) -> None:
    case, forest = cases[name], forests[name]
    R = probe_rows(case, forest)
    ref = forest.evaluate(R).reshape(len(R), -1)
    if backend == "c":
        lib = request.getfixturevalue("c_libs")[name]
        rows = as_rows(forest.schema, R, lib.dtype)
        got = lib.predict_raw(rows)
        single = np.array([lib.predict_row(r) for r in rows[::7]])
        np.testing.assert_array_equal(single, ref[::7])
    else:
        if (backend, name) in REFUSALS:
            assert check(forest, OnnxOptions())
            with pytest.raises(CompileError, match=r"tree \d+, node \d+"):
                emit_onnx(forest)
            return
        art = emit_onnx(forest)
        pred = OnnxPredictor(art.files[art.main], forest.schema, art.fingerprint, str(art.metadata["input_dtype"]))
        got = pred.run(R)["margin"].astype(np.float64)
    bad = np.flatnonzero((got != ref).any(axis=1))
    assert bad.size == 0, f"{bad.size} rows differ from Forest.evaluate, e.g. {R[bad[0]]}"
    shape = (len(R),) if forest.n_outputs == 1 else (len(R), forest.n_outputs)
    np.testing.assert_array_equal(forest.schema.decide(got.reshape(shape)), forest.predict(R))
    lib_out = np.asarray(case.raw(R), dtype=np.float64)
    mine = library_view(case, forest, got)
    if case.exact:
        np.testing.assert_array_equal(mine, lib_out.reshape(mine.shape))
    else:
        np.testing.assert_allclose(mine, lib_out.reshape(mine.shape), rtol=case.rtol, atol=case.rtol)


def test_lightgbm_zero_as_missing_is_refused_by_onnx_with_node(forests: dict[str, Forest]) -> None:
    f = forests["lightgbm-zero-as-missing"]
    assert f.missing_zero.any()
    diags = check(f, OnnxOptions())
    assert all("tree" in str(d.location) for d in diags)


@pytest.mark.parametrize("target", ["numpy", "c", "onnx"])
def test_lumber_compile_predicts_as_the_forest(target: str, cases: dict[str, Case], forests: dict[str, Forest],
                                               tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The public path (``lumber.compile`` -> predictor) on a categorical, NaN-bearing real model."""
    if target == "c":
        request.getfixturevalue("c_compiler")
    name = "lightgbm-binary-categorical"
    case, forest = cases[name], forests[name]
    pred = lumber.compile(case.model, target=target)
    R = probe_rows(case, forest)
    np.testing.assert_array_equal(pred.predict_raw(R), forest.evaluate(R))
    np.testing.assert_array_equal(pred.predict(R), forest.predict(R))
    np.testing.assert_array_equal(pred.predict_proba(R), forest.predict_proba(R))


def test_compile_api_on_real_model(cases: dict[str, Case], tmp_path: Path) -> None:
    """The whole path: library object -> lumber.compile -> predictions equal to LightGBM's."""
    case = cases["lightgbm-binary-categorical"]
    pred = lumber.compile(case.model, target="onnx", path=tmp_path / "adult.onnx")
    np.testing.assert_array_equal(pred.predict_raw(case.X[:300]), case.raw(case.X[:300]))
    np.testing.assert_allclose(pred.predict_proba(case.X[:300])[:, 1], case.model.predict(case.X[:300]), rtol=1e-14)
