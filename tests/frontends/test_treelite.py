"""treelite frontend: differential tests against treelite's reference predictor (gtil).

Leaves are compared exactly with ``gtil.predict_leaf``. Margins are compared
with ``==`` where the summation order is the same (zero base scores) and to
rounding otherwise (gtil adds ``base_scores`` after the tree sum, lumber before).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import treelite
import treelite.gtil as gtil
import treelite.sklearn  # noqa: E402, F811 (the submodule import binds treelite again)
from treelite.model_builder import Metadata, ModelBuilder, PostProcessorFunc, TreeAnnotation  # noqa: E402

import lumber  # noqa: E402
from lumber.compiler.frontends.treelite import from_treelite, from_treelite_json, treelite_node_ids  # noqa: E402
from lumber.ir import (  # noqa: E402
    CategoryRule, FeatureKind, ModelFormatError, PostTransform, Task, UnsupportedModelError,
)


@pytest.fixture(autouse=True, scope="module")
def _one_thread() -> Any:
    """One OpenMP thread: on a shared 2-core machine oversubscribed training is 100x slower."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


def gtil_margin(model: Any, X: np.ndarray) -> np.ndarray:
    return gtil.predict(model, X, pred_margin=True, nthread=1).reshape(len(X), -1)


def assert_matches_gtil(forest: lumber.Forest, model: Any, X: np.ndarray, *, exact: bool) -> None:
    np.testing.assert_array_equal(forest.apply(X), gtil.predict_leaf(model, X, nthread=1).astype(np.int64))
    want = gtil_margin(model, X)
    got = forest.evaluate(X).reshape(want.shape)
    if exact:
        np.testing.assert_array_equal(got.astype(want.dtype), want)
    elif want.dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6 * np.abs(want).max())
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def with_nans(X: np.ndarray, frac: float = 0.08, seed: int = 1) -> np.ndarray:
    X = np.array(X, dtype=np.float64)
    X[np.random.default_rng(seed).random(X.shape) < frac] = np.nan
    return X


@pytest.fixture(scope="module")
def wine() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_wine

    return load_wine(return_X_y=True)


@pytest.fixture(scope="module")
def cancer() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_breast_cancer

    return load_breast_cancer(return_X_y=True)


# -- scikit-learn models through treelite.sklearn.import_model ------------------------------------


def test_random_forest_with_nan_routing(wine: tuple[np.ndarray, np.ndarray]) -> None:
    from sklearn.ensemble import RandomForestClassifier

    X, y = wine
    Xn = with_nans(X)
    rf = RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0).fit(Xn, y)
    model = treelite.sklearn.import_model(rf)
    forest = from_treelite(model)
    assert forest.schema.average and forest.n_outputs == 3 and forest.schema.task == Task.MULTICLASS
    assert np.isinf(forest.threshold).any()  # sklearn's NaN-only splits: dump_as_json cannot even write these
    assert_matches_gtil(forest, model, Xn, exact=True)
    # treelite compares float64 inputs; sklearn rounds X to float32 first, so agree only on float32 data
    X32 = Xn.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(forest.predict_proba(X32), rf.predict_proba(X32), rtol=1e-12, atol=1e-15)
    assert forest.count is not None and forest.count[0] > 0
    assert lumber.load(model).n_trees == 15


