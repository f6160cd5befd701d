"""The MILP optimum equals an exhaustive search over the partition's cells, for every objective.

The solver keeps a small target margin (``MARGINS[0]`` relative to the leaf
values), so its optimum is bracketed: at least the exact optimum (any margin:
the returned point is verified) and at most the optimum over points with a
clearly larger margin. On random forests the two coincide almost always;
the bracket makes the test exact rather than lucky.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cf_brute import brute_force, target_margin, task_is_class
from lumber.ir import FeatureKind, Forest, Task
from lumber.passes.analyses.counterfactual import CounterfactualOptions, solve_counterfactual
from strategies import THRESHOLDS, forests

NORMS = ["l0", "l1", "l2", "linf"]
ROBUST = 1e-3
EXAMPLES = int(os.environ.get("CF_EXAMPLES", "20"))


def draw_case(data: st.DataObject, forest: Forest) -> np.ndarray:
    x0 = []
    for f in forest.schema.features:
        if f.kind == FeatureKind.CATEGORICAL:
            x0.append(float(data.draw(st.integers(0, 6))))
        else:
            x0.append(data.draw(st.one_of(THRESHOLDS, st.floats(-3, 8, width=32), st.just(float("nan")))))
    return np.array(x0, dtype=np.float64)


def cat_codes(forest: Forest, x0: np.ndarray) -> dict[int, list[float]]:
    out = {}
    for i, f in enumerate(forest.schema.features):
        if f.kind == FeatureKind.CATEGORICAL:
            out[i] = sorted(set(float(c) for c in range(6)) | {float(x0[i])})
    return out


def check_against_brute(forest: Forest, x0: np.ndarray, target, norm: str, wd: np.ndarray, wu: np.ndarray,
                        fast_path: bool = True) -> str:
    res = solve_counterfactual(forest, x0, target=target, options=CounterfactualOptions(
        norm=norm, weights=(wd, wu), time_limit=30, fast_path=fast_path))
    codes = cat_codes(forest, x0)
    if task_is_class(forest):
        def meets(X: np.ndarray, d: float = 0.0) -> np.ndarray:
            if d == 0.0:
                return forest.predict(X) == target
            return target_margin(forest, X, target) >= d
    else:
        lo, hi = target

        def meets(X: np.ndarray, d: float = 0.0) -> np.ndarray:
            p = forest.predict(X)
            return (p >= lo + d) & (p <= hi - d)
    exact, _ = brute_force(forest, x0, meets, norm, wd, wu, codes=codes)
    robust, _ = brute_force(forest, x0, lambda X: meets(X, ROBUST), norm, wd, wu, codes=codes)
    if not np.isfinite(exact) or res.status == "infeasible":
        # infeasible iff no point meets the target; a point with a vanishing margin may be missed
        assert res.status == "infeasible", (res.status, res.x)
        assert res.x is None
        assert not np.isfinite(robust), (exact, robust)
        return "infeasible"
    assert res.found and res.verified, (res.status, res.message)
    # only a vanishing target margin (below the solver's) may leave the optimum unproven: then the
    # verified heuristic point is returned, labelled as not proven minimal
    assert res.status == "optimal" or not np.isfinite(robust) or (
        res.status == "time_limit" and "heuristic" in res.message), (res.status, res.message)
    tol = 1e-6 * (1 + exact)  # the MIP gap the solver is asked to close
    assert res.cost >= exact - tol, (res.cost, exact)
    assert res.cost <= robust + tol, (res.cost, exact, robust, res.x)
    # the reported cost is the cost of the returned point, which the model really maps to the target
    assert meets(res.x[None, :])[0]
    return "equal" if abs(res.cost - exact) <= tol else "bracketed"


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "milp"])
@pytest.mark.parametrize("norm", NORMS)
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(forest=forests(max_trees=3, max_depth=3, max_features=3), data=st.data())
def test_optimal_equals_exhaustive(norm: str, fast_path: bool, forest: Forest, data: st.DataObject) -> None:
    x0 = draw_case(data, forest)
    n = forest.n_features
    wd = np.array(data.draw(st.lists(st.floats(0.5, 2.0), min_size=n, max_size=n)))
    wu = np.array(data.draw(st.lists(st.floats(0.5, 2.0), min_size=n, max_size=n)))
    if task_is_class(forest):
        k = 2 if forest.schema.task == Task.BINARY else forest.n_outputs
        current = int(forest.predict(x0[None, :])[0])
        target = data.draw(st.sampled_from([c for c in range(k) if c != current]))
    else:
        p = float(forest.predict(x0[None, :])[0])
        side = data.draw(st.sampled_from(["above", "below", "band"]))
        delta = data.draw(st.floats(0.1, 6.0))
        target = {"above": (p + delta, np.inf), "below": (-np.inf, p - delta), "band": (p + delta, p + 2 * delta)}[side]
    check_against_brute(forest, x0, target, norm, wd, wu, fast_path)
