"""The warm start's greedy walk scores its one-feature moves by walking only the trees whose path for the
current point tests the moved feature (heuristic._moved_margins); the margins must be those of walking
every tree (heuristic.fast_margins), on plain forests and on the forests it hands back to the full walk."""

from __future__ import annotations

import numpy as np
import pytest

import lumber
from lumber.passes.analyses.counterfactual import heuristic
from lumber.passes.analyses.counterfactual.deadline import Deadline


def _moves(X: np.ndarray, x: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, X.shape[1], n)
    Z = np.tile(x, (n, 1))
    Z[np.arange(n), cols] = X[rng.integers(0, X.shape[0], n), cols]
    return cols, Z


@pytest.mark.parametrize("kind", ["rf", "gbm-multiclass"])
def test_moved_margins_are_the_full_walks(kind: str) -> None:
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 7)).round(2)
    if kind == "rf":
        y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
        m = RandomForestClassifier(n_estimators=30, max_depth=6, random_state=0).fit(X, y)
    else:
        y = np.digitize(X[:, 0] + X[:, 3], [-0.5, 0.5])
        m = GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0).fit(X, y)
    f = lumber.load(m)
    for r in range(5):
        cols, Z = _moves(X, X[r], 300, r)
        got = heuristic._moved_margins(f, X[r], cols, Z, Deadline.never())
        assert got is not None
        np.testing.assert_allclose(got, heuristic.fast_margins(f, Z), rtol=0, atol=1e-12)


def test_moved_path_lengths_of_an_isolation_forest_are_the_full_walks() -> None:
    """The walk inside the plausible region scores its moves' isolation path lengths the same way."""
    from sklearn.ensemble import IsolationForest

    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 6)).round(2)
    f = lumber.load(IsolationForest(n_estimators=40, max_samples=32, random_state=0).fit(X))
    for r in range(4):
        cols, Z = _moves(X, X[r], 400, r)
        got = heuristic._moved_margins(f, X[r], cols, Z, Deadline.never())
        assert got is not None
        np.testing.assert_allclose(got, heuristic.fast_margins(f, Z), rtol=0, atol=1e-12)
        np.testing.assert_allclose(got.reshape(-1), f.evaluate(Z).reshape(-1), rtol=1e-12)


