"""LightGBM frontend: differential against the Booster itself, and clear errors on bad files.

Every model is trained here (small, seeded) and compared with LightGBM's own
``predict(raw_score=True)`` (exact ``==``: both sum doubles in tree order),
``predict(pred_leaf=True)`` (exact) and ``predict`` (transformed, 1e-12 rel).
Bad files are only ever given to lumber, never to LightGBM's loader, which
crashes the process on them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lumber
from lumber.compiler.frontends.lightgbm import from_lightgbm, load_lightgbm_text
from lumber.compiler.frontends.lightgbm_text import parse_lightgbm_text
from lumber.ir import FeatureKind, Forest, InputDataError, ModelFormatError, PostTransform, Task, UnsupportedModelError
from lumber.ir.forest import ZERO_THRESHOLD

import lightgbm as lgb

KZT = ZERO_THRESHOLD
SPECIAL = np.array([np.nan, 0.0, -0.0, 1e-36, -1e-36, 1e-35, -1e-35, KZT, -KZT, np.nextafter(KZT, 1),
                    np.nextafter(-KZT, -1), np.inf, -np.inf, 1e300, -1e300])
CATEGORY_PROBES = np.array([-1.0, -0.5, -0.0, 0.0, 0.5, 0.99, 1.0, 3.7, 50.0, 2.0**31 - 1, 2.0**31, 2.0**31 + 0.5,
                            -2.0**31, -2.0**31 - 1, 1e10, np.nan, np.inf, -np.inf, 1e-36])


def train(params: dict[str, Any], X: Any, y: Any, rounds: int = 20, **dataset: Any) -> Any:
    p = {"verbose": -1, "num_threads": 1, "seed": 0, "deterministic": True, **params}
    return lgb.train(p, lgb.Dataset(X, y, **dataset), num_boost_round=rounds)


def probe_rows(forest: Forest, X: np.ndarray, seed: int = 0, n_base: int = 150) -> np.ndarray:
    """Real rows, rows with NaN/zero/tiny/huge values, every threshold +-1 ulp, odd category codes."""
    rng = np.random.default_rng(seed)
    X = np.asarray(X, dtype=np.float64)
    base = X[rng.choice(X.shape[0], size=min(n_base, X.shape[0]), replace=False)]
    parts = [base]
    holes = base.copy()
    holes[rng.random(holes.shape) < 0.3] = np.nan
    parts.append(holes)
    special = np.repeat(base[:40], len(SPECIAL), axis=0)
    cols = rng.integers(0, X.shape[1], size=special.shape[0])
    special[np.arange(special.shape[0]), cols] = np.tile(SPECIAL, 40)
    parts.append(special)
    for j in range(X.shape[1]):  # a whole column of each special value
        block = np.repeat(base[:len(SPECIAL)], 1, axis=0).copy()
        block[:, j] = SPECIAL[:block.shape[0]]
        parts.append(block)
    num = (forest.left >= 0) & ~forest.is_categorical
    pairs = np.unique(np.stack([forest.feature[num], forest.threshold[num]], axis=1), axis=0)
    if pairs.shape[0] > 600:
        pairs = pairs[rng.choice(pairs.shape[0], 600, replace=False)]
    for eps in (None, -np.inf, np.inf):
        rows = base[np.arange(pairs.shape[0]) % base.shape[0]].copy()
        t = pairs[:, 1] if eps is None else np.nextafter(pairs[:, 1], eps)
        rows[np.arange(pairs.shape[0]), pairs[:, 0].astype(int)] = t
        parts.append(rows)
    cat_features = np.unique(forest.feature[forest.is_categorical])
    for j in cat_features:
        rows = base[np.arange(len(CATEGORY_PROBES)) % base.shape[0]].copy()
        rows[:, j] = CATEGORY_PROBES
        parts.append(rows)
    return np.concatenate(parts)


def assert_matches(booster: Any, forest: Forest, X: np.ndarray) -> None:
    """Same leaves, same raw margins (==), same transformed predictions (1e-12 rel)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    leaves = booster.predict(X, pred_leaf=True).reshape(X.shape[0], -1)
    n_int = (np.diff(forest.tree_offset) - 1) // 2
    np.testing.assert_array_equal(forest.apply(X) - n_int[None, :], leaves)
    raw = booster.predict(X, raw_score=True)
    if forest.schema.average:  # rf: raw_score is the plain sum; predict() divides by the iterations first
        raw = raw / (forest.n_trees // forest.n_outputs)
    ours = forest.evaluate(X)
    np.testing.assert_array_equal(ours, raw.reshape(ours.shape))
    pred = booster.predict(X)
    np.testing.assert_allclose(forest.schema.transform(ours), pred.reshape(ours.shape), rtol=1e-12, atol=0)


def decision_types(booster: Any) -> set[int]:
    text = booster.model_to_string()
    found: set[int] = set()
    for line in text.splitlines():
        if line.startswith("decision_type=") and line != "decision_type=":
            found |= {int(v) for v in line.split("=", 1)[1].split()}
    return found


# -- real data ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adult() -> tuple[np.ndarray, np.ndarray, list[int]]:
    ds = lumber.datasets.load("adult")
    X = ds.X.to_numpy(dtype=np.float64)[:3000]
    cats = [i for i, f in enumerate(ds.features) if f.kind == FeatureKind.CATEGORICAL]
    return X, ds.y[:3000], cats


def test_adult_binary_categorical(adult: tuple[np.ndarray, np.ndarray, list[int]]) -> None:
    X, y, cats = adult
    b = train({"objective": "binary", "num_leaves": 15, "min_data_per_group": 5, "cat_smooth": 1}, X, y,
              categorical_feature=cats)
    f = from_lightgbm(b)
    assert f.is_categorical.any(), "the model must use categorical splits for this test to mean anything"
    assert parse_lightgbm_text(b.model_to_string(), "adult").num_cat.max() >= 2  # several bitsets in one tree
    assert f.schema.task == Task.BINARY and f.schema.post_transform == PostTransform.SIGMOID
    assert {f.schema.features[i].kind for i in cats} == {FeatureKind.CATEGORICAL}
    assert f.schema.source["library"] == "lightgbm" and len(f.schema.source["content_hash"]) == 64
    assert_matches(b, f, probe_rows(f, X))


def test_credit_regression_with_onehot_and_many_way_categorical() -> None:
    ds = lumber.datasets.load("credit")
    X = ds.X.to_numpy(dtype=np.float64)[:3000]
    cats = [i for i, f in enumerate(ds.features) if f.kind == FeatureKind.CATEGORICAL]
    edu = X[:, ds.feature_names.index("EDUCATION")]
    y = X[:, ds.feature_names.index("LIMIT_BAL")] / 1e5 + ds.y[:3000] + 2.0 * (edu == 1) - (edu == 2)
    b = train({"objective": "regression", "num_leaves": 31, "max_cat_to_onehot": 2, "min_data_per_group": 5},
              X, y, categorical_feature=cats)
    f = from_lightgbm(b)
    assert f.is_categorical.any()
    assert_matches(b, f, probe_rows(f, X))


def test_compas_rf_mode() -> None:
    ds = lumber.datasets.load("compas")
    X = ds.X.to_numpy(dtype=np.float64)
    b = train({"objective": "binary", "boosting": "rf", "bagging_fraction": 0.6, "bagging_freq": 1,
               "feature_fraction": 0.8, "num_leaves": 15}, X, ds.y, rounds=15)
    f = lumber.load(b)
    assert f.schema.average
    assert_matches(b, f, probe_rows(f, X))


def test_breast_cancer_binary_sigmoid_alpha() -> None:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    b = train({"objective": "binary", "sigmoid": 2.5, "num_leaves": 8}, X, y)
    f = from_lightgbm(b)
    assert f.schema.sigmoid_alpha == 2.5
    assert_matches(b, f, probe_rows(f, X))


@pytest.mark.parametrize("objective", ["multiclass", "multiclassova"])
def test_wine_multiclass(objective: str) -> None:
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    b = train({"objective": objective, "num_class": 3, "num_leaves": 6, "min_data_in_leaf": 5}, X, y, rounds=10)
    f = from_lightgbm(b)
    assert f.n_outputs == 3 and f.schema.task == Task.MULTICLASS
    np.testing.assert_array_equal(f.tree_output, np.arange(30) % 3)
    expected = PostTransform.SOFTMAX if objective == "multiclass" else PostTransform.SIGMOID
    assert f.schema.post_transform == expected
    assert_matches(b, f, probe_rows(f, X))


@pytest.mark.parametrize("objective", ["regression", "poisson", "gamma", "tweedie", "huber", "quantile"])
def test_diabetes_regression_objectives(objective: str) -> None:
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    b = train({"objective": objective, "num_leaves": 10}, X, y, rounds=15)
    f = from_lightgbm(b)
    exp = objective in ("poisson", "gamma", "tweedie")
    assert f.schema.post_transform == (PostTransform.EXP if exp else PostTransform.IDENTITY)
    assert_matches(b, f, probe_rows(f, X))


def test_cross_entropy() -> None:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    b = train({"objective": "cross_entropy", "num_leaves": 6}, X, y * 0.8 + 0.1, rounds=8)
    f = from_lightgbm(b)
    assert f.schema.task == Task.REGRESSION and f.schema.post_transform == PostTransform.SIGMOID
    assert_matches(b, f, probe_rows(f, X))


def test_custom_objective_has_no_transform() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))

    def l2(preds: np.ndarray, data: Any) -> tuple[np.ndarray, np.ndarray]:
        return preds - data.get_label(), np.ones_like(preds)

    b = train({"objective": l2, "num_leaves": 4}, X, X[:, 0], rounds=3)
    assert "\nobjective=" not in b.model_to_string().split("end of trees")[0]
    f = from_lightgbm(b)
    assert f.schema.post_transform == PostTransform.IDENTITY and f.schema.source["objective"] == ""
    assert_matches(b, f, probe_rows(f, X))


