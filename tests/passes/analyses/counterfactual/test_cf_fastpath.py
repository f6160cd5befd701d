"""The fast path: a warm start proven optimal by the per-tree bound, and the batch path that checks every case
and point with the source model once per chunk.

- :func:`leaf_bound_proves` and :func:`split_bound_proves` are sound: whenever they prove a cost, brute force
  over the cells finds no point of the target at or below it (hypothesis, random forests of every kind the
  strategies draw);
- on a population the fast path answers some queries without a MILP, each equal to the MILP's optimum;
- a batch gives every case the answer a single query gives it, each point verified by the source model.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import RandomForestClassifier

import lumber
from cf_brute import brute_force, task_is_class
from lumber.ir import Constraints, Forest, Task
from lumber.passes.analyses.counterfactual import CounterfactualOptions, make_query
from lumber.passes.analyses.counterfactual.fastpath import leaf_bound_proves, split_bound_proves
from strategies import forests
from test_cf_optimality import EXAMPLES, NORMS, cat_codes, draw_case


@pytest.mark.parametrize("norm", NORMS)
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(forest=forests(max_trees=3, max_depth=3, max_features=3), data=st.data())
def test_leaf_bound_is_sound(norm: str, forest: Forest, data: st.DataObject) -> None:
    if not task_is_class(forest):
        return  # (the bound proves only class targets: it returns False for intervals)
    x0 = draw_case(data, forest)
    k = 2 if forest.schema.task == Task.BINARY else forest.n_outputs
    current = int(forest.predict(x0[None, :])[0])
    target = data.draw(st.sampled_from([c for c in range(k) if c != current]))
    n = forest.n_features
    wd = np.array(data.draw(st.lists(st.floats(0.5, 2.0), min_size=n, max_size=n)))
    wu = np.array(data.draw(st.lists(st.floats(0.5, 2.0), min_size=n, max_size=n)))
    exact, _ = brute_force(forest, x0, lambda X: forest.predict(X) == target, norm, wd, wu,
                           codes=cat_codes(forest, x0))
    q = make_query(forest, x0, target, options=CounterfactualOptions(norm=norm, weights=(wd, wu)))[0]
    features = list(range(n))
    for cost in data.draw(st.lists(st.floats(0.0, 6.0), min_size=1, max_size=4)) + [exact * (1 - 1e-6)]:
        if not np.isfinite(cost):
            continue
        if leaf_bound_proves(q, cost):
            assert exact > cost, (exact, cost)  # nothing at or below a proven cost reaches the target
        if split_bound_proves(q, cost, features, depth=2):
            assert exact > cost, ("split", exact, cost)


def _population() -> tuple[RandomForestClassifier, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = np.round(rng.normal(0.0, 1.0, size=(600, 4)), 2)
    y = ((X[:, 0] + 0.5 * X[:, 1] - 0.3 * X[:, 2]) > 0.2).astype(int)
    rf = RandomForestClassifier(n_estimators=12, max_depth=3, random_state=0).fit(X, y)
    rejected = X[rf.predict(X) == 0][:24]
    return rf, X, rejected


def test_fast_path_answers_equal_the_milp() -> None:
    rf, X, rejected = _population()
    fast = lumber.counterfactual(rf, rejected, target=1, reference=X,
                                 options=lumber.CounterfactualOptions(norm="l1", scale="minmax"))
    milp = lumber.counterfactual(rf, rejected, target=1, reference=X,
                                 options=lumber.CounterfactualOptions(norm="l1", scale="minmax", fast_path=False))
    assert any(r.attempts == 0 for r in fast)  # some answers are proven without a MILP
    assert all(r.attempts > 0 for r in milp if r.found)
    for a, b in zip(fast, milp):
        assert a.optimal and b.optimal and a.verified and not a.violations
        assert a.cost == pytest.approx(b.cost, rel=1e-6, abs=1e-12)
        if a.attempts == 0:  # proven by the bound: the point's cost within the MIP gap of it
            assert a.gap <= 1e-6 * (1 + 1e-6) and a.bound <= a.cost
        assert rf.predict(a.x[None, :])[0] == 1


@pytest.mark.parametrize("strategy", ["whole", "cases"])
def test_batch_equals_single_queries(strategy: str) -> None:
    rf, X, rejected = _population()
    cons = Constraints.from_mapping({"immutable": ["f3"], "increase": ["f2"], "max_changes": 2})
    opts = lumber.CounterfactualOptions(norm="l1", scale="minmax", strategy=strategy)
    batch = lumber.counterfactual(rf, rejected, target=1, constraints=cons, reference=X,
                                  options=opts)
    assert len(batch) == len(rejected)
    for x, b in zip(rejected, batch):
        one = lumber.counterfactual(rf, x, target=1, constraints=cons, reference=X, options=opts)
        assert b.status == one.status
        assert b.cost == pytest.approx(one.cost, rel=1e-9, abs=1e-12)
        assert b.original_prediction == one.original_prediction == 0
        if b.found:
            assert b.verified and not b.violations and b.prediction == one.prediction == 1
            assert rf.predict(b.x[None, :])[0] == 1
