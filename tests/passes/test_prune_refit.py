"""``prune{method=refit}`` and ``prune{reduction=...}``: refitted kept weights, parameter errors, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import boundary_rows, forests

import lumber
from lumber.ir import CompileError
from lumber.passes.base import PassContext
from lumber.passes.quality import auc
from lumber.passes.transforms.prune_monomials import monomial_eta
from lumber.passes.transforms.prune_refit import design_matrix, fidelity_loss, refit
from lumber.passes.transforms.polynomial import forest_to_polynomial


@pytest.fixture(scope="module")
def diabetes_poly() -> tuple[lumber.ir.Polynomial, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_diabetes

    import lightgbm as lgb
    X, y = load_diabetes(return_X_y=True)
    m = lgb.LGBMRegressor(n_estimators=30, num_leaves=6, verbose=-1, n_jobs=1).fit(X[:300], y[:300])
    return lumber.run(m, "polynomial"), X, y


@pytest.fixture(scope="module")
def adult_model(adult_split: tuple) -> tuple[lumber.ir.Polynomial, tuple]:
    import lightgbm as lgb
    Xtr, ytr = adult_split[:2]
    m = lgb.LGBMClassifier(n_estimators=60, num_leaves=8, verbose=-1, n_jobs=1).fit(Xtr, ytr)
    return lumber.run(m, "polynomial"), adult_split


def test_design_matrix_reproduces_the_polynomial(diabetes_poly: tuple) -> None:
    p, X, _ = diabetes_poly
    A = design_matrix(p, X)
    assert A.shape == (X.shape[0], p.n_monomials)
    np.testing.assert_allclose(A @ p.weight[:, 0] + p.bias[0], p.evaluate(X), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(np.asarray(A.sum(axis=0)).ravel() / X.shape[0], p.support(X))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_refit_never_worsens_the_training_loss_at_the_same_support(diabetes_poly: tuple, seed: int) -> None:
    p, X, _ = diabetes_poly
    A = design_matrix(p, X[:300])
    target = A @ p.weight + p.bias[None, :]
    keep = np.sort(np.random.default_rng(seed).choice(p.n_monomials, p.n_monomials // 3, replace=False))
    w0, c0 = p.weight[keep], p.bias
    base = fidelity_loss(A[:, keep], w0, c0, target)
    losses = [fidelity_loss(A[:, keep], *refit(A[:, keep], w0, c0, target, it), target) for it in (1, 5, 20, 60)]
    assert all(v <= base for v in losses) and losses[-1] < 0.5 * base
    assert losses == sorted(losses, reverse=True)  # more conjugate-gradient steps never hurt


def test_refit_recovers_a_representable_target(diabetes_poly: tuple) -> None:
    p, X, _ = diabetes_poly
    A = design_matrix(p, X[:300])
    target = A @ p.weight + p.bias[None, :]
    noisy = p.weight + np.random.default_rng(0).normal(scale=5.0, size=p.weight.shape)
    w, c = refit(A, noisy, p.bias + 3.0, target, 500)
    assert fidelity_loss(A, w, c, target) < 1e-6 * fidelity_loss(A, noisy, p.bias + 3.0, target)


@settings(max_examples=25, deadline=None)
@given(forests(categorical=False, missing_zero=False), st.floats(0, 2))
def test_refit_pruning_never_adds_monomials_and_keeps_eta_above_alpha(forest: lumber.ir.Forest, alpha: float) -> None:
    p = forest_to_polynomial(forest)
    X = boundary_rows(forest, n_random=8)
    q = lumber.run(p, f"prune{{method=refit,alpha={alpha!r}}}", data={"X_train": X})
    q.validate()
    assert q.n_monomials <= p.n_monomials and q.n_conditions <= p.n_conditions
    assert np.all(monomial_eta(q, X) >= alpha)


def test_auto_refit_stays_within_tol_and_reports_the_returned_polynomial(adult_model: tuple) -> None:
    p, (Xtr, ytr, Xva, yva, _, _) = adult_model
    ctx = PassContext()
    data = {"train": (Xtr, ytr), "valid": (Xva, yva)}
    q = lumber.run(p, "prune{method=refit,tol=0.001}", data=data, context=ctx)
    rep = ctx.reports[-1].metrics
    assert rep["method"] == "refit" and q.n_monomials == rep["kept"] < p.n_monomials
    assert rep["metric_before"] == auc(yva == 1, p.evaluate(Xva))
    assert rep["metric_after"] == auc(yva == 1, q.evaluate(Xva))  # the report describes the returned polynomial
    assert rep["metric_after"] >= rep["metric_before"] - 0.001
    assert "refit path" in ctx.reports[-1].render()
    q2 = lumber.run(p, "prune{method=refit,tol=0.001}", data=data)  # deterministic, bit for bit
    np.testing.assert_array_equal(q2.weight, q.weight)
    np.testing.assert_array_equal(q2.mono_cond, q.mono_cond)
    np.testing.assert_array_equal(q2.bias, q.bias)


def test_reduction_keeps_floor_n_over_r(adult_model: tuple) -> None:
    p, (Xtr, ytr, Xva, yva, _, _) = adult_model
    data = {"train": (Xtr, ytr), "valid": (Xva, yva)}
    k = p.n_monomials // 3
    q = lumber.run(p, "prune{reduction=3}", data=data)
    eta = monomial_eta(p, Xtr)
    assert q.n_monomials == k and monomial_eta(q, Xtr).min() >= np.sort(eta)[::-1][k - 1]
    r = lumber.run(p, "prune{method=refit,reduction=3}", data={"X_train": Xtr})
    assert r.n_monomials <= k
    # at equal size the refitted weights follow the unpruned margins more closely than the cut ones
    A = design_matrix(p, Xtr)
    target = A @ p.weight + p.bias[None, :]
    assert fidelity_loss(design_matrix(r, Xtr), r.weight, r.bias, target) < \
        fidelity_loss(design_matrix(q, Xtr), q.weight, q.bias, target)


@pytest.mark.parametrize("spec, message", [
    ("prune{method=lasso}", r"option 'method' of pass 'prune' expects 'eta' or 'refit', got 'lasso'"),
    ("prune{method=refit,step=0}", r"step must be a fraction in \(0, 1\), got 0.0"),
    ("prune{method=refit,step=1.5}", r"step must be a fraction in \(0, 1\)"),
    ("prune{method=refit,iters=0}", r"iters must be a positive integer, got 0"),
    ("prune{reduction=0.5}", r"reduction must be a number >= 1"),
    ("prune{reduction=2,alpha=0.1}", r"give alpha or reduction, not both"),
    ("prune{method=refit,iters=2.5}", r"option 'iters' of pass 'prune' expects an integer"),
])
def test_parameter_errors_are_clear(spec: str, message: str) -> None:
    with pytest.raises(CompileError, match=message):
        lumber.run(forest_to_polynomial(_tiny()), spec, data={"X_train": np.zeros((2, 1))})


def test_refit_without_validation_rows_is_a_clear_error() -> None:
    with pytest.raises(CompileError, match=r"needs X_valid, y_valid \(alpha=auto is chosen on validation rows\)"):
        lumber.run(forest_to_polynomial(_tiny()), "prune{method=refit}", data={"X_train": np.zeros((2, 1))})


def _tiny() -> lumber.ir.Forest:
    from builders import make_forest

    return make_forest([("x0", 0.5, 1.0, 2.0)], ["x0"])


def test_design_matrix_over_budget_is_a_clear_error(diabetes_poly: tuple) -> None:
    p, X, _ = diabetes_poly
    with pytest.raises(CompileError, match=r"design matrix passes 100 nonzeros after \d+ of 442 rows"):
        design_matrix(p, X, budget=100)


def test_auto_refit_on_multiclass_logloss_and_regression_rmse() -> None:
    from sklearn.datasets import load_diabetes, load_wine

    import lightgbm as lgb
    X, y = load_wine(return_X_y=True)
    m = lgb.LGBMClassifier(n_estimators=10, num_leaves=4, verbose=-1, n_jobs=1, min_child_samples=5).fit(X, y)
    ctx = PassContext()
    q = lumber.run(m, "polynomial,prune{method=refit,tol=0.05}", data={"train": (X, y), "valid": (X, y)}, context=ctx)
    r = ctx.reports[-1].metrics
    assert r["metric"] == "logloss" and q.n_outputs == 3 and r["kept"] == q.n_monomials < r["monomials_before"]
    assert r["metric_after"] <= r["metric_before"] * 1.05 + 1e-12
    X, y = load_diabetes(return_X_y=True)
    m = lgb.LGBMRegressor(n_estimators=30, num_leaves=6, verbose=-1, n_jobs=1).fit(X[:300], y[:300])
    ctx = PassContext()
    data = {"train": (X[:300], y[:300]), "valid": (X[300:], y[300:])}
    lumber.run(m, "polynomial,prune{method=refit,tol=0.01}", data=data, context=ctx)
    r = ctx.reports[-1].metrics
    assert r["metric"] == "rmse" and r["metric_after"] <= r["metric_before"] * 1.01 + 1e-12


def test_pruning_everything_leaves_the_mean_margin_as_bias(diabetes_poly: tuple) -> None:
    p, X, _ = diabetes_poly
    q = lumber.run(p, "prune{method=refit,alpha=1e300}", data={"X_train": X[:300]})
    assert q.n_monomials == 0
    np.testing.assert_allclose(q.bias, [p.evaluate(X[:300]).mean()])


def test_sampled_design_matrix_keeps_whole_rows_within_the_budget(diabetes_poly: tuple) -> None:
    from lumber.passes.transforms.prune_refit import sampled_design_matrix

    p, X, _ = diabetes_poly
    full = design_matrix(p, X)
    A, rows = sampled_design_matrix(p, X, budget=full.nnz // 3)
    assert 0 < A.shape[0] == rows.shape[0] < X.shape[0] and A.nnz <= full.nnz // 3
    assert np.unique(rows).shape[0] == rows.shape[0]
    assert (A != full[rows]).nnz == 0  # the sampled rows' hits, row by row
    B, all_rows = sampled_design_matrix(p, X, budget=full.nnz)
    assert B.shape[0] == X.shape[0] and (B != full[all_rows]).nnz == 0


def test_prune_refit_pass_samples_rows_past_max_nnz_and_says_so(adult_model: tuple) -> None:
    """The registered ``prune-refit`` pass equals ``prune{method=refit}``; past max-nnz it fits a sample
    (it used to refuse), reports it, and still stays within tol on every validation row."""
    p, (Xtr, ytr, Xva, yva, _, _) = adult_model
    data = {"train": (Xtr, ytr), "valid": (Xva, yva)}
    a = lumber.run(p, "prune-refit{tol=0.001}", data=data)
    b = lumber.run(p, "prune{method=refit,tol=0.001}", data=data)
    np.testing.assert_array_equal(a.weight, b.weight)
    ctx = PassContext()
    budget = design_matrix(p, Xtr).nnz // 4
    q = lumber.run(p, f"prune-refit{{tol=0.001,max-nnz={budget}}}", data=data, context=ctx)
    rep = ctx.reports[-1]
    assert rep.pass_name == "prune-refit" and rep.metrics["fit_rows"] < rep.metrics["train_rows"] == Xtr.shape[0]
    assert "fitted on a sample of" in rep.render()
    assert q.n_monomials < p.n_monomials
    assert auc(yva == 1, q.evaluate(Xva)) >= auc(yva == 1, p.evaluate(Xva)) - 0.001


def test_prune_refit_prices_validation_through_the_polynomial_when_its_matrix_is_too_big(adult_model: tuple) -> None:
    p, (Xtr, ytr, Xva, yva, _, _) = adult_model
    data = {"train": (Xtr[:500], ytr[:500]), "valid": (Xva, yva)}
    budget = design_matrix(p, Xtr[:500]).nnz  # fits the training rows, not the validation rows
    assert design_matrix(p, Xva).nnz > budget
    ctx = PassContext()
    q = lumber.run(p, f"prune-refit{{tol=0.001,max-nnz={budget}}}", data=data, context=ctx)
    m = ctx.reports[-1].metrics
    assert m["metric_after"] == auc(yva == 1, q.evaluate(Xva)) >= m["metric_before"] - 0.001