# -- missing values -------------------------------------------------------------------------------


def _nan_data(seed: int = 0, n: int = 1500) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 2] = np.where(rng.random(n) < 0.4, 0.0, X[:, 2])  # many exact zeros
    y = X[:, 0] + np.where(np.isnan(X[:, 1]), 2.0, X[:, 1]) + 3 * (X[:, 2] == 0)
    X[rng.random(n) < 0.15, 0] = np.nan
    X[rng.random(n) < 0.15, 1] = np.nan
    return X, y + rng.normal(scale=0.1, size=n)


@pytest.mark.parametrize(("params", "missing_type"), [
    ({}, 2),                          # NaN seen in training: missing_type NaN
    ({"zero_as_missing": True}, 1),   # missing_type Zero
    ({"use_missing": False}, 0),      # missing_type None: NaN -> 0.0
])
def test_missing_types(params: dict[str, Any], missing_type: int) -> None:
    X, y = _nan_data()
    b = train({"objective": "regression", "num_leaves": 12, **params}, X, y, rounds=15)
    types = {(d >> 2) & 3 for d in decision_types(b)}
    assert missing_type in types
    f = from_lightgbm(b)
    assert_matches(b, f, probe_rows(f, X))


def test_zero_threshold_window() -> None:
    """Thresholds at +-kZeroThreshold and inputs inside (1e-35, kZT]: LightGBM zeroes |x| <= kZT first."""
    rng = np.random.default_rng(0)
    x = rng.choice([-1.0, 0.0, 1.0], 3000) * rng.random(3000)
    y = np.where(x < 0, -5.0, np.where(x == 0, 0.0, 5.0))
    X = np.column_stack([x, rng.normal(size=3000)])
    for params in ({}, {"zero_as_missing": True}):
        b = train({"objective": "regression", "num_leaves": 4, "min_data_in_leaf": 5, **params}, X, y, rounds=3)
        text = b.model_to_string()
        assert "1.0000000180025095e-35" in text
        f = from_lightgbm(b)
        tiny = np.array([-KZT, KZT, 1e-35, -1e-35, 1.5e-35, -1.5e-35, np.nextafter(KZT, 1), np.nextafter(-KZT, -1),
                         np.nextafter(-KZT, 0), 0.0, -0.0, np.nan])
        rows = np.column_stack([tiny, np.zeros_like(tiny)])
        assert_matches(b, f, np.concatenate([rows, probe_rows(f, X)]))


