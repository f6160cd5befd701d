"""Isolation-forest plausibility: exact against exhaustive search, and end to end through the API."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import IsolationForest, RandomForestClassifier

import lumber
from cf_brute import brute_force
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
    ones = np.ones(2)
    for x0 in X[np.flatnonzero(rf.predict(X) == 0)[:6]]:
        r = solve_counterfactual(f, x0, target=1, norm=norm, isolation=(fi, delta), reference=X)
        plain = solve_counterfactual(f, x0, target=1, norm=norm, isolation=(fi, delta), use_warm_start=False)
        exact, _ = brute_force(f, x0, lambda Z: f.predict(Z) == 1, norm, ones, ones,
                               extra_ok=lambda Z: path_lengths(fi, Z) >= delta, also=(fi,))
        assert r.optimal and r.verified and plain.optimal, (r.status, r.message, plain.status)
        assert r.cost == pytest.approx(plain.cost, rel=1e-6, abs=1e-12)
        assert r.cost == pytest.approx(exact, rel=1e-6, abs=1e-12)
        assert path_lengths(fi, r.x[None, :])[0] >= delta
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
