"""Isolation-forest plausibility: exact against exhaustive search, and end to end through the API."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.ensemble import IsolationForest, RandomForestClassifier

import lumber
from cf_brute import brute_force
from lumber.ir import Feature, FeatureKind
from lumber.passes.analyses.counterfactual import isolation_threshold, path_lengths, solve_counterfactual


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0.0, 1.0, size=(150, 2)), rng.normal(2.5, 0.7, size=(150, 2))])
    y = np.r_[np.zeros(150, dtype=int), np.ones(150, dtype=int)]
    rf = RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0).fit(X, y)
    iso = IsolationForest(n_estimators=4, max_samples=24, random_state=0).fit(X[y == 1])
    return X, y, rf, iso


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_plausible_optimum_equals_exhaustive(blobs, norm) -> None:
    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    assert np.mean(path_lengths(fi, X[y == 1]) < delta) == pytest.approx(0.1, abs=0.02)
    ones = np.ones(2)
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:4]]:
        r = solve_counterfactual(f, x0, target=1, norm=norm, isolation=(fi, delta))
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, norm, ones, ones,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,))
        assert r.optimal and r.verified, (r.status, r.message)
        assert path_lengths(fi, r.x[None, :])[0] >= delta
        assert r.cost == pytest.approx(exact, rel=1e-6)
        free = solve_counterfactual(f, x0, target=1, norm=norm)
        assert free.cost <= r.cost + 1e-12  # plausibility can only cost more


def test_api_fits_isolation_forest_from_contamination(blobs, monkeypatch) -> None:
    import lumber.compiler.api.counterfactual as api

    monkeypatch.setattr(api, "ISOLATION_TREES", 4)  # the default (25 trees) takes seconds; same code path
    X, y, rf, _ = blobs
    x0 = X[np.flatnonzero(rf.predict(X) == 0)[0]]
    r = lumber.counterfactual(rf, x0, reference=X, contamination=0.2, time_limit=60)
    assert r.status == "optimal" and r.verified
    assert rf.predict(r.x[None, :])[0] == 1
    free = lumber.counterfactual(rf, x0, reference=X, time_limit=60)
    assert free.cost <= r.cost + 1e-12


def test_api_rejects_plausibility_without_reference(blobs) -> None:
    X, y, rf, iso = blobs
    with pytest.raises(lumber.LumberError, match="reference rows"):
        lumber.counterfactual(rf, X[0], contamination=0.1)


def test_file_parameters_size_the_isolation_forest(blobs, monkeypatch) -> None:
    """`n_estimators`, `max_samples` and `random_state` in the constraint file reach the fitted forest."""
    fitted = []
    real_fit = IsolationForest.fit

    def recording_fit(self, X, y=None, sample_weight=None):  # type: ignore[no-untyped-def]
        fitted.append(self.get_params())
        return real_fit(self, X, y, sample_weight)

    monkeypatch.setattr(IsolationForest, "fit", recording_fit)
    X, y, rf, _ = blobs
    x0 = X[np.flatnonzero(rf.predict(X) == 0)[0]]
    text = "plausible isolation-forest(contamination=0.2, n_estimators=3, max_samples=16, random_state=5)\n"
    r = lumber.counterfactual(rf, x0, constraints=text, reference=X, time_limit=60)
    assert fitted and {k: fitted[0][k] for k in ("n_estimators", "max_samples", "random_state")} == {
        "n_estimators": 3, "max_samples": 16, "random_state": 5}
    assert r.status == "optimal" and r.verified and rf.predict(r.x[None, :])[0] == 1


@pytest.mark.parametrize("seed, samples", [(0, 8), (1, 24), (2, 64)])
def test_collapsed_isolation_forest_scores_bit_identically(seed, samples) -> None:
    """The MILP encodes the isolation forest with uniform subtrees collapsed: same scores, fewer splits."""
    from lumber.passes.analyses.counterfactual.plausibility import collapse_uniform

    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(size=(300, 3)), 1)  # ties make equal-valued sibling leaves common
    fi = lumber.load(IsolationForest(n_estimators=20, max_samples=samples, random_state=seed).fit(X))
    c = collapse_uniform(fi).validate()
    assert c.n_nodes < fi.n_nodes
    Z = np.vstack([X, rng.normal(scale=3.0, size=(2000, 3))])
    assert np.array_equal(c.evaluate(Z), fi.evaluate(Z))
    leaves = c.left < 0
    inner = np.flatnonzero(~leaves)
    both = leaves[c.left[inner]] & leaves[c.right[inner]]
    assert not np.any(c.value[c.left[inner[both]], 0] == c.value[c.right[inner[both]], 0])  # nothing left to merge
    assert collapse_uniform(c).n_nodes == c.n_nodes


def test_collapse_keeps_a_forest_without_uniform_subtrees() -> None:
    from lumber.passes.analyses.counterfactual.plausibility import collapse_uniform

    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 2))
    f = lumber.load(RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, X[:, 0] > 0))
    c = collapse_uniform(f)
    assert np.array_equal(c.evaluate(X), f.evaluate(X)) and c.n_nodes <= f.n_nodes


def _assert_six_cases_match_plain_and_exhaustive(f, fi, X, rf, delta, norm, **kw) -> None:  # type: ignore[no-untyped-def]
    """Six class-0 cases: the shipped solve (warm start, relaxation, cut loop as configured, ``kw``) is
    proven optimal, verified, plausible and costs what the plain MILP and exhaustive search say."""
    ones = np.ones(2)
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:6]]:
        r = solve_counterfactual(f, x0, target=1, norm=norm, isolation=(fi, delta), reference=X, **kw)
        plain = solve_counterfactual(f, x0, target=1, norm=norm, isolation=(fi, delta), use_warm_start=False)
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, norm, ones, ones,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,))
        assert r.optimal and r.verified and plain.optimal, (r.status, r.message, plain.status)
        assert r.cost == pytest.approx(plain.cost, rel=1e-6, abs=1e-12)
        assert r.cost == pytest.approx(exact, rel=1e-6, abs=1e-12)
        assert path_lengths(fi, r.x[None, :])[0] >= delta


@pytest.mark.parametrize("norm", ["l0", "l1", "l2"])
def test_relaxation_first_matches_the_plain_milp(blobs, norm, monkeypatch) -> None:
    """Solving the isolation forest alone first (lower bound, early optimum, walk start) changes no optimum:
    the same cost as the full MILP without any heuristic, and as exhaustive search."""
    import lumber.passes.analyses.counterfactual.solve as S

    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    seen: list[str] = []
    real = S._plausible_relaxation

    def recording(*a, **k):  # type: ignore[no-untyped-def]
        out = real(*a, **k)
        seen.append("optimum" if isinstance(out, S.CounterfactualResult) else "start" if out else "none")
        return out

    monkeypatch.setattr(S, "_plausible_relaxation", recording)
    _assert_six_cases_match_plain_and_exhaustive(f, fi, X, rf, delta, norm)
    assert len(seen) == 6 and "none" not in seen, seen


def test_relaxation_optimum_that_reaches_the_target_is_returned_as_optimal(monkeypatch) -> None:
    """Where the isolation forest's own optimum (no explained model) already gets the target, it is the
    query's optimum: returned as optimal with a zero gap, equal to exhaustive search."""
    import lumber.passes.analyses.counterfactual.solve as S

    rng = np.random.default_rng(5)
    X = rng.uniform(-3.0, 3.0, size=(400, 2))
    y = (X[:, 0] > 0).astype(int)
    rf = RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    ones = np.ones(2)
    f = lumber.load(rf)
    core = X[X[:, 0] > 1.5]  # the plausible region: inside class 1
    fi = lumber.load(IsolationForest(n_estimators=5, max_samples=32, random_state=0).fit(core))
    delta = isolation_threshold(fi, core, 0.1)
    hit: list[bool] = []
    real = S._plausible_relaxation
    monkeypatch.setattr(S, "_plausible_relaxation",
                        lambda *a, **k: (lambda o: hit.append(isinstance(o, S.CounterfactualResult)) or o)(real(*a, **k)))
    G = np.array([[a, b] for a in np.linspace(-3, 3, 13) for b in np.linspace(-3, 3, 13)])
    early = 0
    for x0 in G[(rf.predict(G) == 0) & (path_lengths(fi, G) < delta)]:
        r = solve_counterfactual(f, x0, target=1, norm="l1", isolation=(fi, delta), reference=X)
        if not hit[-1]:
            continue
        early += 1
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, "l1", ones, ones,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,))
        assert r.optimal and r.verified and r.gap == 0.0 and r.bound == pytest.approx(r.cost)
        assert r.cost == pytest.approx(exact, rel=1e-6)
    assert early >= 1


