"""A numpy array carries no column names. Given to an explainer with a model that records real feature
names, its columns were taken by position without a word: columns in another order gave another (wrong)
answer silently. The explainers now warn (PositionalBindingWarning, naming the features the columns are
taken as); a DataFrame in any column order binds by name and gives the same numbers; a model without
names, a lowered Forest and a request built already take arrays by position, quietly."""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import pandas as pd
import pytest

import lumber
from lumber.compiler.explain import explanation_request
from lumber.ir.binding import PositionalBindingWarning


@pytest.fixture(scope="module")
def named() -> tuple[Any, pd.DataFrame]:
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"Age": rng.integers(17, 90, 300), "Hours": rng.integers(1, 99, 300)}).astype(float)
    y = ((X.Age > 40) & (X.Hours > 35)).astype(int)
    return lgb.LGBMClassifier(n_estimators=4, num_leaves=4, verbose=-1, min_child_samples=5).fit(X, y), X


CALLS: dict[str, Callable[[Any, pd.DataFrame, Any], Any]] = {
    "counterfactual": lambda m, X, a: lumber.counterfactual(m, a, target=1),
    "sensitive_tests": lambda m, X, a: lumber.sensitive_tests(m, a),
    "counterfactual_rules": lambda m, X, a: lumber.counterfactual_rules(m, X, a, target=1),
    "attribution": lambda m, X, a: lumber.attribution(m, a),
}


def _positional(fn: Callable[[], Any]) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in seen if issubclass(w.category, PositionalBindingWarning)]


@pytest.mark.parametrize("call", sorted(CALLS))
def test_an_array_for_a_named_model_is_said_a_frame_is_not(named: tuple[Any, pd.DataFrame], call: str) -> None:
    model, X = named
    said = _positional(lambda: CALLS[call](model, X, X.to_numpy()[:1]))
    assert said and "no column names" in said[0] and "Age, Hours" in said[0], said
    assert not _positional(lambda: CALLS[call](model, X, X.iloc[:1]))


def test_reference_rows_as_an_array_are_said_too(named: tuple[Any, pd.DataFrame]) -> None:
    model, X = named
    said = _positional(lambda: lumber.counterfactual(model, X.iloc[:1], target=1, reference=X.to_numpy()))
    assert said and said[0].startswith("reference has no column names")


def test_a_frame_in_another_column_order_gives_the_same_answer(named: tuple[Any, pd.DataFrame]) -> None:
    model, X = named
    case = X.iloc[[3]]
    a = lumber.counterfactual(model, case, target=1, reference=X)
    b = lumber.counterfactual(model, case[["Hours", "Age"]], target=1, reference=X[["Hours", "Age"]])
    assert a.to_dict()["changes"] == b.to_dict()["changes"] and a.cost == b.cost


def test_quiet_where_the_array_is_in_the_models_order_by_definition(named: tuple[Any, pd.DataFrame]) -> None:
    import lightgbm as lgb

    model, X = named
    unnamed = lgb.LGBMClassifier(n_estimators=4, num_leaves=4, verbose=-1, min_child_samples=5).fit(
        X.to_numpy(), (X.Age > 40).astype(int))
    assert not _positional(lambda: lumber.counterfactual(unnamed, X.to_numpy()[:1], target=1))
    forest = lumber.load(model)
    assert not _positional(lambda: lumber.counterfactual(forest, X.to_numpy()[:1], target=1))
    req = explanation_request(model, reference=X)
    assert not _positional(lambda: lumber.counterfactual(req, X.to_numpy()[:1], target=1))
