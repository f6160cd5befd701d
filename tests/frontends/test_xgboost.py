"""XGBoost frontend: differential tests against XGBoost's own predictor, and bad files.

Margins are compared with ``==`` (lumber reproduces XGBoost's float32 sums) and
leaves with ``pred_leaf=True``, on real data with NaN rows, categorical inputs,
a boundary corpus at every split condition and hypothesis-generated models.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xgboost as xgb

import lumber  # noqa: E402
from lumber.compiler.frontends import ubjson  # noqa: E402
from lumber.compiler.frontends.xgboost import (  # noqa: E402
    from_xgboost, load_xgboost_file, logf, xgboost_node_ids,
)
from lumber.ir import (  # noqa: E402
    CategoryRule, FeatureKind, InputDataError, ModelFormatError, PostTransform, Task, UnsupportedModelError,
)

@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    """One OpenMP thread: on a shared 2-core machine oversubscribed training is 100x slower."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


# -- helpers ------------------------------------------------------------------------------------


def xgb_margin(booster: Any, X: Any, **dm: Any) -> np.ndarray:
    return booster.predict(xgb.DMatrix(X, **dm), output_margin=True)


def xgb_leaves(booster: Any, X: Any, **dm: Any) -> np.ndarray:
    out = booster.predict(xgb.DMatrix(X, **dm), pred_leaf=True)
    return out.reshape(len(X), -1).astype(np.int64)


def assert_same(forest: lumber.Forest, booster: Any, X: Any, **dm: Any) -> None:
    """Bit-identical float32 margins and identical leaves."""
    want = xgb_margin(booster, X, **dm)
    got = forest.evaluate(X)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got.astype(np.float32).reshape(want.shape), want)
    assert np.array_equal(got.astype(np.float32).astype(np.float64), got)  # a float32 sum, stored exactly
    np.testing.assert_array_equal(forest.apply(X), xgb_leaves(booster, X, **dm))


def boundary_rows(forest: lumber.Forest, X: np.ndarray, rng: np.random.Generator, n: int = 300) -> np.ndarray:
    """Rows whose feature sits exactly at, just below and just above each split condition (float32)."""
    internal = np.flatnonzero((forest.left >= 0) & ~forest.is_categorical)
    rows = []
    for node in rng.choice(internal, size=min(n, internal.size), replace=False):
        f = int(forest.feature[node])
        cond = np.nextafter(np.float32(forest.threshold[node]), np.float32(np.inf))  # XGBoost's split_condition
        base = X[rng.integers(len(X))].copy()
        for v in (cond, np.nextafter(cond, np.float32(-np.inf)), np.nextafter(cond, np.float32(np.inf)),
                  np.float64(cond) - 1e-12, np.float64(cond) + 1e-12):
            r = base.copy()
            r[f] = v
            rows.append(r)
    return np.asarray(rows, dtype=np.float64)


@pytest.fixture(scope="module")
def cancer() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = X.copy()
    X[np.random.default_rng(1).random(X.shape) < 0.08] = np.nan
    return X, y


@pytest.fixture(scope="module")
def wine() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_wine

    return load_wine(return_X_y=True)


@pytest.fixture(scope="module")
def diabetes() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_diabetes

    return load_diabetes(return_X_y=True)


@pytest.fixture(scope="module")
def binary_booster(cancer: tuple[np.ndarray, np.ndarray]) -> Any:
    X, y = cancer
    return xgb.train({"objective": "binary:logistic", "max_depth": 4, "seed": 0}, xgb.DMatrix(X, y), 25)


# -- objectives on real data --------------------------------------------------------------------

