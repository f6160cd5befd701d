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
