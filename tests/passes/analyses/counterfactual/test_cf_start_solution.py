"""HiGHS quirks the solver layer works around: a start solution must never make the solver hand back a
dearer point than it proved optimal, a solve with another thread count must still solve, and raced runs
(``SolverOptions.race``) stop each other and leave no thread behind.

HiGHS 1.16, given the heuristic's point as a start, reported the optimum's objective (0.5) but
returned the start's columns (cost 1.5): lumber then said "optimal" at cost 1.5. The case is the
one hypothesis found in test_cf_optimality (a LightGBM zero-as-missing split: x = 0 goes left).
"""

from __future__ import annotations

import numpy as np

from lumber.ir import CategoryRule, Feature, FeatureKind, Forest, PostTransform, Schema, Task
from lumber.passes.analyses.counterfactual import CounterfactualOptions, solve_counterfactual
from lumber.passes.analyses.counterfactual.model import MilpModel
from lumber.passes.analyses.counterfactual.solver import SolverOptions, solve

nan = np.nan


def _zero_as_missing_forest() -> Forest:
    schema = Schema(
        features=(Feature(name="x0", kind=FeatureKind.NUMERICAL, categories=None),
                  Feature(name="x1", kind=FeatureKind.CATEGORICAL, categories=(0, 1, 2, 3, 4, 5))),
        task=Task.MULTICLASS, n_outputs=4, base_score=(0.0, 0.0, 0.0, 0.0), post_transform=PostTransform.SOFTMAX,
        average=False, input_dtype="float32", accumulate_dtype="float64", classes=None, sigmoid_alpha=1.0,
        category_rule=CategoryRule.LIGHTGBM, allow_nan=True, allow_inf=True, decision="proba",
        isolation_c=1.0, isolation_offset=0.0, source={})
    value = np.zeros((11, 4))
    value[2, 0] = 1.0
    value[4, 3] = 1.0
    return Forest(
        schema=schema, tree_offset=np.array([0, 5, 6, 11]), tree_output=np.array([-1, -1, -1], dtype=np.int32),
        left=np.array([1, 2, -1, -1, -1, -1, 7, -1, 9, -1, -1], dtype=np.int32),
        right=np.array([4, 3, -1, -1, -1, -1, 8, -1, 10, -1, -1], dtype=np.int32),
        feature=np.array([0, 0, -1, -1, -1, -1, 1, -1, 1, -1, -1], dtype=np.int32),
        threshold=np.array([-2.0, 0.25] + [nan] * 9),
        missing_left=np.array([True] + [False] * 10), missing_zero=np.array([True] + [False] * 10),
        is_categorical=np.array([False] * 6 + [True, False, True, False, False]),
        cat_offset=np.array([0, 0, 0, 0, 0, 0, 0, 2, 2, 3, 3, 3]), cat_values=np.array([0, 1, 0]),
        cat_in_set_left=np.zeros(11, dtype=bool), cat_invalid_left=np.zeros(11, dtype=bool), value=value, count=None)


def test_warm_started_optimum_is_the_cheapest_point() -> None:
    f = _zero_as_missing_forest()
    x0 = np.array([-0.5, 2.0])
    assert f.predict(np.array([[0.0, 2.0], [-0.5, 2.0]])).tolist() == [0, 3]  # x = 0 is missing: left
    for norm in ("l1", "l2", "linf"):
        warm = solve_counterfactual(f, x0, target=0, options=CounterfactualOptions(norm=norm, weights=(np.ones(2), np.ones(2)), time_limit=30))
        cold = solve_counterfactual(f, x0, target=0, options=CounterfactualOptions(norm=norm, weights=(np.ones(2), np.ones(2)), time_limit=30, warm_start=False))
        assert warm.status == cold.status == "optimal"
        assert warm.cost == cold.cost == 0.5, (norm, warm.cost, warm.x, cold.cost)
        assert f.predict(warm.x[None, :])[0] == 0


def test_solver_columns_price_at_the_reported_objective() -> None:
    # min x + y, x + y >= 1, binaries; the start (1, 1) costs 2, the optimum 1
    m = MilpModel()
    cols = m.add_cols(2, 0.0, 1.0, integer=True)
    m.cost[cols] = 1.0
    m.add_rows(np.zeros(2, dtype=np.int64), cols, np.ones(2), np.array([1.0]), np.array([np.inf]))
    out = solve(m, SolverOptions(time_limit=10), np.array([1.0, 1.0]))
    assert out.status == "optimal"
    assert abs(float(m.cost @ out.x) - out.objective) <= 1e-9
    assert out.objective == 1.0


def test_a_query_with_other_threads_after_one_with_two_still_solves() -> None:
    # HiGHS sizes one process-wide thread scheduler at its first solve: before solver._match_scheduler
    # restarted it, every threads=1 solve after a threads=2 one ended with status "Not Set" (an "error")
    m = MilpModel()
    cols = m.add_cols(2, 0.0, 1.0, integer=True)
    m.cost[cols] = 1.0
    m.add_rows(np.zeros(2, dtype=np.int64), cols, np.ones(2), np.array([1.0]), np.array([np.inf]))
    for threads in (2, 1, 1, 2, 1):
        out = solve(m, SolverOptions(time_limit=10, threads=threads))
        assert (out.status, out.objective) == ("optimal", 1.0), threads


def _tiny() -> MilpModel:
    m = MilpModel()
    cols = m.add_cols(2, 0.0, 1.0, integer=True)
    m.cost[cols] = 1.0
    m.add_rows(np.zeros(2, dtype=np.int64), cols, np.ones(2), np.array([1.0]), np.array([np.inf]))
    return m


def test_alternating_thread_counts_leave_the_scheduler_usable() -> None:
    # HiGHS sizes one scheduler per process by its first solve; another thread count must restart it
    for threads in (2, 1, 1, 2, 1, 2, 2, 1):
        out = solve(_tiny(), SolverOptions(time_limit=10, threads=threads), np.array([1.0, 1.0]))
        assert (out.status, out.objective) == ("optimal", 1.0), threads
