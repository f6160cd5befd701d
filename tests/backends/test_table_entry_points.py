"""Every re-composition strategy through every way of making tables: the option must reach the pass.

``to_tables``, ``lumber.compile(target="table"/"table-c")``
and ``lumber compile --emit table/table-c --strategy``: each must build the tables with the strategy
it was given (the ``oblivious`` pass reports it) and reproduce LightGBM's margins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from c_tools import needs_cc

import lumber
from lumber.compiler.tables import to_tables
from lumber.compiler.cli import main
from lumber.compiler.targets import get_target
from lumber.passes.transforms.recompose_oblivious import STRATEGIES


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, np.ndarray]:
    import lightgbm as lgb
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    X = X.copy()
    X[np.random.default_rng(2).random(X.shape) < 0.05] = np.nan
    bst = lgb.train({"objective": "binary", "num_leaves": 6, "max_depth": 3, "verbose": -1, "num_threads": 1,
                     "seed": 0}, lgb.Dataset(X, y), 8)
    path = tmp_path_factory.mktemp("strategies") / "model.txt"
    bst.save_model(str(path))
    return bst, path, X


def used(stats: dict[str, Any]) -> str:
    assert stats["method"] == "re-composition", stats
    return str(stats["recompose"]["strategy"])


def same(got: np.ndarray, bst: Any, X: np.ndarray) -> None:
    np.testing.assert_allclose(got, bst.predict(X, raw_score=True), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_strategy_reaches_the_pass_in_python_entry_points(model: tuple[Any, Path, np.ndarray], strategy: str) -> None:
    bst, _, X = model
    stats: dict[str, Any] = {}
    ens = to_tables(lumber.load(bst), strategy=strategy, stats=stats)
    assert used(stats) == strategy
    same(ens.evaluate(X), bst, X)
    pred = lumber.compile(bst, target="table", options=lumber.TableOptions(strategy=strategy))
    assert used(pred.report["tables"]) == strategy
    same(pred.predict_raw(X), bst, X)


@needs_cc
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_strategy_reaches_the_pass_in_c_entry_points(model: tuple[Any, Path, np.ndarray], strategy: str) -> None:
    bst, _, X = model
    pred = lumber.compile(bst, target="table-c", options=lumber.TableCOptions(strategy=strategy))
    same(pred.predict_raw(X), bst, X)
    assert used(pred.report["tables"]) == strategy and pred.report["tables"]["build_seconds"] > 0


@pytest.mark.parametrize("emit", ["table", "table-c"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_strategy_reaches_the_pass_from_the_cli(model: tuple[Any, Path, np.ndarray], tmp_path: Path, strategy: str,
                                                emit: str, capsys: pytest.CaptureFixture[str],
                                                request: pytest.FixtureRequest) -> None:
    if emit == "table-c":
        request.getfixturevalue("c_compiler")
    bst, path, X = model
    out = tmp_path / f"m{get_target(emit).suffix}"
    assert main(["compile", str(path), "--emit", emit, "--strategy", strategy, "-o", str(out), "--time-passes"]) == 0
    text = capsys.readouterr()
    assert f"(strategy {strategy}, max-depth" in text.err  # the oblivious pass's own report
    same(lumber.load_compiled(out, bst).predict_raw(X), bst, X)


def test_unknown_strategy_is_refused_before_any_work(model: tuple[Any, Path, np.ndarray],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bst, path, _ = model
    with pytest.raises(lumber.LumberError, match="unknown strategy 'best'"):
        lumber.compile(bst, target="table", options=lumber.TableOptions(strategy="best"))
    with pytest.raises(SystemExit) as exc:
        main(["compile", str(path), "--emit", "table", "--strategy", "best"])
    assert exc.value.code == 2
    assert "invalid choice: 'best'" in capsys.readouterr().err
