"""Actionability constraints, infeasible queries, time limits, diverse solutions, backends, errors.

Small hand-built forests; optimal costs are checked against the exhaustive
search restricted to the same constraints (``cf_brute``).
"""

from __future__ import annotations

import numpy as np
import pytest

from builders import categorical, make_forest
from cf_brute import brute_force
from lumber.ir import (
    Bound, Constraints, Direction, Event, FeatureEvent, FeatureRule, Implication, InputDataError, LinearRelation,
    Membership, PostTransform, Task,
)
from lumber.passes.analyses.counterfactual import CounterfactualOptions, solve_counterfactual

# class 1 iff the margin is > 0; several routes to it, with different features
TREES = [
    ("a", 1.0, ("b", 2.0, -2.0, 1.0), ("c", {1, 2}, 1.5, -1.0)),
    ("b", 3.0, ("a", -1.0, 0.5, -1.0), 2.5),
    ("c", {3}, 2.0, ("a", 4.0, -0.5, 1.0)),
]
NAMES = ["a", "b", categorical("c", ["p", "q", "r", "s", "t"])]
X0 = np.array([0.0, 0.0, 0.0])


@pytest.fixture(scope="module")
def forest():
    return make_forest(TREES, NAMES, task=Task.BINARY, post_transform=PostTransform.SIGMOID)


def _brute(forest, cons: Constraints | None, norm="l1", extra=None):
    lo, hi = (cons.bounds(["a", "b", "c"], X0) if cons is not None else (None, None))
    ones = np.ones(3)

    def meets(X):
        return forest.predict(X) == 1

    return brute_force(forest, X0, meets, norm, ones, ones, lo, hi, extra_ok=extra)[0]


def test_unconstrained_matches_brute(forest) -> None:
    assert forest.predict(X0[None, :])[0] == 0
    for norm in ("l0", "l1", "l2", "linf"):
        r = solve_counterfactual(forest, X0, target=1, options=CounterfactualOptions(norm=norm))
        assert r.optimal and r.verified
        assert r.cost == pytest.approx(_brute(forest, None, norm), rel=1e-9)


@pytest.mark.parametrize("rules", [
    [FeatureRule("a", immutable=True)],
    [FeatureRule("b", direction=Direction.DECREASE)],
    [FeatureRule("a", lower=Bound(-0.5), upper=Bound(0.8))],
    [FeatureRule("b", upper=Bound(2.0, relative=True)), FeatureRule("a", immutable=True)],
    [FeatureRule("c", allowed=(0.0, 4.0))],
    [FeatureRule("a", direction=Direction.INCREASE), FeatureRule("c", immutable=True)],
])
def test_feature_rules_respected_and_optimal(forest, rules) -> None:
    cons = Constraints(rules=tuple(rules))
    r = solve_counterfactual(forest, X0, target=1, constraints=cons)
    expected = _brute(forest, cons, extra=lambda X: _allowed(X, cons))
    if not np.isfinite(expected):
        assert r.status == "infeasible" and r.x is None
        return
    assert r.optimal and r.verified and not r.violations
    assert r.cost == pytest.approx(expected, rel=1e-9)
    lo, hi = cons.bounds(["a", "b", "c"], X0)
    assert np.all(r.x >= lo) and np.all(r.x <= hi)


def _allowed(X, cons):
    ok = np.ones(len(X), dtype=bool)
    for i, n in enumerate(["a", "b", "c"]):
        a = cons.rule(n).allowed
        if a is not None:
            ok &= np.isin(X[:, i], a)
    return ok


def test_max_changes(forest) -> None:
    for k in (1, 2):
        cons = Constraints(max_changes=k)
        r = solve_counterfactual(forest, X0, target=1, constraints=cons, options=CounterfactualOptions(norm="l1"))
        exp = _brute(forest, cons, extra=lambda X, k=k: (X != X0).sum(axis=1) <= k)
        assert r.verified and r.cost == pytest.approx(exp, rel=1e-9)
        assert len(r.changes) <= k