@pytest.mark.parametrize("missing", [0, 1, 2])
@pytest.mark.parametrize("t", ["0", "-0", "5e-36", "-5e-36", "1e-35", "-1e-35", "-1.0000000180025095e-35"])
def test_thresholds_inside_zero_window(t: str, missing: int) -> None:
    """Hand-set thresholds in [-kZT, kZT) (valid files, so LightGBM may read them) route like LightGBM."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    b = train({"objective": "regression", "num_leaves": 3}, X, X[:, 0], rounds=1)
    text = _edit(b.model_to_string(), 0, "threshold", lambda v: [t] + v[1:])
    text = _edit(text, 0, "decision_type", lambda v: [str(missing << 2 | 2)] + v[1:])
    f = load_lightgbm_text("window.txt", data=text.encode())
    edited = lgb.Booster(model_str=text)
    col = np.array([-KZT, KZT, 1e-35, -1e-35, 5e-36, -5e-36, 1.5e-35, -1.5e-35, np.nextafter(KZT, 1),
                    np.nextafter(-KZT, -1), 0.0, -0.0, np.nan, 1.0, -1.0])
    feat = int(f.feature[0])
    rows = np.zeros((col.shape[0], 2))
    rows[:, feat] = col
    assert_matches(edited, f, rows)


def test_categorical_nan_and_invalid_codes_each_missing_type() -> None:
    rng = np.random.default_rng(3)
    n = 2000
    c = rng.integers(0, 8, n).astype(float)
    X = np.column_stack([c, rng.normal(size=n)])
    y = np.isin(c, [1, 4, 6]) * 2.0 + X[:, 1]
    X[rng.random(n) < 0.1, 0] = np.nan
    for params in ({}, {"zero_as_missing": True}, {"use_missing": False}):
        b = train({"objective": "regression", "num_leaves": 8, "min_data_per_group": 5, "cat_smooth": 1,
                   **params}, X, y, rounds=6, categorical_feature=[0])
        f = from_lightgbm(b)
        assert f.is_categorical.any()
        rows = np.column_stack([CATEGORY_PROBES, np.zeros_like(CATEGORY_PROBES)])
        assert_matches(b, f, np.concatenate([rows, probe_rows(f, X)]))


# -- objects, files, layout -------------------------------------------------------------------------


def test_sklearn_classifier_file_and_object_paths(tmp_path: Path) -> None:
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    clf = lgb.LGBMClassifier(n_estimators=8, num_leaves=5, min_child_samples=5, verbose=-1).fit(X, labels)
    f = lumber.load(clf)
    assert f.schema.classes == ("setosa", "versicolor", "virginica")
    np.testing.assert_array_equal(f.predict(X), clf.predict(X))
    np.testing.assert_allclose(f.predict_proba(X), clf.predict_proba(X), rtol=1e-12)
    path = tmp_path / "iris.txt"
    clf.booster_.save_model(str(path))
    g = lumber.load(path)
    assert g.schema.classes is None and g.schema.source["content_hash"] == f.schema.source["content_hash"]
    np.testing.assert_array_equal(g.evaluate(X), f.evaluate(X))
    h = load_lightgbm_text(str(path), feature_names=["a", "b", "c", "d"])
    assert h.schema.feature_names == ["a", "b", "c", "d"]

    reg = lgb.LGBMRegressor(n_estimators=5, num_leaves=4, verbose=-1).fit(X, X[:, 0])
    np.testing.assert_array_equal(lumber.load(reg).predict(X), reg.predict(X))
    with pytest.raises(UnsupportedModelError, match="not fitted"):
        from_lightgbm(lgb.LGBMRegressor())


def test_pandas_categorical_labels() -> None:
    rng = np.random.default_rng(0)
    n = 800
    df = pd.DataFrame({"x": rng.normal(size=n),
                       "color": pd.Categorical(rng.choice(["red", "green", "blue", "grey"], n)),
                       "size": pd.Categorical(rng.choice([10, 20, 30], n))})
    y = (df["color"].isin(["red", "grey"]) * 2 + (df["size"] == 20) + df["x"]).to_numpy(dtype=float)
    b = train({"objective": "regression", "num_leaves": 8, "min_data_per_group": 5, "cat_smooth": 1}, df, y)
    f = from_lightgbm(b)
    assert f.schema.features[1].categories == ("blue", "green", "grey", "red")
    assert f.schema.features[2].categories == (10, 20, 30)
    np.testing.assert_array_equal(f.evaluate(df), b.predict(df, raw_score=True))
    # the same rows as a CSV holds them (plain numbers and text, no pandas categories): bound by label, not code
    plain = df.assign(color=df["color"].astype(str), size=df["size"].astype(int))
    np.testing.assert_array_equal(f.evaluate(plain), b.predict(df, raw_score=True))
    np.testing.assert_array_equal(f.evaluate(plain.assign(size=plain["size"].astype(float))),
                                  b.predict(df, raw_score=True))
    with pytest.raises(InputDataError, match=r"(?s)column 'size' holds unknown category 2 \(row 1\).*10, 20, 30"):
        f.evaluate(plain.assign(size=2))  # a valid code of 'size', but not one of its labels


def test_single_leaf_trees() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    b = train({"objective": "regression", "min_data_in_leaf": 100}, X, X[:, 0], rounds=3)
    f = from_lightgbm(b)
    assert f.n_nodes == f.n_trees and f.is_leaf.all()
    assert_matches(b, f, probe_rows(f, X))


def _strip_tree_sizes(text: str) -> str:
    return re.sub(r"\ntree_sizes=[^\n]*", "", text)


def _edit_field(text: str, tree: int, key: str, fn: Any) -> str:
    """Apply ``fn`` to the value list of ``key`` in block ``Tree=tree``."""
    start = text.index(f"Tree={tree}\n")
    i = text.index(f"\n{key}=", start) + len(key) + 2
    j = text.index("\n", i)
    return text[:i] + " ".join(fn(text[i:j].split())) + text[j:]


def test_internal_nodes_out_of_order_are_renumbered() -> None:
    """A valid file whose internal nodes are not parent-before-child (hand-edited) still loads exactly."""
    X, y = _nan_data(1)
    b = train({"objective": "regression", "num_leaves": 6}, X, y, rounds=2)
    text = _strip_tree_sizes(b.model_to_string())
    # reverse the internal-node order of tree 0 except the root
    blk = text.index("Tree=0\n")
    L = int(re.search(r"num_leaves=(\d+)", text[blk:]).group(1))
    perm = [0] + list(range(L - 2, 0, -1))  # new position -> old id
    new_id = {old: new for new, old in enumerate(perm)}
    for key in ("split_feature", "split_gain", "threshold", "decision_type", "internal_value", "internal_weight",
                "internal_count"):
        text = _edit_field(text, 0, key, lambda v: [v[o] for o in perm])
    for key in ("left_child", "right_child"):
        text = _edit_field(text, 0, key, lambda v: [str(new_id[int(v[o])]) if int(v[o]) >= 0 else v[o] for o in perm])
    f = load_lightgbm_text("edited.txt", data=text.encode())
    edited = lgb.Booster(model_str=text)  # a valid model: safe to give to LightGBM
    assert_matches(edited, f, probe_rows(f, X))
    assert_matches(b, f, probe_rows(f, X))


# -- hypothesis -------------------------------------------------------------------------------------


@settings(deadline=None)  # examples: the profile (25 by default, 300 with HYPOTHESIS_PROFILE=thorough)
@given(seed=st.integers(0, 2**16), objective=st.sampled_from(["regression", "binary", "multiclass", "poisson"]),
       num_leaves=st.integers(2, 12), rounds=st.integers(1, 6), categorical=st.booleans(),
       missing=st.sampled_from([{}, {"zero_as_missing": True}, {"use_missing": False}]),
       rf=st.booleans(), nan_rate=st.sampled_from([0.0, 0.2]))
def test_random_models(seed: int, objective: str, num_leaves: int, rounds: int, categorical: bool,
                       missing: dict[str, Any], rf: bool, nan_rate: float) -> None:
    rng = np.random.default_rng(seed)
    n = 300
    X = rng.normal(size=(n, 4)).round(rng.integers(0, 3))
    X[:, 3] = rng.integers(0, 6, n)
    X[rng.random((n, 4)) < nan_rate] = np.nan
    z = np.nan_to_num(X[:, 0]) + np.isin(X[:, 3], [1, 3]) - np.nan_to_num(X[:, 1])
    params: dict[str, Any] = {"objective": objective, "num_leaves": num_leaves, "min_data_in_leaf": 3,
                              "min_data_per_group": 3, "cat_smooth": 1, **missing}
    if objective == "binary":
        y: np.ndarray = (z > 0).astype(float)
    elif objective == "multiclass":
        y = np.digitize(z, [-0.5, 0.5]).astype(float)
        params["num_class"] = 3
    elif objective == "poisson":
        y = np.exp(z / 2).round()
    else:
        y = z
    if rf:
        params.update(boosting="rf", bagging_fraction=0.7, bagging_freq=1)
    b = train(params, X, y, rounds=rounds, categorical_feature=[3] if categorical else "auto")
    f = from_lightgbm(b)
    assert_matches(b, f, probe_rows(f, np.nan_to_num(X), seed=seed, n_base=60))


# -- bad files: only lumber reads them -----------------------------------------------------------


@pytest.fixture(scope="module")
def good_text() -> str:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    X[:, 2] = rng.integers(0, 5, 400)
    y = X[:, 0] + (X[:, 2] == 2)
    b = train({"objective": "regression", "num_leaves": 5, "min_data_per_group": 5, "cat_smooth": 1}, X, y,
              rounds=4, categorical_feature=[2])
    text = b.model_to_string()
    assert "num_cat=1" in text
    return text


def _edit(text: str, tree: int, key: str, fn: Any) -> str:
    """Edit a field and drop ``tree_sizes`` (which would otherwise catch every length change first)."""
    return _edit_field(_strip_tree_sizes(text), tree, key, fn)


def _load(text: str | bytes) -> Forest:
    data = text.encode() if isinstance(text, str) else text
    return load_lightgbm_text("bad.txt", data=data)


def _cat_tree(text: str) -> int:
    return int(re.search(r"Tree=(\d+)\nnum_leaves=\d+\nnum_cat=1", text).group(1))


BAD_FILES = {
    "empty": (lambda t: "", ModelFormatError, "empty"),
    "garbage": (lambda t: "hello world\nthis is not a model\n", ModelFormatError, "not a LightGBM model text"),
    "binary": (lambda t: b"\xff\xfe\x00garbage", ModelFormatError, "not UTF-8"),
    "truncated mid-tree": (lambda t: t[:t.index("Tree=2") + 60], ModelFormatError, "truncated.*end of trees"),
    "no end of trees": (lambda t: t.replace("end of trees", "end of tree"), ModelFormatError, "truncated"),
    "tree_sizes edited": (lambda t: re.sub(r"tree_sizes=(\d+)", lambda m: f"tree_sizes={int(m.group(1)) + 3}", t),
                          ModelFormatError, "tree_sizes"),
    "tree_sizes dropped tree": (lambda t: re.sub(r"(tree_sizes=[\d ]*) \d+\n", r"\1\n", t), ModelFormatError,
                                "tree_sizes"),
    "fewer trees than tree_sizes": (lambda t: t[:t.index("Tree=3")] + t[t.index("end of trees"):],
                                    ModelFormatError, "tree_sizes"),
    "child out of range": (lambda t: _edit(t, 1, "left_child", lambda v: ["7"] + v[1:]), ModelFormatError,
                           r"tree 1, node 0, field 'left_child'.*does not exist"),
    "leaf out of range": (lambda t: _edit(t, 1, "right_child", lambda v: ["-9"] + v[1:]),
                          ModelFormatError, r"tree 1.*right_child.*leaf 8"),
    "node reached twice": (lambda t: _edit(t, 0, "right_child", lambda v: v[:-1] + [v[0]]),
                           ModelFormatError, "tree 0.*reached"),
    "feature out of range": (lambda t: _edit(t, 2, "split_feature", lambda v: ["7"] + v[1:]),
                             ModelFormatError, r"tree 2, node 0, field 'split_feature'.*max_feature_idx=2"),
    "threshold nan": (lambda t: _edit(t, 0, "threshold", lambda v: ["nan"] + v[1:]),
                      ModelFormatError, r"tree 0, node 0, field 'threshold'.*NaN"),
    "threshold text": (lambda t: _edit(t, 3, "threshold", lambda v: v[:-1] + ["abc"]),
                       ModelFormatError, r"tree 3.*threshold.*'abc'"),
    "leaf inf": (lambda t: _edit(t, 2, "leaf_value", lambda v: v[:-1] + ["inf"]),
                 ModelFormatError, r"tree 2.*leaf_value.*finite"),
    "short array": (lambda t: _edit(t, 1, "decision_type", lambda v: v[:-1]),
                    ModelFormatError, r"tree 1.*decision_type.*has \d values, expected"),
    "bad decision type": (lambda t: _edit(t, 0, "decision_type", lambda v: ["12"] + v[1:]),
                          ModelFormatError, "decision_type 12 is not valid"),
    "bitset mismatch": (lambda t: _edit(t, _cat_tree(t), "cat_boundaries",
                                              lambda v: v[:-1] + ["5"]), ModelFormatError, "cat_boundaries"),
    "missing header": (lambda t: re.sub(r"\nmax_feature_idx=\d+", "", t), ModelFormatError, "max_feature_idx"),
    "bad tree header": (lambda t: _strip_tree_sizes(t).replace("Tree=1\n", "Tree=5\n"), ModelFormatError,
                        "expected 'Tree=1'"),
    "multiclass count": (lambda t: t.replace("num_tree_per_iteration=1", "num_tree_per_iteration=3"),
                         ModelFormatError, "not a multiple"),
    "unknown objective": (lambda t: t.replace("objective=regression", "objective=frobnicate"),
                          UnsupportedModelError, "unknown LightGBM objective 'frobnicate'"),
    "reg sqrt": (lambda t: t.replace("objective=regression", "objective=regression sqrt"),
                 UnsupportedModelError, "raw_output=True"),
    "version": (lambda t: t.replace("version=v4", "version=v9"), UnsupportedModelError, "v9"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files(good_text: str, case: str) -> None:
    make, error, pattern = BAD_FILES[case]
    with pytest.raises(error, match="(?s)" + pattern) as info:
        _load(make(good_text))
    assert "bad.txt" in str(info.value) or case in ("empty", "unknown objective")


def test_bad_file_through_lumber_load(tmp_path: Path, good_text: str) -> None:
    p = tmp_path / "cut.txt"
    p.write_text(good_text[:good_text.index("Tree=1") + 100])
    with pytest.raises(ModelFormatError, match="cut.txt.*truncated"):
        lumber.load(p)


def test_raw_output_option(good_text: str) -> None:
    f = _load(good_text)
    g = load_lightgbm_text("sqrt.txt", data=good_text.replace("objective=regression", "objective=regression sqrt")
                           .encode(), raw_output=True)
    assert g.schema.post_transform == PostTransform.IDENTITY
    X = np.random.default_rng(0).normal(size=(20, 3))
    np.testing.assert_array_equal(f.evaluate(X), g.evaluate(X))


def test_linear_tree_rejected(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    b = train({"objective": "regression", "linear_tree": True, "num_leaves": 4}, X, 2 * X[:, 0], rounds=2)
    p = tmp_path / "linear.txt"
    b.save_model(str(p))
    with pytest.raises(UnsupportedModelError, match=r"(?s)tree 0.*linear tree.*linear_tree=False"):
        lumber.load(p)
    with pytest.raises(UnsupportedModelError, match="linear_tree=False"):
        lumber.load(b)


def test_parser_keeps_counts_and_header(good_text: str) -> None:
    m = parse_lightgbm_text(good_text, "m.txt")
    assert m.n_trees == 4 and m.max_feature_idx == 2 and m.objective == "regression"
    f = _load(good_text)
    assert f.count is not None and f.count[0] == 400
    # leaf counts of each tree sum to the root's count
    for t in range(f.n_trees):
        sl = f.tree_slice(t)
        assert f.count[sl][f.is_leaf[sl]].sum() == f.count[sl][0]
