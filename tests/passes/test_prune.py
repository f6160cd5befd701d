"""``prune``: eta(M) from training rows, fixed or validated alpha, reports, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lumber
from builders import make_forest
from lumber.ir import CompileError, PostTransform, Task
from lumber.passes.base import PassContext
from lumber.passes.quality import auc, make_metric
from lumber.passes.transforms.prune_monomials import monomial_eta
from lumber.passes.transforms.polynomial import forest_to_polynomial
from strategies import boundary_rows, forests


def test_eta_is_squared_weight_times_support() -> None:
    f = make_forest([("x0", 0.5, ("x1", 1.0, 1.0, 2.0), 4.0)], ["x0", "x1"])
    p = forest_to_polynomial(f)
    X = np.array([[0.0, 0.0], [1.0, 2.0], [1.0, 0.0], [0.0, 5.0]])
    # brute force: mean over rows of (w_M * prod c(x))^2
    want = [np.mean([(p.weight[j, 0] * p.active(X)[r, j]) ** 2 for r in range(4)]) for j in range(p.n_monomials)]
    np.testing.assert_allclose(monomial_eta(p, X), want)


@given(forests(categorical=False, missing_zero=False), st.floats(0, 2))
def test_pruning_never_adds_monomials_and_drops_exactly_eta_below_alpha(forest: lumber.ir.Forest, alpha: float) -> None:
    p = forest_to_polynomial(forest)
    X = boundary_rows(forest, n_random=8)
    q = lumber.run(p, f"prune{{alpha={alpha!r}}}", data={"X_train": X})
    assert q.n_monomials <= p.n_monomials and q.n_conditions <= p.n_conditions
    assert q.n_monomials == int((monomial_eta(p, X) >= alpha).sum())
    np.testing.assert_array_equal(q.bias, p.bias)


def test_alpha_zero_keeps_the_polynomial_exact(adult_split: tuple) -> None:
    Xtr, ytr, Xva, yva, _, _ = adult_split
    import lightgbm as lgb
    m = lgb.LGBMClassifier(n_estimators=20, num_leaves=8, verbose=-1, n_jobs=1).fit(Xtr, ytr)
    p = lumber.run(m, "polynomial")
    q = lumber.run(p, "prune{alpha=0}", data={"train": (Xtr, ytr)})
    assert q.n_monomials == p.n_monomials
    np.testing.assert_array_equal(q.evaluate(Xva), p.evaluate(Xva))


def test_auto_alpha_keeps_validation_auc_within_tol_and_reports(adult_split: tuple) -> None:
    Xtr, ytr, Xva, yva, _, _ = adult_split
    import lightgbm as lgb
    m = lgb.LGBMClassifier(n_estimators=40, num_leaves=15, verbose=-1, n_jobs=1).fit(Xtr, ytr)
    ctx = PassContext()
    q = lumber.run(m, "polynomial,prune{alpha=auto,tol=0.001}", data={"train": (Xtr, ytr), "valid": (Xva, yva)},
                   context=ctx)
    rep = ctx.reports[-1]
    assert rep.pass_name == "prune" and rep.metrics["metric"] == "auc"
    # margins agree with LightGBM to ~1e-15; rows tied in one may be split in the other, so AUCs agree to ~1e-4
    before = auc(yva == 1, m.predict(Xva, raw_score=True))
    after = auc(yva == 1, q.evaluate(Xva))
    assert rep.metrics["metric_before"] == pytest.approx(before, abs=1e-4)
    assert rep.metrics["metric_after"] == pytest.approx(after, abs=1e-4)
    assert rep.metrics["metric_after"] >= rep.metrics["metric_before"] - 0.001
    assert rep.metrics["kept"] == q.n_monomials < rep.metrics["monomials_before"]
    assert "monomials" in rep.render() and "validation auc" in rep.render()
    # a larger tolerance never keeps more
    q2 = lumber.run(m, "polynomial,prune{tol=0.01}", data={"train": (Xtr, ytr), "valid": (Xva, yva)})
    assert q2.n_monomials <= q.n_monomials


def test_regression_uses_rmse_and_multiclass_logloss() -> None:
    from sklearn.datasets import load_diabetes, load_wine

    import lightgbm as lgb
    X, y = load_diabetes(return_X_y=True)
    m = lgb.LGBMRegressor(n_estimators=30, num_leaves=8, verbose=-1, n_jobs=1).fit(X[:300], y[:300])
    ctx = PassContext()
    lumber.run(m, "polynomial,prune{tol=0.01}", data={"train": (X[:300], y[:300]), "valid": (X[300:], y[300:])},
               context=ctx)
    r = ctx.reports[-1].metrics
    assert r["metric"] == "rmse" and r["metric_after"] <= r["metric_before"] * 1.01 + 1e-12
    X, y = load_wine(return_X_y=True)
    m = lgb.LGBMClassifier(n_estimators=10, num_leaves=4, verbose=-1, n_jobs=1, min_child_samples=5).fit(X, y)
    ctx = PassContext()
    lumber.run(m, "polynomial,prune{metric=accuracy,tol=0.02}", data={"train": (X, y), "valid": (X, y)}, context=ctx)
    assert ctx.reports[-1].metrics["metric"] == "accuracy"
    assert make_metric("auto", lumber.load(m).schema, y).name == "logloss"


def test_missing_data_is_a_clear_error() -> None:
    f = make_forest([("x0", 0.5, 1.0, 2.0)], ["x0"], task=Task.BINARY, post_transform=PostTransform.SIGMOID)
    with pytest.raises(CompileError, match=r"pass 'prune' needs X_train \(eta\(M\) is a mean over training rows\)"):
        lumber.run(f, "polynomial,prune")
    with pytest.raises(CompileError, match="needs X_valid, y_valid"):
        lumber.run(f, "polynomial,prune", data={"X_train": np.zeros((3, 1))})
    with pytest.raises(CompileError, match="single class"):
        lumber.run(f, "polynomial,prune", data={"train": (np.zeros((3, 1)), None), "valid": (np.zeros((2, 1)), [1, 1])})
    with pytest.raises(CompileError, match="needs a classifier"):
        make_metric("auc", make_forest([("x0", 0.5, 1.0, 2.0)], ["x0"]).schema, [1.0])


def _cut_values(p: lumber.ir.Polynomial, eta: np.ndarray, X: np.ndarray, metric) -> tuple[np.ndarray, np.ndarray]:
    """Brute force: the metric after dropping every monomial with eta below each distinct eta value."""
    alphas = np.append(np.unique(eta), np.nextafter(eta.max(), np.inf))
    return alphas, np.array([metric(p.select(eta >= a).evaluate(X)) for a in alphas])


@pytest.mark.parametrize("grid", [2, 16])
@pytest.mark.parametrize("tol", [0.0, 0.002, 0.01, 0.05])
def test_auto_alpha_is_a_locally_largest_threshold(tol: float, grid: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from sklearn.datasets import load_diabetes

    from lumber.passes.transforms import prune_monomials
    from lumber.passes.transforms.prune_monomials import choose_alpha

    monkeypatch.setattr(prune_monomials, "GRID", grid)  # a coarse grid needs many refinement levels

    import lightgbm as lgb
    X, y = load_diabetes(return_X_y=True)
    m = lgb.LGBMRegressor(n_estimators=25, num_leaves=6, verbose=-1, n_jobs=1).fit(X[:300], y[:300])
    p = lumber.run(m, "polynomial")
    eta = monomial_eta(p, X[:300])
    metric = make_metric("rmse", p.schema, y[300:])
    alpha, before, after = choose_alpha(p, eta, p.prepare_input(X[300:]), metric, tol)
    alphas, vals = _cut_values(p, eta, X[300:], metric)
    k = int(np.flatnonzero(alphas == alpha)[0])  # alpha is one of the distinct eta values (a cut between ties)
    assert before == pytest.approx(vals[0]) and after == pytest.approx(vals[k])
    assert metric.within(vals[k], vals[0], tol)
    if k + 1 < len(alphas):  # the search refines down to the next distinct eta value: that cut is out of tol
        assert not metric.within(vals[k + 1], vals[0], tol)
    good = [i for i in range(len(alphas)) if metric.within(vals[i], vals[0], tol)]
    if len(alphas) <= grid:  # a single grid level prices every cut: the largest good alpha overall
        assert k == max(good)
    first_bad = next((i for i in range(len(alphas)) if i not in good), len(alphas))
    assert k >= first_bad - 1  # never short of the last cut before the metric first leaves tol


@pytest.mark.parametrize("grid", [2, 16])
def test_auto_alpha_with_few_training_rows_searches_distinct_values(grid: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five training rows leave most monomials at eta 0 (one long run of ties): the search still ends after a
    few grid levels (a grid over the monomial count stalled in the run) and finds the brute-force threshold."""
    from sklearn.datasets import load_diabetes

    from lumber.passes.transforms import prune_monomials
    from lumber.passes.transforms.prune_monomials import choose_alpha

    monkeypatch.setattr(prune_monomials, "GRID", grid)
    import lightgbm as lgb
    X, y = load_diabetes(return_X_y=True)
    m = lgb.LGBMRegressor(n_estimators=25, num_leaves=6, verbose=-1, n_jobs=1).fit(X[:300], y[:300])
    p = lumber.run(m, "polynomial")
    eta = monomial_eta(p, X[:5])
    assert (eta == 0).mean() > 0.5
    metric = make_metric("rmse", p.schema, y[300:])
    calls = 0

    def counted(margin: np.ndarray) -> float:
        nonlocal calls
        calls += 1
        return metric(margin)

    alpha, before, after = choose_alpha(p, eta, p.prepare_input(X[300:]), dataclasses.replace(metric, fn=counted), 0.01)
    alphas, vals = _cut_values(p, eta, X[300:], metric)
    k = int(np.flatnonzero(alphas == alpha)[0])
    assert after == pytest.approx(vals[k]) and metric.within(vals[k], vals[0], 0.01)
    if k + 1 < len(alphas):
        assert not metric.within(vals[k + 1], vals[0], 0.01)
    assert calls <= 1 + grid * int(np.ceil(np.log(len(alphas)) / np.log(grid)) + 2)