@pytest.fixture
def cut_loop(monkeypatch):
    """The cut loop on (it is off by default), with room to finish; records what each loop returned."""
    import lumber.passes.analyses.counterfactual.solve as S

    monkeypatch.setattr(S, "CUT_ROUNDS", 200)
    monkeypatch.setattr(S, "CUT_SHARE", 1.0)
    seen: list[object] = []
    real = S._cut_loop
    monkeypatch.setattr(S, "_cut_loop", lambda *a, **k: (lambda o: seen.append(o) or o)(real(*a, **k)))
    return seen


@pytest.mark.parametrize("norm", ["l0", "l1", "l2"])
def test_cut_loop_matches_full_encoding_and_exhaustive(blobs, norm, cut_loop) -> None:
    """The isolation forest as "leave this box" cuts on the plain MILP: every optimum it proves is the
    full encoding's (no heuristic, no cut loop) and exhaustive search's."""
    import lumber.passes.analyses.counterfactual.solve as S

    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    _assert_six_cases_match_plain_and_exhaustive(f, fi, X, rf, delta, norm)
    proved = [o for o in cut_loop if isinstance(o, S.CounterfactualResult)]
    assert len(proved) >= 3, cut_loop  # the loop itself proved most of them (the rest: the relaxation did)


def test_cut_loop_leaves_an_infeasible_query_infeasible(blobs, cut_loop) -> None:
    """Nothing plausible reaches the target within the bounds: no heuristic point, so no loop; infeasible."""
    from lumber.ir import Constraints

    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    x0 = X[np.flatnonzero(rf.predict(X) == 0)[0]]
    cons = Constraints.from_mapping({"immutable": ["f0"], "bounds": {"f1": (-5.0, float(x0[1]))}})
    assert list(f.schema.feature_names) == ["f0", "f1"]
    ones = np.ones(2)
    lo, hi = np.array([x0[0], -5.0]), np.array([x0[0], x0[1]])
    exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, "l1", ones, ones, lo=lo, hi=hi,
                           extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,))
    r = solve_counterfactual(f, x0, target=1, constraints=cons, norm="l1", isolation=(fi, delta), reference=X)
    assert exact == np.inf and r.status == "infeasible" and r.x is None, (exact, r.status)


