"""Solving a MILP case by case (``solver.solve_enumerated``): the whole model's optimum from any start,
floors and LP cut-offs that close only cases without a cheaper point, and honest bounds at the time limit."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lumber.passes.analyses.counterfactual import solver as SV
from lumber.passes.analyses.counterfactual.model import MilpModel
from lumber.passes.analyses.counterfactual.solver import (INFEASIBLE, OPTIMAL, TIME_LIMIT, SolveOutcome,
                                                          SolverOptions, solve, solve_enumerated)

from test_cf_cases import _cover, _exhaustive

CASE_COLS = np.array([0, 1, 2])


def _cases(c: np.ndarray, below: float = np.inf) -> tuple[list[SV.Case], np.ndarray]:
    """Every 0/1 value of columns 0-2 whose own cost is below ``below``, the cost as the floor."""
    cases, floors = [], []
    for bits in itertools.product((0.0, 1.0), repeat=CASE_COLS.shape[0]):
        v = np.array(bits)
        if float(c[CASE_COLS] @ v) < below:
            cases.append((CASE_COLS, v))
            floors.append(float(c[CASE_COLS] @ v))
    return cases, np.array(floors)


@pytest.mark.parametrize("seed", range(8))
def test_cases_give_the_whole_models_optimum_from_any_start(seed: int) -> None:
    m, c, A = _cover(seed)
    exact = _exhaustive(c, A)
    opt = solve(m, SolverOptions(time_limit=10)).x
    for start in (opt, np.ones(c.shape[0]), None):
        below = np.inf if start is None else float(c @ start)  # the caller leaves out what costs more
        cases, floors = _cases(c, below)
        out = solve_enumerated(m, SolverOptions(time_limit=10), start, cases, floors)
        assert out.status == OPTIMAL, out
        assert out.objective == pytest.approx(exact, abs=1e-9)
        assert out.bound == pytest.approx(out.objective, abs=1e-9) and out.gap == pytest.approx(0.0, abs=1e-9)
        assert np.all(A @ out.x >= 1 - 1e-9) and float(c @ out.x) == pytest.approx(exact, abs=1e-9)


def test_no_case_left_means_the_start_is_optimal() -> None:
    m, c, A = _cover(2)
    opt = solve(m, SolverOptions(time_limit=10)).x
    out = solve_enumerated(m, SolverOptions(time_limit=10), opt, [], np.zeros(0))
    assert out.status == OPTIMAL and out.objective == pytest.approx(_exhaustive(c, A), abs=1e-9)
    assert out.x is opt and out.nodes == 0


def test_an_infeasible_model_is_infeasible_in_every_case() -> None:
    m, c, _ = _cover(1)
    m.add_rows(np.zeros(c.shape[0], dtype=np.int64), np.arange(c.shape[0]), np.ones(c.shape[0]),
               np.array([-np.inf]), np.array([0.0]))  # nothing may be chosen: no cover
    cases, floors = _cases(c)
    out = solve_enumerated(m, SolverOptions(time_limit=10), None, cases, floors)
    assert out.status == INFEASIBLE and out.x is None and out.bound == np.inf


@pytest.mark.parametrize("seed", range(6))
def test_the_case_lp_closes_only_cases_without_a_cheaper_point(seed: int) -> None:
    """``_CaseLp.floor`` is the LP bound of the case (never above its exhaustive optimum) and is +inf only
    when no point of the case is at or below the cutoff; one loaded LP serves every case and cutoff."""
    m, c, A = _cover(seed)
    lp = SV._CaseLp(m, SolverOptions(time_limit=10))
    cases, _ = _cases(c)
    exact = _exhaustive(c, A)
    closed = 0
    for cutoff in (exact * 0.9, exact, exact * 1.2, np.inf):
        for cols, v in cases:
            best = _exhaustive(c, A, dict(zip(cols.tolist(), v.tolist())))
            floor = lp.floor((cols, v), cutoff, 5.0)
            if floor == np.inf:
                closed += 1
                assert best > cutoff - 1e-9 or best == np.inf
            else:
                assert floor <= best + 1e-9
    assert closed > 0, "no case was closed: the test does not reach the branch it is about"


def test_an_unproven_case_leaves_an_honest_bound(monkeypatch) -> None:
    """A case whose MILP ends at the time limit stays open: the result is the best point found, with the
    case's bound as the query's bound, not a claim of optimality."""
    m, c, A = _cover(3)
    real = SV.solve
    calls: list[int] = []

    def first_case_stops(model: MilpModel, opts: SolverOptions, start=None) -> SolveOutcome:
        calls.append(1)
        if len(calls) == 1:
            return SolveOutcome(TIME_LIMIT, None, np.inf, 0.25, np.inf, 0.1, 5, "time limit")
        return real(model, opts, start)

    monkeypatch.setattr(SV, "solve", first_case_stops)
    start = np.ones(c.shape[0])
    cases, floors = _cases(c)
    out = solve_enumerated(m, SolverOptions(time_limit=10), start, cases, np.zeros(len(cases)),
                           lp_seconds=0.0)  # no LP: every case goes to its MILP
    assert out.status == TIME_LIMIT and out.x is not None
    assert out.bound == pytest.approx(0.25) and out.objective == pytest.approx(_exhaustive(c, A), abs=1e-9)
    assert out.gap == pytest.approx((out.objective - 0.25) / out.objective)
