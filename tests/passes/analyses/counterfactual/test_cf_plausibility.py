"""Isolation-forest plausibility: exact against exhaustive search, and end to end through the API."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.ensemble import IsolationForest, RandomForestClassifier

import lumber
from cf_brute import brute_force
from lumber.ir import Feature, FeatureKind
from lumber.passes.analyses.counterfactual import (
    CounterfactualOptions, isolation_threshold, path_lengths, solve_counterfactual,
)

STRATEGIES = ["whole", "cases", "flag split"]
"""The search strategies: one MILP, case by case, and case by case over one flag (``max_cases=1``)."""


def _strategy(name: str, **kw) -> CounterfactualOptions:  # type: ignore[no-untyped-def]
    if name == "flag split":
        return CounterfactualOptions(strategy="cases", max_cases=1, **kw)
    return CounterfactualOptions(strategy=name, **kw)


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
        r = solve_counterfactual(f, x0, target=1, isolation=(fi, delta), options=CounterfactualOptions(norm=norm))
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, norm, ones, ones,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,))
        assert r.optimal and r.verified, (r.status, r.message)
        assert path_lengths(fi, r.x[None, :])[0] >= delta
        assert r.cost == pytest.approx(exact, rel=1e-6)
        free = solve_counterfactual(f, x0, target=1, options=CounterfactualOptions(norm=norm))
        assert free.cost <= r.cost + 1e-12  # plausibility can only cost more


def test_api_fits_isolation_forest_from_contamination(blobs, monkeypatch) -> None:
    import lumber.compiler.api.counterfactual as api

    monkeypatch.setattr(api, "ISOLATION_TREES", 4)  # the default (25 trees) takes seconds; same code path
    X, y, rf, _ = blobs
    x0 = X[np.flatnonzero(rf.predict(X) == 0)[0]]
    r = lumber.counterfactual(rf, x0, reference=X, options=lumber.CounterfactualOptions(contamination=0.2, time_limit=60))
    assert r.status == "optimal" and r.verified
    assert rf.predict(r.x[None, :])[0] == 1
    free = lumber.counterfactual(rf, x0, reference=X, options=lumber.CounterfactualOptions(time_limit=60))
    assert free.cost <= r.cost + 1e-12


def test_api_rejects_plausibility_without_reference(blobs) -> None:
    X, y, rf, iso = blobs
    with pytest.raises(lumber.LumberError, match="reference rows"):
        lumber.counterfactual(rf, X[0], options=lumber.CounterfactualOptions(contamination=0.1))


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
    r = lumber.counterfactual(rf, x0, constraints=text, reference=X, options=lumber.CounterfactualOptions(time_limit=60))
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


def _assert_six_cases_match_plain_and_exhaustive(f, fi, X, rf, delta, norm, strategy="cases") -> None:  # type: ignore[no-untyped-def]
    """Six class-0 cases: the shipped solve (warm start, relaxation, the given strategy) is proven optimal,
    verified, plausible and costs what the plain MILP and exhaustive search say."""
    ones = np.ones(2)
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:6]]:
        r = solve_counterfactual(f, x0, target=1, isolation=(fi, delta), reference=X,
                                 options=_strategy(strategy, norm=norm))
        plain = solve_counterfactual(f, x0, target=1, isolation=(fi, delta), options=CounterfactualOptions(norm=norm, warm_start=False))
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
        r = solve_counterfactual(f, x0, target=1, isolation=(fi, delta), reference=X, options=CounterfactualOptions(norm="l1"))
        if not hit[-1]:
            continue
        early += 1
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, "l1", ones, ones,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,))
        assert r.optimal and r.verified and r.gap == 0.0 and r.bound == pytest.approx(r.cost)
        assert r.cost == pytest.approx(exact, rel=1e-6)
    assert early >= 1


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("norm", ["l0", "l1", "l2"])
def test_each_strategy_matches_the_plain_milp_and_exhaustive(blobs, norm, strategy) -> None:
    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    _assert_six_cases_match_plain_and_exhaustive(f, fi, X, rf, delta, norm, strategy)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_an_infeasible_plausible_query_stays_infeasible(blobs, strategy) -> None:
    from lumber.ir import Constraints

    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    x0 = X[np.flatnonzero(rf.predict(X) == 0)[0]]
    cons = Constraints.from_mapping({"immutable": ["f0"], "bounds": {"f1": (-5.0, float(x0[1]))}})
    for warm in (True, False):
        r = solve_counterfactual(f, x0, target=1, constraints=cons, isolation=(fi, delta), reference=X,
                                 options=_strategy(strategy, norm="l1", warm_start=warm))
        assert r.status == "infeasible" and r.x is None, (warm, r.status)


@pytest.mark.parametrize("integer_flows", [True, False])
def test_integer_flows_keep_the_exhaustive_optimum(blobs, integer_flows) -> None:
    """With an isolation forest the full MILP declares the flows binary (``integer_flows``); the
    isolation forest alone keeps them continuous. Either way the optimum is the exhaustive one."""
    from lumber.passes.analyses.counterfactual.problem import build
    from lumber.passes.analyses.counterfactual.solve import make_query

    X, y, rf, iso = blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    ones = np.ones(2)
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:3]]:
        opts = CounterfactualOptions(norm="l1", integer_flows=integer_flows)
        q = make_query(f, x0, 1, None, isolation=(fi, delta), options=opts)[0]
        full, alone = build(q), build(q, explained=False)
        flows = [np.arange(a, b) for a, b, name in full.model._names if name in ("y", "y-iso")]
        assert flows and all(bool(full.model.integer[c].all()) == integer_flows for c in flows)
        alone_flows = [np.arange(a, b) for a, b, name in alone.model._names if name == "y-iso"]
        assert alone_flows and not any(alone.model.integer[c].any() for c in alone_flows)
        r = solve_counterfactual(f, x0, target=1, isolation=(fi, delta), reference=X, options=opts)
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


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_keeps_the_exhaustive_optimum_over_a_flag(flag_blobs, strategy) -> None:
    """The flag split (``cases`` with ``max_cases=1``: the two sides of the 0/1 feature the isolation forest
    alone flips), the case enumeration and the whole MILP all give the exhaustive optimum over the domain
    (the flag only 0 or 1)."""
    X, y, rf, iso = flag_blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    ones = np.ones(3)
    lo, hi = X.min(axis=0), X.max(axis=0)
    cases = X[np.flatnonzero((rf.predict(X) == 0) & (X[:, 2] == 1.0))[:6]]
    for x0 in cases:
        r = solve_counterfactual(f, x0, target=1, isolation=(fi, delta), reference=X,
                                 options=_strategy(strategy, norm="l1", clip_to_reference=True))
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, "l1", ones, ones, lo=lo, hi=hi,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,), steps={2: 1.0})
        assert r.optimal and r.verified, (r.status, r.message)
        assert r.x[2] in (0.0, 1.0)
        assert r.cost == pytest.approx(exact, rel=1e-6, abs=1e-12)


def test_the_flag_split_reaches_its_branch(flag_blobs) -> None:
    """The flag fixture has queries whose relaxation flips the flag (so the test above splits on it)."""
    from lumber.passes.analyses.counterfactual.problem import build
    from lumber.passes.analyses.counterfactual.solve import _plausible_relaxation, flip, make_query, solver_options
    from lumber.passes.analyses.counterfactual.deadline import Deadline

    X, y, rf, iso = flag_blobs
    f, fi = lumber.load(rf), lumber.load(iso)
    delta = isolation_threshold(fi, X[y == 1], 0.1)
    opts = CounterfactualOptions(norm="l1", clip_to_reference=True)
    flipped = 0
    for x0 in X[np.flatnonzero((rf.predict(X) == 0) & (X[:, 2] == 1.0))[:6]]:
        q = make_query(f, x0, 1, reference=X, isolation=(fi, delta), options=opts)[0]
        rel = _plausible_relaxation(q, solver_options(opts), lambda Z: f.predict(Z), Deadline.never(), ())
        if isinstance(rel, tuple):
            flipped += flip(q, build(q), rel[0]) == 2
    assert flipped >= 1


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


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_keeps_the_exhaustive_optimum_over_flags_and_categories(flags_and_category, strategy) -> None:
    """Case by case over the values of the two-valued and categorical features (``solver.solve_enumerated``),
    split on one flag, or whole: the optimum is the exhaustive one over the domain (flags 0 or 1, the
    category one of its codes), for l1, l2 and linf."""
    X, y, rf, f, fi, delta = flags_and_category
    rng = np.random.default_rng(0)
    lo, hi = X.min(axis=0), X.max(axis=0)
    origins = X[np.flatnonzero(rf.predict(X) == 0)[:5]]
    for x0, norm in itertools.product(origins, ("l1", "l2", "linf")):
        wd, wu = rng.uniform(0.5, 2.0, 5), rng.uniform(0.5, 2.0, 5)
        r = solve_counterfactual(f, x0, target=1, isolation=(fi, delta), reference=X,
                                 options=_strategy(strategy, norm=norm, weights=(wd, wu), clip_to_reference=True))
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, norm, wd, wu, lo=lo, hi=hi,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,),
                               codes={4: [0.0, 1.0, 2.0, 3.0]}, steps={2: 1.0, 3: 1.0})
        assert r.optimal and r.verified, (r.status, r.message)
        assert r.x[2] in (0.0, 1.0) and r.x[3] in (0.0, 1.0) and r.x[4] in (0.0, 1.0, 2.0, 3.0)
        assert r.cost == pytest.approx(exact, rel=1e-6, abs=1e-12), (norm, x0)


def test_the_cases_are_every_combination_cheaper_than_the_cutoff(flags_and_category) -> None:
    """``solve.discrete_cases`` lists each combination of flag values and category codes whose own changes
    cost less than the cutoff, once, with that cost as its floor; none is left out (the cover the optimum
    rests on), and more than ``max_cases`` gives None (the query is then split on one flag or solved whole)."""
    import lumber.passes.analyses.counterfactual.solve as S
    from lumber.passes.analyses.counterfactual.problem import build

    X, y, rf, f, fi, delta = flags_and_category
    wd, wu = np.array([1.0, 1.0, 0.7, 1.3, 0.9]), np.array([1.0, 1.0, 1.1, 0.6, 0.9])
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:3]]:
        q = S.make_query(f, x0, 1, reference=X, isolation=(fi, delta),
                         options=CounterfactualOptions(norm="l1", weights=(wd, wu), clip_to_reference=True))[0]
        for cutoff in (0.5, 1.5, 2.5, 10.0):
            prob = build(q)
            got = S.discrete_cases(q, prob, cutoff, 64)
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
    assert S.discrete_cases(q, prob, 10.0, 16) is not None
    assert S.discrete_cases(q, prob, 10.0, 15) is None  # 16 combinations