def test_cut_loop_stops_at_its_deadline_and_the_full_encoding_finishes(blobs, cut_loop, monkeypatch) -> None:
    """A clock that passes the loop's share of the time during its first solve: the loop stops there (one
    solve, a lower bound at most the optimum) and the full encoding still proves the exhaustive optimum."""
    import lumber.passes.analyses.counterfactual.solve as S
    from lumber.passes.analyses.counterfactual.solver import HighsSession

    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    now = [0.0]
    runs: list[float] = []

    class SlowSession(HighsSession):  # the loop's solves only (the others build their own session)
        def run(self, start=None, time_limit=None):  # type: ignore[no-untyped-def]
            runs.append(time_limit)
            out = super().run(start, time_limit)
            now[0] += 30.0  # the loop's share is 0.2 of 100 s
            return out

    monkeypatch.setattr(S, "HighsSession", SlowSession)
    monkeypatch.setattr(S, "CUT_SHARE", 0.2)
    ones = np.ones(2)
    checked = 0
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:6]]:
        runs.clear()
        n_loops = len(cut_loop)
        r = solve_counterfactual(f, x0, target=1, norm="l1", isolation=(fi, delta), reference=X,
                                 time_limit=100.0, clock=lambda: now[0])
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, "l1", ones, ones,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,))
        assert r.verified and r.cost == pytest.approx(exact, rel=1e-6, abs=1e-12), (r.status, r.cost, exact)
        assert path_lengths(fi, r.x[None, :])[0] >= delta
        if len(cut_loop) > n_loops and not isinstance(cut_loop[-1], S.CounterfactualResult):
            assert len(runs) == 1 and runs[0] <= 20.0 + 1e-9  # one solve, given the loop's share only
            assert cut_loop[-1] <= exact * (1 + 1e-6) + 1e-12  # what it proved is a lower bound
            assert r.optimal
            checked += 1
    assert checked >= 1


