"""One cost model: counterfactuals and sensitive tests price a move with the same ChangeCost.

The formulas are written out here per element (the module docstring of ``change_cost``),
and the two explainers are checked to agree on the same move when given the same weights
(the exact sensitive path hands the metric's weights to the counterfactual solver)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lumber.ir import CategoryRule, Constraints, FeatureRule, Forest, InputDataError, Norm
from lumber.passes.analyses.change_cost import ChangeCost
from lumber.passes.analyses.counterfactual import CounterfactualOptions, make_query
from lumber.passes.analyses.metrics import build_metric
from tests.builders import categorical, make_forest

NORMS = [Norm.L0, Norm.L1, Norm.L2, Norm.LINF]


def written_out(cost: ChangeCost, x0: np.ndarray, x: np.ndarray) -> float:
    """The cost of moving ``x0`` to ``x`` as the module docstring states it, one feature at a time."""
    d = []
    for i in range(x0.shape[0]):
        a, b = float(x0[i]), float(x[i])
        if a == b or (np.isnan(a) and np.isnan(b)):
            d.append(0.0)
        elif np.isnan(a) or np.isnan(b):
            d.append(np.inf)
        elif cost.categorical[i]:
            d.append(float(cost.w_up[i]) if np.trunc(a) != np.trunc(b) else 0.0)
        else:
            w = float(cost.w_up[i] if b > a else cost.w_down[i])
            d.append(w if cost.norm == Norm.L0 else w * (abs(b - a) / float(cost.scale[i])))
    if cost.norm == Norm.L2:
        return float(np.sqrt(sum(v * v for v in d)))
    if cost.norm == Norm.LINF:
        return max(d, default=0.0)
    return float(sum(d))


values = st.one_of(st.integers(0, 4).map(float), st.floats(-5, 5, allow_nan=False), st.just(float("nan")))


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(1, 5), norm=st.sampled_from(NORMS))
def test_costs_are_the_written_formula(data: st.DataObject, n: int, norm: Norm) -> None:
    pos = st.floats(0.0, 4.0, allow_nan=False)
    cost = ChangeCost(norm, np.array(data.draw(st.lists(pos, min_size=n, max_size=n))),
                      np.array(data.draw(st.lists(pos, min_size=n, max_size=n))),
                      np.array(data.draw(st.lists(st.floats(0.1, 10.0), min_size=n, max_size=n))),
                      np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n))))
    x0 = np.array(data.draw(st.lists(values, min_size=n, max_size=n)))
    X = np.array(data.draw(st.lists(st.lists(values, min_size=n, max_size=n), min_size=1, max_size=4)))
    got = cost.distance(x0[None, :], X)
    want = [written_out(cost, x0, x) for x in X]
    assert np.allclose(got, want, rtol=1e-12, atol=0.0)


def test_a_category_changes_when_the_code_the_model_reads_does() -> None:
    cost = ChangeCost(Norm.L1, np.ones(1), np.full(1, 2.0), np.ones(1), np.ones(1, dtype=bool),
                      CategoryRule.LIGHTGBM)
    X0 = np.array([[-3.0], [1.0], [1.0], [np.nan]])
    X = np.array([[-1.0], [1.7], [2.0], [1.0]])  # both invalid (missing) | same code | another code | missing moved
    assert cost.feature_costs(X0, X)[:, 0].tolist() == [0.0, 0.0, 2.0, np.inf]


def _forest() -> Forest:
    return make_forest(
        [("x0", 0.5, ("c", {1, 3}, 0.0, 1.0), ("x1", 2.0, 1.0, 0.0)),
         ("x1", -1.0, 0.0, ("x0", 3.0, 1.0, 0.5))],
        ["x0", "x1", categorical("c", range(5))])


@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
def test_sensitive_metric_and_counterfactual_price_a_move_alike(norm: str) -> None:
    forest = _forest()
    rng = np.random.default_rng(0)
    R = np.column_stack([rng.normal(size=50) * 2, rng.normal(size=50), rng.integers(0, 5, 50)]).astype(float)
    metric = build_metric(forest, norm=norm, scale="std", reference=R, weights={"x0": (0.5, 2.0), "c": 1.5})
    x0 = R[0]
    q = make_query(forest, x0, (-np.inf, np.inf), options=CounterfactualOptions(norm=metric.norm, scale=None, weights=(metric.down, metric.up)))[0]
    X = R[1:]
    assert np.array_equal(q.cost.total(X), metric.distance(x0[None, :], X))
    assert q.cost.cost.norm == metric.cost.norm == Norm.parse(norm)


def test_constraint_costs_override_the_weights_without_writing_them() -> None:
    """A rule's cost replaces the keyword weight of its feature; the caller's arrays stay as given
    (the exact sensitive path hands the metric's own weight arrays to the solver)."""
    down, up = np.full(3, 2.0), np.full(3, 3.0)
    cons = Constraints(rules=(FeatureRule("x0", cost_up=5.0), FeatureRule("x1", cost_down=0.5)))
    q = make_query(_forest(), np.array([0.0, 0.0, 1.0]), (-np.inf, np.inf), cons, options=CounterfactualOptions(weights=(down, up)))[0]
    assert q.cost.cost.w_up.tolist() == [5.0, 3.0, 3.0] and q.cost.cost.w_down.tolist() == [2.0, 0.5, 2.0]
    assert down.tolist() == [2.0] * 3 and up.tolist() == [3.0] * 3


@pytest.mark.parametrize("scale", ["std", "minmax"])
def test_one_spread_rule_for_every_explainer(scale: str) -> None:
    # 'a' is split on and constant in the reference rows: neither explainer may price it in raw units
    f = make_forest([("a", 0.5, -1.0, 1.0), ("b", 0.5, -0.5, 0.5)], ["a", "b", "c"])
    ref = np.column_stack([np.full(20, 0.3), np.linspace(0, 1, 20), np.zeros(20)])
    with pytest.raises(InputDataError, match="'a' has zero"):
        build_metric(f, norm="l1", scale=scale, reference=ref)
    with pytest.raises(InputDataError, match="'a' has zero"):
        make_query(f, np.array([0.3, 0.2, 0.0]), target=(0.5, np.inf), reference=ref, options=CounterfactualOptions(norm="l1", scale=scale))
    # 'c' is constant too but no tree reads it: no error, and it is priced by 1
    ref[:, 0] = np.linspace(0, 1, 20)
    build_metric(f, norm="l1", scale=scale, reference=ref)
    q = make_query(f, np.array([0.3, 0.2, 0.0]), target=(0.5, np.inf), reference=ref, options=CounterfactualOptions(norm="l1", scale=scale))[0]
    assert q.cost.cost.scale[2] == 1.0 and q.cost.cost.scale[0] > 0
