"""Differential tests of the scikit-learn frontend against scikit-learn's own predictions.

Exact (bitwise) where lumber sums in the model's order: raw margins of every
DecisionTree/RandomForest/ExtraTrees (predict, predict_proba), GradientBoosting
(decision_function, _raw_predict) and HistGradientBoosting (_raw_predict), and
leaf ids of every tree. Through the post-transform (sigmoid, softmax, exp,
isolation score) outputs agree to rtol 1e-12: the formulas may round differently.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sklearn import datasets as skd
from sklearn import ensemble as E
from sklearn import tree as T
from sklearn.base import is_classifier

import lumber.datasets
from lumber.compiler.frontends import load
from lumber.compiler.frontends.sklearn import from_sklearn
from lumber.ir import (
    CategoryRule, FeatureKind, Forest, InputDataError, ModelFormatError, PostTransform, Task, UnsupportedModelError,
)

RTOL = 1e-12


@pytest.fixture(autouse=True, scope="module")
def _one_openmp_thread():
    """HistGradientBoosting's OpenMP threads spin on a shared 2-core box: one thread is faster here."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="openmp"):
        yield


# -- data ------------------------------------------------------------------------------------


def _subsample(name: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    ds = lumber.datasets.load(name)
    idx = np.random.default_rng(0).choice(len(ds.y), size=min(n, len(ds.y)), replace=False)
    return ds.X.to_numpy()[idx], ds.y[idx]


def _with_nan(X: np.ndarray, frac: float = 0.08, seed: int = 1) -> np.ndarray:
    X = X.astype(np.float64).copy()
    X[np.random.default_rng(seed).random(X.shape) < frac] = np.nan
    return X


DATA = {
    "breast_cancer": lambda: skd.load_breast_cancer(return_X_y=True),
    "wine": lambda: skd.load_wine(return_X_y=True),
    "iris": lambda: skd.load_iris(return_X_y=True),
    "diabetes": lambda: skd.load_diabetes(return_X_y=True),
    "adult": lambda: _subsample("adult", 3000),
    "compas": lambda: _subsample("compas", 2000),
}
_CACHE: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def data(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name not in _CACHE:
        X, y = DATA[name]()
        _CACHE[name] = (np.asarray(X, dtype=np.float64), np.asarray(y))
    return _CACHE[name]


# -- the oracle: what scikit-learn itself returns ---------------------------------------------


def sk_leaves(model, X) -> np.ndarray:
    """Leaf id per row and tree, from scikit-learn's own traversal code."""
    n = len(X)
    if isinstance(model, (T.DecisionTreeClassifier, T.DecisionTreeRegressor)):
        return model.apply(X)[:, None]
    if isinstance(model, (E.GradientBoostingClassifier, E.GradientBoostingRegressor)):
        return model.apply(X).reshape(n, -1)
    if isinstance(model, E.IsolationForest):
        sub = model._max_features != X.shape[1]
        Xf = np.asarray(X, dtype=np.float32)
        return np.stack([est.apply(Xf[:, feats] if sub else Xf)
                         for est, feats in zip(model.estimators_, model.estimators_features_)], axis=1)
    if isinstance(model, (E.HistGradientBoostingClassifier, E.HistGradientBoostingRegressor)):
        from sklearn.ensemble._hist_gradient_boosting.predictor import TreePredictor

        Xp = model._preprocess_X(X, reset=False)
        known, fmap = model._bin_mapper.make_known_categories_bitsets()
        out = []
        for stage in model._predictors:
            for p in stage:  # sklearn's predict, with each node's value replaced by its id
                nodes = p.nodes.copy()
                nodes["value"] = np.arange(len(nodes))
                tp = TreePredictor(nodes, p.binned_left_cat_bitsets, p.raw_left_cat_bitsets)
                out.append(tp.predict(Xp, known, fmap, 1))
        return np.stack(out, axis=1).astype(np.int64)
    return model.apply(X)


def sk_raw(model, X) -> np.ndarray:
    """The model's own raw output in the shape Forest.evaluate returns."""
    if isinstance(model, (E.HistGradientBoostingClassifier, E.HistGradientBoostingRegressor)):
        raw = model._raw_predict(X)
    elif isinstance(model, (E.GradientBoostingClassifier, E.GradientBoostingRegressor)):
        raw = model._raw_predict(np.ascontiguousarray(X, dtype=np.float32))
        if is_classifier(model):
            np.testing.assert_array_equal(raw.reshape(len(X), -1), model.decision_function(X).reshape(len(X), -1))
    elif is_classifier(model):
        raw = model.predict_proba(X)
    else:
        raw = model.predict(X)
    raw = np.asarray(raw, dtype=np.float64)
    return raw[:, 0] if raw.ndim == 2 and raw.shape[1] == 1 else raw


def assert_matches(model, forest: Forest, X) -> None:
    """Raw margins, leaves, and user-facing outputs of ``forest`` equal the model's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # feature-name warnings of DataFrame-fitted models
        Xa = X if isinstance(X, pd.DataFrame) else np.asarray(X)
        np.testing.assert_array_equal(forest.apply(Xa), sk_leaves(model, Xa))
        if isinstance(model, E.IsolationForest):
            score = forest.schema.transform(forest.evaluate(Xa))
            np.testing.assert_allclose(score, model.score_samples(Xa), rtol=RTOL, atol=0)
            np.testing.assert_array_equal(forest.predict(Xa), model.predict(Xa))
            return
        np.testing.assert_array_equal(forest.evaluate(Xa), sk_raw(model, Xa))  # bit for bit
        if is_classifier(model):
            proba = model.predict_proba(Xa)
            np.testing.assert_allclose(forest.predict_proba(Xa), proba, rtol=RTOL, atol=1e-300)
            # schema.decision follows each estimator's rule (argmax of proba, raw >= 0, raw > 0),
            # so labels agree even where rounding makes the top probabilities tie
            np.testing.assert_array_equal(forest.predict(Xa), model.predict(Xa))
        else:
            np.testing.assert_allclose(forest.predict(Xa), model.predict(Xa), rtol=RTOL, atol=1e-300)


def boundary_rows(forest: Forest, background: np.ndarray, seed: int = 0) -> np.ndarray:
    """For every distinct (feature, threshold): rows at t, at float32(t), and one ulp either side in both types."""
    rng = np.random.default_rng(seed)
    internal = (forest.left >= 0) & ~forest.is_categorical
    pairs = np.unique(np.stack([forest.feature[internal], forest.threshold[internal]], axis=1), axis=0)
    f = pairs[:, 0].astype(np.int64)
    t = pairs[:, 1]
    t32 = t.astype(np.float32)
    with np.errstate(over="ignore"):
        probes = np.stack([
            t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf),
            t32.astype(np.float64), np.nextafter(t32, np.float32(np.inf)).astype(np.float64),
            np.nextafter(t32, np.float32(-np.inf)).astype(np.float64)], axis=1)
    rows = background[rng.integers(0, len(background), size=probes.size)].copy()
    rows[np.arange(probes.size), np.repeat(f, probes.shape[1])] = probes.reshape(-1)
    if forest.schema.input_dtype == "float32":  # sklearn rejects values that overflow float32
        with np.errstate(over="ignore"):
            rows = rows[np.isfinite(rows.astype(np.float32)).all(axis=1) | np.isnan(rows).any(axis=1)]
    return rows


# -- every estimator on real data --------------------------------------------------------------

CLASSIFIERS = {
    "dt": lambda s: T.DecisionTreeClassifier(max_depth=8, random_state=s),
    "rf": lambda s: E.RandomForestClassifier(n_estimators=12, max_depth=8, random_state=s),
    "et": lambda s: E.ExtraTreesClassifier(n_estimators=12, max_depth=8, random_state=s),
    "gb": lambda s: E.GradientBoostingClassifier(n_estimators=12, max_depth=3, random_state=s),
    "hgb": lambda s: E.HistGradientBoostingClassifier(max_iter=12, max_leaf_nodes=15, random_state=s),
}
REGRESSORS = {
    "dt": lambda s: T.DecisionTreeRegressor(max_depth=8, random_state=s),
    "rf": lambda s: E.RandomForestRegressor(n_estimators=12, max_depth=8, random_state=s),
    "et": lambda s: E.ExtraTreesRegressor(n_estimators=12, max_depth=8, random_state=s),
    "gb": lambda s: E.GradientBoostingRegressor(n_estimators=12, max_depth=3, random_state=s),
    "hgb": lambda s: E.HistGradientBoostingRegressor(max_iter=12, max_leaf_nodes=15, random_state=s),
}


@pytest.mark.parametrize("dataset", ["breast_cancer", "wine", "iris", "adult", "compas"])
@pytest.mark.parametrize("kind", sorted(CLASSIFIERS))
def test_classifiers_on_real_data(kind: str, dataset: str) -> None:
    X, y = data(dataset)
    model = CLASSIFIERS[kind](0).fit(X, y)
    forest = from_sklearn(model)
    n_classes = len(np.unique(y))
    assert forest.schema.classes == tuple(model.classes_.tolist())
    assert forest.schema.task == (Task.BINARY if n_classes == 2 else Task.MULTICLASS)
    assert forest.schema.input_dtype == ("float64" if kind == "hgb" else "float32")
    assert_matches(model, forest, X)
    assert_matches(model, forest, boundary_rows(forest, X))


@pytest.mark.parametrize("dataset", ["diabetes", "adult"])
@pytest.mark.parametrize("kind", sorted(REGRESSORS))
def test_regressors_on_real_data(kind: str, dataset: str) -> None:
    X, y = data(dataset)
    model = REGRESSORS[kind](0).fit(X, y.astype(np.float64))
    forest = from_sklearn(model)
    assert forest.schema.task == Task.REGRESSION
    assert_matches(model, forest, X)
    assert_matches(model, forest, boundary_rows(forest, X))


@pytest.mark.parametrize("max_features", [1.0, 0.5])
@pytest.mark.parametrize("dataset", ["breast_cancer", "adult"])
def test_isolation_forest(dataset: str, max_features: float) -> None:
    X, _ = data(dataset)
    model = E.IsolationForest(n_estimators=12, max_features=max_features, random_state=0).fit(X)
    forest = from_sklearn(model)
    s = forest.schema
    assert (s.task, s.post_transform, s.average) == (Task.ANOMALY, PostTransform.ISOLATION, True)
    assert s.isolation_offset == model.offset_
    assert_matches(model, forest, X)
    assert_matches(model, forest, boundary_rows(forest, X))
    # decision_function = score_samples - offset_
    got = forest.schema.transform(forest.evaluate(X)) - s.isolation_offset
    np.testing.assert_allclose(got, model.decision_function(X), rtol=1e-9, atol=1e-15)


def test_isolation_forest_contamination_and_nan() -> None:
    X, _ = data("wine")
    model = E.IsolationForest(n_estimators=20, contamination=0.1, max_samples=64, random_state=3).fit(X)
    forest = from_sklearn(model)
    assert forest.schema.isolation_offset != -0.5
    assert_matches(model, forest, np.vstack([X, _with_nan(X, 0.3)]))


# -- missing values ------------------------------------------------------------------------------


@pytest.mark.parametrize("factory", [
    lambda: T.DecisionTreeClassifier(max_depth=10, random_state=0),
    lambda: E.RandomForestClassifier(n_estimators=10, max_depth=10, random_state=0),
    lambda: E.ExtraTreesClassifier(n_estimators=10, max_depth=10, random_state=0),
    lambda: E.RandomForestRegressor(n_estimators=10, max_depth=10, random_state=0),
    lambda: E.HistGradientBoostingClassifier(max_iter=15, random_state=0),
    lambda: E.HistGradientBoostingRegressor(max_iter=15, random_state=0),
], ids=["dt", "rf", "et", "rf-reg", "hgb", "hgb-reg"])
def test_models_trained_with_nan(factory) -> None:
    X, y = data("adult")
    Xn = _with_nan(X)
    model = factory().fit(Xn, y)
    forest = from_sklearn(model)
    assert forest.schema.allow_nan
    assert forest.missing_left.any() and not forest.missing_left.all()
    all_nan = np.full((3, X.shape[1]), np.nan)
    assert_matches(model, forest, np.vstack([Xn, _with_nan(X, 0.5, seed=7), all_nan]))


def test_hgb_accepts_infinity_like_sklearn() -> None:
    X, y = data("diabetes")
    model = E.HistGradientBoostingRegressor(max_iter=10, random_state=0).fit(X, y)
    forest = from_sklearn(model)
    assert forest.schema.allow_inf
    R = np.repeat(X[:4], X.shape[1], axis=0)
    R[np.arange(len(R)), np.tile(np.arange(X.shape[1]), 4)] = np.tile([np.inf, -np.inf], len(R) // 2)
    assert_matches(model, forest, R)


# -- HistGradientBoosting native categorical splits ------------------------------------------


def _adult_categorical() -> tuple[np.ndarray, np.ndarray, list[int]]:
    ds = lumber.datasets.load("adult")
    X, y = data("adult")
    cats = [i for i, f in enumerate(ds.features) if f.kind == FeatureKind.CATEGORICAL]
    return X, y, cats


def _category_probes(X: np.ndarray, cats: list[int]) -> np.ndarray:
    probes = [np.nan, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 7.0, 7.25, 8.0, 13.0, 14.0, 15.0,
              255.0, 256.0, 257.0, 1e6, 2.0**32, 1e20]
    rows = np.repeat(X[: len(probes)], len(cats), axis=0)
    for j, c in enumerate(cats):
        rows[j * len(probes):(j + 1) * len(probes), c] = probes
    return rows


@pytest.mark.parametrize("classifier", [True, False])
def test_hgb_categorical_codes(classifier: bool) -> None:
    X, y, cats = _adult_categorical()
    Xn = _with_nan(X, 0.05)
    cls = E.HistGradientBoostingClassifier if classifier else E.HistGradientBoostingRegressor
    model = cls(max_iter=15, categorical_features=cats, random_state=0).fit(Xn, y)
    forest = from_sklearn(model)
    assert forest.is_categorical.any()
    assert forest.schema.category_rule == CategoryRule.SKLEARN
    assert [f.kind for f in forest.schema.features if f.kind == FeatureKind.CATEGORICAL] == [FeatureKind.CATEGORICAL] * 4
    # unseen, negative, non-integer, huge and NaN categories follow the missing direction
    assert_matches(model, forest, np.vstack([Xn, _category_probes(X, cats)]))
    # the encoder rejects infinity in a categorical column; the schema cannot say "only there"
    assert not forest.schema.allow_inf
    Xi = X[:3].copy()
    Xi[1, cats[0]] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        model.predict(Xi)
    with pytest.raises(InputDataError, match="infinite value"):
        forest.evaluate(Xi)


def test_hgb_categorical_multiclass_unseen_training_gaps() -> None:
    """Known categories {0, 2, 5, 9}: 1, 3 and 4 are unknown and must take the missing branch."""
    rng = np.random.default_rng(0)
    n = 1500
    c = rng.choice([0.0, 2.0, 5.0, 9.0], size=n)
    X = np.column_stack([c, rng.normal(size=n), rng.choice([1.0, 4.0, 6.0], size=n)])
    y = (np.isin(c, [2.0, 9.0]).astype(int) + (X[:, 1] > 0.3)) % 3
    model = E.HistGradientBoostingClassifier(max_iter=8, categorical_features=[0, 2], random_state=0).fit(X, y)
    forest = from_sklearn(model)
    probe = np.repeat(X[:14], 2, axis=0)
    probe[:14, 0] = [np.nan, -2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 2.5]
    probe[14:, 2] = [np.nan, -2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 4.0000001]
    assert_matches(model, forest, np.vstack([X, probe]))


def test_hgb_categorical_from_pandas_dtype() -> None:
    X, y, cats = _adult_categorical()
    ds = lumber.datasets.load("adult")
    df = pd.DataFrame(X, columns=ds.feature_names)
    df["MaritalStatus"] = pd.Categorical(df["MaritalStatus"].map(lambda v: f"status-{int(v)}"))
    df["Occupation"] = pd.Categorical(df["Occupation"].astype(int))
    model = E.HistGradientBoostingClassifier(max_iter=10, categorical_features="from_dtype",
                                             random_state=0).fit(df, y)
    forest = from_sklearn(model)
    feats = {f.name: f for f in forest.schema.features}
    assert forest.schema.feature_names == ds.feature_names  # input order, not the encoder's
    assert feats["MaritalStatus"].kind == FeatureKind.CATEGORICAL
    assert feats["MaritalStatus"].categories == tuple(f"status-{i}" for i in range(1, 8))
    assert feats["Occupation"].kind == FeatureKind.CATEGORICAL and feats["Occupation"].categories is None
    assert forest.is_categorical.any()
    assert_matches(model, forest, df)
    odd = df.iloc[:6].copy()  # an unseen numeric category reaches the missing branch in both
    odd["Occupation"] = pd.Categorical([99, 0, 3, 14, 1, 2])
    assert_matches(model, forest, odd)


# -- model shapes and options -----------------------------------------------------------------


@pytest.mark.parametrize("factory", [
    lambda: T.DecisionTreeRegressor(max_depth=6, random_state=0),
    lambda: E.RandomForestRegressor(n_estimators=8, max_depth=6, random_state=0),
    lambda: E.ExtraTreesRegressor(n_estimators=8, max_depth=6, random_state=0),
], ids=["dt", "rf", "et"])
def test_multi_output_regression(factory) -> None:
    X, y = data("diabetes")
    Y = np.column_stack([y, np.log(y), X[:, 2] * 100])
    model = factory().fit(X, Y)
    forest = from_sklearn(model)
    assert forest.n_outputs == 3 and (forest.tree_output == -1).all()
    assert_matches(model, forest, X)


@pytest.mark.parametrize("model", [
    E.GradientBoostingClassifier(n_estimators=10, loss="exponential", random_state=0),
    E.GradientBoostingClassifier(n_estimators=10, init="zero", random_state=0),
    E.GradientBoostingClassifier(n_estimators=10, init=__import__("sklearn.dummy").dummy.DummyClassifier(
        strategy="most_frequent"), random_state=0),
    E.GradientBoostingRegressor(n_estimators=10, loss="huber", subsample=0.7, random_state=0),
    E.GradientBoostingRegressor(n_estimators=10, loss="quantile", alpha=0.8, random_state=0),
    E.GradientBoostingRegressor(n_estimators=200, n_iter_no_change=2, validation_fraction=0.2, random_state=0),
    E.HistGradientBoostingRegressor(max_iter=10, loss="poisson", random_state=0),
    E.HistGradientBoostingRegressor(max_iter=10, loss="gamma", random_state=0),
    E.HistGradientBoostingRegressor(max_iter=10, loss="quantile", quantile=0.3, random_state=0),
], ids=["gb-exp", "gb-zero", "gb-dummy", "gb-huber", "gb-quantile", "gb-early-stop", "hgb-poisson",
        "hgb-gamma", "hgb-quantile"])
def test_losses_and_init(model) -> None:
    X, y = data("breast_cancer") if is_classifier(model) else data("diabetes")
    model.fit(X, y)
    forest = from_sklearn(model)
    if getattr(model, "loss", "") == "exponential":
        assert forest.schema.sigmoid_alpha == 2.0
    if getattr(model, "loss", "") in ("poisson", "gamma"):
        assert forest.schema.post_transform == PostTransform.EXP
    assert_matches(model, forest, X)


def test_gradient_boosting_leaves_hold_learning_rate_times_value() -> None:
    X, y = data("diabetes")
    model = E.GradientBoostingRegressor(n_estimators=3, learning_rate=0.3, random_state=0).fit(X, y)
    forest = from_sklearn(model)
    tree = model.estimators_[1, 0].tree_
    sl = forest.tree_slice(1)
    leaf = tree.children_left == -1
    np.testing.assert_array_equal(forest.value[sl, 0][leaf], 0.3 * tree.value[leaf, 0, 0])
    assert forest.schema.base_score == (float(model.init_.constant_[0, 0]),)


def test_feature_names_from_dataframe_and_override() -> None:
    ds = lumber.datasets.load("compas")
    X, y = data("compas")
    df = pd.DataFrame(X, columns=ds.feature_names)
    model = E.RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(df, y)
    forest = from_sklearn(model)
    assert forest.schema.feature_names == ds.feature_names
    assert_matches(model, forest, df)
    assert forest.evaluate(df[ds.feature_names[::-1]]).tolist() == forest.evaluate(df).tolist()  # matched by name
    renamed = from_sklearn(model, feature_names=[f"c{i}" for i in range(5)])
    assert renamed.schema.feature_names == [f"c{i}" for i in range(5)]
    plain = from_sklearn(E.RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y))
    assert plain.schema.feature_names == [f"f{i}" for i in range(5)]


def test_source_and_content_hash() -> None:
    X, y = data("iris")
    a = E.RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
    fa = from_sklearn(a)
    src = fa.schema.source
    assert src["library"] == "scikit-learn" and src["model_type"] == "RandomForestClassifier"
    assert src["version"] == __import__("sklearn").__version__
    assert len(src["content_hash"]) == 64
    assert from_sklearn(pickle.loads(pickle.dumps(a))).schema.source["content_hash"] == src["content_hash"]
    b = E.RandomForestClassifier(n_estimators=5, random_state=1).fit(X, y)
    assert from_sklearn(b).schema.source["content_hash"] != src["content_hash"]


@pytest.mark.parametrize("kind", ["rf", "gb", "hgb-cat", "iforest"])
def test_save_load_round_trip(tmp_path, kind: str) -> None:
    X, y, cats = _adult_categorical()
    model = {
        "rf": lambda: E.RandomForestClassifier(n_estimators=6, max_depth=6, random_state=0).fit(_with_nan(X), y),
        "gb": lambda: E.GradientBoostingRegressor(n_estimators=6, random_state=0).fit(X, y),
        "hgb-cat": lambda: E.HistGradientBoostingClassifier(max_iter=6, categorical_features=cats,
                                                            random_state=0).fit(X, y),
        "iforest": lambda: E.IsolationForest(n_estimators=6, max_features=0.6, random_state=0).fit(X),
    }[kind]()
    forest = from_sklearn(model)
    path = tmp_path / "model.lumber"
    forest.save(path)
    back = Forest.load(path)
    assert back.schema == forest.schema
    for name, _ in Forest.ARRAY_FIELDS:
        a, b = getattr(forest, name), getattr(back, name)
        assert (a is None and b is None) or np.array_equal(a, b, equal_nan=True), name
    rows = np.vstack([X[:300], _category_probes(X, cats)])
    if kind == "gb":
        rows = X[:300]
    np.testing.assert_array_equal(back.evaluate(rows), forest.evaluate(rows))
    assert_matches(model, back, rows)


def test_load_dispatches_objects_and_pickles(tmp_path) -> None:
    X, y = data("wine")
    model = E.ExtraTreesClassifier(n_estimators=4, random_state=0).fit(X, y)
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(model))
    for forest in (load(model), load(path, trust_pickle=True)):
        assert_matches(model, forest, X)


# -- hypothesis: random small fitted models ------------------------------------------------------

KINDS = ["dt", "rf", "et", "gb", "hgb", "iforest"]


@settings(max_examples=12 if settings().max_examples <= 25 else settings().max_examples, deadline=None)
@example(kind="gb", classify=True, n_classes=3, depth=3, n_estimators=1, seed=3, nan=False)  # softmax tie
@given(kind=st.sampled_from(KINDS), classify=st.booleans(), n_classes=st.integers(2, 3),
       depth=st.integers(1, 6), n_estimators=st.integers(1, 6), seed=st.integers(0, 2**16),
       nan=st.booleans())
def test_random_fitted_models(kind: str, classify: bool, n_classes: int, depth: int, n_estimators: int,
                              seed: int, nan: bool) -> None:
    if classify:
        X, y = skd.make_classification(n_samples=160, n_features=5, n_informative=3, n_classes=n_classes,
                                       random_state=seed)
    else:
        X, y = skd.make_regression(n_samples=160, n_features=5, noise=1.0, random_state=seed)
    X = np.round(X, 2)  # ties in the data give thresholds at float32 midpoints
    if nan and kind in ("dt", "rf", "et", "hgb", "iforest"):
        X = _with_nan(X, 0.1, seed)
    table = CLASSIFIERS if classify else REGRESSORS
    if kind == "iforest":
        model = E.IsolationForest(n_estimators=n_estimators, max_samples=min(160, 2 ** (depth + 2)),
                                  max_features=0.6, random_state=seed).fit(X)
    else:
        model = table[kind](seed)
        model.set_params(**({"max_depth": depth} if kind != "hgb" else {"max_depth": depth + 1}))
        if kind in ("rf", "et", "gb"):
            model.set_params(n_estimators=n_estimators)
        if kind == "hgb":
            model.set_params(max_iter=n_estimators)
        model.fit(X, y)
    forest = from_sklearn(model)
    assert_matches(model, forest, np.vstack([X, boundary_rows(forest, np.nan_to_num(X))]))


# -- bad input -------------------------------------------------------------------------------------


def test_unfitted_model() -> None:
    with pytest.raises(ModelFormatError, match="(?s)RandomForestClassifier is not fitted.*call fit"):
        from_sklearn(E.RandomForestClassifier())


@pytest.mark.parametrize("model", [
    E.BaggingRegressor(n_estimators=3), __import__("sklearn.neighbors").
    neighbors.KNeighborsClassifier()], ids=["bagging", "knn"])
def test_unsupported_estimators(model) -> None:
    X, y = data("iris")
    model.fit(X, y)
    with pytest.raises(UnsupportedModelError, match=f"(?s)cannot lower a .*{type(model).__name__}.*supported estimators"):
        from_sklearn(model)


def test_pipeline_is_rejected_with_a_hint() -> None:
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = data("iris")
    pipe = make_pipeline(StandardScaler(), T.DecisionTreeClassifier(random_state=0)).fit(X, y)
    with pytest.raises(UnsupportedModelError, match=r"(?s)Pipeline.*last step: DecisionTreeClassifier.*pipeline\[-1\]"):
        from_sklearn(pipe)
    with pytest.raises(UnsupportedModelError, match="Pipeline"):
        load(pipe)


def test_multi_output_classifier_rejected() -> None:
    X, y = data("iris")
    model = T.DecisionTreeClassifier().fit(X, np.column_stack([y, y % 2]))
    with pytest.raises(UnsupportedModelError, match="multi-output classifiers"):
        from_sklearn(model)


def test_input_dependent_gb_init_rejected() -> None:
    X, y = data("diabetes")
    model = E.GradientBoostingRegressor(n_estimators=3, init=T.DecisionTreeRegressor(max_depth=2)).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="(?s)init estimator DecisionTreeRegressor.*init=None"):
        from_sklearn(model)


def test_bad_feature_names() -> None:
    X, y = data("iris")
    model = T.DecisionTreeClassifier(random_state=0).fit(X, y)
    with pytest.raises(InputDataError, match="feature_names has 2 names but the model reads 4"):
        from_sklearn(model, feature_names=["a", "b"])
    with pytest.raises(InputDataError, match="duplicate feature names: a"):
        from_sklearn(model, feature_names=["a", "a", "b", "c"])


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_bad_data_at_evaluate() -> None:
    X, y = data("breast_cancer")
    gb = from_sklearn(E.GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, y))
    with pytest.raises(InputDataError, match="data has 29 columns but the model reads 30 features"):
        gb.evaluate(X[:, :-1])
    Xn = X[:5].copy()
    Xn[2, 4] = np.nan
    with pytest.raises(InputDataError, match=r"(?s)NaN in column 'f4' \(row 3\).*scikit-learn rejects NaN"):
        gb.evaluate(Xn)
    rf = from_sklearn(E.RandomForestRegressor(n_estimators=2, random_state=0).fit(X, y))
    rf.evaluate(Xn)  # random forests route NaN
    Xi = X[:5].copy()
    Xi[1, 0] = 1e39  # finite in float64, infinite in float32: sklearn rejects it too
    with pytest.raises(InputDataError, match="infinite value in column 'f0' .*after rounding to float32"):
        rf.evaluate(Xi)
    with pytest.raises(ValueError):
        E.RandomForestRegressor(n_estimators=2, random_state=0).fit(X, y).predict(Xi)


def test_string_class_labels() -> None:
    X, y = data("iris")
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    model = E.RandomForestClassifier(n_estimators=4, random_state=0).fit(X, labels)
    forest = from_sklearn(model)
    assert forest.schema.classes == ("setosa", "versicolor", "virginica")
    assert_matches(model, forest, X)


def test_unknown_text_category_is_an_input_error() -> None:
    """sklearn sends an unseen text label to the missing branch; lumber's DataFrame reader refuses it."""
    X, y, _ = _adult_categorical()
    df = pd.DataFrame({"m": pd.Categorical([f"s{int(v)}" for v in X[:, 5]]), "age": X[:, 0]})
    model = E.HistGradientBoostingClassifier(max_iter=3, categorical_features="from_dtype").fit(df, y)
    forest = from_sklearn(model)
    assert_matches(model, forest, df)
    with pytest.raises(InputDataError, match="(?s)column 'm' holds unknown category 'nope'.*known categories: s1"):
        forest.evaluate(pd.DataFrame({"m": ["nope"], "age": [30.0]}))


@pytest.mark.parametrize("make, match", [
    (lambda X, y: T.DecisionTreeClassifier().fit(X, np.zeros(len(X), dtype=int)), "fitted on a single class"),
    (lambda X, y: E.IsolationForest(n_estimators=2, max_samples=1).fit(X), "max_samples_=1 isolates nothing"),
], ids=["one-class", "iforest-one-sample"])
def test_degenerate_models_rejected(make, match: str) -> None:
    X, y = data("iris")
    with pytest.raises(UnsupportedModelError, match=match):
        from_sklearn(make(X, y))


def test_digest_is_content_hash_of_the_canonical_bytes() -> None:
    from lumber.compiler.frontends import content_hash
    from lumber.compiler.frontends.sklearn import _Digest

    model = T.DecisionTreeRegressor()
    a, b = np.arange(5, dtype=np.int64), np.array([0.5, np.nan])
    d = _Digest(model)
    d.add(a, b)
    want = b"DecisionTreeRegressor" + b"<i8(5,)" + a.tobytes() + b"<f8(2,)" + b.tobytes()
    assert d.hexdigest() == content_hash(want)
