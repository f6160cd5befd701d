"""The best-first box search (``bestfirst.py``): its optimum is the exhaustive search's, its bounds hold.

Random small forests (numeric and categorical features, missing values, every task) and cases, with
and without constraints (immutable features, directions, ``changes <= k``), under every norm: the
search alone (no warm start, no MILP) must prove the optimum or the infeasibility that ``cf_brute``
finds; stopped early, its bound must lie below the optimum and its point must be verified.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from builders import categorical, make_forest
from cf_brute import brute_force, target_margin, task_is_class
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import THRESHOLDS, forests

from lumber.ir import Constraints, Direction, FeatureKind, FeatureRule, Forest, InputDataError, PostTransform, Task
from lumber.ir.domains import DomainKind, Domains, FeatureDomain
from lumber.passes.analyses.counterfactual import CounterfactualOptions, bestfirst, solve_counterfactual
from lumber.passes.analyses.counterfactual.deadline import Deadline
from lumber.passes.analyses.counterfactual.solve import make_query

NORMS = ["l0", "l1", "l2", "linf"]
EXAMPLES = int(os.environ.get("CF_EXAMPLES", "20"))
ROBUST = 1e-3
"""A target margin no float rounding erases: the optimum over such points bounds the search's from above."""


def _case(data: st.DataObject, forest: Forest) -> np.ndarray:
    x0 = []
    for f in forest.schema.features:
        if f.kind == FeatureKind.CATEGORICAL:
            x0.append(float(data.draw(st.integers(0, 5))))
        else:
            x0.append(data.draw(st.one_of(THRESHOLDS, st.floats(-3, 8, width=32), st.just(float("nan")))))
    return np.array(x0, dtype=np.float64)


def _target(data: st.DataObject, forest: Forest, x0: np.ndarray):
    if task_is_class(forest):
        k = 2 if forest.schema.task == Task.BINARY else forest.n_outputs
        current = int(forest.predict(x0[None, :])[0])
        return data.draw(st.sampled_from([c for c in range(k) if c != current]))
    p = float(forest.predict(x0[None, :])[0])
    delta = data.draw(st.floats(0.1, 6.0))
    return data.draw(st.sampled_from([(p + delta, np.inf), (-np.inf, p - delta), (p + delta, p + 2 * delta)]))


def _constraints(data: st.DataObject, forest: Forest) -> Constraints | None:
    if not data.draw(st.booleans()):
        return None
    rules = []
    for f in forest.schema.features:
        kind = data.draw(st.sampled_from(["free", "free", "immutable", "up", "down"]))
        if kind == "immutable":
            rules.append(FeatureRule(f.name, immutable=True))
        elif kind in ("up", "down") and f.kind != FeatureKind.CATEGORICAL:
            rules.append(FeatureRule(f.name, direction=Direction.INCREASE if kind == "up" else Direction.DECREASE))
    return Constraints(rules=tuple(rules), max_changes=data.draw(st.sampled_from([None, 1, 2])))


def _brute(forest: Forest, x0: np.ndarray, target, cons: Constraints | None, norm: str, wd, wu,
           margin: float = 0.0) -> float:
    """The exhaustive optimum; ``margin > 0``: over points that meet the target by at least that much."""
    names = forest.schema.feature_names
    lo, hi = cons.bounds(names, x0) if cons is not None else (None, None)
    codes = {i: sorted({float(c) for c in range(6)} | {float(x0[i])})
             for i, f in enumerate(forest.schema.features) if f.kind == FeatureKind.CATEGORICAL}
    if task_is_class(forest):
        def meets(X: np.ndarray) -> np.ndarray:
            if margin > 0:
                return target_margin(forest, X, target) >= margin
            return forest.predict(X) == target
    else:
        def meets(X: np.ndarray) -> np.ndarray:
            p = forest.predict(X)
            return (p >= target[0] + margin) & (p <= target[1] - margin)
    k = cons.max_changes if cons is not None else None

    def few(X: np.ndarray) -> np.ndarray:
        same = (X == x0[None, :]) | (np.isnan(X) & np.isnan(x0[None, :]))
        return (~same).sum(axis=1) <= (k if k is not None else X.shape[1])

    return brute_force(forest, x0, meets, norm, wd, wu, lo, hi, extra_ok=few, codes=codes)[0]