OBJECTIVES = [
    ("reg:squarederror", "diabetes", Task.REGRESSION, PostTransform.IDENTITY),
    ("reg:absoluteerror", "diabetes", Task.REGRESSION, PostTransform.IDENTITY),
    ("count:poisson", "diabetes", Task.REGRESSION, PostTransform.EXP),
    ("reg:gamma", "diabetes", Task.REGRESSION, PostTransform.EXP),
    ("binary:logistic", "cancer", Task.BINARY, PostTransform.SIGMOID),
    ("binary:logitraw", "cancer", Task.BINARY, PostTransform.SIGMOID),
    ("reg:logistic", "cancer", Task.REGRESSION, PostTransform.SIGMOID),
    ("multi:softprob", "wine", Task.MULTICLASS, PostTransform.SOFTMAX),
]


@pytest.mark.parametrize("objective,data,task,post", OBJECTIVES, ids=[o[0] for o in OBJECTIVES])
def test_objective_margins_and_leaves_are_exact(objective: str, data: str, task: Task, post: PostTransform,
                                                request: pytest.FixtureRequest) -> None:
    X, y = request.getfixturevalue(data)
    params: dict[str, Any] = {"objective": objective, "max_depth": 4, "seed": 0}
    if objective.startswith("multi"):
        params["num_class"] = 3
    if objective in ("count:poisson", "reg:gamma", "reg:tweedie"):
        y = np.round(y / 50.0) + 1.0
    booster = xgb.train(params, xgb.DMatrix(X, y), 10)
    forest = from_xgboost(booster)
    assert forest.schema.task == task and forest.schema.post_transform == post
    assert forest.schema.input_dtype == "float32" and forest.schema.accumulate_dtype == "float32"
    assert forest.schema.source["objective"] == objective
    assert_same(forest, booster, X)
    rows = boundary_rows(forest, np.nan_to_num(X), np.random.default_rng(0))
    assert_same(forest, booster, rows)
    if objective in ("multi:softprob", "binary:logistic", "count:poisson", "reg:gamma"):
        want = booster.predict(xgb.DMatrix(X))
        got = forest.predict_proba(X)[:, 1] if task == Task.BINARY else (
            forest.predict_proba(X) if task == Task.MULTICLASS else forest.predict(X))
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)


def test_base_margin_is_xgboosts_float32_logit() -> None:
    """XGBoost turns a probability base_score into a margin with float32 logf, clamped to [1e-6, 1 - 1e-6]."""
    X = np.random.default_rng(0).random((4, 3))
    for p in (1e-7, 0.01, 0.2764, 0.5, 0.7, 0.999, 1 - 1e-7):
        b = xgb.train({"objective": "binary:logistic", "base_score": p}, xgb.DMatrix(X, np.zeros(4)), 0)
        b = _add_stump(b)
        forest = from_xgboost(b)
        assert np.float32(forest.schema.base_score[0]) == xgb_margin(b, X[:1])[0] - np.float32(0.25)
    for obj in ("count:poisson", "reg:gamma"):
        b = _add_stump(xgb.train({"objective": obj, "base_score": 3.3}, xgb.DMatrix(X, np.ones(4)), 0))
        assert np.float32(from_xgboost(b).schema.base_score[0]) == logf(np.float32(3.3))


def _add_stump(booster: Any) -> Any:
    """A model with one single-leaf tree of value 0.25 (XGBoost refuses to save a model without trees)."""
    doc = json.loads(booster.save_raw("json"))
    m = doc["learner"]["gradient_booster"]["model"]
    m["trees"] = [_tree_json(0, [-1], [-1], [0], [0.25], [0])]
    m["tree_info"] = [0]
    m["iteration_indptr"] = [0, 1]
    m["gbtree_model_param"]["num_trees"] = "1"
    return xgb.Booster(model_file=bytearray(json.dumps(doc).encode()))