def test_box_bound_is_above_every_score_and_boxes_hold_no_plausible_point(blobs) -> None:
    """leave_box's box (the points that break its row) holds only implausible points, and the bound over a
    box is at least the score of every point in it; checked on a dense grid."""
    from lumber.passes.analyses.counterfactual.domain import CategoricalDomain, NumericDomain
    from lumber.passes.analyses.counterfactual.plausibility import BoxBound, leave_box
    from lumber.passes.analyses.counterfactual.problem import build
    from lumber.passes.analyses.counterfactual.solve import make_query

    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    rng = np.random.default_rng(0)
    G = rng.uniform(-3.0, 5.0, size=(4000, 2))
    G = np.vstack([G, X])
    s = path_lengths(fi, G)
    cut_any = 0
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:5]]:
        q = make_query(f, x0, 1, isolation=(fi, delta))[0]
        prob = build(q, encode_isolation=False)
        bound = BoxBound(q.isolation_encoded, prob.domains, delta)
        assert BoxBound.supported(q.isolation_encoded, q.x0)
        for _ in range(5):  # random boxes
            a, b = np.sort(rng.uniform(-3.0, 5.0, size=(2, 2)), axis=0)
            inside = np.all((G >= a) & (G <= b), axis=1)
            if inside.any():
                assert bound.upper(a, b) >= s[inside].max() - 1e-12
        for z in G[s < delta][:20]:  # implausible points: their box is implausible throughout
            cut = leave_box(bound, prob.domains, prob.snapped(z))
            assert cut is not None
            expr, need = cut
            lhs = np.full(G.shape[0], expr.const)
            for col, coef in zip(expr.cols, expr.coefs):
                d = next(d for d in prob.domains if isinstance(d, NumericDomain) and col in set(d.mu.tolist()))
                j = int(np.flatnonzero(d.mu == col)[0])
                u = d.levels[j]  # an integral mu[j] is [x > level j] at the levels a solution takes
                ind = (np.array([d.snap(float(g)) for g in G[:, d.index]]) > u).astype(float)
                lhs += coef * ind
            in_box = lhs < 1.0 - 1e-9
            assert in_box.any() and not np.any(s[in_box] >= delta)
            cut_any += 1
            assert set(need) <= {int(c) for d in prob.domains if isinstance(d, NumericDomain) for c in d.mu}
            assert not any(isinstance(d, CategoricalDomain) for d in prob.domains)
    assert cut_any > 0


