"""Solving a MILP as a disjunction of cases (``solver.solve_cases``): the same optimum as the whole model,
honest bounds and statuses when a case is not proven, and the fallback to the whole model."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from lumber.passes.analyses.counterfactual import solver as SV
from lumber.passes.analyses.counterfactual.model import MilpModel
from lumber.passes.analyses.counterfactual.solver import (INFEASIBLE, NO_SOLUTION, OPTIMAL, TIME_LIMIT, SolveOutcome,
                                                          SolverOptions, solve, solve_cases)


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
def test_cases_give_the_whole_models_optimum(seed: int) -> None:
    m, c, A = _cover(seed)
    whole = solve(m, SolverOptions(time_limit=10))
    start = whole.x.copy()
    for j in (0, 3):  # branch on a column the optimum uses or not, with and without the start
        cases = [(np.array([j]), np.array([v])) for v in (0.0, 1.0)]
        for s in (start, None):
            out = solve_cases(m, SolverOptions(time_limit=10), s, cases, probe_limit=5.0)
            assert out.status == OPTIMAL
            assert out.objective == pytest.approx(_exhaustive(c, A), abs=1e-9)
            assert out.bound == pytest.approx(out.objective, abs=1e-9)
            assert np.all(A @ out.x >= 1 - 1e-9)


def test_a_case_without_points_is_infeasible_and_the_other_decides() -> None:
    m, c, A = _cover(1)
    # fixing a column to 0 in every row's only cover makes that side infeasible
    m.add_rows(np.array([0]), np.array([2]), np.array([1.0]), np.array([1.0]), np.array([np.inf]))  # x2 = 1
    cases = [(np.array([2]), np.array([v])) for v in (0.0, 1.0)]
    out = solve_cases(m, SolverOptions(time_limit=10), None, cases, probe_limit=5.0)
    assert out.status == OPTIMAL and out.objective == pytest.approx(_exhaustive(c, A, {2: 1.0}), abs=1e-9)
    infeasible = m.with_fixed(np.array([2]), np.array([0.0]))
    out = solve_cases(infeasible, SolverOptions(time_limit=10), None, cases, probe_limit=5.0)
    assert out.status == INFEASIBLE and out.x is None


def test_with_fixed_leaves_the_model_alone() -> None:
    m, _, _ = _cover(2)
    lb, ub, rows = m.lb.copy(), m.ub.copy(), m.n_rows
    child = m.with_fixed(np.array([1, 4]), np.array([1.0, 0.0]))
    child.add_rows(np.array([0]), np.array([0]), np.array([1.0]), np.array([0.0]), np.array([0.0]))
    assert child.lb[1] == child.ub[1] == 1.0 and child.ub[4] == 0.0 and child.n_rows == rows + 1
    assert np.array_equal(m.lb, lb) and np.array_equal(m.ub, ub) and m.n_rows == rows
    assert m.csr()[2].shape[0] == rows + 1  # the parent's rows are untouched


def test_an_unproven_probe_falls_back_to_the_whole_model(monkeypatch) -> None:
    m, c, A = _cover(3)
    calls: list[int] = []
    real = SV.solve

    def probe_stops(model: MilpModel, opts: SolverOptions, start=None) -> SolveOutcome:
        calls.append(model.n_cols)
        if len(calls) == 1:  # the probe ends unproven, as at its time limit
            time.sleep(0.2)
            return SolveOutcome(TIME_LIMIT, None, np.inf, 0.0, np.inf, 0.2, 3)
        return real(model, opts, start)

    monkeypatch.setattr(SV, "solve", probe_stops)
    monkeypatch.setattr(SV, "_lp_infeasible", lambda *a: False)  # the LP does not decide the probe
    whole = real(m, SolverOptions(time_limit=10))
    cases = [(np.array([0]), np.array([v])) for v in (0.0, 1.0)]
    out = solve_cases(m, SolverOptions(time_limit=10), whole.x, cases, probe_limit=1.0)
    assert len(calls) == 2  # the probe, then the whole model (not the other case)
    assert out.status == OPTIMAL and out.objective == pytest.approx(_exhaustive(c, A), abs=1e-9)
    assert out.seconds >= 0.2  # the probe's wall time counts


@pytest.mark.parametrize("seed", range(4))
def test_cases_on_two_threads_give_the_whole_models_optimum(seed: int) -> None:
    """With ``threads=2`` the probe and the case holding the start run at once (solver._cases_at_once)."""
    import threading

    m, c, A = _cover(seed)
    before = threading.active_count()
    # from the optimum, and from every column set (the optimum may then sit in the probed case)
    for start, j in itertools.product((solve(m, SolverOptions(time_limit=10)).x, np.ones(c.shape[0])), range(7)):
        cases = [(np.array([j]), np.array([v])) for v in (0.0, 1.0)]
        out = solve_cases(m, SolverOptions(time_limit=10, threads=2), start, cases, probe_limit=5.0)
        assert out.status == OPTIMAL and out.bound == pytest.approx(out.objective, abs=1e-9)
        assert out.objective == pytest.approx(_exhaustive(c, A), abs=1e-9)
    assert threading.active_count() == before


def test_an_unproven_probe_on_two_threads_stops_the_other_case_and_solves_the_whole_model(monkeypatch) -> None:
    import threading

    m, c, A = _cover(4)
    real = SV._solve_highs
    seen: list[str] = []

    def probe_stops(model, opt, start=None, stop=None):  # type: ignore[no-untyped-def]
        if start is None and stop is not None:  # the probe: ends unproven, as at its time limit
            seen.append("probe")
            return SolveOutcome(TIME_LIMIT, None, np.inf, 0.0, np.inf, 0.1, 3)
        if stop is not None:  # the case holding the start: runs until it is stopped
            assert stop.wait(10.0)
            seen.append("stopped")
            return SolveOutcome(TIME_LIMIT, None, np.inf, 0.0, np.inf, 0.1, 2)
        seen.append("whole")
        return real(model, opt, start, stop)

    monkeypatch.setattr(SV, "_solve_highs", probe_stops)
    monkeypatch.setattr(SV, "_lp_infeasible", lambda *a: False)
    start = real(m, SolverOptions(time_limit=10), None).x
    cases = [(np.array([1]), np.array([v])) for v in (0.0, 1.0)]
    before = threading.active_count()
    out = solve_cases(m, SolverOptions(time_limit=10, threads=2), start, cases, probe_limit=1.0)
    assert sorted(seen) == ["probe", "stopped", "whole"] and threading.active_count() == before
    assert out.status == OPTIMAL and out.objective == pytest.approx(_exhaustive(c, A), abs=1e-9)


def test_an_error_on_either_thread_stops_the_other_and_reaches_the_caller(monkeypatch) -> None:
    import threading

    m, _, _ = _cover(5)

    def held_fails(model, opt, start=None, stop=None):  # type: ignore[no-untyped-def]
        if start is not None:
            raise RuntimeError("HiGHS failed")
        assert stop is not None and stop.wait(10.0)  # the probe runs until the error stops it
        return SolveOutcome(TIME_LIMIT, None, np.inf, 0.0, np.inf, 0.1, 1)

    monkeypatch.setattr(SV, "_solve_highs", held_fails)
    monkeypatch.setattr(SV, "_lp_infeasible", lambda *a: False)
    cases = [(np.array([0]), np.array([v])) for v in (0.0, 1.0)]
    before = threading.active_count()
    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match="HiGHS failed"):
        solve_cases(m, SolverOptions(time_limit=10, threads=2), np.ones(7), cases, probe_limit=5.0)
    assert threading.active_count() == before and time.perf_counter() - t0 < 5.0


def test_a_probe_whose_lp_is_infeasible_needs_no_milp(monkeypatch) -> None:
    m, c, A = _cover(1)
    m.add_rows(np.array([0]), np.array([2]), np.array([1.0]), np.array([1.0]), np.array([np.inf]))  # x2 = 1
    calls: list[int] = []
    real = SV.solve

    def counted(model: MilpModel, opts: SolverOptions, start=None) -> SolveOutcome:
        calls.append(model.n_cols)
        return real(model, opts, start)

    start = real(m, SolverOptions(time_limit=10)).x
    monkeypatch.setattr(SV, "solve", counted)
    cases = [(np.array([2]), np.array([v])) for v in (0.0, 1.0)]
    out = solve_cases(m, SolverOptions(time_limit=10), start, cases, probe_limit=1.0)
    assert len(calls) == 1  # only the case holding the start: x2 = 0 has no LP point
    assert out.status == OPTIMAL and out.objective == pytest.approx(_exhaustive(c, A, {2: 1.0}), abs=1e-9)


def test_an_infeasible_lp_means_no_point() -> None:
    """Sound: whenever ``_lp_infeasible`` says so, enumeration finds no point under the fixing and the cutoff
    (and it does say so on some of these)."""
    said = 0
    for seed in range(8):
        rng = np.random.default_rng(seed)
        m, c, A = _cover(seed)
        for j, v in itertools.product(range(c.shape[0]), (0.0, 1.0)):
            child = m.with_fixed(np.array([j]), np.array([v]))
            cut = float(rng.uniform(0.5, 1.5) * _exhaustive(c, A))
            child.add_cost_row(cut)
            if SV._lp_infeasible(child, SolverOptions(time_limit=10), 10.0):
                said += 1
                assert not _exhaustive(c, A, {j: v}) <= cut + 1e-9
    assert said > 0


def test_combined_status_and_bound() -> None:
    x = np.zeros(1)
    opt = SolveOutcome(OPTIMAL, x, 2.0, 2.0, 0.0, 1.0, 1)
    inf = SolveOutcome(INFEASIBLE, None, np.inf, np.inf, np.inf, 1.0, 1)
    lim = SolveOutcome(TIME_LIMIT, x, 3.0, 1.5, 0.5, 1.0, 1)
    none = SolveOutcome(NO_SOLUTION, None, np.inf, 1.0, np.inf, 1.0, 1)
    both = SV._combine([opt, inf], complete=True, rel_gap=1e-6, seconds=2.0)
    assert (both.status, both.objective, both.bound) == (OPTIMAL, 2.0, 2.0)
    # an unproven case whose bound is below the best point leaves a gap
    gap = SV._combine([opt, none], complete=True, rel_gap=1e-6, seconds=2.0)
    assert (gap.status, gap.objective, gap.bound) == (TIME_LIMIT, 2.0, 1.0) and gap.gap == pytest.approx(0.5)
    # ... and one whose bound is above it does not
    done = SV._combine([opt, SolveOutcome(TIME_LIMIT, x, 4.0, 2.5, 0.3, 1.0, 1)], complete=True, rel_gap=1e-6,
                       seconds=2.0)
    assert done.status == OPTIMAL and done.objective == 2.0
    # a case that never ran bounds nothing
    cut = SV._combine([lim], complete=False, rel_gap=1e-6, seconds=1.0)
    assert cut.status == TIME_LIMIT and cut.bound == -np.inf
    assert SV._combine([inf, inf], complete=True, rel_gap=1e-6, seconds=1.0).status == INFEASIBLE
    assert SV._combine([inf, none], complete=True, rel_gap=1e-6, seconds=1.0).status == NO_SOLUTION


def test_probe_limit_floor_and_ceiling() -> None:
    from lumber.passes.analyses.counterfactual.solve import _probe_limit

    assert _probe_limit(30.0) == pytest.approx(1.5)  # 5% of a long limit
    assert _probe_limit(100.0) == pytest.approx(5.0)
    assert _probe_limit(5.0) == pytest.approx(1.0)  # at least a second
    assert _probe_limit(2.0) == pytest.approx(0.5)  # at most a quarter
