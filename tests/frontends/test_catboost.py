"""CatBoost frontend: bit-exact margins (symmetric and non-symmetric trees, NaN modes, classes), files, errors,
and our polynomial of a CatBoost model against catboost's own ``monoforest`` module."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

catboost = pytest.importorskip("catboost")

import lumber  # noqa: E402
from lumber.compiler.frontends.catboost import catboost_to_oblivious, float32_border  # noqa: E402
from lumber.ir import ModelFormatError, ObliviousEnsemble, UnsupportedModelError  # noqa: E402
from lumber.passes.transforms.polynomial import forest_to_polynomial  # noqa: E402

COMMON = {"verbose": 0, "allow_writing_files": False, "thread_count": 1, "random_seed": 0}


def data(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = X[:, 0] * 2 + X[:, 1] * X[:, 2] + (X[:, 3] > 0)
    X[rng.random(X.shape) < 0.1] = np.nan
    return X, y


def probe_rows(m: Any, X: np.ndarray) -> np.ndarray:
    """The data plus rows on, just above and just below every border (float32), NaN and infinities."""
    info = json.loads(_json(m))["features_info"]["float_features"]
    rows = [X]
    for f in info:
        for b in f["borders"]:
            bf = np.float32(b)
            with np.errstate(over="ignore"):
                near = (bf, np.nextafter(bf, np.float32(np.inf)), np.nextafter(bf, np.float32(-np.inf)))
            for v in near:
                r = X[:3].copy()
                r[:, f["flat_feature_index"]] = v
                rows.append(r)
    special = X[:4].copy()
    special[0, :] = np.inf
    special[1, :] = -np.inf
    special[2, :] = np.nan
    special[3, :] = 0.0
    rows.append(special)
    return np.concatenate(rows)


def _json(m: Any) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp, "m.json")
        m.save_model(str(p), format="json")
        return p.read_bytes()


@pytest.fixture(scope="module")
def regressors() -> dict[str, Any]:
    X, y = data()
    out = {}
    for nan_mode in ("Min", "Max"):
        out[nan_mode] = catboost.CatBoostRegressor(iterations=25, depth=4, nan_mode=nan_mode, **COMMON).fit(X, y)
    out["Lossguide"] = catboost.CatBoostRegressor(iterations=15, grow_policy="Lossguide", max_leaves=7,
                                                  **COMMON).fit(X, y)
    out["Depthwise"] = catboost.CatBoostRegressor(iterations=15, grow_policy="Depthwise", depth=3, **COMMON).fit(X, y)
    return out


@pytest.mark.parametrize("kind", ["Min", "Max", "Lossguide", "Depthwise"])
def test_margins_are_bit_exact(regressors: dict[str, Any], kind: str) -> None:
    m = regressors[kind]
    X = probe_rows(m, data()[0])
    forest = lumber.load(m)
    expected = m.predict(X, prediction_type="RawFormulaVal")
    np.testing.assert_array_equal(forest.evaluate(X), expected)
    if kind in ("Min", "Max"):
        ens = catboost_to_oblivious(m)
        np.testing.assert_array_equal(ens.evaluate(X), expected)
        # leaf index per tree, as CatBoost computes it (the last tree is our constant bias tree)
        leaves = m.calc_leaf_indexes(catboost.Pool(X))
        np.testing.assert_array_equal(ens.apply(X)[:, :leaves.shape[1]], leaves)
        assert ens.schema.source["library"] == "catboost" and ens.schema.input_dtype == "float32"
    else:
        with pytest.raises(UnsupportedModelError, match="non-symmetric trees"):
            catboost_to_oblivious(m)


def test_classifiers() -> None:
    X, y = data()
    labels = np.where(y > 1, "yes", "no")
    m = catboost.CatBoostClassifier(iterations=15, depth=3, **COMMON).fit(X, labels)
    ens = catboost_to_oblivious(m)
    Xp = probe_rows(m, X)
    np.testing.assert_array_equal(ens.evaluate(Xp), m.predict(Xp, prediction_type="RawFormulaVal"))
    np.testing.assert_allclose(ens.predict_proba(Xp), m.predict_proba(Xp), rtol=1e-12)
    np.testing.assert_array_equal(ens.predict(Xp), m.predict(Xp))
    yc = np.digitize(y, [0, 2])
    for loss in ("MultiClass", "MultiClassOneVsAll"):
        mc = catboost.CatBoostClassifier(iterations=10, depth=3, loss_function=loss, **COMMON).fit(X, yc)
        ens = catboost_to_oblivious(mc)
        assert ens.n_outputs == 3
        np.testing.assert_array_equal(ens.evaluate(Xp), mc.predict(Xp, prediction_type="RawFormulaVal"))
        np.testing.assert_allclose(ens.predict_proba(Xp), mc.predict_proba(Xp), rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(ens.predict(Xp), mc.predict(Xp).ravel())


def test_scaled_model_and_files(regressors: dict[str, Any], tmp_path: Path) -> None:
    m = regressors["Min"].copy()
    m.set_scale_and_bias(0.5, [0.25])
    X = probe_rows(m, data()[0])
    expected = m.predict(X, prediction_type="RawFormulaVal")
    np.testing.assert_allclose(lumber.load(m).evaluate(X), expected, rtol=1e-14, atol=1e-14)
    m.save_model(str(tmp_path / "m.json"), format="json")
    m.save_model(str(tmp_path / "m.cbm"))
    for name in ("m.json", "m.cbm"):
        np.testing.assert_allclose(lumber.load(tmp_path / name).evaluate(X), expected, rtol=1e-14, atol=1e-14)
    assert isinstance(catboost_to_oblivious(tmp_path / "m.cbm"), ObliviousEnsemble)


def test_our_polynomial_equals_catboosts_monoforest(regressors: dict[str, Any]) -> None:
    import catboost.monoforest as mf

    X, y = data()
    yc = np.digitize(y, [0, 2])
    models = [regressors["Min"], regressors["Max"],
              catboost.CatBoostClassifier(iterations=8, depth=3, loss_function="MultiClass", **COMMON).fit(X, yc)]
    for m in models:
        ours = forest_to_polynomial(lumber.load(m))
        tol = 1e-12 * (1 + float(np.abs(ours.weight).sum()))
        theirs: dict[tuple[tuple[int, float], ...], np.ndarray] = {}
        for mono in mf.to_polynom(m):
            conds: dict[int, float] = {}
            for s in mono.splits:
                assert s.split_type == "TakeGreater"
                conds[s.feature_idx] = max(conds.get(s.feature_idx, -np.inf), float32_border(s.border))
            key = tuple(sorted(conds.items()))  # two borders on a feature: the larger devours the smaller
            theirs[key] = theirs.get(key, 0.0) + np.asarray(mono.value, dtype=np.float64)
        mine = {(): ours.bias.copy()}
        for j in range(ours.n_monomials):
            ids = ours.mono_cond[ours.mono_offset[j]:ours.mono_offset[j + 1]]
            mine[tuple(sorted((int(ours.cond_feature[c]), float(ours.cond_threshold[c])) for c in ids))] = ours.weight[j]
        theirs = {k: v for k, v in theirs.items() if k == () or np.abs(v).max() > tol}
        assert set(theirs) == set(mine)
        for k, v in mine.items():
            np.testing.assert_allclose(theirs[k], v, rtol=0, atol=tol)


def test_unsupported_and_broken_models(tmp_path: Path) -> None:
    import pandas as pd

    X, y = data(200)
    df = pd.DataFrame({"a": np.nan_to_num(X[:, 0]), "c": np.where(X[:, 1] > 0, "u", "v")})
    m = catboost.CatBoostRegressor(iterations=3, depth=2, **COMMON).fit(df, y, cat_features=["c"])
    with pytest.raises(UnsupportedModelError, match="1 categorical feature.*'c'"):
        lumber.load(m)
    with pytest.raises(UnsupportedModelError, match="not fitted"):
        lumber.load(catboost.CatBoostRegressor())
    good = catboost.CatBoostRegressor(iterations=3, depth=2, **COMMON).fit(X, y)
    raw = _json(good)
    (tmp_path / "cut.json").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModelFormatError, match="cut.json: invalid JSON"):
        lumber.load(tmp_path / "cut.json")
    doc = json.loads(raw)
    del doc["oblivious_trees"][1]["leaf_values"]
    (tmp_path / "nofield.json").write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match=r"oblivious_trees\[1\].leaf_values: missing field"):
        lumber.load(tmp_path / "nofield.json")
    doc = json.loads(raw)
    doc["oblivious_trees"][0]["leaf_values"] = doc["oblivious_trees"][0]["leaf_values"][:-1]
    (tmp_path / "short.json").write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match=r"leaf_values: has 3 values, expected 4"):
        lumber.load(tmp_path / "short.json")
    doc = json.loads(raw)
    doc["model_info"]["params"]["loss_function"]["type"] = "SurvivalAft"
    (tmp_path / "loss.json").write_text(json.dumps(doc))
    with pytest.raises(UnsupportedModelError, match="loss function 'SurvivalAft' is not supported"):
        lumber.load(tmp_path / "loss.json")