@pytest.mark.parametrize("norm", ["l0", "l1", "l2"])
def test_raced_solves_match_the_plain_milp_and_exhaustive(blobs, norm) -> None:
    """Every MILP raced by two HiGHS runs (solver.RACE_VARIANTS): the same optima, and no thread left behind."""
    import threading

    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    before = threading.active_count()
    _assert_six_cases_match_plain_and_exhaustive(f, fi, X, rf, delta, norm, race=2)
    assert threading.active_count() == before


def test_raced_infeasible_query_stays_infeasible(blobs) -> None:
    from lumber.ir import Constraints

    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    x0 = X[np.flatnonzero(rf.predict(X) == 0)[0]]
    cons = Constraints.from_mapping({"immutable": ["f0"], "bounds": {"f1": (-5.0, float(x0[1]))}})
    for warm in (True, False):
        r = solve_counterfactual(f, x0, target=1, constraints=cons, norm="l1", isolation=(fi, delta), reference=X,
                                 race=2, use_warm_start=warm)
        assert r.status == "infeasible" and r.x is None, (warm, r.status)


@pytest.mark.parametrize("integer_flows", [True, False])
def test_integer_flows_keep_the_exhaustive_optimum(blobs, integer_flows, monkeypatch) -> None:
    """With an isolation forest the full MILP declares the flows binary (``trees.INTEGER_FLOWS``); the
    isolation forest alone keeps them continuous. Either way the optimum is the exhaustive one."""
    import lumber.passes.analyses.counterfactual.trees as T
    from lumber.passes.analyses.counterfactual.problem import build
    from lumber.passes.analyses.counterfactual.solve import make_query

    monkeypatch.setattr(T, "INTEGER_FLOWS", integer_flows)
    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    ones = np.ones(2)
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:3]]:
        q = make_query(f, x0, 1, None, norm="l1", isolation=(fi, delta))[0]
        full, alone = build(q), build(q, explained=False)
        flows = [np.arange(a, b) for a, b, name in full.model._names if name in ("y", "y-iso")]
        assert flows and all(bool(full.model.integer[c].all()) == integer_flows for c in flows)
        alone_flows = [np.arange(a, b) for a, b, name in alone.model._names if name == "y-iso"]
        assert alone_flows and not any(alone.model.integer[c].any() for c in alone_flows)
        r = solve_counterfactual(f, x0, target=1, norm="l1", isolation=(fi, delta), reference=X)
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, "l1", ones, ones,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,))
        assert r.optimal and r.verified and r.cost == pytest.approx(exact, rel=1e-6, abs=1e-12)


@pytest.fixture(scope="module")
def flag_blobs():
    """Two blobs and a 0/1 flag that the target class rarely has: plausible points must clear the flag."""
    rng = np.random.default_rng(3)
    n = 200
    X1 = np.column_stack([rng.normal(0.0, 1.0, (n, 2)), (rng.uniform(size=n) < 0.9).astype(float)])
    X2 = np.column_stack([rng.normal(2.0, 0.8, (n, 2)), (rng.uniform(size=n) < 0.05).astype(float)])
    X = np.vstack([X1, X2])
    y = np.r_[np.zeros(n, dtype=int), np.ones(n, dtype=int)]
    rf = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=1).fit(X, y)
    iso = IsolationForest(n_estimators=5, max_samples=32, random_state=1).fit(X[y == 1])
    return X, y, rf, iso