def test_linear_relation_holds_and_beats_cells(forest) -> None:
    # a + b >= 3.5 : the optimum may sit inside a cell, so the MILP can only beat the cell search
    rel = LinearRelation((("a", 1.0), ("b", 1.0)), op=">=", rhs=3.5)
    cons = Constraints(relations=(rel,))
    r = solve_counterfactual(forest, X0, target=1, constraints=cons)
    assert r.optimal and r.verified and not r.violations
    assert r.x[0] + r.x[1] >= 3.5 - 1e-9
    assert r.cost <= _brute(forest, cons, extra=lambda X: X[:, 0] + X[:, 1] >= 3.5) + 1e-9
    assert r.cost == pytest.approx(3.5, rel=1e-6)


def test_implication_with_event_and_membership(forest) -> None:
    # if a increases then c must become 'r' (code 2); the cheap route a > 1 now also needs c in {1, 2}
    imp = Implication(FeatureEvent("a", Event.INCREASES), (Membership("c", (2.0,)),))
    cons = Constraints(implications=(imp,))
    r = solve_counterfactual(forest, X0, target=1, constraints=cons)

    def ok(X):
        return ~(X[:, 0] > 0) | (X[:, 2] == 2)

    assert r.optimal and r.verified and not r.violations
    assert r.cost == pytest.approx(_brute(forest, cons, extra=ok), rel=1e-9)


def test_implication_with_linear_consequence(forest) -> None:
    imp = Implication(FeatureEvent("b", Event.CHANGES), (LinearRelation((("a", 1.0),), op="<=", rhs=-2.0),))
    cons = Constraints(implications=(imp,))
    r = solve_counterfactual(forest, X0, target=1, constraints=cons)
    assert r.verified and not r.violations
    if r.x[1] != 0:
        assert r.x[0] <= -2.0


def test_infeasible_is_a_result_not_an_exception(forest) -> None:
    cons = Constraints(rules=(FeatureRule("a", immutable=True), FeatureRule("b", immutable=True),
                              FeatureRule("c", immutable=True)))
    r = solve_counterfactual(forest, X0, target=1, constraints=cons)
    assert r.status == "infeasible" and r.infeasible and r.x is None and not r.verified
    assert "class 1" in r.message
    assert r.to_dict()["status"] == "infeasible"


def test_contradictory_bounds_are_infeasible(forest) -> None:
    cons = Constraints(rules=(FeatureRule("a", lower=Bound(2.0), upper=Bound(1.0)),))
    r = solve_counterfactual(forest, X0, target=1, constraints=cons)
    assert r.status == "infeasible" and "'a'" in r.message


def test_time_limit_is_labelled() -> None:
    rng = np.random.default_rng(0)
    from sklearn.ensemble import RandomForestClassifier

    import lumber

    X = rng.normal(size=(400, 12))
    y = (np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] + rng.normal(scale=0.3, size=400) > 0).astype(int)
    m = RandomForestClassifier(n_estimators=30, max_depth=6, random_state=0).fit(X, y)
    f = lumber.load(m)
    x = X[np.flatnonzero(m.predict(X) == 0)[0]]
    with_start = solve_counterfactual(f, x, target=1, reference=X, options=CounterfactualOptions(time_limit=0.05))
    # wall-clock limits: on a loaded machine even the warm start may not finish in 0.05 s
    # (the deadline itself is pinned with a fake clock in test_cf_deadline)
    assert with_start.status in ("time_limit", "optimal", "no_solution")
    if with_start.status == "time_limit":
        assert with_start.timed_out and with_start.verified and with_start.found
    if with_start.status == "no_solution":
        assert with_start.x is None and with_start.timed_out
    cold = solve_counterfactual(f, x, target=1, options=CounterfactualOptions(warm_start=False, time_limit=0.01))
    assert cold.status in ("no_solution", "time_limit", "optimal")
    if cold.status == "no_solution":
        assert cold.x is None and cold.timed_out


def test_diverse_counterfactuals(forest) -> None:
    r = solve_counterfactual(forest, X0, target=1, options=CounterfactualOptions(k=3))
    sols = [r] + r.alternatives
    assert len(sols) >= 2
    patterns = {tuple(np.sign(s.x - X0)) + (s.x[2],) for s in sols}
    assert len(patterns) == len(sols)
    assert all(s.verified for s in sols)
    costs = [s.cost for s in sols]
    assert costs == sorted(costs)


