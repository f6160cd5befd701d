"""One-feature case splits (the ``cases`` strategy's flag split) through ``solver.solve_enumerated``: the
same optimum as the whole model with and without a start, and a side without points closes as infeasible."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lumber.passes.analyses.counterfactual.model import MilpModel
from lumber.passes.analyses.counterfactual.solver import INFEASIBLE, OPTIMAL, SolverOptions, solve, solve_enumerated


def _cover(seed: int, n: int = 7) -> tuple[MilpModel, np.ndarray, np.ndarray]:
    """A random set-cover MILP over binaries: min c.x with every row covered at least once."""
    rng = np.random.default_rng(seed)
    c = rng.uniform(0.5, 2.0, n)
    A = (rng.uniform(size=(5, n)) < 0.4).astype(float)
    A[A.sum(axis=1) == 0, 0] = 1.0
    m = MilpModel()
    cols = m.add_cols(n, 0.0, 1.0, c, integer=True)
    r, k = np.nonzero(A)
    m.add_rows(r, cols[k], np.ones(r.shape[0]), np.ones(5), np.full(5, np.inf))
    return m, c, A


def _exhaustive(c: np.ndarray, A: np.ndarray, fixed: dict[int, float] | None = None) -> float:
    best = np.inf
    for bits in itertools.product((0.0, 1.0), repeat=c.shape[0]):
        x = np.array(bits)
        if fixed and any(x[j] != v for j, v in fixed.items()):
            continue
        if np.all(A @ x >= 1):
            best = min(best, float(c @ x))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_one_column_cases_give_the_whole_models_optimum(seed: int) -> None:
    m, c, A = _cover(seed)
    whole = solve(m, SolverOptions(time_limit=10))
    start = whole.x.copy()
    for j in (0, 3):  # branch on a column the optimum uses or not, with and without the start
        cases = [(np.array([j]), np.array([v])) for v in (0.0, 1.0)]
        for s in (start, None):
            out = solve_enumerated(m, SolverOptions(time_limit=10), s, cases, np.array([0.0, c[j]]))
            assert out.status == OPTIMAL
            assert out.objective == pytest.approx(_exhaustive(c, A), abs=1e-9)
            assert out.bound == pytest.approx(out.objective, abs=1e-9)
            assert np.all(A @ out.x >= 1 - 1e-9)


def test_a_case_without_points_is_infeasible_and_the_other_decides() -> None:
    m, c, A = _cover(1)
    m.add_rows(np.array([0]), np.array([2]), np.array([1.0]), np.array([1.0]), np.array([np.inf]))  # x2 = 1
    cases = [(np.array([2]), np.array([v])) for v in (0.0, 1.0)]
    floors = np.zeros(2)
    out = solve_enumerated(m, SolverOptions(time_limit=10), None, cases, floors)
    assert out.status == OPTIMAL and out.objective == pytest.approx(_exhaustive(c, A, {2: 1.0}), abs=1e-9)
    infeasible = m.with_fixed(np.array([2]), np.array([0.0]))
    out = solve_enumerated(infeasible, SolverOptions(time_limit=10), None, cases, floors)
    assert out.status == INFEASIBLE and out.x is None


def test_with_fixed_leaves_the_model_alone() -> None:
    m, _, _ = _cover(2)
    lb, ub, rows = m.lb.copy(), m.ub.copy(), m.n_rows
    child = m.with_fixed(np.array([1, 4]), np.array([1.0, 0.0]))
    child.add_rows(np.array([0]), np.array([0]), np.array([1.0]), np.array([0.0]), np.array([0.0]))
    assert child.lb[1] == child.ub[1] == 1.0 and child.ub[4] == 0.0 and child.n_rows == rows + 1
    assert np.array_equal(m.lb, lb) and np.array_equal(m.ub, ub) and m.n_rows == rows
    assert m.csr()[2].shape[0] == rows + 1  # the parent's rows are untouched
