"""CounterfactualOptions: checked on construction, frozen; reference rows prepared once give the same answers."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from sklearn.ensemble import IsolationForest, RandomForestClassifier

import lumber
from lumber.ir import InputDataError
from lumber.passes.analyses.counterfactual import CounterfactualOptions, isolation_threshold, solve_counterfactual
from lumber.passes.analyses.counterfactual.reference import Reference


@pytest.mark.parametrize("field,value,message", [
    ("time_limit", 0, "time_limit must be a number of seconds above 0"),
    ("time_limit", math.nan, "time_limit must be a number of seconds above 0"),
    ("strategy", "race", "unknown counterfactual strategy"),
    ("k", 0, "k must be a whole number"),
    ("threads", 1.5, "threads must be a whole number"),
    ("max_cases", True, "max_cases must be a whole number"),
    ("mip_gap", 1.0, "mip_gap must lie in"),
    ("relaxation_share", 0.0, "relaxation_share must lie in"),
    ("window", 0, "window must be None or a whole number"),
    ("contamination", 0.7, "contamination must lie in"),
    ("norm", "l3", "unknown norm"),
])
def test_bad_options_raise_clear_errors(field: str, value: object, message: str) -> None:
    with pytest.raises(InputDataError, match=message):
        CounterfactualOptions(**{field: value})  # type: ignore[arg-type]


def test_options_are_frozen_keyword_only_with_a_30_second_default() -> None:
    opts = CounterfactualOptions()
    assert opts.time_limit == 30.0 and opts.strategy == "cases"
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.time_limit = 5.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        CounterfactualOptions("l2")  # type: ignore[misc]
    assert lumber.CounterfactualOptions is CounterfactualOptions


def test_api_rejects_a_foreign_options_object() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 2))
    rf = RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, X[:, 0] > 0)
    with pytest.raises(InputDataError, match="options must be a lumber.CounterfactualOptions"):
        lumber.counterfactual(rf, X[0], options=lumber.SensitiveOptions())  # type: ignore[arg-type]


def test_reference_prepared_once_gives_the_same_answers() -> None:
    """A batch's Reference (the model's decisions on its rows order the warm start; the isolation forest is
    collapsed once) answers every case as the plain reference rows do."""
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(0.0, 1.0, size=(200, 3)), rng.normal(2.0, 0.8, size=(200, 3))])
    y = np.r_[np.zeros(200, dtype=int), np.ones(200, dtype=int)]
    rf = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    iso = IsolationForest(n_estimators=4, max_samples=32, random_state=0).fit(X[y == 1])
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    ref = Reference.of(f, X, decide=True)
    assert ref is not None and ref.batch and np.array_equal(ref.decisions(f), rf.predict(X))
    assert ref.decisions(f) is ref.decisions(f)  # evaluated once
    assert ref.encoded(fi) is ref.encoded(fi)  # collapsed once
    opts = CounterfactualOptions(norm="l1", scale="minmax")
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:4]]:
        for isolation in (None, (fi, delta)):
            a = solve_counterfactual(f, x0, 1, options=opts, reference=X, isolation=isolation)
            b = solve_counterfactual(f, x0, 1, options=opts, reference=ref, isolation=isolation)
            assert a.optimal and b.optimal and b.verified
            assert b.cost == pytest.approx(a.cost, rel=1e-9, abs=1e-12)