def test_gradient_boosting_and_extra_trees(wine: tuple[np.ndarray, np.ndarray]) -> None:
    from sklearn.ensemble import ExtraTreesRegressor, GradientBoostingClassifier

    X, y = wine
    gb = GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0).fit(X, y)
    model = treelite.sklearn.import_model(gb)
    forest = from_treelite(model)
    assert forest.schema.post_transform == PostTransform.SOFTMAX and any(forest.schema.base_score)
    assert_matches_gtil(forest, model, X, exact=False)
    np.testing.assert_allclose(forest.predict_proba(X), gb.predict_proba(X), rtol=1e-9)
    et = ExtraTreesRegressor(n_estimators=8, max_depth=6, random_state=0).fit(X, np.column_stack([y, X[:, 0]]))
    model = treelite.sklearn.import_model(et)
    forest = from_treelite(model)
    assert forest.n_outputs == 2 and forest.schema.average
    assert_matches_gtil(forest, model, X, exact=True)


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")  # inside treelite's importer
def test_hist_gradient_boosting_with_categories(cancer: tuple[np.ndarray, np.ndarray]) -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = cancer
    rng = np.random.default_rng(0)
    cat = rng.integers(0, 12, len(X)).astype(np.float64)
    y = (y + (cat % 3 == 0)) % 2
    Xc = with_nans(np.column_stack([X[:, :6], cat]))
    hgb = HistGradientBoostingClassifier(max_iter=15, categorical_features=[6], random_state=0).fit(Xc, y)
    model = treelite.sklearn.import_model(hgb)
    forest = from_treelite(model)
    assert forest.is_categorical.any() and forest.schema.features[6].kind == FeatureKind.CATEGORICAL
    assert forest.schema.category_rule == CategoryRule.TREELITE
    odd = np.array([0, 1, 2.5, 3, -0.5, -1, -0.0, 11, 12, 50, 2.0**24, 2.0**32, 1e12, np.nan, np.inf, -np.inf])
    probe = np.repeat(Xc[:40], len(odd), axis=0)
    probe[:, 6] = np.tile(odd, 40)
    assert_matches_gtil(forest, model, np.vstack([Xc, probe]), exact=False)


def test_isolation_forest(wine: tuple[np.ndarray, np.ndarray]) -> None:
    from sklearn.ensemble import IsolationForest

    X, _ = wine
    iso = IsolationForest(n_estimators=10, random_state=0).fit(X)
    model = treelite.sklearn.import_model(iso)
    forest = from_treelite(model)
    assert forest.schema.task == Task.ANOMALY and forest.schema.post_transform == PostTransform.ISOLATION
    assert_matches_gtil(forest, model, X, exact=True)
    # gtil's post-processor is 2**(-m/c); lumber's ISOLATION is sklearn's score_samples = -2**(-m/c)
    np.testing.assert_allclose(-forest.schema.transform(forest.evaluate(X)),
                               gtil.predict(model, X, nthread=1).reshape(-1), rtol=1e-12)
    # treelite keeps c(max_samples) as ratio_c in float32, so sklearn agrees to float32 precision
    np.testing.assert_allclose(forest.schema.transform(forest.evaluate(X)), iso.score_samples(X), rtol=1e-6)


# -- XGBoost and LightGBM through treelite ----------------------------------------------------------


def test_xgboost_models_in_float32(cancer: tuple[np.ndarray, np.ndarray], wine: tuple[np.ndarray, np.ndarray]) -> None:
    import xgboost as xgb
    X, y = cancer
    Xn = with_nans(X)
    # base_score 0.5 is margin 0: gtil's "sum then add base" equals lumber's "start at base"
    b = xgb.train({"objective": "binary:logistic", "max_depth": 4, "base_score": 0.5, "nthread": 1},
                  xgb.DMatrix(Xn, y), 12)
    model = treelite.frontend.from_xgboost(b)
    forest = from_treelite(model)
    assert forest.schema.input_dtype == "float32" and forest.schema.accumulate_dtype == "float32"
    assert forest.schema.task == Task.BINARY
    rows = np.vstack([Xn, _boundary_rows(forest, np.nan_to_num(X), np.float32)])
    assert_matches_gtil(forest, model, rows, exact=True)
    Xw, yw = wine
    bm = xgb.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "nthread": 1},
                   xgb.DMatrix(Xw, yw), 6)
    model = treelite.frontend.from_xgboost(bm)
    assert_matches_gtil(from_treelite(model), model, Xw, exact=False)