def test_branching_on_the_flag_the_relaxation_flips_keeps_the_exhaustive_optimum(flag_blobs, monkeypatch) -> None:
    """``solve.FLIP_SPLIT``: the MILP is solved as its two sides on the 0/1 feature the isolation forest
    alone flips; the optimum is the exhaustive one over the domain (the flag only 0 or 1), as without it."""
    import lumber.passes.analyses.counterfactual.solve as S

    X, y, rf, iso = flag_blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    monkeypatch.setattr(S, "ENUMERATE", False)  # (it takes precedence over the one-flag split)
    split: list[int] = []
    real = S.solve_cases
    monkeypatch.setattr(S, "solve_cases", lambda *a, **k: split.append(1) or real(*a, **k))
    ones = np.ones(3)
    lo, hi = X.min(axis=0), X.max(axis=0)
    cases = X[np.flatnonzero((rf.predict(X) == 0) & (X[:, 2] == 1.0))[:6]]
    for x0 in cases:
        before = len(split)
        r = solve_counterfactual(f, x0, target=1, norm="l1", isolation=(fi, delta), reference=X,
                                 clip_to_reference=True)
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, "l1", ones, ones, lo=lo, hi=hi,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,), steps={2: 1.0})
        assert r.optimal and r.verified, (r.status, r.message)
        assert r.x[2] in (0.0, 1.0)
        assert r.cost == pytest.approx(exact, rel=1e-6, abs=1e-12)
        if len(split) > before:
            monkeypatch.setattr(S, "FLIP_SPLIT", False)
            plain = solve_counterfactual(f, x0, target=1, norm="l1", isolation=(fi, delta), reference=X,
                                         clip_to_reference=True)
            monkeypatch.setattr(S, "FLIP_SPLIT", True)
            assert plain.cost == pytest.approx(r.cost, rel=1e-9, abs=1e-12)
    assert split, "no case was split: the test does not reach the branch it is about"


@pytest.fixture(scope="module")
def flags_and_category():
    """Two numeric features, two 0/1 flags and a category (codes 0-3), the target class mostly without the
    flags and with category 2: plausible counterfactuals change some of them."""
    rng = np.random.default_rng(5)
    n = 250

    def part(mu: float, p_flag: float, cat_p: list[float]) -> np.ndarray:
        return np.column_stack([rng.normal(mu, 1.0, (n, 2)), (rng.uniform(size=(n, 2)) < p_flag).astype(float),
                                rng.choice(4, size=n, p=cat_p).astype(float)])
    X = np.vstack([part(0.0, 0.85, [0.4, 0.3, 0.1, 0.2]), part(1.5, 0.1, [0.05, 0.05, 0.85, 0.05])])
    y = np.r_[np.zeros(n, dtype=int), np.ones(n, dtype=int)]
    rf = RandomForestClassifier(n_estimators=6, max_depth=3, random_state=2).fit(X, y)
    iso = IsolationForest(n_estimators=6, max_samples=32, random_state=2).fit(X[y == 1])
    f, fi = lumber.load(rf), lumber.load(iso)
    feats = list(f.schema.features)
    feats[4] = Feature(name=feats[4].name, kind=FeatureKind.CATEGORICAL, categories=(0, 1, 2, 3))
    f = f.replace(schema=f.schema.with_(features=tuple(feats)))
    fi = fi.replace(schema=fi.schema.with_(features=tuple(feats)))
    return X, y, rf, f, fi, isolation_threshold(fi, X[y == 1], 0.1)


