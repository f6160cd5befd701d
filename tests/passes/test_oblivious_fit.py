"""The formula-5 fit (``oblivious_fit``): levels are the source's own conditions, tables compile exactly,
the fit approximates, formula 5's price stops it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from strategies import boundary_rows, forests

import lumber
from lumber.ir import CompileError, Forest
from lumber.ir.oblivious import INVALID_CODE
from lumber.passes.transforms.oblivious_fit import FitOptions, fit_oblivious, forest_candidates, mixed_rows
from lumber.passes.transforms.quantize import quantize_ensemble

SMALL = FitOptions(depth=3, max_trees=12, samples=1.0, patience=5, time_budget=30.0)


def _forest_conditions(forest: Forest) -> tuple[set[tuple[int, float]], dict[int, set[tuple[int, ...]]]]:
    internal = np.flatnonzero(forest.left >= 0)
    thr = {(int(forest.feature[v]), float(forest.threshold[v])) for v in internal if not forest.is_categorical[v]}
    sets: dict[int, set[tuple[int, ...]]] = {}
    for v in internal:
        if forest.is_categorical[v]:
            members = forest.categories_of(int(v)).tolist()
            inv = bool(forest.cat_invalid_left[v]) == bool(forest.cat_in_set_left[v])
            sets.setdefault(int(forest.feature[v]), set()).add(tuple(sorted(members + ([INVALID_CODE] if inv else []))))
    return thr, sets


@settings(max_examples=10)
@given(forests(categorical=True, multiclass=False, max_trees=4, max_depth=3))
def test_levels_are_the_source_conditions_and_tables_compile_exactly(forest: Forest) -> None:
    """Every level of the fitted ensemble tests a (feature, threshold) or (feature, category set) of the
    source forest, and the table C runtime gives the fitted ensemble's own margins on boundary rows (NaN,
    invalid and unseen codes included): the translation is lossy, its compilation is not."""
    from lumber.backends.table_c import TableRuntime

    X = boundary_rows(forest)
    fr = fit_oblivious(forest, X, SMALL)
    ens = fr.ensemble()
    ens.validate()
    thr, sets = _forest_conditions(forest)
    for i in range(ens.n_levels):
        f = int(ens.level_feature[i])
        if np.isnan(ens.level_threshold[i]):
            assert tuple(ens.level_set(i).tolist()) in sets[f]
        else:
            assert (f, float(ens.level_threshold[i])) in thr
    q = quantize_ensemble(ens)
    rt = TableRuntime(q)
    Xp = np.ascontiguousarray(forest.prepare_input(X), dtype=rt.dtype)
    np.testing.assert_array_equal(rt.predict_raw(Xp)[:, 0], ens.evaluate(X).reshape(-1))


def test_fit_approximates_a_lightgbm_model_with_categories(adult_split: tuple) -> None:
    """On Adult with native categorical splits, the fit explains most of the margin variance on rows it did
    not fit, and its holdout error falls as trees are added."""
    import lightgbm as lgb

    d = lumber.datasets.load("adult")
    cats = [i for i, f in enumerate(d.features) if f.kind.name == "CATEGORICAL"]
    Xtr, ytr, Xva = adult_split[:3]
    bst = lgb.train({"objective": "binary", "num_leaves": 8, "learning_rate": 0.2, "verbose": -1, "num_threads": 1,
                     "seed": 0, "max_cat_to_onehot": 1, "min_data_per_group": 5},
                    lgb.Dataset(Xtr, ytr, categorical_feature=cats), 40)
    forest = lumber.load(bst)
    cand = forest_candidates(forest)
    assert cand.sets, "the model has category sets to offer"
    fr = fit_oblivious(forest, Xtr, FitOptions(depth=6, max_trees=80, patience=80, time_budget=60.0))
    assert fr.report["trees_grown"] == 80 and fr.holdout_mse[-1] < 0.5 * fr.holdout_mse[1]
    ens = fr.ensemble(80)
    ref = bst.predict(Xva, raw_score=True)
    err = ens.evaluate(Xva) - ref
    assert np.mean(err ** 2) < 0.05 * np.var(ref)
    assert np.mean((ens.evaluate(Xva) > 0) == (ref > 0)) > 0.97
    assert any(np.isnan(ens.level_threshold))  # category levels are used
    capped = fit_oblivious(forest, Xtr, FitOptions(depth=6, max_trees=30, patience=30, max_set_columns=3))
    e3 = capped.ensemble(30)
    cat = np.flatnonzero(np.isnan(e3.level_threshold))
    columns = {(int(e3.level_feature[i]), tuple(e3.level_set(i).tolist()), bool(e3.level_nan_true[i])) for i in cat}
    assert 1 <= len(columns) <= 3 and capped.report["set_columns"] == len(columns)


def test_mixed_rows_combine_observed_values_of_each_column() -> None:
    """A mixed row is a training row with about ``share`` of its features taken from other rows: every value
    (NaN and category codes included) is one its column holds, share 0 copies rows, and the fit reports them."""
    rng = np.random.default_rng(0)
    X = np.column_stack([np.arange(200.0), rng.integers(0, 5, 200).astype(float), rng.normal(size=200)])
    X[::7, 2] = np.nan
    M = mixed_rows(X, 1000, 0.3, rng)
    assert M.shape == (1000, 3)
    for f in range(3):
        col = X[:, f]
        assert np.isin(M[:, f][~np.isnan(M[:, f])], col[~np.isnan(col)]).all()
    ids = np.arange(200.0)[:, None] + np.array([0.0, 1000.0, 2000.0])  # each entry names its row
    src = mixed_rows(ids, 4000, 0.3, rng) - np.array([0.0, 1000.0, 2000.0])
    whole = np.mean((src[:, 0] == src[:, 1]) & (src[:, 1] == src[:, 2]))
    assert 0.29 < whole < 0.40  # all three features kept: 0.7 ** 3 = 0.343
    same = mixed_rows(X, 50, 0.0, rng)
    assert all(np.array_equal(r, X[int(r[0])], equal_nan=True) for r in same)
    with pytest.raises(CompileError, match="mix_share"):
        FitOptions(mix_share=1.5).check()


def test_formula_5_price_truncates_the_sequence() -> None:
    """A high price per tree keeps fewer trees than a zero price (the holdout optimum of MSE + lambda T)."""
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = X[:, 0] * X[:, 1] + np.sin(X[:, 2])
    forest = lumber.load(GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(X, y))
    free = fit_oblivious(forest, X, FitOptions(depth=4, max_trees=60, patience=60, tree_price=0.0))
    dear = fit_oblivious(forest, X, FitOptions(depth=4, max_trees=60, patience=10, tree_price=1e-2))
    assert dear.best_trees < free.best_trees
    var = dear.report["margin_std"] ** 2
    objective = [m / var + 1e-2 * t for t, m in enumerate(dear.holdout_mse)]
    assert dear.best_trees == int(np.argmin(objective))
    assert dear.report["stop"] == "price"


def test_bad_fit_inputs_are_refused() -> None:
    from sklearn.ensemble import GradientBoostingClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = rng.integers(0, 3, 200)
    multi = lumber.load(GradientBoostingClassifier(n_estimators=3, max_depth=2).fit(X, y))
    with pytest.raises(CompileError, match="one-output"):
        fit_oblivious(multi, X, SMALL)
    with pytest.raises(CompileError, match="depth"):
        FitOptions(depth=0).check()
    with pytest.raises(CompileError, match="boundary >= 0"):
        FitOptions(boundary=-1.0).check()


def test_boundary_weighting_fits_rows_near_the_decision_closer() -> None:
    """``boundary=s`` weighs rows by ``1 / (1 + (m / s)^2)``: the error on validation rows whose source margin is
    near the decision falls (decisions and the cascade band live there) while far rows may fit worse."""
    import lightgbm as lgb

    rng = np.random.default_rng(3)
    X = rng.normal(size=(6000, 5))
    y = (2 * X[:, 0] + X[:, 1] * X[:, 2] + np.sin(3 * X[:, 3]) + 0.3 * rng.normal(size=6000) > 0).astype(int)
    bst = lgb.train({"objective": "binary", "num_leaves": 15, "verbose": -1, "num_threads": 1, "seed": 0},
                    lgb.Dataset(X[:3000], y[:3000]), 60)
    forest = lumber.load(bst)
    opts = dict(depth=5, max_trees=40, patience=40, time_budget=60.0)
    plain = fit_oblivious(forest, X[:3000], FitOptions(boundary=0.0, **opts)).ensemble(40)
    near = fit_oblivious(forest, X[:3000], FitOptions(boundary=0.5, **opts)).ensemble(40)
    ref = bst.predict(X[3000:], raw_score=True)
    close = np.abs(ref) < 0.5
    err = lambda e: float(np.mean(np.abs(e.evaluate(X[3000:]) - ref)[close]))  # noqa: E731
    assert close.sum() > 100 and err(near) < 0.8 * err(plain)


def test_fit_oblivious_is_a_pass_whose_result_deploys() -> None:
    """``fit-oblivious{...}`` in a pipeline: the options are FitOptions fields (kebab-case), the report states the
    fit and, with validation rows, |margin change| and agreement there; the ObliviousEnsemble compiles to tables
    that give its own margins. Without training rows the pass says what it needs."""
    from sklearn.ensemble import GradientBoostingClassifier

    from lumber.passes.base import PassContext

    rng = np.random.default_rng(4)
    X = rng.normal(size=(1200, 4))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    m = GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0).fit(X[:600], y[:600])
    ctx = PassContext()
    ens = lumber.run(m, "fit-oblivious{depth=4,max-trees=15,boundary=1.0}",
                     data={"train": (X[:600], y[:600]), "valid": (X[600:], y[600:])}, context=ctx)
    assert type(ens).__name__ == "ObliviousEnsemble" and 1 < ens.n_trees <= 16
    rep = ctx.reports[-1]
    assert rep.pass_name == "fit-oblivious" and "LOSSY" in rep.summary and "decisions agree on" in rep.summary
    ref = m.decision_function(X[600:])
    got = ens.evaluate(X[600:]).reshape(-1)
    assert rep.metrics["max_abs_margin_change"] == pytest.approx(np.abs(got - ref).max(), rel=1e-9)
    assert rep.metrics["agreement"] == pytest.approx(np.mean((got > 0) == (ref > 0)))
    table = lumber.compile(ens, target="table")
    np.testing.assert_allclose(table.predict_raw(X[600:]).reshape(-1), got, rtol=1e-12, atol=1e-12)
    with pytest.raises(CompileError, match="needs X_train"):
        lumber.run(m, "fit-oblivious")
    with pytest.raises(CompileError, match="depth"):
        lumber.run(m, "fit-oblivious{depth=40}", data={"train": (X[:600], y[:600])})