def test_lightgbm_categorical_matches_gtil_not_lightgbm() -> None:
    import lightgbm as lgb
    rng = np.random.default_rng(0)
    n = 3000
    X = np.column_stack([rng.normal(size=n), rng.integers(0, 20, n).astype(float), rng.normal(size=n)])
    X[rng.random(n) < 0.1, 0] = np.nan
    X[rng.random(n) < 0.2, 2] = 0.0
    y = (np.nan_to_num(X[:, 0]) > 0) + 2.0 * (X[:, 1] % 3 == 0) + (X[:, 1] % 5 == 0) + (X[:, 2] == 0)
    booster = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 8, "min_data_per_group": 5,
                         "cat_smooth": 1, "max_cat_to_onehot": 1, "zero_as_missing": True, "num_threads": 1},
                        lgb.Dataset(X, y, categorical_feature=[1]), 8)
    model = treelite.frontend.from_lightgbm(booster)
    forest = from_treelite(model)
    assert forest.schema.input_dtype == "float64" and forest.is_categorical.any()
    odd = np.array([0, 1, 3, -0.5, -1, -0.0, 0.5, 3.7, 19, 25, 2.0**24, 2.0**31, 2.0**32 - 1, 2.0**32, 1e10,
                    np.nan, np.inf])
    probe = np.repeat(X[:30], len(odd), axis=0)
    probe[:, 1] = np.tile(odd, 30)
    rows = np.vstack([X, probe, _boundary_rows(forest, np.nan_to_num(X), np.float64)])
    assert_matches_gtil(forest, model, rows, exact=True)
    # treelite differs from LightGBM on -0.5 (category 0 in LightGBM) and zero_as_missing; lumber follows gtil
    assert not np.array_equal(forest.evaluate(probe), booster.predict(probe))


def _boundary_rows(forest: lumber.Forest, X: np.ndarray, dtype: Any, n: int = 200) -> np.ndarray:
    """Rows at each numerical threshold and one step either side in the model's precision."""
    rng = np.random.default_rng(0)
    internal = np.flatnonzero((forest.left >= 0) & ~forest.is_categorical & np.isfinite(forest.threshold))
    rows = []
    for node in rng.choice(internal, size=min(n, internal.size), replace=False):
        t = dtype(forest.threshold[node])
        base = X[rng.integers(len(X))]
        for v in (t, np.nextafter(t, dtype(-np.inf)), np.nextafter(t, dtype(np.inf))):
            r = base.copy()
            r[forest.feature[node]] = v
            rows.append(r)
    return np.asarray(rows, dtype=np.float64)


# -- hypothesis: models built with treelite's ModelBuilder, every comparison op ---------------------


@st.composite
def built_models(draw: st.DrawFn) -> Any:
    dtype = draw(st.sampled_from(["float32", "float64"]))
    n_trees = draw(st.integers(1, 3))
    multiclass = draw(st.booleans())
    K = 3 if multiclass else 1
    builder = ModelBuilder(
        threshold_type=dtype, leaf_output_type=dtype,
        metadata=Metadata(num_feature=3, task_type="kMultiClf" if multiclass else "kRegressor",
                          average_tree_output=False, num_target=1, num_class=[K], leaf_vector_shape=(1, 1)),
        tree_annotation=TreeAnnotation(num_tree=n_trees, target_id=[0] * n_trees,
                                       class_id=[t % K for t in range(n_trees)]),
        postprocessor=PostProcessorFunc(name="softmax" if multiclass else "identity"),
        base_scores=[0.0] * K,
    )
    for _ in range(n_trees):
        builder.start_tree()
        keys = iter(draw(st.permutations(list(range(100, 131)))))  # arbitrary node keys
        pending = [(next(keys), 0)]
        while pending:
            key, depth = pending.pop(draw(st.integers(0, len(pending) - 1)))
            builder.start_node(key)
            if depth < 4 and draw(st.booleans()):
                lk, rk = next(keys), next(keys)
                f = draw(st.integers(0, 2))
                if f == 2:
                    cats = sorted(draw(st.sets(st.integers(0, 6), max_size=4)) | draw(st.sets(
                        st.sampled_from([2**24, 2**24 + 2]), max_size=1)))
                    builder.categorical_test(2, default_left=draw(st.booleans()), category_list=cats,
                                             category_list_right_child=draw(st.booleans()),
                                             left_child_key=lk, right_child_key=rk)
                else:
                    builder.numerical_test(f, float(draw(st.sampled_from(THRESHOLDS))),
                                           default_left=draw(st.booleans()),
                                           opname=draw(st.sampled_from(["<", "<=", ">", ">="])),
                                           left_child_key=lk, right_child_key=rk)
                pending += [(lk, depth + 1), (rk, depth + 1)]
            else:
                builder.leaf(float(draw(st.floats(-4, 4, width=32))))
            builder.end_node()
        builder.end_tree()
    return builder.commit()