def test_moved_margins_at_the_thresholds_themselves() -> None:
    """A move onto a split threshold goes left (``x <= t``), one float above goes right: the line walk's
    intervals ``(lo, hi]`` must route both as the tree walk does."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 5)).round(1)
    f = lumber.load(RandomForestClassifier(n_estimators=20, max_depth=5, random_state=0)
                    .fit(X, X[:, 0] - X[:, 1] + X[:, 2] * X[:, 3] > 0))
    inner = f.left >= 0
    cols = f.feature[inner].astype(np.int64)
    thr = f.threshold[inner]
    cols = np.concatenate([cols, cols, cols])
    vals = np.concatenate([thr, np.nextafter(thr, np.inf), np.nextafter(thr, -np.inf)])
    for r in range(4):
        Z = np.tile(X[r], (cols.size, 1))
        Z[np.arange(cols.size), cols] = vals
        got = heuristic._moved_margins(f, X[r], cols, Z, Deadline.never())
        assert got is not None
        np.testing.assert_allclose(got, heuristic.fast_margins(f, Z), rtol=0, atol=1e-12)


def test_moved_margins_fall_back_on_nan_and_stop_at_the_deadline() -> None:
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    f = lumber.load(RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(X, X[:, 0] > 0))
    cols, Z = _moves(X, X[0], 50, 0)
    Z[3, cols[3]] = np.nan
    got = heuristic._moved_margins(f, X[0], cols, Z, Deadline.never())
    assert got is not None and np.allclose(got, heuristic.fast_margins(f, Z))
    assert heuristic._moved_margins(f, X[0], cols[:10], Z[:10] * 0 + X[0], Deadline(0.0, lambda: 1.0)) is None


def test_a_change_limit_checks_reference_rows_before_the_model(monkeypatch) -> None:
    """``changes <= k`` costs the warm start no model evaluations of rows it rules out: the rows the model
    sees are only those that keep the limit (the check runs on all rows at once, before the model)."""
    import lumber
    from sklearn.ensemble import RandomForestClassifier

    from lumber.ir import Constraints
    from lumber.passes.analyses.counterfactual import heuristic as H
    from lumber.passes.analyses.counterfactual.solve import make_query
    from lumber.passes.analyses.counterfactual.targets import forest_meets

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 6))
    rf = RandomForestClassifier(n_estimators=10, max_depth=4, random_state=0).fit(X, X[:, 0] + X[:, 1] > 0)
    f = lumber.load(rf)
    x0 = X[np.flatnonzero(rf.predict(X) == 0)[0]]
    seen: list[np.ndarray] = []
    real = H.fast_margins
    monkeypatch.setattr(H, "fast_margins", lambda forest, Z: seen.append(Z) or real(forest, Z))
    q = make_query(f, x0, 1, Constraints(max_changes=2), reference=X)[0]
    x = H.warm_start(q, lambda Z: forest_meets(f, q.spec, Z), X)
    assert x is not None and int(np.sum(x != q.x0)) <= 2
    cands = H.Candidates(q, lambda Z: forest_meets(f, q.spec, Z))
    R, ok = cands.repair(X)
    keep = int(cands.checker.ok(R[ok]).sum())  # reference rows that keep the limit once repaired
    assert 0 < keep < 1024 and seen
    assert max(Z.shape[0] for Z in seen) <= max(keep, 64)  # never a block of rows the limit rules out


def test_a_change_limit_spent_on_cheap_moves_still_finds_a_point() -> None:
    """``changes <= 2``: the cheapest move per unit of gain (a) cannot help reach the target and uses up
    one of the two changes; the walk by gain moves b and c instead, so the warm start has a point."""
    from builders import make_forest

    from lumber.ir import Constraints, PostTransform, Task
    from lumber.passes.analyses.counterfactual import CounterfactualOptions, solve_counterfactual
    from lumber.passes.analyses.counterfactual.solve import make_query
    from lumber.passes.analyses.counterfactual.targets import forest_meets

    f = make_forest([("a", 0.5, -1.0, -0.8), ("b", 0.5, -1.0, 1.0), ("c", 0.5, -1.0, 1.0)], ["a", "b", "c"],
                    task=Task.BINARY, post_transform=PostTransform.SIGMOID)
    x0 = np.zeros(3)
    opts = CounterfactualOptions(weights=(np.ones(3), np.array([0.01, 1.0, 1.0])))
    q = make_query(f, x0, 1, Constraints(max_changes=2), options=opts)[0]
    meets = lambda Z: forest_meets(f, q.spec, Z)  # noqa: E731
    assert heuristic.greedy(heuristic.Candidates(q, meets)) is None  # the cost-per-gain walk alone fails
    x = heuristic.warm_start(q, meets, None)
    assert x is not None and x[0] == 0.0 and x[1] > 0.5 and x[2] > 0.5
    r = solve_counterfactual(f, x0, 1, Constraints(max_changes=2), options=opts)
    assert r.optimal and r.cost == pytest.approx(float(q.cost.total(x[None, :])[0]))


def test_a_change_limit_keeps_the_best_features_of_the_walk_without_it() -> None:
    """``changes <= 2`` on a boosted model: the walk under the limit spends it on its first cheap moves; the
    walks from the best 2-subsets of the walk without the limit find cheaper points (within the limit, at
    the target), and the warm start keeps the cheapest, never below the proven optimum."""
    from sklearn.ensemble import GradientBoostingClassifier

    from lumber.ir import Constraints
    from lumber.passes.analyses.counterfactual import solve_counterfactual
    from lumber.passes.analyses.counterfactual.solve import make_query
    from lumber.passes.analyses.counterfactual.targets import forest_meets

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 6)).round(1)
    y = (X.sum(axis=1) + 0.5 * X[:, 0] * X[:, 1] > 2).astype(int)
    m = GradientBoostingClassifier(n_estimators=30, max_depth=3, random_state=0).fit(X, y)
    f = lumber.load(m)
    cons = Constraints(max_changes=2)
    cheaper = 0
    for r in (4, 17, 18, 23, 24):
        q = make_query(f, X[r], 1, cons)[0]
        meets = lambda Z, q=q: forest_meets(f, q.spec, Z)
        cands = heuristic.Candidates(q, meets)
        g = heuristic.greedy(cands)
        walked = float(q.cost.total(g[None, :])[0]) if g is not None else np.inf
        for p in heuristic._projected_walks(cands, 2, Deadline.never()):
            assert int(np.sum(p != q.x0)) <= 2 and meets(p[None, :])[0]
        x = heuristic.warm_start(q, meets, None)
        assert x is not None and int(np.sum(x != q.x0)) <= 2 and meets(x[None, :])[0]
        c = float(q.cost.total(x[None, :])[0])
        cheaper += g is not None and c < 0.9 * walked  # (on rows 4 and 17 the walk under the limit finds none)
        res = solve_counterfactual(f, X[r], 1, cons)
        assert res.optimal and len(res.changes) <= 2 and res.cost <= c * (1 + 1e-9)
    assert cheaper == 3
