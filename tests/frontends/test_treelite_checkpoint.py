"""treelite checkpoints (``Model.serialize`` files) against treelite's reference predictor GTIL.

The file is read by treelite in a child process (its reader crashes the process
on edited bytes), so a damaged checkpoint is one clear error naming the file,
never a crash of the caller.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import treelite
import treelite.gtil as gtil
import treelite.sklearn  # noqa: E402, F811

import lumber  # noqa: E402
from lumber.compiler.cli import main  # noqa: E402
from lumber.compiler.frontends import sniff  # noqa: E402
from lumber.compiler.frontends.treelite import from_treelite  # noqa: E402
from lumber.compiler.frontends.treelite_checkpoint import load_treelite_checkpoint  # noqa: E402
from lumber.ir import LumberError, ModelFormatError, UnsupportedModelError  # noqa: E402

from frontend_smoke import assert_backends_accept, assert_explainers_accept  # noqa: E402


def _data() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :8].copy()
    X[np.random.default_rng(1).random(X.shape) < 0.08] = np.nan
    return X, y


def _models() -> dict[str, Any]:
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    X, y = _data()
    Xc = X.copy()
    Xc[:, 0] = np.where(np.isnan(X[:, 0]), np.nan, np.floor(np.nan_to_num(X[:, 0]) % 6))
    lg = lgb.train({"objective": "binary", "verbose": -1, "num_leaves": 8, "min_data_in_leaf": 5},
                   lgb.Dataset(Xc, y, categorical_feature=[0]), num_boost_round=6)
    xg = xgb.XGBClassifier(n_estimators=6, max_depth=3, n_jobs=1).fit(X, y)
    rf = RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X, y)
    return {"lightgbm-categorical": (treelite.frontend.from_lightgbm(lg), Xc),
            "xgboost": (treelite.frontend.from_xgboost(xg.get_booster()), X),
            "sklearn-rf": (treelite.sklearn.import_model(rf), X)}


@pytest.fixture(scope="module")
def models() -> dict[str, Any]:
    return _models()


@pytest.mark.parametrize("name", ["lightgbm-categorical", "xgboost", "sklearn-rf"])
def test_checkpoint_matches_gtil(models: dict[str, Any], name: str, tmp_path: Path) -> None:
    model, X = models[name]
    p = tmp_path / "model.tl"
    model.serialize(str(p))
    assert sniff(p.read_bytes()) == "treelite-checkpoint"
    forest = lumber.load(p)
    np.testing.assert_array_equal(forest.apply(X), gtil.predict_leaf(model, X, nthread=1).astype(np.int64))
    want = gtil.predict(model, X, pred_margin=True, nthread=1).reshape(len(X), -1)
    got = forest.evaluate(X).reshape(want.shape)
    rtol = 2e-6 if want.dtype == np.float32 else 1e-12  # gtil adds base scores last (see docs/models.md)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())
    # the same Forest as from the in-memory model
    direct = from_treelite(model)
    np.testing.assert_array_equal(forest.evaluate(X), direct.evaluate(X))
    assert forest.schema.to_dict() == direct.schema.to_dict()


def test_options_pass_through(models: dict[str, Any], tmp_path: Path) -> None:
    model, _ = models["xgboost"]
    p = tmp_path / "m.tl"
    model.serialize(str(p))
    names = [f"c{i}" for i in range(8)]
    assert load_treelite_checkpoint(p, feature_names=names).schema.feature_names == names
    with pytest.raises(ModelFormatError, match="feature_names has 2 names"):
        load_treelite_checkpoint(p, feature_names=["a", "b"])
    with pytest.raises(UnsupportedModelError, match="unknown option.*frobnicate"):
        load_treelite_checkpoint(p, frobnicate=1)


def test_backends_and_explainers_accept_the_lowered_forest(models: dict[str, Any], tmp_path: Path) -> None:
    model, X = models["sklearn-rf"]
    p = tmp_path / "m.tl"
    model.serialize(str(p))
    forest = lumber.load(p)
    assert_backends_accept(forest, X)
    assert_explainers_accept(forest, np.nan_to_num(X))


def _good(models: dict[str, Any]) -> bytes:
    return models["sklearn-rf"][0].serialize_bytes()


BAD = {
    "truncated header": (lambda b: b[:15], ModelFormatError, "truncated treelite checkpoint"),
    "truncated": (lambda b: b[:len(b) // 2], ModelFormatError, "treelite"),
    "truncated near the end": (lambda b: b[:-3], ModelFormatError, "treelite"),
    "v3 header": (lambda b: (3).to_bytes(4, "little") + b[4:], UnsupportedModelError, "format v3"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_damaged_checkpoints(models: dict[str, Any], case: str, tmp_path: Path) -> None:
    make, error, pattern = BAD[case]
    p = tmp_path / "bad.tl"
    p.write_bytes(make(_good(models)))
    with pytest.raises(error, match="(?s)" + pattern) as info:
        lumber.load(p)
    assert "bad.tl" in str(info.value)


def test_edited_bytes_never_crash_the_caller(models: dict[str, Any], tmp_path: Path) -> None:
    """treelite segfaults or hangs on some of these in-process; through lumber each is an error or a model."""
    good = _good(models)
    rng = np.random.default_rng(3)
    X = _data()[0][:50]
    outcomes = set()
    for k in range(10):
        b = bytearray(good)
        for i in rng.integers(22, len(b), size=3):
            b[i] = int(rng.integers(0, 256))
        p = tmp_path / f"edit{k}.tl"
        p.write_bytes(bytes(b))
        try:
            f = lumber.load(p)
            f.evaluate(X)
            outcomes.add("loaded")
        except LumberError as exc:
            assert f"edit{k}.tl" in str(exc)
            outcomes.add("refused")
    assert outcomes


def test_cli_reports_a_damaged_checkpoint(models: dict[str, Any], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "cut.tl"
    p.write_bytes(_good(models)[:200])
    assert main(["inspect", str(p)]) == 2
    err = capsys.readouterr().err
    assert "cut.tl" in err and "Traceback" not in err