def _has_zero_splits(forest: Forest) -> bool:
    """Zero-as-missing splits that are not one threshold: the search leaves those to the MILP."""
    return bool((forest.missing_zero & (forest.left >= 0)).any())


@pytest.mark.parametrize("norm", NORMS)
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(forest=forests(max_trees=4, max_depth=3, max_features=3), data=st.data())
def test_search_alone_proves_the_exhaustive_optimum(norm: str, forest: Forest, data: st.DataObject) -> None:
    x0 = _case(data, forest)
    n = forest.n_features
    wd = np.array(data.draw(st.lists(st.floats(0.5, 2.0), min_size=n, max_size=n)))
    wu = np.array(data.draw(st.lists(st.floats(0.5, 2.0), min_size=n, max_size=n)))
    target = _target(data, forest, x0)
    cons = _constraints(data, forest)
    opts = CounterfactualOptions(norm=norm, weights=(wd, wu))
    q = make_query(forest, x0, target, cons, options=opts)[0]
    out = bestfirst.answer(q, None, None, Deadline.never())
    if out is None:
        assert _has_zero_splits(forest)
        return
    exact = _brute(forest, x0, target, cons, norm, wd, wu)
    robust = _brute(forest, x0, target, cons, norm, wd, wu, margin=ROBUST)
    if out.status == bestfirst.INFEASIBLE or not np.isfinite(exact):
        # infeasible iff no point meets the target; a point whose margin vanishes in the model's own float
        # arithmetic (a probability rounding to the cutoff) may be missed, as the MILP's target rows miss it
        assert out.status == bestfirst.INFEASIBLE and out.x is None, (out.status, out.x)
        assert not np.isfinite(robust), (exact, robust)
        return
    assert out.status == bestfirst.OPTIMAL, out.status
    assert out.x is not None
    cost = float(q.cost.total(out.x[None, :])[0])
    assert q.cost.from_objective(out.objective) == pytest.approx(cost, rel=1e-9, abs=1e-12)
    assert cost >= exact * (1 - 1e-9) - 1e-12, (cost, exact)  # the point is verified: never below the optimum
    assert cost <= robust * (1 + 1e-9) + 1e-12, (cost, exact, robust)  # equal to it unless a margin vanishes
    assert q.spec.satisfied(forest.schema.decide(forest.evaluate(out.x[None, :])))[0]
    if cons is not None:
        lo, hi = cons.bounds(forest.schema.feature_names, x0)
        assert np.all((out.x >= lo) & (out.x <= hi) | np.isnan(out.x))


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(forest=forests(max_trees=5, max_depth=4, max_features=3, missing_zero=False), data=st.data(),
       budget=st.integers(1, 6))
def test_an_early_stop_keeps_a_bound_below_the_optimum(forest: Forest, data: st.DataObject, budget: int) -> None:
    x0 = _case(data, forest)
    target = _target(data, forest, x0)
    cons = _constraints(data, forest)
    ones = np.ones(forest.n_features)
    q = make_query(forest, x0, target, cons, options=CounterfactualOptions(norm="l1"))[0]
    doms, why = bestfirst.build_domains(q, q.lo, q.hi)
    exact = _brute(forest, x0, target, cons, "l1", ones, ones)
    if why:
        assert not np.isfinite(exact)
        return
    out = bestfirst.BoxSearch(q, doms).run(Deadline.never(), max_nodes=budget)
    assert out.bound <= exact * (1 + 1e-9) + 1e-12 or out.status == bestfirst.INFEASIBLE
    if out.status == bestfirst.INFEASIBLE:
        assert not np.isfinite(exact)
    if out.x is not None:
        assert q.spec.satisfied(forest.schema.decide(forest.evaluate(out.x[None, :])))[0]
        assert float(q.cost.total(out.x[None, :])[0]) >= exact * (1 - 1e-9) - 1e-12
    if out.status == bestfirst.OPTIMAL:
        assert out.objective == pytest.approx(exact, rel=1e-9, abs=1e-12)


