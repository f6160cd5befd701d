"""The user's decision rule: a threshold of 0.3 on P(class 1) changes which applicants are rejected and
where counterfactuals and sensitive tests aim, checked with the source model's own ``predict_proba``."""

from __future__ import annotations

from typing import Any

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

import lumber
from lumber.compiler.dsl import format_constraints, parse_constraints
from lumber.ir import Cutoff, InputDataError, Target


def _p1(model: Any, x: np.ndarray) -> float:
    """The source model's own P(class 1) of one point."""
    return float(model.predict_proba(pd.DataFrame([x], columns=model.feature_name_))[0, 1])


@pytest.fixture(scope="module")
def credit() -> dict[str, Any]:
    ds = lumber.datasets.load("credit")
    X, y = ds.X.iloc[:4000], ds.y[:4000]
    model = lgb.LGBMClassifier(n_estimators=30, num_leaves=8, learning_rate=0.1, random_state=0,
                               verbose=-1).fit(X, y)
    p = model.predict_proba(ds.X.iloc[4000:6000])[:, 1]
    return {"ds": ds, "model": model, "X": X, "cases": ds.X.iloc[4000:6000], "p": p}


def test_threshold_changes_who_is_rejected(credit: dict[str, Any]) -> None:
    model, cases, p = credit["model"], credit["cases"], credit["p"]
    compiled = lumber.compile(model, target="numpy")
    at_half, at_03 = compiled.predict(cases), compiled.predict(cases, threshold=0.3)
    np.testing.assert_array_equal(at_half, model.predict(cases))
    np.testing.assert_array_equal(at_03, (p > 0.3).astype(int))
    assert ((at_03 == 1) & (at_half == 0)).sum() > 20  # applicants rejected at 0.3 but not at 0.5
    np.testing.assert_array_equal(lumber.load(model).predict(cases, threshold=Cutoff(0.3)), at_03)
    margin = model.predict(cases, raw_score=True)
    np.testing.assert_array_equal(compiled.predict(cases, threshold=Cutoff(-0.5, "margin")), (margin > -0.5).astype(int))
    with pytest.raises(InputDataError, match="strictly between 0 and 1"):
        compiled.predict(cases, threshold=1.5)


def test_counterfactuals_aim_at_the_threshold(credit: dict[str, Any]) -> None:
    """A case with 0.3 < P(default) < 0.5 is approved by the model's rule but rejected at 0.3; its
    counterfactual under ``P(class 1) <= 0.3`` lands at or below 0.3 on the source model."""
    model, cases, p, ds = credit["model"], credit["cases"], credit["p"], credit["ds"]
    i = int(np.flatnonzero((p > 0.33) & (p < 0.45))[0])
    x = cases.iloc[[i]]
    plain = lumber.counterfactual(model, x, target=0, features=ds.features)
    assert plain.verified and not plain.changes  # already approved at 0.5
    want = Target.threshold(0.3, below=True)
    r = lumber.counterfactual(model, x, target=want, features=ds.features)
    assert r.verified and r.changes
    assert _p1(model, r.x) <= 0.3
    j = int(np.flatnonzero(p > 0.6)[0])  # rejected either way: the threshold moves the aim further
    r5 = lumber.counterfactual(model, cases.iloc[[j]], target=0, features=ds.features)
    r3 = lumber.counterfactual(model, cases.iloc[[j]], target=want, features=ds.features)
    p5, p3 = _p1(model, r5.x), _p1(model, r3.x)
    assert r5.verified and r3.verified and p5 <= 0.5 and p3 <= 0.3 < p5
    assert r3.cost >= r5.cost


def test_constraint_file_threshold(credit: dict[str, Any]) -> None:
    model, cases, p, ds = credit["model"], credit["cases"], credit["p"], credit["ds"]
    schema = lumber.load(model).schema
    text = "target probability of class 1 <= 0.3\n"
    c = parse_constraints(text, schema)
    assert c.target == Target(label=1, cutoff=Cutoff(0.3), below=True)
    assert parse_constraints(format_constraints(c, schema), schema) == c
    i = int(np.flatnonzero((p > 0.33) & (p < 0.45))[0])
    r = lumber.counterfactual(model, cases.iloc[[i]], constraints=text, features=ds.features)
    assert r.verified and _p1(model, r.x) <= 0.3


def test_sensitive_tests_follow_the_threshold(credit: dict[str, Any]) -> None:
    model, cases, p = credit["model"], credit["cases"], credit["p"]
    i = int(np.flatnonzero((p > 0.33) & (p < 0.45))[0])
    res = lumber.sensitive_tests(model, cases.iloc[[i]], target=Target(label=0, cutoff=Cutoff(0.3)))
    case = res[0]
    assert case.verified and case.point is not None
    assert _p1(model, case.point) <= 0.3


def test_threshold_needs_a_binary_classifier() -> None:
    X = np.random.default_rng(0).normal(size=(200, 3))
    reg = lgb.LGBMRegressor(n_estimators=3, verbose=-1).fit(X, X[:, 0])
    with pytest.raises(InputDataError, match="binary classifier"):
        lumber.counterfactual(reg, X[:1], target=Target.threshold(0.3))
