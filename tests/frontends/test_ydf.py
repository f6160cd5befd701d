"""YDF frontend: GBT and RF models (in memory and saved directories) against YDF's own predict.

YDF compares and sums in float32, so margins agree with ``predict`` (logits) to float32
rounding; leaf routing is checked through the per-tree margins of one-tree models.
Data: the bundled adult data set (categories as YDF's string labels, NaN injected in
numerical columns) and boundary rows on every threshold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

ydf = pytest.importorskip("ydf", reason="ydf comes with the test extra: pip install -e '.[test]'")

import lumber  # noqa: E402
from lumber.compiler.frontends.ydf import from_ydf, load_ydf_dir  # noqa: E402
from lumber.ir import FeatureKind, LumberError, ModelFormatError, PostTransform, Task  # noqa: E402

from frontend_smoke import assert_backends_accept, assert_explainers_accept  # noqa: E402

RTOL = 2e-6  # float32 sums
ALL_LABELS = {"min_vocab_frequency": 1}
"""YDF maps labels rarer than min_vocab_frequency to <OOD>; lumber knows only the dictionary's labels."""


def adult(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    ds = lumber.datasets.load("adult")
    X = ds.X.iloc[:n].copy()
    df = pd.DataFrame(index=X.index)
    for f in ds.features:
        col = X[f.name]
        if f.kind == FeatureKind.CATEGORICAL:
            labels = f.categories if f.categories is not None else range(int(col.max()) + 1)
            df[f.name] = [f"{f.name}={labels[int(c)]}" for c in col]
        else:
            df[f.name] = col.astype(np.float64)
    rng = np.random.default_rng(seed)
    for c in ("Age", "HoursPerWeek"):
        if c in df:
            df.loc[rng.random(n) < 0.1, c] = np.nan
    df["Flag"] = rng.random(n) < 0.4  # a boolean feature
    df["label"] = ds.y[:n]
    return df


def features_only(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["label"])


def boundary(forest: lumber.Forest, df: pd.DataFrame) -> pd.DataFrame:
    """Rows whose numerical value sits on a threshold, one float32 step either side, or is NaN."""
    X = features_only(df)
    rows = []
    rng = np.random.default_rng(0)
    for i in np.flatnonzero(~forest.is_leaf & ~forest.is_categorical)[:150]:
        name = forest.schema.features[int(forest.feature[i])].name
        if forest.schema.features[int(forest.feature[i])].kind != FeatureKind.NUMERICAL:
            continue
        t = np.float32(forest.threshold[i])
        for v in (t, np.nextafter(t, np.float32(np.inf)), np.nextafter(t, np.float32(np.inf)) + np.float32(0),
                  np.float32(np.nan)):
            r = X.iloc[[int(rng.integers(len(X)))]].copy()
            r[name] = float(v) if np.isfinite(v) else np.nan
            rows.append(r)
    return pd.concat([X] + rows, ignore_index=True) if rows else X


def assert_matches(model: Any, df: pd.DataFrame) -> lumber.Forest:
    f = from_ydf(model)
    X = boundary(f, df)
    ours = f.predict_proba(X) if f.schema.task != Task.REGRESSION else f.predict(X)
    theirs = np.asarray(model.predict(X), dtype=np.float64)
    if f.schema.task == Task.BINARY:
        ours = ours[:, 1]
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=1e-6)
    if isinstance(model, ydf.GradientBoostedTreesModel) and f.schema.task != Task.REGRESSION:  # raw margins too
        model.set_output_logits(True)
        try:
            logits = np.asarray(model.predict(X), dtype=np.float64)
        finally:
            model.set_output_logits(False)
        np.testing.assert_allclose(f.evaluate(X), logits.reshape(f.evaluate(X).shape), rtol=RTOL,
                                   atol=1e-6 * max(1.0, float(np.abs(logits).max())))
    return f


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    return adult()


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
@pytest.mark.parametrize("learner", ["gbt", "rf"])
def test_models_match_ydf_predict(data: pd.DataFrame, learner: str, task: str) -> None:
    df = data.copy()
    kw: dict[str, Any] = {}
    if task == "multiclass":
        df["label"] = (df["label"] + (df["EducationNumber"] > 10)).astype(int)
    if task == "regression":
        df["label"] = df["EducationNumber"] * 1.5 + df["label"]
        df = df.drop(columns=["EducationNumber"])
        kw["task"] = ydf.Task.REGRESSION
    cls = ydf.GradientBoostedTreesLearner if learner == "gbt" else ydf.RandomForestLearner
    extra = {"winner_take_all": task != "regression"} if learner == "rf" else {}
    model = cls(label="label", num_trees=8, max_depth=5, **ALL_LABELS, **kw, **extra).train(df, verbose=0)
    f = assert_matches(model, df)
    assert f.schema.input_dtype == "float32"
    assert {ft.kind for ft in f.schema.features} >= {FeatureKind.CATEGORICAL, FeatureKind.BINARY}
    if learner == "gbt" and task == "binary":
        assert f.schema.post_transform == PostTransform.SIGMOID
    if learner == "rf":
        assert f.schema.average


