"""``time_limit`` bounds the whole query (warm start, model building, solve), driven by a fake clock.

No test here measures time: the clock is a number the test moves by hand, so
each stage sees exactly the deadline the test sets up.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from lumber.passes.analyses.counterfactual import CounterfactualOptions, solve as solve_mod
from lumber.passes.analyses.counterfactual import heuristic
from lumber.passes.analyses.counterfactual.deadline import Deadline
from lumber.passes.analyses.counterfactual.problem import build
from lumber.passes.analyses.counterfactual.solve import make_query, solve_counterfactual


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def rf_case():
    from sklearn.ensemble import RandomForestClassifier

    import lumber

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    m = RandomForestClassifier(n_estimators=15, max_depth=5, random_state=0).fit(X, y)
    f = lumber.load(m)
    x = X[np.flatnonzero(m.predict(X) == 0)[0]]
    return f, X, x


def test_deadline_share_and_expiry() -> None:
    clock = FakeClock()
    d = Deadline.after(10.0, clock)
    assert d.remaining() == 10.0 and not d.expired()
    half = d.share(0.5)
    clock.now = 4.0
    assert half.remaining() == 1.0 and d.remaining() == 6.0
    clock.now = 5.0
    assert half.expired() and not d.expired()
    assert Deadline.after(math.inf, clock).share(0.5).remaining() == math.inf
    assert not Deadline.never().expired()


def test_solver_gets_what_is_left(rf_case, monkeypatch) -> None:
    """With a clock that does not move, HiGHS is given exactly the whole time_limit (the fast path, which
    would prove this case without HiGHS, is off)."""
    f, X, x = rf_case
    seen = []
    real = solve_mod.solve

    def spy(model, opts, start=None):
        seen.append(opts.time_limit)
        return real(model, opts, start)

    monkeypatch.setattr(solve_mod, "solve", spy)
    res = solve_counterfactual(f, x, target=1, reference=X, clock=FakeClock(),
                               options=CounterfactualOptions(time_limit=7.0, fast_path=False))
    assert res.status == "optimal" and res.verified
    assert seen and seen[0] == 7.0


def test_warm_start_that_eats_the_budget_returns_its_point_as_time_limit(rf_case, monkeypatch) -> None:
    f, X, x = rf_case
    clock = FakeClock()
    real = solve_mod.warm_start

    def slow_warm_start(*a, **kw):
        out = real(*a, **kw)
        clock.now += 100.0  # the warm start ran past the deadline
        return out

    monkeypatch.setattr(solve_mod, "warm_start", slow_warm_start)
    monkeypatch.setattr(solve_mod, "solve", lambda *a, **kw: pytest.fail("solver called after the deadline"))
    res = solve_counterfactual(f, x, target=1, reference=X, clock=clock, options=CounterfactualOptions(time_limit=2.0))
    assert res.status == "time_limit" and res.found and res.verified and not res.violations
    assert res.bound == 0.0 and res.gap == 1.0 and res.cost > 0
    assert "time limit" in res.message


def test_no_point_by_the_deadline_says_so(rf_case, monkeypatch) -> None:
    f, X, x = rf_case
    clock = FakeClock()

    def fruitless_warm_start(*a, **kw):
        clock.now += 100.0
        return None

    monkeypatch.setattr(solve_mod, "warm_start", fruitless_warm_start)
    monkeypatch.setattr(solve_mod, "solve", lambda *a, **kw: pytest.fail("solver called after the deadline"))
    res = solve_counterfactual(f, x, target=1, reference=X, clock=clock, options=CounterfactualOptions(time_limit=2.0))
    assert res.status == "no_solution" and res.x is None and res.timed_out
    assert "no point found" in res.message


def test_warm_start_gets_half_and_stops_at_it(rf_case, monkeypatch) -> None:
    """The greedy walk asks the deadline before every step and stops once it has passed."""
    f, X, x = rf_case
    q = make_query(f, x, target=1)[0]
    meets = lambda Z: solve_mod.forest_meets(q.forest, q.spec, Z)  # noqa: E731
    calls = []
    real, real_moved = heuristic.fast_margins, heuristic._moved_margins
    monkeypatch.setattr(heuristic, "fast_margins", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(heuristic, "_moved_margins", lambda *a: calls.append(1) or real_moved(*a))
    heuristic.warm_start(q, meets, None)
    free = len(calls)
    assert free > 3
    clock = FakeClock()
    calls.clear()
    d = Deadline.after(1.0, clock)
    clock.now = 1.0
    assert heuristic.warm_start(q, meets, X, deadline=d) is None  # nothing evaluated after the deadline
    assert len(calls) <= 1  # the walk's starting score only
    # passed on: solve_counterfactual gives the warm start half of what is left
    shares = []
    real_ws = solve_mod.warm_start
    monkeypatch.setattr(solve_mod, "warm_start",
                        lambda *a, deadline, **kw: shares.append(deadline.remaining()) or real_ws(*a, deadline=deadline,
                                                                                                  **kw))
    solve_counterfactual(f, x, target=1, clock=FakeClock(), options=CounterfactualOptions(time_limit=8.0))
    assert shares == [4.0]


def test_build_stops_at_the_deadline(rf_case) -> None:
    f, X, x = rf_case
    q = make_query(f, x, target=1)[0]
    clock = FakeClock()
    d = Deadline.after(1.0, clock)
    assert not build(q, deadline=d).expired
    clock.now = 2.0
    prob = build(q, deadline=d)
    assert prob.expired and not prob.encodings


def test_leaf_cuts_stop_at_the_deadline(rf_case, monkeypatch) -> None:
    """The leaf-cost cuts are the last costly stage of building: once the deadline passes inside it, no
    further rows are added and the problem comes back expired (the caller returns its best point)."""
    from lumber.passes.analyses.counterfactual import leafcuts

    f, X, x = rf_case
    q = make_query(f, x, target=1)[0]
    full = build(q)
    assert not full.expired
    clock = FakeClock()
    real = leafcuts.leaf_costs

    def slow_leaf_costs(*a, **kw):
        out = real(*a, **kw)
        clock.now += 100.0  # computing the leaf costs ran past the deadline
        return out

    monkeypatch.setattr(leafcuts, "leaf_costs", slow_leaf_costs)
    prob = build(q, deadline=Deadline.after(2.0, clock))
    assert prob.expired
    assert prob.model.n_rows < full.model.n_rows  # not one leaf cut was added after the deadline
    # already past the deadline when the stage starts: the leaf costs are not even computed
    calls = []
    monkeypatch.setattr(leafcuts, "leaf_costs", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    n = leafcuts.add_leaf_cuts(f, *_leaf_cut_args(q), deadline=Deadline.after(0.0, FakeClock()))
    assert n == 0 and not calls


def _leaf_cut_args(q):
    """(choices, encoding, domains, cost, zcols, model) of a freshly built problem of ``q``."""
    from lumber.passes.analyses.counterfactual.trees import classify

    prob = build(q, leaf_cuts=False)
    enc = prob.encodings[0]
    return classify(q.forest, prob.domains), enc, prob.domains, q.cost, prob.zcols, prob.model
