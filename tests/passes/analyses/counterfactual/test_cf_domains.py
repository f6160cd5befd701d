"""Counterfactuals on feature domains: whole numbers, resolutions, observed bounds, one-hot groups.

The MILP puts each feature on its domain's grid (integer levels, cells without
a domain point removed), so its optimum must equal an exhaustive search over
the grid's candidate values (``cf_brute.step_values``), and the returned point
must be in the domain: integers whole, every change at least the resolution.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cf_brute import brute_force
from lumber.ir import Bound, Constraints, FeatureKind, FeatureRule, Forest, OneHotGroup, Task
from lumber.ir.domains import DomainKind, Domains, FeatureDomain, infer_domains
from lumber.passes.analyses.counterfactual import CounterfactualOptions, solve_counterfactual
from strategies import forests

EXAMPLES = int(os.environ.get("CF_EXAMPLES", "20"))


def _stumps(trees: list, names: list[str]) -> Forest:
    from builders import make_forest
    from lumber.ir import PostTransform

    return make_forest(trees, names, task=Task.BINARY, post_transform=PostTransform.SIGMOID)


def _domains(forest: Forest, kinds: list[tuple[str, float]]) -> Domains:
    feats = []
    for f, (kind, step) in zip(forest.schema.features, kinds):
        if f.kind == FeatureKind.CATEGORICAL:
            feats.append(FeatureDomain(f.name, DomainKind.CATEGORICAL))
        else:
            feats.append(FeatureDomain(f.name, DomainKind(kind), step=step))
    return Domains(tuple(feats))


@pytest.mark.parametrize("norm", ["l0", "l1", "l2", "linf"])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forest=forests(max_trees=3, max_depth=3, max_features=3, categorical=False, multiclass=False,
                      missing_zero=False, input_dtype="float64"),
       data=st.data())
def test_optimum_on_the_domain_grid_equals_exhaustive(norm: str, forest: Forest, data: st.DataObject) -> None:
    n = forest.n_features
    kinds = data.draw(st.lists(st.sampled_from([("continuous", 0.0), ("integer", 0.0), ("continuous", 0.5),
                                                ("continuous", 2.0), ("integer", 3.0)]), min_size=n, max_size=n))
    doms = _domains(forest, kinds)
    steps = {i: doms[i].resolution for i in range(n) if doms[i].resolution > 0}
    x0 = np.array([float(data.draw(st.integers(-3, 8))) if i in steps else data.draw(st.floats(-3, 8, width=32))
                   for i in range(n)])
    if forest.schema.task != Task.BINARY:
        return
    current = int(forest.predict(x0[None, :])[0])
    target = 1 - current
    res = solve_counterfactual(forest, x0, target=target, options=CounterfactualOptions(norm=norm, domains=doms, time_limit=30))
    meets = lambda X: forest.predict(X) == target  # noqa: E731
    ones = np.ones(n)
    exact, _ = brute_force(forest, x0, meets, norm, ones, ones, steps=steps)
    if not np.isfinite(exact):
        assert res.status == "infeasible" and res.x is None
        return
    assert res.found and res.verified, (res.status, res.message)
    assert doms.problems(x0, res.x) == [], (res.x, doms.problems(x0, res.x))
    tol = 1e-6 * (1 + exact)
    assert res.cost >= exact - tol, (res.cost, exact)
    # a vanishing target margin may leave the optimum unproven (the heuristic point comes back)
    if res.status == "optimal":
        assert res.cost <= exact + tol, (res.cost, exact, res.x)


def test_integer_feature_crosses_a_tiny_threshold_by_going_to_one() -> None:
    # one stump: x <= 1e-35 -> class 0, else class 1 (LightGBM puts thresholds at 1e-35 around zero)
    forest = _stumps([("f0", 1e-35, -1.0, 1.0)], ["f0"])
    ref = np.array([[0.0], [3.0], [12.0]])
    doms = infer_domains(forest.schema, None, ref)
    assert doms[0].kind == DomainKind.INTEGER and (doms[0].lower, doms[0].upper) == (0.0, 12.0)
    res = solve_counterfactual(forest, np.array([0.0]), target=1, reference=ref)
    assert res.optimal and res.x[0] == 1.0 and res.cost == 1.0
    plain = solve_counterfactual(forest, np.array([0.0]), target=1)  # no data: any float64 is a value
    assert 0 < plain.x[0] < 1e-30


def test_observed_bounds_hold_unless_the_file_widens_them() -> None:
    forest = _stumps([("f0", 50.5, 1.0, -1.0)], ["f0"])
    ref = np.array([[0.0], [10.0], [30.0]])
    res = solve_counterfactual(forest, np.array([5.0]), target=0, reference=ref)
    assert res.infeasible  # above 50 lies outside the observed range 0 .. 30
    wide = Constraints(rules=(FeatureRule("f0", upper=Bound(100.0)),))
    res = solve_counterfactual(forest, np.array([5.0]), target=0, constraints=wide, reference=ref)
    assert res.optimal and res.x[0] == 51.0


def test_a_case_already_at_the_target_needs_no_change() -> None:
    forest = _stumps([("f0", 0.0, 1.0, -1.0)], ["f0"])
    res = solve_counterfactual(forest, np.array([0.0]), target=1, constraints=Constraints(max_changes=3))
    assert res.optimal and res.changes == [] and res.cost == 0.0
    assert "no change needed" in res.message and "no change needed" in res.summary()
    np.testing.assert_array_equal(res.x, [0.0])


def test_onehot_groups_stay_onehot() -> None:
    # class 1 needs column b set; a case with a = 1 must move the 1 from a to b, not add a second 1
    forest = _stumps([("f1", 0.5, -1.0, 1.0)], ["f0", "f1", "f2"])
    cons = Constraints(onehot=(OneHotGroup("g", ("f0", "f1", "f2")),))
    doms = infer_domains(forest.schema, cons)
    assert [d.kind for d in doms.features] == [DomainKind.BINARY] * 3
    res = solve_counterfactual(forest, np.array([1.0, 0.0, 0.0]), target=1, constraints=cons, options=CounterfactualOptions(norm="l0"))
    assert res.optimal, res.message
    np.testing.assert_array_equal(res.x, [0.0, 1.0, 0.0])
    assert doms.problems(np.array([1.0, 0.0, 0.0]), res.x) == []
    assert doms.problems(np.array([1.0, 0.0, 0.0]), np.array([1.0, 1.0, 0.0]))  # the check sees a broken group


def test_domains_inferred_from_data_and_schema() -> None:
    from lumber.ir import Feature, Schema

    schema = Schema((Feature("a"), Feature("b"), Feature("c"), Feature("d", FeatureKind.ORDINAL)),
                    Task.BINARY, 1, (0.0,))
    R = np.array([[1.0, 0.0, 0.5, 2.0], [2.0, 1.0, 1.5, 3.0], [7.0, 1.0, np.nan, 4.5]])
    d = infer_domains(schema, None, R)
    assert [x.kind for x in d.features] == [DomainKind.INTEGER, DomainKind.BINARY, DomainKind.CONTINUOUS,
                                            DomainKind.INTEGER]
    assert (d[0].lower, d[0].upper, d[0].source) == (1.0, 7.0, "data")
    assert d[3].source == "schema"
    c = Constraints(rules=(FeatureRule("a", domain="continuous", step=0.25),))
    d2 = infer_domains(schema, c, R)
    assert d2[0].kind == DomainKind.CONTINUOUS and d2[0].resolution == 0.25 and d2[0].source == "constraints"
    assert d2[0].problem(1.0, 1.1) and not d2[0].problem(1.0, 1.25)
    assert "not a whole number of steps of 1" in FeatureDomain("x", step=1.0).problem(0.5, 0.75)
    assert not FeatureDomain("x", step=1.0).problem(0.5, 2.5)  # whole steps from an off-grid case


def test_changes_print_for_people_and_json_keeps_exact_values() -> None:
    forest = _stumps([("f0", 1e-35, -1.0, 1.0)], ["f0"])
    res = solve_counterfactual(forest, np.array([0.0]), target=1, reference=np.array([[0.0], [4.0]]))
    assert res.summary().splitlines()[1] == "  f0: 0 -> 1"
    plain = solve_counterfactual(forest, np.array([0.0]), target=1)
    ch = plain.to_dict()["changes"][0]
    # no domain: the exact first float past the split in JSON; its text the shortest decimal of that cell
    # at most 1e-4 of the change past it
    assert ch["after"] == plain.x[0] == 1.0000000000000001e-35 and ch["after_text"] == "1.0001e-35"