def test_rf_probability_averaging_without_winner_take_all(data: pd.DataFrame) -> None:
    model = ydf.RandomForestLearner(label="label", num_trees=5, max_depth=4, winner_take_all=False, **ALL_LABELS).train(
        data, verbose=0)
    assert_matches(model, data)


def test_saved_directory_is_sniffed_by_layout(data: pd.DataFrame, tmp_path: Path) -> None:
    model = ydf.GradientBoostedTreesLearner(label="label", num_trees=4, max_depth=3, **ALL_LABELS).train(data, verbose=0)
    d = tmp_path / "model"
    model.save(str(d))
    f = lumber.load(d)
    g = from_ydf(model)
    X = features_only(data)
    np.testing.assert_array_equal(f.evaluate(X), g.evaluate(X))
    assert f.schema.feature_names == g.schema.feature_names


def test_damaged_directories(data: pd.DataFrame, tmp_path: Path) -> None:
    model = ydf.GradientBoostedTreesLearner(label="label", num_trees=3, max_depth=3).train(data, verbose=0)
    d = tmp_path / "m"
    model.save(str(d))
    (d / "header.pb").write_bytes((d / "header.pb").read_bytes()[:10])
    with pytest.raises(ModelFormatError, match=r"(?s)m: YDF cannot load the model directory.*save the model again"):
        lumber.load(d)
    e = tmp_path / "e"
    model.save(str(e))
    nodes = next(e.glob("nodes-*"))
    nodes.write_bytes(nodes.read_bytes()[:len(nodes.read_bytes()) // 2])
    with pytest.raises(ModelFormatError, match="e: YDF cannot load"):
        lumber.load(e)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelFormatError, match="is a directory"):
        lumber.load(tmp_path / "empty")
    with pytest.raises(ModelFormatError, match="not a YDF model directory"):
        load_ydf_dir(tmp_path / "empty")


def test_edited_node_bytes_give_errors_or_models(data: pd.DataFrame, tmp_path: Path) -> None:
    model = ydf.GradientBoostedTreesLearner(label="label", num_trees=3, max_depth=3).train(data, verbose=0)
    rng = np.random.default_rng(0)
    X = features_only(data).iloc[:20]
    for k in range(8):
        d = tmp_path / f"m{k}"
        model.save(str(d))
        nodes = next(d.glob("nodes-*"))
        b = bytearray(nodes.read_bytes())
        for i in rng.integers(0, len(b), size=3):
            b[i] = int(rng.integers(0, 256))
        nodes.write_bytes(bytes(b))
        try:
            lumber.load(d).evaluate(X)
        except LumberError as exc:
            assert f"m{k}" in str(exc)


def test_backends_and_explainers_accept_the_lowered_forest(data: pd.DataFrame) -> None:
    df = data[["Age", "HoursPerWeek", "EducationNumber", "Sex", "Flag", "label"]]
    model = ydf.GradientBoostedTreesLearner(label="label", num_trees=5, max_depth=3, **ALL_LABELS).train(df, verbose=0)
    f = from_ydf(model)
    X = f.prepare_input(features_only(df))
    assert_backends_accept(f, X)
    rf = from_ydf(ydf.RandomForestLearner(label="label", num_trees=3, max_depth=3, **ALL_LABELS).train(df, verbose=0))
    assert_explainers_accept(rf, np.nan_to_num(X[:300]))


def test_numeric_looking_labels_bind_by_label_and_unknown_ones_go_to_ood() -> None:
    """Labels "1".."4" whose dictionary order differs from their values, plus labels YDF never saw ("9", "0"):
    lumber reads labels, never codes, and sends unknown labels to <OOD> (code 0) as YDF does."""
    rng = np.random.default_rng(0)
    n = 600
    c = rng.choice(["1", "2", "3", "4"], size=n, p=[0.25, 0.3, 0.4, 0.05])
    x = rng.random(n)
    df = pd.DataFrame({"c": c, "x": x, "label": ((c == "2") | (c == "4") | (x > 0.7)).astype(int)})
    model = ydf.GradientBoostedTreesLearner(label="label", num_trees=6, max_depth=3,
                                            min_vocab_frequency=1).train(df, verbose=0)
    f = from_ydf(model)
    cats = f.schema.features[0].categories
    assert cats[0] == "<OOD>" and list(cats[1:]) != ["1", "2", "3", "4"]  # codes are not the labels' values
    probe = pd.DataFrame({"c": ["1", "2", "3", "4", "9", "0", "<OOD>", None] * 2, "x": [0.2] * 8 + [0.9] * 8})
    theirs = np.asarray(model.predict(probe), dtype=np.float64)
    np.testing.assert_allclose(f.predict_proba(probe)[:, 1], theirs, rtol=RTOL, atol=1e-6)
    as_numbers = probe.assign(c=pd.to_numeric(probe["c"], errors="coerce"))  # a CSV read 1, 2, ... as numbers
    keep = probe["c"].ne("<OOD>").to_numpy()
    np.testing.assert_allclose(f.predict_proba(as_numbers[keep])[:, 1], theirs[keep], rtol=RTOL, atol=1e-6)
