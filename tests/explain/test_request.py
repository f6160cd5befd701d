"""The explanation request resolves targets, norms, scales and constraints exactly as the three
explainers did before it existed (their alias tables are copied here), and re-checks every
explainer on the source model, raw boosters included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lumber
from lumber.compiler.api.rules import RuleExplainer, RuleOptions
from lumber.compiler.explain import ExplanationRequest, explanation_request, source_predictor
from lumber.ir import Constraints, Direction, InputDataError, Norm, Scale, Target, UnsupportedModelError
from lumber.passes.analyses.metrics import build_metric
from lumber.passes.analyses.counterfactual import CounterfactualOptions, make_query
from lumber.ir.decision import resolve_target

# -- the alias tables of the three explainers before the request ----------------------

SOLVE_PARSE_NORM = {"L0": Norm.L0, "L1": Norm.L1, "L2": Norm.L2, "LINF": Norm.LINF, "INF": Norm.LINF}
"""counterfactual/solve.parse_norm: ``str(norm).strip().upper().replace("-", "")`` looked up here."""
METRICS_NORMS = {"l0": Norm.L0, "l1": Norm.L1, "l2": Norm.L2, "linf": Norm.LINF, "l-inf": Norm.LINF,
                 "inf": Norm.LINF}
"""analyses/metrics._norm: ``value.lower()`` looked up here."""
DSL_NORMS = {"l0": Norm.L0, "l1": Norm.L1, "l2": Norm.L2, "linf": Norm.LINF}
"""dsl/check.NORMS: the word as written."""
MAPPING_NORMS = {"l0": Norm.L0, "L1": Norm.L1, "l2": Norm.L2, "LinF": Norm.LINF}
"""Constraints.from_mapping: ``Norm[norm.upper()]``."""
OLD_SCALES = {"none": Scale.NONE, "std": Scale.STD, "minmax": Scale.MINMAX, "STD": Scale.STD, "MinMax": Scale.MINMAX}
"""metrics.SCALES / dsl SCALES / feature_scales (lower-cased) / from_mapping (``Scale[upper]``)."""

NORM_CASES = (
    [(k, v) for k, v in SOLVE_PARSE_NORM.items()]
    + [(k.lower(), v) for k, v in SOLVE_PARSE_NORM.items()]
    + [(f" {k.lower()} ", v) for k, v in SOLVE_PARSE_NORM.items()]  # parse_norm stripped blanks
    + [("L-INF", Norm.LINF), ("l-1", Norm.L1)]  # and dropped hyphens anywhere
    + list(METRICS_NORMS.items()) + list(DSL_NORMS.items()) + list(MAPPING_NORMS.items())
    + [(n, n) for n in Norm]
)


@pytest.fixture(scope="module")
def classifier() -> Any:
    import pandas as pd
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "yes", "no")
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"])
    return RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(frame, y), X


@pytest.fixture(scope="module")
def regressor() -> Any:
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 2))
    return DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, X[:, 0] * 2.0), X


@pytest.mark.parametrize("alias, expected", NORM_CASES, ids=lambda v: repr(v))
def test_every_old_norm_alias_resolves_the_same(alias: Any, expected: Norm, classifier: Any) -> None:
    model, X = classifier
    assert Norm.parse(alias) == expected
    req = explanation_request(model, norm=alias)
    assert req.norm == expected
    assert Constraints.from_mapping({"norm": alias}).norm == expected
    assert make_query(req.forest, X[0], constraints=None, options=CounterfactualOptions(norm=alias))[0].cost.norm == expected
    if expected != Norm.L0:  # sensitive tests never projected under l0
        assert build_metric(req.forest, norm=alias).norm == expected


@pytest.mark.parametrize("word, expected", list(DSL_NORMS.items()) + [("inf", Norm.LINF), ("L2", Norm.L2)])
def test_dsl_norm_words(word: str, expected: Norm, classifier: Any) -> None:
    model, _ = classifier
    req = explanation_request(model, constraints=f"norm {word}\n")
    assert req.constraints is not None and req.constraints.norm == expected and req.norm == expected


@pytest.mark.parametrize("alias, expected", list(OLD_SCALES.items()) + [(s, s) for s in Scale])
def test_every_old_scale_alias_resolves_the_same(alias: Any, expected: Scale, classifier: Any) -> None:
    model, X = classifier
    assert Scale.parse(alias) == expected
    req = explanation_request(model, scale=alias, reference=X)
    assert req.scale == (None if expected == Scale.NONE else expected)
    assert Constraints.from_mapping({"scale": alias}).scale == expected
    metric = build_metric(req.forest, scale=alias, reference=X)
    assert metric.scale == (None if expected == Scale.NONE else expected)


@pytest.mark.parametrize("bad, what", [("l3", "norm"), ("euclid", "norm"), (2, "norm"), ("standard", "scale")])
def test_unknown_names_are_refused_everywhere(bad: Any, what: str, classifier: Any) -> None:
    model, X = classifier
    with pytest.raises(InputDataError, match=f"unknown {what}"):
        explanation_request(model, **{what: bad}, reference=X)
    with pytest.raises(InputDataError, match=f"unknown {what}"):
        build_metric(lumber.load(model), **{what: bad}, reference=X)
    with pytest.raises(InputDataError, match=f"unknown {what}|malformed"):
        Constraints.from_mapping({what: bad}) if isinstance(bad, str) else Norm.parse(bad)


def test_constraints_override_keywords(classifier: Any) -> None:
    model, X = classifier
    req = explanation_request(model, constraints="norm linf\nscale minmax\ntarget class yes\n", norm="l1",
                              scale="std", target="no", reference=X)
    assert (req.norm, req.scale, req.target) == (Norm.LINF, Scale.MINMAX, Target(label="yes"))


CONSTRAINT_FORMS = {
    "object": Constraints.from_mapping({"immutable": ["x0"], "increase": ["x1"]}),
    "mapping": {"immutable": ["x0"], "increase": ["x1"]},
    "text": "immutable x0\nx1: increase\n",
}


@pytest.mark.parametrize("form", sorted(CONSTRAINT_FORMS) + ["file"])
def test_constraints_from_every_form(form: str, classifier: Any, tmp_path: Path) -> None:
    model, _ = classifier
    given: Any = CONSTRAINT_FORMS.get(form)
    if form == "file":
        given = tmp_path / "c.lum"
        given.write_text(CONSTRAINT_FORMS["text"])
    cons = explanation_request(model, constraints=given).constraints
    assert cons is not None
    assert cons.rule("x0").immutable and cons.rule("x1").direction == Direction.INCREASE
    assert not cons.rule("x2").immutable and cons.rule("x2").direction == Direction.ANY


@pytest.mark.parametrize("bad, match", [({"immutable": ["x9"]}, "unknown feature"), (42, "must be a lumber"),
                                        ({"bounds": {"x0": 1}}, "malformed")])
def test_bad_constraints(bad: Any, match: str, classifier: Any) -> None:
    with pytest.raises(InputDataError, match=match):
        explanation_request(classifier[0], constraints=bad)


@pytest.mark.parametrize("target, current, classes", [
    ("yes", None, (1,)), ("no", 1.0, (0,)), (["yes", "no"], None, (0, 1)), (Target(label="yes"), None, (1,)),
    (None, 0.0, (1,)), (None, 1.0, (0,)),
])
def test_class_targets_resolve_the_same_for_every_explainer(target: Any, current: Any, classes: tuple[int, ...],
                                                            classifier: Any) -> None:
    model, X = classifier
    req = explanation_request(model, target=target)
    ts = req.target_set(current)
    labels = ("no", "yes")
    assert ts.classes == classes and ts.labels == labels and ts.cutoff is None
    assert ts.label == (labels[classes[0]] if len(classes) == 1 else tuple(labels[c] for c in classes))
    from lumber.passes.analyses.rules.targets import resolve_target as rules_resolve

    assert rules_resolve(req.forest, req.target, current) == ts
    cur = req.forest.schema.class_index(req.forest.evaluate(X[:1]))[0]
    if target is not None:  # the counterfactual MILP targets every class of the set
        specs = make_query(req.forest, X[0], target)
        assert [q.spec.index for q in specs] == list(classes)
        assert [q.spec.label for q in specs] == [ts.labels[c] for c in classes]
    else:
        assert [q.spec.index for q in make_query(req.forest, X[0], None)] == [c for c in (0, 1) if c != cur]


@pytest.mark.parametrize("target", [(0.5, 2.0), [0.5, 2.0], Target(interval=(0.5, 2.0))])
def test_interval_targets(target: Any, regressor: Any) -> None:
    model, X = regressor
    req = explanation_request(model, target=target)
    assert req.target_set() == Target(interval=(0.5, 2.0))
    assert make_query(req.forest, X[0], target)[0].spec.interval == (0.5, 2.0)


@pytest.mark.parametrize("target, match", [(None, "needs a target interval for sensitive tests"),
                                           (3.0, "is not an interval"), ((2.0, 1.0), "is empty")])
def test_interval_target_errors(target: Any, match: str, regressor: Any) -> None:
    model, X = regressor
    with pytest.raises(InputDataError, match=match):
        lumber.sensitive_tests(model, X[:2], target=target)


def test_target_errors(classifier: Any) -> None:
    model, X = classifier
    with pytest.raises(InputDataError, match="target 'maybe' is not a class"):
        explanation_request(model, target="maybe").target_set()
    with pytest.raises(InputDataError, match="one target class"):
        lumber.sensitive_tests(model, X[:2], target=["yes", "no"])
    from sklearn.ensemble import IsolationForest

    iso = IsolationForest(n_estimators=3, random_state=0).fit(X)
    with pytest.raises(UnsupportedModelError, match="counterfactuals need a classifier or a regressor"):
        resolve_target(lumber.load(iso), "x", explainer="counterfactuals")


def test_a_request_is_accepted_where_a_model_goes(classifier: Any) -> None:
    model, X = classifier
    assert lumber.explanation_request is explanation_request
    req = lumber.explanation_request(model, constraints={"immutable": ["x2"]}, norm="l1")
    assert isinstance(req, ExplanationRequest) and req.predictor is not None
    direct = lumber.sensitive_tests(model, X[:4], constraints={"immutable": ["x2"]},
                                    options=lumber.SensitiveOptions(norm="l1"))
    via = lumber.sensitive_tests(req, X[:4])
    np.testing.assert_array_equal(direct.distance, via.distance)
    assert via.verified.all()
    current = req.forest.predict(X[:1])[0]
    cf = lumber.counterfactual(req, X[0], target="yes" if current == "no" else "no")
    assert cf.verified and np.float32(cf.x[2]) == np.float32(X[0, 2])  # x2 is immutable
    with pytest.raises(InputDataError, match="belong to the request"):
        lumber.sensitive_tests(req, X[:4], constraints={"immutable": ["x1"]})


# -- one verifier on the source model: raw boosters too --------------------------------------------

def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    return X, (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)


def _lightgbm_booster() -> Any:
    import lightgbm as lgb
    X, y = _data()
    return lgb.train({"objective": "binary", "num_leaves": 4, "min_data_in_leaf": 5, "verbose": -1},
                     lgb.Dataset(X, y), num_boost_round=5)


def _xgboost_booster() -> Any:
    import xgboost as xgb
    X, y = _data()
    return xgb.train({"objective": "binary:logistic", "max_depth": 2}, xgb.DMatrix(X, y), num_boost_round=5)


BOOSTERS = {"lightgbm": _lightgbm_booster, "xgboost": _xgboost_booster}


def _tamper(booster: Any) -> Any:
    """The same booster whose predict answers the other class: verification must notice."""
    honest = booster.predict
    booster.predict = lambda *a, **k: 1.0 - honest(*a, **k)
    return booster


@pytest.mark.parametrize("library", sorted(BOOSTERS))
def test_raw_booster_is_verified_by_sensitive_tests(library: str) -> None:
    X, _ = _data()
    booster = BOOSTERS[library]()
    assert source_predictor(booster, lumber.load(booster)) is not None
    ok = lumber.sensitive_tests(booster, X[:6], options=lumber.SensitiveOptions(norm="l1"))
    assert ok.verified.all()
    bad = lumber.sensitive_tests(_tamper(booster), X[:6], options=lumber.SensitiveOptions(norm="l1"))
    assert not bad.verified.any()
    assert all("NOT confirmed by the source model" in bad.messages[i] for i in range(6))


@pytest.mark.parametrize("library", sorted(BOOSTERS))
def test_raw_booster_is_verified_by_rules(library: str) -> None:
    X, _ = _data()
    booster = BOOSTERS[library]()
    ex = RuleExplainer(booster, X[:200], options=RuleOptions(n_estimators=5, max_depth=4))
    samples = [s for r in ex.local(X[200:204]) for s in r.samples]
    assert samples and all(s.verified for s in samples)
    _tamper(booster)
    samples = [s for r in ex.local(X[200:204]) for s in r.samples]
    assert samples and not any(s.verified for s in samples)


@pytest.mark.parametrize("library", sorted(BOOSTERS))
def test_raw_booster_is_verified_by_counterfactuals(library: str) -> None:
    X, _ = _data()
    booster = BOOSTERS[library]()
    assert lumber.counterfactual(booster, X[0], options=lumber.CounterfactualOptions(time_limit=20)).verified
    assert not lumber.counterfactual(_tamper(booster), X[0], options=lumber.CounterfactualOptions(time_limit=20)).verified


def test_batch_tasks_check_on_the_source_model() -> None:
    from lumber.compiler.api.batch import make_task

    X, _ = _data()
    booster = _lightgbm_booster()
    task = make_task(booster, "sensitive", norm="l1")
    assert task.model is booster
    assert all(r["verified"] for r in task(X[:3], [0, 1, 2]))
    _tamper(booster)
    assert not any(r["verified"] for r in task(X[:3], [0, 1, 2]))