THRESHOLDS = [-2.5, -1e-30, 0.0, 0.1, 1.0 / 3.0, 1.0, 3.3, 1e6]


@settings(max_examples=25)
@given(model=built_models())
def test_hypothesis_built_models_match_gtil(model: Any) -> None:
    forest = from_treelite(model)
    dtype = np.float32 if forest.schema.input_dtype == "float32" else np.float64
    num = [np.nan, np.inf, -np.inf] + [float(v) for t in THRESHOLDS for v in
                                        (dtype(t), np.nextafter(dtype(t), dtype(-np.inf)),
                                         np.nextafter(dtype(t), dtype(np.inf)), t)]
    cat = [np.nan, -1.0, -0.5, -0.0, 0.0, 0.7, 1.0, 2.5, 6.0, 7.0, 2.0**24, 2.0**24 + 2, 2.0**32, np.inf]
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.choice(num, 300), rng.choice(num, 300), rng.choice(cat, 300)])
    ids = treelite_node_ids(model)
    np.testing.assert_array_equal(
        np.stack([ids[t][forest.apply(X)[:, t]] for t in range(forest.n_trees)], axis=1),
        gtil.predict_leaf(model, X, nthread=1).astype(np.int64))
    want = gtil_margin(model, X)
    np.testing.assert_array_equal(forest.evaluate(X).reshape(want.shape).astype(want.dtype), want)
    text = model.dump_as_json(pretty_print=False)
    again = from_treelite_json(text)
    np.testing.assert_array_equal(again.evaluate(X), forest.evaluate(X))


# -- dump_as_json input and bad documents -------------------------------------------------------------