def test_case_by_case_over_flags_and_categories_keeps_the_exhaustive_optimum(flags_and_category, monkeypatch) -> None:
    """``solve.ENUMERATE``: a plausible query is solved case by case over the values of its two-valued and
    categorical features (``solver.solve_enumerated``); the optimum is the exhaustive one over the domain
    (flags 0 or 1, the category one of its codes) and the same as the whole MILP's, for l1, l2 and linf."""
    import lumber.passes.analyses.counterfactual.solve as S

    X, y, rf, f, fi, delta = flags_and_category
    calls: list[int] = []
    real = S.solve_enumerated
    monkeypatch.setattr(S, "solve_enumerated", lambda *a, **k: calls.append(len(a[3])) or real(*a, **k))
    rng = np.random.default_rng(0)
    lo, hi = X.min(axis=0), X.max(axis=0)
    origins = X[np.flatnonzero(rf.predict(X) == 0)[:5]]
    for x0, norm in itertools.product(origins, ("l1", "l2", "linf")):
        wd, wu = rng.uniform(0.5, 2.0, 5), rng.uniform(0.5, 2.0, 5)
        before = len(calls)
        r = solve_counterfactual(f, x0, target=1, norm=norm, weights=(wd, wu), isolation=(fi, delta), reference=X,
                                 clip_to_reference=True)
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, norm, wd, wu, lo=lo, hi=hi,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,),
                               codes={4: [0.0, 1.0, 2.0, 3.0]}, steps={2: 1.0, 3: 1.0})
        assert r.optimal and r.verified, (r.status, r.message)
        assert r.x[2] in (0.0, 1.0) and r.x[3] in (0.0, 1.0) and r.x[4] in (0.0, 1.0, 2.0, 3.0)
        assert r.cost == pytest.approx(exact, rel=1e-6, abs=1e-12), (norm, x0)
        if len(calls) > before:
            monkeypatch.setattr(S, "ENUMERATE", False)
            whole = solve_counterfactual(f, x0, target=1, norm=norm, weights=(wd, wu), isolation=(fi, delta),
                                         reference=X, clip_to_reference=True)
            monkeypatch.setattr(S, "ENUMERATE", True)
            assert whole.cost == pytest.approx(r.cost, rel=1e-9, abs=1e-12)
    assert any(n > 1 for n in calls), "no query went case by case: the test does not reach the branch it is about"


def test_the_cases_are_every_combination_cheaper_than_the_cutoff(flags_and_category) -> None:
    """``solve._discrete_cases`` lists each combination of flag values and category codes whose own changes
    cost less than the cutoff, once, with that cost as its floor; none is left out (the cover the optimum
    rests on), and more than ``MAX_CASES`` gives None (the query is then solved whole)."""
    import lumber.passes.analyses.counterfactual.solve as S
    from lumber.passes.analyses.counterfactual.problem import build

    X, y, rf, f, fi, delta = flags_and_category
    wd, wu = np.array([1.0, 1.0, 0.7, 1.3, 0.9]), np.array([1.0, 1.0, 1.1, 0.6, 0.9])
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:3]]:
        q = S.make_query(f, x0, 1, norm="l1", weights=(wd, wu), reference=X, isolation=(fi, delta),
                         clip_to_reference=True)[0]
        for cutoff in (0.5, 1.5, 2.5, 10.0):
            prob = build(q)
            got = S._discrete_cases(q, prob, cutoff)
            want = {}
            for v2, v3, c4 in itertools.product((0.0, 1.0), (0.0, 1.0), (0.0, 1.0, 2.0, 3.0)):
                z = q.x0.copy()  # (the case as the model reads it: float32)
                z[2], z[3], z[4] = v2, v3, c4
                cost = float(q.cost.total(z[None, :])[0])
                if cost < cutoff:
                    want[(v2, v3, c4)] = cost
            assert got is not None
            cases, floors = got
            assert len(cases) == len(want)
            dom = {d.index: d for d in prob.domains}
            seen = {}
            for (cols, vals), floor in zip(cases, floors):
                sol = np.zeros(prob.model.n_cols)
                sol[cols] = vals
                key = (float(dom[2].levels[int(sol[dom[2].mu[0]])]), float(dom[3].levels[int(sol[dom[3].mu[0]])]),
                       float(dom[4].codes[int(np.argmax(sol[dom[4].nu]))]))
                seen[key] = floor
            assert seen == pytest.approx(want)
            assert np.all(prob.model.integer[cases[0][0]])  # the flags' level columns are integer now
    prob = build(q)
    assert S._discrete_cases(q, prob, 10.0) is not None
    old = S.MAX_CASES
    try:
        S.MAX_CASES = 15
        assert S._discrete_cases(q, prob, 10.0) is None  # 16 combinations
    finally:
        S.MAX_CASES = old