# class 1 iff the margin is > 0; several routes to it, with different features
TREES = [
    ("a", 1.0, ("b", 2.0, -2.0, 1.0), ("c", {1, 2}, 1.5, -1.0)),
    ("b", 3.0, ("a", -1.0, 0.5, -1.0), 2.5),
    ("c", {3}, 2.0, ("a", 4.0, -0.5, 1.0)),
]
NAMES = ["a", "b", categorical("c", ["p", "q", "r", "s", "t"])]
X0 = np.array([0.0, 0.0, 0.0])


@pytest.fixture(scope="module")
def forest() -> Forest:
    return make_forest(TREES, NAMES, task=Task.BINARY, post_transform=PostTransform.SIGMOID)


@pytest.mark.parametrize("cons", [
    None,
    Constraints(max_changes=1),
    Constraints(rules=(FeatureRule("a", immutable=True),)),
    Constraints(rules=(FeatureRule("a", immutable=True), FeatureRule("b", immutable=True),
                       FeatureRule("c", immutable=True))),
])
def test_the_driver_answers_as_the_milp_does(forest: Forest, cons: Constraints | None) -> None:
    searched = solve_counterfactual(forest, X0, target=1, constraints=cons,
                                    options=CounterfactualOptions(box_search="first", warm_start=False))
    milp = solve_counterfactual(forest, X0, target=1, constraints=cons,
                                options=CounterfactualOptions(box_search="off"))
    assert searched.status == milp.status
    if milp.status == "infeasible":
        assert searched.x is None
        return
    assert searched.optimal and searched.verified and not searched.violations
    assert searched.attempts == 0  # proven by the search: no MILP was built
    assert searched.cost == pytest.approx(milp.cost, rel=1e-9)


def test_box_search_mode_is_checked_and_auto_takes_change_limits(forest: Forest) -> None:
    with pytest.raises(InputDataError, match="box_search"):
        CounterfactualOptions(box_search="sometimes")
    auto = CounterfactualOptions()
    assert auto.box_search == "auto"
    limited = make_query(forest, X0, 1, Constraints(max_changes=2), options=auto)[0]
    free = make_query(forest, X0, 1, None, options=auto)[0]
    assert bestfirst.first(limited) and not bestfirst.first(free)
    assert bestfirst.first(make_query(forest, X0, 1, None, options=CounterfactualOptions(box_search="first"))[0])
    assert not bestfirst.first(limited, nogoods=[np.zeros(3)])


@pytest.mark.parametrize("norm", NORMS)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forest=forests(max_trees=4, max_depth=3, max_features=3, categorical=False, multiclass=False,
                      missing_zero=False, input_dtype="float64"),
       data=st.data())
def test_on_domain_grids_the_driver_gives_the_exhaustive_optimum(norm: str, forest: Forest,
                                                                 data: st.DataObject) -> None:
    n = forest.n_features
    kinds = data.draw(st.lists(st.sampled_from([("continuous", 0.0), ("integer", 0.0), ("continuous", 0.5),
                                                ("integer", 3.0)]), min_size=n, max_size=n))
    doms = Domains(tuple(FeatureDomain(f.name, DomainKind(kind), step=step)
                         for f, (kind, step) in zip(forest.schema.features, kinds)))
    steps = {i: doms[i].resolution for i in range(n) if doms[i].resolution > 0}
    x0 = np.array([float(data.draw(st.integers(-3, 8))) if i in steps else data.draw(st.floats(-3, 8, width=32))
                   for i in range(n)])
    if forest.schema.task != Task.BINARY:
        return
    target = 1 - int(forest.predict(x0[None, :])[0])
    k = data.draw(st.sampled_from([1, 2]))
    res = solve_counterfactual(forest, x0, target=target, constraints=Constraints(max_changes=k),
                               options=CounterfactualOptions(norm=norm, domains=doms, box_search="first"))
    ones = np.ones(n)
    exact, _ = brute_force(forest, x0, lambda X: forest.predict(X) == target, norm, ones, ones, steps=steps,
                           extra_ok=lambda X: (X != x0[None, :]).sum(axis=1) <= k)
    if not np.isfinite(exact):
        assert res.status == "infeasible" and res.x is None
        return
    assert res.optimal and res.verified and not res.violations, (res.status, res.message)
    assert doms.problems(x0, res.x) == []
    assert res.cost == pytest.approx(exact, rel=1e-9, abs=1e-12)
