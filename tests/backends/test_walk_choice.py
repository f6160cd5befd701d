"""``lumber.compile(model, "c", sample=rows)``: the walk timed on the user's rows, exact either way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from c_tools import needs_cc
from cases import CASES, corpus

import lumber
from lumber.compiler.api.compile import load_compiled
from lumber.compiler.walks import SAMPLE_MIN_ROWS, sample_matrix
from lumber.ir import CompileError, InputDataError

pytestmark = needs_cc


@pytest.mark.parametrize("case", ["numeric_nan", "categorical_lightgbm", "multiclass", "float32_average"])
def test_sample_times_both_walks_and_keeps_one_exactly(case: str, tmp_path: Path) -> None:
    forest = CASES[case]()
    X = corpus(forest)
    pred = lumber.compile(forest, target="c", sample=X, path=tmp_path / "m.so")
    walk = pred.report["walk"]
    assert set(walk["ns_per_row_tree"]) == {"binned", "code"}
    assert all(v > 0 for v in walk["ns_per_row_tree"].values())
    assert walk["chosen"] == pred.library.metadata["walk"]
    assert walk["chosen"] in ("code", "binned8", "binned16")
    assert f"{len(X)} sample rows, tiled to {SAMPLE_MIN_ROWS}" == walk["timed_on"]
    np.testing.assert_array_equal(pred.predict_raw(X), forest.evaluate(X))
    np.testing.assert_array_equal(np.array([pred.predict_row(x) for x in X]).reshape(len(X), -1),
                                  forest.evaluate(X).reshape(len(X), -1))
    again = load_compiled(tmp_path / "m.so", forest)
    assert again.library.metadata["walk"] == walk["chosen"]
    np.testing.assert_array_equal(again.predict_raw(X), forest.evaluate(X))


def test_explicit_walk_is_kept_and_not_timed() -> None:
    forest = CASES["numeric_nan"]()
    pred = lumber.compile(forest, target="c", sample=corpus(forest), options=lumber.COptions(walk="code"))
    assert "walk" not in pred.report and pred.library.metadata["walk"] == "code"
    pred = lumber.compile(forest, target="c")
    assert "walk" not in pred.report and pred.library.metadata["walk"].startswith("binned")


def test_bad_samples_are_clear_errors() -> None:
    forest = CASES["numeric_nan"]()
    with pytest.raises(InputDataError, match="columns"):
        lumber.compile(forest, target="c", sample=np.zeros((5, 7)))
    with pytest.raises(CompileError, match="sample has no rows"):
        lumber.compile(forest, target="c", sample=np.zeros((0, forest.n_features)))


def test_sample_is_tiled_or_cut() -> None:
    forest = CASES["numeric_nan"]()
    X, what = sample_matrix(forest, np.ones((3, forest.n_features)))
    assert X.shape == (SAMPLE_MIN_ROWS, forest.n_features) and what == f"3 sample rows, tiled to {SAMPLE_MIN_ROWS}"
    X, what = sample_matrix(forest, np.ones((70000, forest.n_features)))
    assert X.shape[0] == 65536 and what == "the first 65536 of 70000 sample rows"