@pytest.fixture(scope="module")
def small_json(wine: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    from sklearn.ensemble import GradientBoostingRegressor

    X, y = wine
    gb = GradientBoostingRegressor(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    return json.loads(treelite.sklearn.import_model(gb).dump_as_json(pretty_print=False))  # type: ignore[no-any-return]


def test_json_reader_equals_object_reader(wine: tuple[np.ndarray, np.ndarray]) -> None:
    from sklearn.ensemble import RandomForestRegressor

    X, y = wine
    model = treelite.sklearn.import_model(RandomForestRegressor(n_estimators=4, max_depth=4, random_state=0).fit(X, y))
    a = from_treelite(model)
    b = from_treelite_json(model.dump_as_json(pretty_print=True))
    for name, _ in lumber.Forest.ARRAY_FIELDS:
        x, z = getattr(a, name), getattr(b, name)
        assert (x is None and z is None) or np.array_equal(x, z, equal_nan=True), name


def test_children_numbered_before_parents_are_renumbered(small_json: dict[str, Any],
                                                          wine: tuple[np.ndarray, np.ndarray]) -> None:
    """Node ids in reverse order (root kept at 0): lumber renumbers breadth first and maps ids back."""
    X, _ = wine
    doc = json.loads(json.dumps(small_json))
    for tree in doc["trees"]:
        n = len(tree["nodes"])
        new = {0: 0, **{i: n - i for i in range(1, n)}}
        for nd in tree["nodes"]:
            nd["node_id"] = new[nd["node_id"]]
            if "left_child" in nd:
                nd["left_child"], nd["right_child"] = new[nd["left_child"]], new[nd["right_child"]]
    text = json.dumps(doc)
    original = from_treelite_json(json.dumps(small_json))
    renumbered = from_treelite_json(text)
    np.testing.assert_array_equal(renumbered.evaluate(X), original.evaluate(X))
    ids = treelite_node_ids(text)
    assert any(not np.array_equal(i, np.arange(len(i))) for i in ids)
    n = [len(t["nodes"]) for t in doc["trees"]]
    back = np.stack([ids[t][renumbered.apply(X)[:, t]] for t in range(len(n))], axis=1)
    want = np.stack([np.where(o == 0, 0, n[t] - o) for t, o in enumerate(original.apply(X).T)], axis=1)
    np.testing.assert_array_equal(back, want)


def _edit(doc: dict[str, Any], path: str, value: Any) -> str:
    out = json.loads(json.dumps(doc))
    parts = path.replace("]", "").replace("[", ".").split(".")
    node: Any = out
    for p in parts[:-1]:
        node = node[int(p)] if p.isdigit() else node[p]
    last = parts[-1]
    if value is ...:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return json.dumps(out)


@pytest.mark.parametrize("path,value,error,match", [
    ("trees[1].nodes[0].left_child", 40, ModelFormatError, r"trees\[1\]\.nodes\[0\]\.left_child: node 0 points "
                                                           r"to child 40"),
    ("trees[1].nodes[0].split_feature_id", 13, ModelFormatError, r"split_feature_id: node 0 splits on feature 13"),
    ("trees[1].nodes[0].threshold", float("nan"), ModelFormatError, r"nodes\[0\]\.threshold: node 0 has a NaN"),
    ("trees[1].nodes[0].threshold", ..., ModelFormatError, r"nodes\[0\]\.threshold: missing field"),
    ("trees[1].nodes[0].comparison_op", "==", UnsupportedModelError, r"comparison_op '==' is not supported"),
    ("trees[1].nodes[1].node_id", 0, ModelFormatError, r"node_id values must be 0\.\.6"),
    ("trees[0].nodes[2].leaf_value", [1.0, 2.0], ModelFormatError, r"leaf 2 holds 2 values, expected 1"),
    ("trees[0].nodes[2].leaf_value", "x", ModelFormatError, r"nodes\[2\]\.leaf_value: expected .*number, found the string 'x'"),
    ("trees[2].nodes[0].right_child", 1, ModelFormatError, r"node 1 is the child of 2 nodes"),
    ("base_scores", [0.0, 1.0], ModelFormatError, r"base_scores: expected 1 finite numbers"),
    ("threshold_type", "float16", UnsupportedModelError, r"threshold_type 'float16'"),
    ("task_type", "kRanker", UnsupportedModelError, r"task_type 'kRanker'"),
    ("postprocessor", "signed_square", UnsupportedModelError, r"(?s)postprocessor 'signed_square'.*raw_output"),
    ("target_id", [0, 0], ModelFormatError, r"target_id: has 2 entries, expected 3"),
    ("num_feature", ..., ModelFormatError, r"num_feature: missing field"),
])
def test_bad_documents_name_the_field(small_json: dict[str, Any], path: str, value: Any, error: type,
                                      match: str) -> None:
    with pytest.raises(error, match=match) as info:
        from_treelite_json(_edit(small_json, path, value), name="model.json")
    assert "model.json" in str(info.value)


def test_unparseable_json_and_wrong_objects() -> None:
    with pytest.raises(ModelFormatError, match=r"(?s)invalid JSON at line 1, column 12.*empty value"):
        from_treelite_json('{"trees": [,]}')
    with pytest.raises(ModelFormatError, match="expected a JSON object"):
        from_treelite_json("[1, 2]")
    with pytest.raises(UnsupportedModelError, match="cannot load an object of type treelite"):
        from_treelite(treelite.model_builder.PostProcessorFunc(name="identity"))


def test_raw_output_accepts_unknown_postprocessor(small_json: dict[str, Any]) -> None:
    forest = from_treelite_json(_edit(small_json, "postprocessor", "signed_square"), raw_output=True)
    assert forest.schema.post_transform == PostTransform.IDENTITY