def test_multiclass_layout_and_classes(wine: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = wine
    clf = xgb.XGBClassifier(n_estimators=8, max_depth=3, random_state=0).fit(X, y)
    forest = lumber.load(clf)
    assert forest.n_outputs == 3 and forest.schema.classes == (0, 1, 2)
    assert list(forest.tree_output[:6]) == [0, 1, 2, 0, 1, 2]
    assert_same(forest, clf.get_booster(), X)
    np.testing.assert_array_equal(forest.predict(X), clf.predict(X))
    np.testing.assert_allclose(forest.predict_proba(X), clf.predict_proba(X), rtol=2e-6, atol=1e-7)


def test_sklearn_wrapper_uses_best_iteration(cancer: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = cancer
    clf = xgb.XGBClassifier(n_estimators=60, max_depth=3, learning_rate=0.5, early_stopping_rounds=3,
                            random_state=0).fit(X[:400], y[:400], eval_set=[(X[400:], y[400:])], verbose=False)
    best = clf.best_iteration
    assert best + 1 < 60
    forest = lumber.load(clf)
    assert forest.n_trees == best + 1
    np.testing.assert_array_equal(forest.evaluate(X).astype(np.float32), clf.predict(X, output_margin=True))
    assert from_xgboost(clf.get_booster()).n_trees == clf.get_booster().num_boosted_rounds()
    assert from_xgboost(clf, iteration_range=(0, 2)).n_trees == 2


def test_missing_other_than_nan_is_refused(cancer: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = cancer
    clf = xgb.XGBClassifier(n_estimators=2, missing=0.0).fit(np.nan_to_num(X), y)
    with pytest.raises(UnsupportedModelError, match=r"missing=0\.0.*treats the value"):
        from_xgboost(clf)


def test_inputs_are_checked_like_xgboost(binary_booster: Any, cancer: tuple[np.ndarray, np.ndarray]) -> None:
    X, _ = cancer
    forest = from_xgboost(binary_booster)
    bad = np.nan_to_num(X[:3]).copy()
    bad[1, 4] = np.inf
    with pytest.raises(InputDataError, match="infinite"):
        forest.evaluate(bad)
    with pytest.raises(Exception, match="inf"):
        binary_booster.predict(xgb.DMatrix(bad))
    bad[1, 4] = 1e300  # overflows float32: XGBoost rejects it too
    with pytest.raises(InputDataError, match="float32"):
        forest.evaluate(bad)


# -- files through lumber.load ------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".json", ".ubj"])
def test_model_files_load_through_lumber(binary_booster: Any, cancer: tuple[np.ndarray, np.ndarray],
                                         tmp_path: Path, suffix: str) -> None:
    X, _ = cancer
    path = tmp_path / f"model{suffix}"
    binary_booster.save_model(str(path))
    forest = lumber.load(path)
    assert forest.schema.source["format"] == ("json" if suffix == ".json" else "ubjson")
    assert forest.schema.source["version"] == xgb.__version__.split("rc")[0]
    assert len(forest.schema.source["content_hash"]) == 64
    assert_same(forest, binary_booster, X)
    assert lumber.load(str(path)).schema.source["content_hash"] == forest.schema.source["content_hash"]


def test_ubjson_decoder_matches_json(binary_booster: Any) -> None:
    """Every field of the UBJSON document equals the JSON one (typed arrays as numpy)."""
    doc_json = json.loads(binary_booster.save_raw("json"))
    doc_ubj = ubjson.loads(bytes(binary_booster.save_raw("ubj")))

    def same(a: Any, b: Any) -> None:
        if isinstance(b, dict):
            assert isinstance(a, dict) and a.keys() == b.keys()
            for k in b:
                same(a[k], b[k])
        elif isinstance(b, list) and isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a.astype(np.float64), np.asarray(b, dtype=a.dtype).astype(np.float64))
        elif isinstance(b, list):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                same(x, y)
        else:
            assert a == b or np.float32(a) == np.float32(b)

    same(doc_ubj, doc_json)


@pytest.mark.parametrize("data,match", [
    (b"{", "unterminated object"),
    (b"{L\x00\x00\x00\x00\x00\x00\x00\x05ab", "unexpected end"),
    (b"[$d#i\x7f\x00", "unexpected end"),
    (b"{i\x01aQ}", "unknown type marker"),
    (b"[#L\xff\xff\xff\xff\xff\xff\xff\xff", "negative length"),
    (b"[]x", "trailing bytes"),
    (b"[" * 100 + b"]" * 100, "nested too deeply"),
])
def test_ubjson_decoder_rejects_malformed_input(data: bytes, match: str) -> None:
    with pytest.raises(ubjson.UBJSONError, match=match):
        ubjson.loads(data)


def test_ubjson_values() -> None:
    assert ubjson.loads(b"{i\x01aSi\x02hi}") == {"a": "hi"}
    assert ubjson.loads(b"[TFZi\xffU\xffI\x01\x00D?\xf0\x00\x00\x00\x00\x00\x00C@]") == [
        True, False, None, -1, 255, 256, 1.0, "@"]
    arr = ubjson.loads(b"[$l#i\x02\x00\x00\x00\x01\xff\xff\xff\xff")
    assert arr.tolist() == [1, -1]


# -- categorical splits ---------------------------------------------------------------------------


def _categorical_frame(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    codes = rng.integers(0, 30, n)
    labels = np.array(list("abcdefghijklmnopqrstuvwxyz0123"))[codes]
    df = pd.DataFrame({"x": rng.normal(size=n), "c": pd.Categorical(codes, categories=list(range(30))),
                       "s": pd.Categorical(labels)})
    df.loc[rng.random(n) < 0.05, "x"] = np.nan
    y = (df.x.fillna(0) > 0) + 2.0 * (codes % 3 == 0) + (codes % 5 == 0) + 0.5 * np.isin(labels, list("aeiou"))
    return df, y.to_numpy(dtype=np.float64)


def test_categorical_splits_match_xgboost_on_adversarial_codes() -> None:
    rng = np.random.default_rng(0)
    df, y = _categorical_frame(3000, rng)
    booster = xgb.train({"max_depth": 4, "max_cat_to_onehot": 1, "seed": 0},
                        xgb.DMatrix(df, y, enable_categorical=True), 15)
    forest = from_xgboost(booster)
    assert forest.schema.category_rule == CategoryRule.XGBOOST
    kinds = [f.kind for f in forest.schema.features]
    assert kinds == [FeatureKind.NUMERICAL, FeatureKind.CATEGORICAL, FeatureKind.CATEGORICAL]
    assert forest.schema.features[2].categories == tuple(sorted(set("abcdefghijklmnopqrstuvwxyz0123")))
    assert forest.is_categorical.any()
    assert not forest.cat_in_set_left[forest.is_categorical].any()
    assert forest.cat_invalid_left[forest.is_categorical].all()
    odd = [0, 1, 2, 3, -0.5, -1e-30, -0.0, -1, 0.5, 0.99, 3.7, 29, 30, 40, 2**24 - 1, 2**24, 2**24 + 1,
           16777214.5, 1e10, -1e10, np.nan]
    X = rng.normal(size=(len(odd) ** 2, 3))
    X[:, 1] = np.repeat(odd, len(odd))
    X[:, 2] = np.tile(odd, len(odd))
    X[::7, 0] = np.nan
    dm = {"feature_names": ["x", "c", "s"], "feature_types": ["q", "c", "c"], "enable_categorical": True}
    assert_same(forest, booster, X, **dm)
    coded = df.copy()
    coded["c"] = df["c"].cat.codes.astype(float)
    coded["s"] = df["s"].cat.codes.astype(float)
    assert_same(forest, booster, coded.to_numpy(), **dm)
    # a DataFrame with category dtype is mapped through the stored labels, as XGBoost >= 3.1 recodes it
    shuffled = df.head(200).copy()
    shuffled["s"] = shuffled["s"].cat.reorder_categories(list(reversed(shuffled["s"].cat.categories)))
    np.testing.assert_array_equal(forest.evaluate(shuffled).astype(np.float32),
                                  booster.predict(xgb.DMatrix(shuffled, enable_categorical=True), output_margin=True))


def test_real_dataset_with_categorical_codes() -> None:
    ds = lumber.datasets.load("adult")
    X = ds.X.to_numpy(dtype=np.float64)[:3000]
    y = np.asarray(ds.y)[:3000]
    types = ["c" if f.kind == FeatureKind.CATEGORICAL else "q" for f in ds.features]
    dm = {"feature_names": list(ds.X.columns), "feature_types": types, "enable_categorical": True}
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 5, "max_cat_to_onehot": 1, "seed": 0},
                        xgb.DMatrix(X, y, **dm), 15)
    forest = from_xgboost(booster)
    assert forest.is_categorical.any()
    assert forest.schema.feature_names == list(ds.X.columns)
    X_test = ds.X.to_numpy(dtype=np.float64)[3000:5000].copy()
    X_test[::11, 3] = np.nan
    assert_same(forest, booster, X_test, **dm)


# -- booster variants -------------------------------------------------------------------------------


def test_pruned_exact_trees_keep_xgboost_node_ids(diabetes: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = diabetes
    booster = xgb.train({"tree_method": "exact", "max_depth": 6, "gamma": 5000}, xgb.DMatrix(X, y), 15)
    doc = json.loads(booster.save_raw("json"))
    assert sum(int(t["tree_param"]["num_deleted"]) for t in doc["learner"]["gradient_booster"]["model"]["trees"])
    forest = from_xgboost(booster)
    ids = xgboost_node_ids(booster)
    leaves = forest.apply(X)
    mapped = np.stack([ids[t][leaves[:, t]] for t in range(forest.n_trees)], axis=1)
    np.testing.assert_array_equal(mapped, xgb_leaves(booster, X))
    np.testing.assert_array_equal(forest.evaluate(X).astype(np.float32), xgb_margin(booster, X))


def test_dart_weights_are_folded_in_float32(diabetes: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = diabetes
    booster = xgb.train({"booster": "dart", "max_depth": 3, "rate_drop": 0.5, "skip_drop": 0.0, "seed": 1},
                        xgb.DMatrix(X, y), 20)
    weights = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["weight_drop"]
    assert min(weights) < 1.0
    forest = from_xgboost(booster)
    assert forest.schema.source["booster"] == "dart"
    assert_same(forest, booster, X)


def test_random_forest_and_multi_target(diabetes: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = diabetes
    rf = xgb.XGBRFRegressor(n_estimators=6, max_depth=4, random_state=0).fit(X, y)
    assert_same(lumber.load(rf), rf.get_booster(), X)
    Y = np.column_stack([y, np.sqrt(y)])
    mt = xgb.train({"multi_strategy": "one_output_per_tree", "max_depth": 3}, xgb.DMatrix(X, Y), 5)
    forest = from_xgboost(mt)
    assert forest.n_outputs == 2
    assert_same(forest, mt, X)


def test_feature_types_and_ranker(diabetes: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = diabetes
    Xt = np.column_stack([np.round(X[:, 0] * 100), X[:, 1] > 0, X[:, 2:]]).astype(np.float64)
    types = ["int", "i"] + ["q"] * (Xt.shape[1] - 2)
    names = [f"col{j}" for j in range(Xt.shape[1])]
    booster = xgb.train({"max_depth": 3}, xgb.DMatrix(Xt, y, feature_types=types, feature_names=names), 5)
    forest = from_xgboost(booster)
    assert [f.kind for f in forest.schema.features[:3]] == [FeatureKind.ORDINAL, FeatureKind.BINARY,
                                                             FeatureKind.NUMERICAL]
    assert forest.schema.feature_names == names
    assert from_xgboost(booster, feature_names=list("abcdefghij")).schema.feature_names[0] == "a"
    assert_same(forest, booster, Xt, feature_types=types, feature_names=names)
    ranker = xgb.XGBRanker(n_estimators=5, max_depth=3, objective="rank:ndcg").fit(X, np.digitize(y, [100, 200]),
                                                                                   qid=np.arange(len(X)) // 40)
    forest = lumber.load(ranker)
    assert forest.schema.task == Task.REGRESSION
    np.testing.assert_array_equal(forest.evaluate(X).astype(np.float32), ranker.predict(X))


def test_refused_models(diabetes: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = diabetes
    linear = xgb.train({"booster": "gblinear"}, xgb.DMatrix(X, y), 2)
    with pytest.raises(UnsupportedModelError, match="gblinear.*linear model"):
        from_xgboost(linear)
    vector = xgb.train({"multi_strategy": "multi_output_tree", "tree_method": "hist", "max_depth": 2},
                       xgb.DMatrix(X, np.column_stack([y, y])), 2)
    with pytest.raises(UnsupportedModelError, match="vector leaves"):
        from_xgboost(vector)
    hinge = xgb.train({"objective": "binary:hinge"}, xgb.DMatrix(X, y > 140), 2)
    with pytest.raises(UnsupportedModelError, match="binary:hinge.*step function"):
        from_xgboost(hinge)
    forest = from_xgboost(hinge, raw_output=True)
    np.testing.assert_array_equal(forest.evaluate(X).astype(np.float32), xgb_margin(hinge, X))
    with pytest.raises(UnsupportedModelError, match="cannot load an object of type xgboost DMatrix"):
        from_xgboost(xgb.DMatrix(X))
    with pytest.raises(UnsupportedModelError, match="not fitted"):
        from_xgboost(xgb.XGBRegressor())
    with pytest.raises(UnsupportedModelError, match="iteration_range"):
        from_xgboost(linear if False else xgb.train({}, xgb.DMatrix(X, y), 2), iteration_range=(0, 5))


# -- bad files ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_doc(diabetes: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    X, y = diabetes
    b = xgb.train({"max_depth": 2, "seed": 0}, xgb.DMatrix(X, y), 3)
    return json.loads(b.save_raw("json"))  # type: ignore[no-any-return]


def _edit(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Copy of ``doc`` with the field at a dotted path (``a.b[2].c``) replaced, or deleted if value is ...."""
    out = copy.deepcopy(doc)
    parts = path.replace("]", "").replace("[", ".").split(".")
    node: Any = out
    for p in parts[:-1]:
        node = node[int(p)] if p.isdigit() else node[p]
    last = parts[-1]
    if value is ...:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return out


T1 = "learner.gradient_booster.model.trees[1]"


@pytest.mark.parametrize("path,value,match", [
    ("learner.learner_model_param", ..., r"learner\.learner_model_param: missing field"),
    (f"{T1}.split_conditions", ..., r"trees\[1\]\.split_conditions: missing field"),
    (f"{T1}.left_children[0]", 99, r"trees\[1\]\.left_children: node 0 points to child 99"),
    (f"{T1}.split_indices[0]", 10, r"trees\[1\]\.split_indices: node 0 splits on feature 10.*10 features"),
    (f"{T1}.split_conditions[0]", float("nan"), r"trees\[1\]\.split_conditions: node 0 has a NaN split"),
    (f"{T1}.split_conditions[3]", float("inf"), r"trees\[1\]\.split_conditions: leaf 3"),
    (f"{T1}.default_left", [0, 1], r"trees\[1\]\.default_left: has 2 entries, expected 7"),
    (f"{T1}.split_type[0]", 5, r"trees\[1\]\.split_type: node 0 has split type 5"),
    (f"{T1}.right_children[1]", 2, r"node 2 is the child of 2 nodes"),
    (f"{T1}.tree_param.num_nodes", "abc", r"tree_param\.num_nodes: expected an integer"),
    (f"{T1}.left_children", "oops", r"trees\[1\]\.left_children: expected an array"),
    ("learner.gradient_booster.model.gbtree_model_param.num_trees", "4", r"num_trees: says 4 trees.*holds 3"),
    ("learner.gradient_booster.model.tree_info[2]", 3, r"tree_info: tree 2 adds to output 3"),
    ("learner.learner_model_param.base_score", "[abc]", r"base_score: expected a number string"),
    ("learner.learner_model_param.num_feature", "0", r"num_feature: must be at least 1"),
    ("learner.feature_types", ["q", "zz"] + ["q"] * 8, r"feature_types\[1\]: unknown feature type 'zz'"),
    ("learner.objective.name", "reg:mystery", r"objective 'reg:mystery' is not supported"),
])
def test_bad_documents_name_file_and_field(small_doc: dict[str, Any], tmp_path: Path, path: str, value: Any,
                                           match: str) -> None:
    bad = _edit(small_doc, path, value)
    file = tmp_path / "bad.json"
    file.write_text(json.dumps(bad))
    with pytest.raises((ModelFormatError, UnsupportedModelError), match=match) as info:
        lumber.load(file)
    assert str(file) in str(info.value)


def test_truncated_and_garbled_files(small_doc: dict[str, Any], tmp_path: Path,
                                     diabetes: tuple[np.ndarray, np.ndarray]) -> None:
    text = json.dumps(small_doc)
    file = tmp_path / "m.json"
    file.write_text(text[: len(text) // 2])
    with pytest.raises(ModelFormatError, match=r"(?s)m\.json: invalid JSON at line 1.*truncated"):
        load_xgboost_file(file)
    file.write_bytes(b'{"learner": \xff\xfe}')
    with pytest.raises(ModelFormatError, match="not UTF-8|invalid JSON"):
        load_xgboost_file(file)
    X, y = diabetes
    ubj = bytes(xgb.train({"max_depth": 2}, xgb.DMatrix(X, y), 2).save_raw("ubj"))
    ufile = tmp_path / "m.ubj"
    for cut in (len(ubj) // 3, len(ubj) - 2):
        ufile.write_bytes(ubj[:cut])
        with pytest.raises(ModelFormatError, match=r"(?s)m\.ubj: invalid UBJSON.*truncated"):
            lumber.load(ufile)
    with pytest.raises(ModelFormatError, match="no such file"):
        load_xgboost_file(tmp_path / "missing.json")
    file.write_text('{"learner": {}}')
    with pytest.raises(ModelFormatError, match=r"learner\.learner_model_param: missing field"):
        lumber.load(file)


# -- hypothesis: random small models loaded into XGBoost itself ------------------------------------


def _tree_json(tid: int, left: list[int], right: list[int], feat: list[int], cond: list[float],
               stype: list[int], cats: dict[int, list[int]] | None = None,
               default_left: list[int] | None = None) -> dict[str, Any]:
    n = len(left)
    parents = [2147483647] * n
    for i in range(n):
        if left[i] >= 0:
            parents[left[i]] = i
            parents[right[i]] = i
    cats = cats or {}
    nodes = sorted(cats)
    flat: list[int] = []
    segs, sizes = [], []
    for nd in nodes:
        segs.append(len(flat))
        sizes.append(len(cats[nd]))
        flat.extend(sorted(cats[nd]))
    return {
        "base_weights": [0.0] * n, "categories": flat, "categories_nodes": nodes, "categories_segments": segs,
        "categories_sizes": sizes, "default_left": default_left or [0] * n, "id": tid, "left_children": left,
        "loss_changes": [0.0] * n, "parents": parents, "right_children": right, "split_conditions": cond,
        "split_indices": feat, "split_type": stype, "sum_hessian": [1.0] * n,
        "tree_param": {"num_deleted": "0", "num_feature": "3", "num_nodes": str(n), "size_leaf_vector": "1"},
    }


OBJECTIVE_PARAMS = {"reg:squarederror": {"reg_loss_param": {"scale_pos_weight": "1"}},
                    "binary:logistic": {"reg_loss_param": {"scale_pos_weight": "1"}},
                    "count:poisson": {"poisson_regression_param": {"max_delta_step": "0.7"}}}
GRID = np.float32([-2.5, -1.0, -1e-30, 0.0, 1e-30, 0.1, 0.5, 1.0, 2.0, 3.3, 1e6])


@st.composite
def xgb_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A random XGBoost model document: 1-4 trees of depth <= 4 over 2 numerical and 1 categorical feature."""
    trees = []
    n_trees = draw(st.integers(1, 4))
    for tid in range(n_trees):
        left: list[int] = []
        right: list[int] = []
        feat: list[int] = []
        cond: list[float] = []
        stype: list[int] = []
        dl: list[int] = []
        cats: dict[int, list[int]] = {}

        def new_node() -> int:
            left.append(-1), right.append(-1), feat.append(0), cond.append(0.0), stype.append(0), dl.append(0)
            return len(left) - 1

        # XGBoost allocates both children of a split together (right == left + 1), expanding breadth first
        queue = [(new_node(), 0)]
        while queue:
            i, depth = queue.pop(0)
            if depth < 4 and draw(st.booleans()):
                f = draw(st.integers(0, 2))
                feat[i] = f
                dl[i] = int(draw(st.booleans()))
                if f == 2:
                    stype[i] = 1
                    cond[i] = float(np.float32(1e-45))
                    cats[i] = sorted(draw(st.sets(st.integers(0, 6), min_size=1, max_size=4)))
                else:
                    cond[i] = float(draw(st.sampled_from(GRID)))
                left[i], right[i] = new_node(), new_node()
                queue += [(left[i], depth + 1), (right[i], depth + 1)]
            else:
                cond[i] = float(np.float32(draw(st.floats(-4, 4, width=32))))

        trees.append(_tree_json(tid, left, right, feat, cond, stype, cats, dl))
    objective = draw(st.sampled_from(["reg:squarederror", "binary:logistic", "count:poisson"]))
    base = draw(st.sampled_from(["5E-1", "2.764E-1", "9.9E-1"]))
    return {
        "learner": {
            "attributes": {}, "feature_names": ["a", "b", "c"], "feature_types": ["float", "float", "c"],
            "gradient_booster": {"model": {
                "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": str(n_trees)},
                "iteration_indptr": list(range(n_trees + 1)), "tree_info": [0] * n_trees, "trees": trees},
                "name": "gbtree"},
            "learner_model_param": {"base_score": base, "boost_from_average": "0", "num_class": "0",
                                    "num_feature": "3", "num_target": "1"},
            "objective": {"name": objective, **OBJECTIVE_PARAMS[objective]},
        },
        "version": [3, 2, 0],
    }


@settings(max_examples=12)
@given(doc=xgb_documents())
def test_hypothesis_models_match_xgboost(doc: dict[str, Any]) -> None:
    raw = json.dumps(doc).encode()
    booster = xgb.Booster(model_file=bytearray(raw))
    forest = load_xgboost_file("generated.json", data=raw)
    num = [np.nan, -1e9] + [float(v) for g in GRID for v in
                            (g, np.nextafter(g, np.float32(-np.inf)), np.nextafter(g, np.float32(np.inf)))]
    cat = [np.nan, -1.0, -0.5, -0.0, 0.0, 0.7, 1.0, 2.5, 3.0, 6.0, 7.0, 2.0**24, 1e9]
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.choice(num, 400), rng.choice(num, 400), rng.choice(cat, 400)])
    dm = {"feature_names": ["a", "b", "c"], "feature_types": ["float", "float", "c"], "enable_categorical": True}
    assert_same(forest, booster, X, **dm)