@pytest.mark.parametrize("presolve", [False, True])
def test_presolve_settings_agree(forest, presolve) -> None:
    ref = solve_counterfactual(forest, X0, target=1, options=CounterfactualOptions(norm="l2"))
    r = solve_counterfactual(forest, X0, target=1, options=CounterfactualOptions(norm="l2", presolve=presolve))
    assert r.optimal and r.verified and r.cost == pytest.approx(ref.cost, rel=1e-9)


def test_bad_arguments_raise_clear_errors(forest) -> None:
    with pytest.raises(InputDataError, match="unknown norm"):
        solve_counterfactual(forest, X0, target=1, options=CounterfactualOptions(norm="l3"))
    with pytest.raises(InputDataError, match="needs reference data"):
        solve_counterfactual(forest, X0, target=1, options=CounterfactualOptions(scale="std"))
    with pytest.raises(InputDataError, match="not a class"):
        solve_counterfactual(forest, X0, target=7)
    with pytest.raises(InputDataError, match="unknown features"):
        solve_counterfactual(forest, X0, target=1, constraints=Constraints(rules=(FeatureRule("zz"),)))
    with pytest.raises(InputDataError, match="unknown counterfactual strategy"):
        CounterfactualOptions(strategy="race")
    reg = make_forest([("a", 0.0, 1.0, 2.0)], ["a"])
    with pytest.raises(InputDataError, match="interval"):
        solve_counterfactual(reg, np.array([0.0]), target=3)


def test_missing_value_is_kept(forest) -> None:
    x = np.array([np.nan, 0.0, 0.0])
    r = solve_counterfactual(forest, x, target=1)
    assert r.verified and np.isnan(r.x[0])


@pytest.mark.parametrize("norm", ["l0", "l1", "l2", "linf"])
def test_ordinal_and_binary_features_take_whole_levels(norm) -> None:
    from lumber.ir import Feature, FeatureKind

    feats = [Feature("age", FeatureKind.ORDINAL), Feature("flag", FeatureKind.BINARY), Feature("v")]
    trees = [("age", 4.5, ("flag", 0.5, -2.0, 0.5), ("v", 0.3, 1.0, 3.0)),
             ("age", 2.5, -1.0, ("flag", 0.5, 0.2, 1.5)),
             ("v", -0.7, ("age", 6.5, -1.0, 2.0), -0.5)]
    f = make_forest(trees, feats, task=Task.BINARY, post_transform=PostTransform.SIGMOID, input_dtype="float32")
    ones = np.ones(3)
    for x0 in (np.array([2.0, 0.0, 0.0]), np.array([3.0, 1.0, -1.0]), np.array([7.0, 0.0, 1.0])):
        cur = int(f.predict(x0[None, :])[0])
        r = solve_counterfactual(f, x0, target=1 - cur, options=CounterfactualOptions(norm=norm, weights=(ones, ones * 1.5)))
        exp, _ = brute_force(f, x0, lambda X: f.predict(X) == 1 - cur, norm, ones, ones * 1.5)
        if not np.isfinite(exp):
            assert r.status == "infeasible"
            continue
        assert r.optimal and r.verified
        assert float(r.x[0]).is_integer() and r.x[1] in (0.0, 1.0)
        assert r.cost == pytest.approx(exp, rel=1e-6)


def test_relation_on_an_ordinal_feature_keeps_whole_levels() -> None:
    from lumber.ir import Feature, FeatureKind

    feats = [Feature("age", FeatureKind.ORDINAL), Feature("v")]
    f = make_forest([("v", 1.0, -1.0, ("age", 30.5, -0.5, 1.0))], feats, task=Task.BINARY,
                    post_transform=PostTransform.SIGMOID)
    # if v changes then age >= age0 + 12.5: 33, a whole number, although the split only needs 31
    imp = Implication(FeatureEvent("v", Event.CHANGES),
                      (LinearRelation((("age", 1.0),), (("age", -1.0),), op=">=", rhs=12.5),))
    r = solve_counterfactual(f, np.array([20.0, 0.0]), target=1, constraints=Constraints(implications=(imp,)))
    assert r.optimal and r.verified and not r.violations
    assert r.x[0] == 33.0 and r.x[1] > 1.0


def test_constraints_override_keywords(forest) -> None:
    from lumber.ir import Norm, Target

    cons = Constraints(norm=Norm.L2, target=Target(label=1))
    r = solve_counterfactual(forest, X0, target=None, constraints=cons, options=CounterfactualOptions(norm="l1"))
    assert r.norm == "l2" and r.target == "class 1"
    assert r.cost == pytest.approx(solve_counterfactual(forest, X0, target=1, options=CounterfactualOptions(norm="l2")).cost)


