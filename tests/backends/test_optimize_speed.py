"""``lumber.compile_fastest`` / ``--optimize speed``: the form that is faster on the caller's rows is kept,
and the report says what was timed on what. The timer is injected, so the choice is structural, never
a race between two timings in a unit test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from c_tools import needs_cc

import lumber
from lumber.compiler.api.compile import load_compiled
from lumber.compiler.speed import compile_fastest, describe_choice
from lumber.runtime.predictors import CPredictor, Predictor


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, np.ndarray]:
    """LightGBM with native categories and NaN in its rows, saved for the CLI."""
    import lightgbm as lgb

    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 5))
    X[:, 4] = rng.integers(0, 6, 600)
    y = (X[:, 0] + (X[:, 4] % 2) + 0.3 * rng.normal(size=600) > 0.5).astype(int)
    X[rng.random(X.shape) < 0.05] = np.nan
    bst = lgb.train({"objective": "binary", "num_leaves": 7, "max_depth": 3, "verbose": -1, "num_threads": 1,
                     "seed": 0, "max_cat_to_onehot": 1, "min_data_per_group": 5}, lgb.Dataset(X, y, categorical_feature=[4]),
                    15)
    path = tmp_path_factory.mktemp("fastest") / "model.txt"
    bst.save_model(str(path))
    return bst, path, X


def _form(p: Predictor) -> str:
    meta = p.library.metadata if isinstance(p, CPredictor) else {}
    return "oblivious" if meta.get("form") == "oblivious" else "forest"


def faster(form: str) -> Any:
    """A timer under which ``form`` takes 1 s and every other form 2 s."""
    return lambda p, X: 1.0 if _form(p) == form else 2.0


@needs_cc
@pytest.mark.parametrize("wins", ["oblivious", "forest"])
def test_the_faster_form_on_the_sample_is_kept(model: tuple[Any, Path, np.ndarray], tmp_path: Path, wins: str) -> None:
    bst, _, X = model
    forest = lumber.load(bst)
    pred = compile_fastest(forest, lumber.FastestOptions(), sample=X[:200], sample_source="the caller's rows",
                           path=tmp_path / "m.so", timer=faster(wins))
    rep = pred.report
    assert _form(pred) == wins
    assert rep["chosen"] == ("oblivious" if wins == "oblivious" else rep["chosen"]) and rep["chosen"] in rep["forms"]
    if wins == "forest":
        assert rep["chosen"] in ("forest", "forest-values")
    assert rep["forms"]["oblivious"]["agrees_with_forest"] and "tables" in rep["forms"]["oblivious"]
    on = rep["timed_on"]
    assert on["rows"] == 200 and on["source"] == "the caller's rows" and on["tiled"] and on["timed_rows"] >= 200
    assert "timed on 200 rows of the caller's rows" in describe_choice(rep)
    # exact whichever form, and the saved library is the chosen one
    np.testing.assert_allclose(pred.predict_raw(X), bst.predict(X, raw_score=True), rtol=0, atol=1e-12 * 10)
    back = load_compiled(tmp_path / "m.so", bst)
    np.testing.assert_array_equal(back.predict_raw(X), pred.predict_raw(X))
    assert _form(back) == wins