def test_weights_by_name(forest) -> None:
    a = solve_counterfactual(forest, X0, target=1, options=CounterfactualOptions(weights={"a": (1.0, 3.0)}))
    b = solve_counterfactual(forest, X0, target=1, options=CounterfactualOptions(weights=(np.ones(3), np.array([3.0, 1.0, 1.0]))))
    assert a.cost == pytest.approx(b.cost) and np.array_equal(a.x, b.x)
    with pytest.raises(InputDataError, match="weights: unknown feature 'zz'"):
        solve_counterfactual(forest, X0, target=1, options=CounterfactualOptions(weights={"zz": 2.0}))


def test_vectorised_check_agrees_with_violations_point_by_point() -> None:
    """``actionability.Checker.ok`` (the warm start's check of many points at once) says exactly what
    ``violations`` says of each point: bounds, allowed values, relations, implications and the change limit."""
    from lumber.passes.analyses.counterfactual.actionability import Checker, violations

    names = ["a", "b", "c", "d"]
    cons = Constraints(
        rules=(FeatureRule("a", lower=Bound(-1.0), upper=Bound(2.0)), FeatureRule("d", allowed=(0.0, 1.0, 3.0))),
        relations=(LinearRelation((("a", 1.0), ("b", 2.0)), (("a", 1.0),), "<=", 3.0),
                   LinearRelation((("c", 1.0),), (), "==", 0.5)),
        implications=(Implication(FeatureEvent("b", Event.INCREASES), (Membership("d", (1.0, 3.0)),)),
                      Implication(Membership("d", (0.0,), original=True), (FeatureEvent("c", Event.UNCHANGED),)),
                      Implication(LinearRelation((("a", 1.0),), (), ">=", 1.0), (FeatureEvent("d", Event.CHANGES),))),
        max_changes=2)
    rng = np.random.default_rng(0)
    x0 = np.array([0.5, 1.0, 0.5, 0.0])
    X = np.tile(x0, (4000, 1))
    for j in range(4):  # each coordinate kept, or moved to one of a few values (some NaN)
        pick = rng.uniform(size=X.shape[0]) < 0.5
        X[pick, j] = rng.choice([-2.0, -1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, np.nan], size=int(pick.sum()))
    want = np.array([not violations(cons, names, x0, x) for x in X])
    got = Checker(cons, names, x0).ok(X)
    assert np.array_equal(got, want)
    assert 0 < want.sum() < want.shape[0]


def test_an_infeasible_query_names_the_constraint_that_blocks_it(forest) -> None:
    """No point under the constraints: the answer stays infeasible, and names the one constraint without
    which a verified point reaches the target (exhaustive search agrees on both)."""
    frozen = Constraints(rules=(FeatureRule("a", immutable=True), FeatureRule("b", immutable=True),
                                FeatureRule("c", immutable=True)))
    assert _brute(forest, frozen) == np.inf
    r = solve_counterfactual(forest, X0, target=1, constraints=frozen)
    assert r.status == "infeasible" and r.x is None
    # a alone cannot reach the target (the first rule tried), b alone can
    assert _brute(forest, Constraints(rules=frozen.rules[1:])) == np.inf
    assert np.isfinite(_brute(forest, Constraints(rules=(frozen.rules[0], frozen.rules[2]))))
    assert r.blocking == "immutable the rule on b" and "without immutable the rule on b" in r.message
    none = Constraints(max_changes=0)
    r = solve_counterfactual(forest, X0, target=1, constraints=none)
    assert r.status == "infeasible" and r.blocking == "changes <= 0"
    assert r.to_dict()["blocking"] == "changes <= 0"


def test_no_constraint_blocks_alone_names_none(forest) -> None:
    """Every feature immutable and no change allowed: no single removal admits a point, so none is named."""
    cons = Constraints(rules=(FeatureRule("a", immutable=True), FeatureRule("b", immutable=True),
                              FeatureRule("c", immutable=True)), max_changes=0)
    r = solve_counterfactual(forest, X0, target=1, constraints=cons)
    assert r.status == "infeasible" and r.blocking == ""
