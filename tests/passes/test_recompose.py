"""``oblivious`` and ``quantize`` passes: exact re-composition of real and generated models."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import make_forest
from strategies import boundary_rows, forests

import lumber
from lumber.backends.table import TableEvaluator
from lumber.passes.analyses.equivalence import model_scale
from lumber.ir import CompileError, ConditionKind, Forest, ObliviousEnsemble, Polynomial, Task, default_features
from lumber.ir.polynomial import from_terms
from lumber.passes.analyses.equivalence import polynomial_difference
from lumber.passes.transforms.quantize import quantize_ensemble
from lumber.passes.transforms.recompose_oblivious import (_levels, _merge_nested, cover_lower_bound, grow_sets,
                                                           level_groups, maximal_monomials, polish_sets, recompose)
from lumber.passes.transforms.polynomial import forest_to_polynomial


def corpus(forest: Forest, n_random: int = 32) -> np.ndarray:
    """Boundary rows the model accepts (scikit-learn models refuse NaN or infinity)."""
    X = boundary_rows(forest, n_random=n_random)
    if not forest.schema.allow_nan:
        X = X[~np.isnan(X).any(axis=1)]
    if not forest.schema.allow_inf:
        X = X[~np.isinf(X).any(axis=1)]
    return X


def assert_exact(forest: Forest, ens: ObliviousEnsemble, X: np.ndarray) -> None:
    """Margins to 1e-12 of the model's scale, identical decisions."""
    a, b = forest.evaluate(X), ens.evaluate(X)
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-12 * max(model_scale(forest), 1.0))
    if forest.schema.task in (Task.BINARY, Task.MULTICLASS):
        np.testing.assert_array_equal(ens.predict(X), forest.predict(X))


def assert_same_polynomial(poly: Polynomial, ens: ObliviousEnsemble) -> None:
    """The re-composed ensemble's canonical polynomial is the input polynomial."""
    back = forest_to_polynomial(ens.to_forest())
    atol = 1e-12 * max(model_scale(poly), 1.0)
    diff = polynomial_difference(poly, back, atol=atol)
    assert diff.n_monomials == 0 and np.all(np.abs(diff.bias) <= atol)


def _assert_every_form_exact(f: Forest, poly: Polynomial, e: ObliviousEnsemble, X: np.ndarray) -> None:
    """``e`` equals the source ``f`` and its polynomial, and so do its quantized tables through the
    numpy evaluator, a table-file round trip and the C runtime (bit for bit against ``e``)."""
    from lumber.backends.table import decode_table, encode_table
    from lumber.backends.table_c import TableRuntime

    e.validate()
    assert_exact(f, e, X)
    assert_same_polynomial(poly, e)
    q = quantize_ensemble(e).validate()
    np.testing.assert_array_equal(TableEvaluator(q).predict_raw(X), e.evaluate(X))
    np.testing.assert_array_equal(TableEvaluator(decode_table(encode_table(q)).ensemble).predict_raw(X),
                                  e.evaluate(X))
    np.testing.assert_array_equal(TableRuntime(q).predict_raw(np.ascontiguousarray(X))[:, 0], e.evaluate(X))


@given(forests(categorical=False, missing_zero=False, max_trees=5, max_depth=4),
       st.sampled_from(["greedy", "pack", "grow"]), st.integers(0, 3))
def test_recomposition_is_exact_on_generated_forests(forest: Forest, strategy: str, slack: int) -> None:
    poly = forest_to_polynomial(forest)
    ens, stats = recompose(poly, max_depth=max(poly.max_degree, 1) + slack, strategy=strategy)
    ens.validate()
    assert ens.max_depth <= max(poly.max_degree, 1) + slack
    X = corpus(forest)
    assert_exact(forest, ens, X)
    assert_same_polynomial(poly, ens)
    q = quantize_ensemble(ens).validate()
    np.testing.assert_array_equal(TableEvaluator(q).predict_raw(X), ens.evaluate(X))
    if strategy == "greedy":
        assert stats["extensions"] == 0


def _lightgbm(X: np.ndarray, y: np.ndarray, **params: Any) -> Any:
    import lightgbm as lgb

    p = {"num_leaves": 15, "max_depth": 4, "learning_rate": 0.2, "verbose": -1, "num_threads": 1, "seed": 0,
         "min_data_in_leaf": 5, **params}
    return lgb.train(p, lgb.Dataset(X, y), 25)


def _nan_cancer(seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(seed)
    X = X.copy()
    X[rng.random(X.shape) < 0.1] = np.nan
    return X, y


def test_lightgbm_with_nan_against_lightgbm() -> None:
    X, y = _nan_cancer(1)
    bst = _lightgbm(X, y, objective="binary")
    forest = lumber.load(bst)
    poly = forest_to_polynomial(forest)
    assert poly.statistics()["missing_conditions"] > 0  # explicit NaN conditions are exercised
    for strategy in ("greedy", "pack", "grow"):
        ens = lumber.run(poly, f"oblivious{{max-depth=8,strategy={strategy}}}")
        raw = bst.predict(X, raw_score=True)
        np.testing.assert_allclose(ens.evaluate(X), raw, rtol=1e-12, atol=1e-12 * model_scale(forest))
        np.testing.assert_array_equal(ens.predict_proba(X)[:, 1] > 0.5, bst.predict(X) > 0.5)
        assert_exact(forest, ens, corpus(forest, n_random=64))
    assert_same_polynomial(poly, ens)


def test_lightgbm_nan_only_split_against_lightgbm() -> None:
    X, y = _nan_cancer(0)
    bst = _lightgbm(X, y, objective="binary")
    forest = lumber.load(bst)
    assert np.isinf(forest.threshold).any()
    ens = lumber.run(forest, "polynomial,oblivious{max-depth=8}")
    np.testing.assert_allclose(ens.evaluate(X), bst.predict(X, raw_score=True), rtol=1e-12, atol=1e-11)


def test_xgboost_regression_routes_like_xgboost() -> None:
    import xgboost as xgb
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X = X.copy()
    X[::7, 2] = np.nan
    bst = xgb.train({"max_depth": 3, "eta": 0.3, "nthread": 1, "seed": 0}, xgb.DMatrix(X, y), 20)
    forest = lumber.load(bst)
    ens = lumber.run(forest, "polynomial,oblivious{max-depth=6}")
    # XGBoost sums leaves in float32; the polynomial (and the tables) hold the float64 sum of the same leaves
    f64 = forest.replace(schema=forest.schema.with_(accumulate_dtype="float64"))
    assert_exact(f64, ens, np.concatenate([X, corpus(forest)]))
    np.testing.assert_allclose(ens.evaluate(X), bst.predict(xgb.DMatrix(X), output_margin=True), rtol=1e-5)


@pytest.mark.parametrize("kind", ["rf", "gb"])
def test_sklearn_multiclass_against_sklearn(kind: str) -> None:
    from sklearn.datasets import load_wine
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

    X, y = load_wine(return_X_y=True)
    if kind == "rf":
        model = RandomForestClassifier(n_estimators=8, max_depth=3, random_state=0).fit(X, y)
    else:
        model = GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0).fit(X, y)
    forest = lumber.load(model)
    ens = lumber.run(forest, "polynomial,oblivious{max-depth=8}")
    # random-forest leaves are vectors over the classes: vector tables; boosting feeds one class per tree
    assert (ens.tree_output < 0).all() if kind == "rf" else (ens.tree_output >= 0).all()
    np.testing.assert_allclose(ens.predict_proba(X), model.predict_proba(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ens.predict(X), model.predict(X))
    assert_exact(forest, ens, corpus(forest))


def _chain_forest() -> Forest:
    # tree 0: x0 then x1 (monomials {c0}, {c0, c1}); tree 1: x2 alone ({c2})
    return make_forest([("x0", 0.0, 1.0, ("x1", 0.0, 2.0, 3.0)), ("x2", 0.0, 0.5, -0.5)], ["x0", "x1", "x2"])


def test_greedy_is_the_papers_algorithm_and_pack_extends() -> None:
    forest = _chain_forest()
    poly = forest_to_polynomial(forest)
    greedy, gs = recompose(poly, max_depth=4, strategy="greedy")
    assert sorted(greedy.depth.tolist()) == [1, 2] and gs["searched"] == 2  # one tree per maximal monomial
    packed, ps = recompose(poly, max_depth=4, strategy="pack")
    assert packed.depth.tolist() == [3] and ps["extensions"] == 1
    capped, _ = recompose(poly, max_depth=2, strategy="pack")
    assert sorted(capped.depth.tolist()) == [1, 2]
    for ens in (greedy, packed, capped):
        assert_exact(forest, ens, corpus(forest))


def test_monomials_whose_supersets_skip_a_degree_are_found_by_search() -> None:
    schema = lumber.Schema(features=default_features(3), task=lumber.ir.Task.REGRESSION, n_outputs=1,
                           base_score=(0.0,))
    cf, ck = np.array([0, 1, 2]), np.full(3, ConditionKind.GREATER, dtype=np.int8)
    ct, cn = np.array([0.0, 0.0, 0.0]), np.zeros(3, dtype=bool)
    ids = np.array([[0, 1, 2], [0, 3, 3]], dtype=np.int32)  # {a, b, c} and {a}: no {a, b} in between
    poly = from_terms(schema, cf, ck, ct, cn, ids, np.array([[2.0], [1.0]]), np.array([0.5]))
    for strategy in ("greedy", "pack", "grow"):
        ens, st_ = recompose(poly, max_depth=3, strategy=strategy)
        assert ens.n_trees == 1 and st_["searched"] == 2
        X = np.array([[1.0, 1, 1], [1, 0, 1], [0, 1, 1], [np.nan, 1, 1]])
        np.testing.assert_array_equal(ens.evaluate(X), poly.evaluate(X))


def test_nested_trees_are_merged() -> None:
    tree_of, sets, merged = _merge_nested([{1, 2}, {1, 2, 3}, {4}, {3, 1, 2}], np.array([0, 1, 2, 0, 3]))
    assert merged == 2 and sets == [{1, 2, 3}, {4}]
    assert tree_of.tolist() == [0, 0, 1, 0, 0]


def test_pipeline_reports_statistics() -> None:
    forest = _chain_forest()
    err = io.StringIO()
    ens = lumber.run(forest, "polynomial,oblivious{max-depth=6,strategy=greedy},quantize", time_passes=True,
                     stream=err)
    assert isinstance(ens, ObliviousEnsemble) and ens.quantized
    text = err.getvalue()
    assert "oblivious: 3 monomials -> 2 oblivious trees (1 x depth 1, 1 x depth 2)" in text
    assert "quantize: 3 binarized columns" in text


def test_max_depth_below_the_degree_is_refused() -> None:
    poly = forest_to_polynomial(_chain_forest())
    with pytest.raises(CompileError, match="max-depth is 1"):
        recompose(poly, max_depth=1)
    with pytest.raises(CompileError, match="max-depth must be 'auto' or between"):
        lumber.run(poly, "oblivious{max-depth=0}")
    with pytest.raises(CompileError, match="unknown strategy 'best'"):
        lumber.run(poly, "oblivious{strategy=best}")
    with pytest.raises(CompileError, match="takes a Polynomial"):
        lumber.run(_chain_forest(), "oblivious")


def test_quantize_nan_bins() -> None:
    from lumber.ir import Schema, Task

    schema = Schema(features=default_features(2), task=Task.REGRESSION, n_outputs=1, base_score=(0.0,))
    # x0: NaN true below 1.0 and false above (one column, NaN in the middle bin);
    # x1: NaN true at 2.0 but false at 1.0 (out of order: two columns)
    e = ObliviousEnsemble(schema=schema, depth=np.array([4]), level_feature=np.array([0, 0, 1, 1]),
                          level_threshold=np.array([0.0, 1.0, 1.0, 2.0]),
                          level_nan_true=np.array([True, False, False, True]), tree_output=np.array([0]),
                          value=np.arange(16.0))
    q = quantize_ensemble(e.validate()).validate()
    assert q.col_feature is not None and q.col_nan_bin is not None
    assert q.col_feature.tolist() == [0, 1, 1] and q.col_nan_bin.tolist() == [1, 1, 0]
    X = np.array([[np.nan, np.nan], [0.5, 1.5], [np.nan, 3.0], [-1.0, np.nan], [1.0, 2.0], [np.inf, -np.inf]])
    np.testing.assert_array_equal(TableEvaluator(q).predict_raw(X), e.evaluate(X))
    np.testing.assert_array_equal(TableEvaluator(q).apply(X), e.apply(X))


@given(forests(categorical=True, missing_zero=False, max_trees=4, max_depth=3),
       st.sampled_from(["greedy", "pack", "grow"]))
def test_category_conditions_become_exact_set_levels(forest: Forest, strategy: str) -> None:
    """Native categorical splits (every category rule, in-set left or right, invalid values either way)
    re-compose to ``code in set`` levels: the IR, the numpy and C table evaluators, the table file and
    ``to_forest`` all give the forest's margins on boundary rows with NaN, invalid and unseen codes."""
    from lumber.backends.table import decode_table, encode_table

    poly = forest_to_polynomial(forest)
    ens, _ = recompose(poly, max_depth=max(poly.max_degree, 1), strategy=strategy)
    ens.validate()
    X = corpus(forest)
    assert_exact(forest, ens, X)
    assert_same_polynomial(poly, ens)
    q = quantize_ensemble(ens).validate()
    np.testing.assert_array_equal(TableEvaluator(q).predict_raw(X), ens.evaluate(X))
    np.testing.assert_array_equal(TableEvaluator(decode_table(encode_table(q)).ensemble).predict_raw(X),
                                  ens.evaluate(X))
    if ens.has_bin_levels:  # a bin group becomes a search over its borders: exact, but not oblivious
        assert_exact(forest, ens.to_forest(), X)
    else:
        assert_exact(forest, ObliviousEnsemble.from_forest(ens.to_forest()), X)


def test_category_levels_name_their_categories() -> None:
    from builders import categorical

    f = make_forest([("x", 0.5, ("c", {1, 3}, 1.0, 2.0), 3.0)], ["x", categorical("c", range(4))])
    ens, _ = recompose(forest_to_polynomial(f))
    texts = {ens.describe_level(i) for i in range(ens.n_levels)}
    assert any(t.startswith("c in {") for t in texts), texts
    assert ens.statistics()["category_levels"] >= 1




@pytest.mark.parametrize("strategy", ["pack", "grow"])
def test_codes_of_one_feature_share_levels(strategy: str) -> None:
    """Seven codes of one categorical feature (split three ways by three trees) and one threshold fit
    one tree of 1 + 3 levels: the codes are exclusive, so three levels read a code's rank in the tree
    (level j: the codes whose rank has bit j). Exact on every code, unseen and invalid values and NaN,
    through the IR, the quantized numpy and C evaluators, the table file and ``to_forest``."""
    from builders import categorical

    from lumber.passes.transforms.recompose_oblivious import category_groups

    f = make_forest([("c", {1, 3}, ("x", 0.5, 1.0, 2.0), 3.0), ("c", {2, 5}, 0.25, ("x", 0.5, -1.0, 4.0)),
                     ("c", {0, 6, 7}, ("x", 0.5, 0.5, 1.5), -2.0)], ["x", categorical("c", range(9))])
    poly = forest_to_polynomial(f)
    groups = category_groups(poly)
    assert (groups[:-1] >= 0).sum() == 7 and groups[-1] == -1
    ens, _ = recompose(poly, max_depth=4, strategy=strategy)
    assert ens.n_trees == 1 and ens.depth.tolist() == [4], ens.depth
    sets = [ens.level_set(i).tolist() for i in range(ens.n_levels) if np.isnan(ens.level_threshold[i])]
    assert len(sets) == 3 and sorted(c for s in sets for c in s) != list(range(7))  # codes share levels
    greedy, _ = recompose(poly, max_depth=4, strategy="greedy")
    assert greedy.n_trees > 1
    x = np.array([0.0, 0.5, 1.0, 2.0, np.nan])
    c = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, 2.5, np.nan, np.inf])
    X = np.array([[a, b] for a in x for b in c])
    for e in (ens, greedy):
        _assert_every_form_exact(f, poly, e, X)
        assert not e.has_bin_levels  # one threshold of x: a plain level, so the round trip is oblivious
        assert_exact(f, ObliviousEnsemble.from_forest(e.to_forest()), X)


def _adult_native_categories(adult_split: tuple, rounds: int, **params: Any) -> tuple[Any, list[int]]:
    """LightGBM on Adult with its own categorical splits (sets of several codes: max_cat_to_onehot=1), and
    the categorical columns."""
    import lightgbm as lgb

    d = lumber.datasets.load("adult")
    cats = [i for i, f in enumerate(d.features) if f.kind.name == "CATEGORICAL"]
    Xtr, ytr = adult_split[:2]
    p = {"objective": "binary", "num_leaves": 8, "max_depth": 3, "learning_rate": 0.2, "verbose": -1,
         "num_threads": 1, "seed": 0, "max_cat_to_onehot": 1, "min_data_per_group": 5, **params}
    return lgb.train(p, lgb.Dataset(Xtr, ytr, categorical_feature=cats), rounds), cats


@pytest.mark.parametrize("strategy", ["pack", "grow"])
def test_lightgbm_with_native_categories_compiles_to_exact_tables(adult_split: tuple, strategy: str) -> None:
    """Adult with LightGBM's own categorical splits (sets of several codes, max_cat_to_onehot=1): the
    tables -- IR, numpy table evaluator, C table runtime -- give LightGBM's raw scores on real rows
    and on rows with NaN, negative, fractional, unseen and huge category values."""
    from lumber.backends.table_c import TableRuntime

    bst, cats = _adult_native_categories(adult_split, 30)
    forest = lumber.load(bst)
    assert forest.is_categorical.any() and any(forest.categories_of(int(n)).size > 1
                                               for n in np.flatnonzero(forest.is_categorical))
    ens = lumber.run(bst, f"polynomial,oblivious{{strategy={strategy}}},quantize")
    assert ens.statistics()["category_levels"] > 0 and ens.statistics()["bin_levels"] > 0
    X = np.concatenate([adult_split[4][:1500]] + [adult_split[4][:40].copy() for _ in range(5)])
    for j, v in enumerate([np.nan, -1.0, 0.5, 99.0, 2.0**31]):
        X[1500 + 40 * j:1540 + 40 * j, cats] = v
    ref = bst.predict(X, raw_score=True)
    tol = 1e-12 * max(model_scale(forest), 1.0)
    np.testing.assert_allclose(ens.evaluate(X), ref, rtol=0, atol=tol)
    np.testing.assert_array_equal(TableEvaluator(ens).predict_raw(X), ens.evaluate(X))
    rt = TableRuntime(ens)
    np.testing.assert_array_equal(rt.predict_raw(np.ascontiguousarray(X))[:, 0], ens.evaluate(X))
    np.testing.assert_array_equal(rt.predict_raw(np.ascontiguousarray(X[1501:1502]))[:, 0], ens.evaluate(X[1501:1502]))


def test_table_file_margins_against_the_model(adult_split: tuple, tmp_path: Any,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``lumber predict m.table`` on a 10-tree Adult model with native categories: the file's margins
    equal the IR's evaluator bit for bit, and LightGBM's within the stated bound, 1e-12 of the model's
    scale (docs/table-format.md, "Exactness"): a table row is a sum of polynomial weights while LightGBM
    adds leaf values tree by tree, so the last bits may differ."""
    import json

    import pandas as pd

    from lumber.compiler.cli import main

    bst, _ = _adult_native_categories(adult_split, 10, num_leaves=15, max_depth=-1, learning_rate=0.1)
    model = tmp_path / "m.txt"
    bst.save_model(str(model))
    X = adult_split[4][:600]
    pd.DataFrame(X, columns=bst.feature_name()).to_csv(tmp_path / "rows.csv", index=False)
    art = tmp_path / "m.table"
    assert main(["compile", str(model), "--emit", "table", "-o", str(art)]) == 0
    capsys.readouterr()
    assert main(["predict", str(art), str(tmp_path / "rows.csv"), "--format", "jsonl"]) == 0
    got = np.array([json.loads(line)["raw"] for line in capsys.readouterr().out.splitlines()])
    forest = lumber.load(bst)
    np.testing.assert_allclose(got, bst.predict(X, raw_score=True), rtol=0,
                               atol=1e-12 * max(model_scale(forest), 1.0))
    from lumber.compiler.tables import to_tables

    ens = to_tables(bst)  # the compile command's re-composition, with its defaults
    np.testing.assert_array_equal(got, ens.evaluate(X))


@pytest.mark.parametrize("strategy", ["pack", "grow"])
@pytest.mark.parametrize("nan_right", [(), (3,), (0, 1), (5,)])
def test_thresholds_of_one_feature_share_levels_as_a_bin_code(strategy: str, nan_right: tuple[int, ...]) -> None:
    """Seven trees split x at seven thresholds, then y: with bins the seven thresholds are one bin
    code of three levels, so one tree of 3 + 1 levels holds everything (without: 8 conditions, more
    trees). NaN going right at some thresholds: when those are the lowest, NaN reads as a code;
    otherwise the thresholds true on NaN are a group (or a plain level) of their own. Exact on every cell, NaN and
    infinities through the IR, the quantized numpy and C evaluators, the table file and ``to_forest``."""

    cuts = [-1.5, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0]
    specs = [("x", t, ("y", 0.0, 0.1 * i, -0.2 * i), 1.0 + i, i not in nan_right) for i, t in enumerate(cuts)]
    f = make_forest(specs, ["x", "y"])
    poly = forest_to_polynomial(f)
    split = bool(nan_right) and nan_right != tuple(range(len(nan_right)))  # NaN-true thresholds not the lowest
    ens, _ = recompose(poly, max_depth=5 if split else 4, strategy=strategy)
    plain, _ = recompose(poly, max_depth=5 if split else 4, strategy=strategy, bins=False)
    assert ens.n_trees == 1 and ens.statistics()["bin_levels"] == 3 and ens.max_depth == (5 if split else 4)
    assert plain.n_trees > 1 and plain.statistics()["bin_levels"] == 0
    vals = np.array(sorted(set(cuts) | {c + 0.25 for c in cuts} | {-9.0, np.nan, np.inf, -np.inf}))
    X = np.array([[a, b] for a in vals for b in (-1.0, 0.0, 1.0, np.nan)])
    for e in (ens, plain):
        _assert_every_form_exact(f, poly, e, X)
        np.testing.assert_array_equal(e.to_forest().evaluate(X), e.evaluate(X))


def test_pack_scores_each_placement_in_one_step(adult_split: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pack`` on a model with category and bin groups: a placement scores every tree at once, so the
    per-tree level count (``_Cover.grown``) runs once per extension, not once per candidate tree (the
    per-candidate loop made Adult 500 x 63 take over 600 s)."""
    from lumber.passes.transforms import recompose_oblivious as ro

    bst, _ = _adult_native_categories(adult_split, 40)
    forest = lumber.load(bst)
    poly = forest_to_polynomial(forest)
    calls = {"grown": 0, "place": 0, "scored": 0}
    grown, place = ro._Cover.grown, ro._Cover.place

    def counting_grown(self: Any, t: int, new: set[int]) -> int:
        calls["grown"] += 1
        return grown(self, t, new)

    def counting_place(self: Any, conds: list[int]) -> int:
        calls["place"] += 1
        before = self.scored
        out = place(self, conds)
        calls["scored"] += self.scored - before
        return out

    monkeypatch.setattr(ro._Cover, "grown", counting_grown)
    monkeypatch.setattr(ro._Cover, "place", counting_place)
    ens, stats = recompose(poly, max_depth=8, strategy="pack", merge=False)
    assert ens.n_trees > 20 and stats["extensions"] > 20
    assert calls["grown"] == stats["extensions"]  # one level count per extension made
    assert calls["scored"] <= calls["place"]      # at most one scoring step per placement
    assert_exact(forest, ens, adult_split[4][:500])


def _optimal_cover(poly: Polynomial, max_depth: int) -> int:
    """Fewest trees of at most ``max_depth`` levels holding every maximal monomial (exhaustive search)."""
    ids = np.asarray(poly.padded_ids, dtype=np.int64)
    top = [set(r[r < poly.n_conditions].tolist()) for r in ids[maximal_monomials(ids, poly.degree)]]
    groups = level_groups(poly)
    best = [len(top)]

    def place(i: int, trees: list[set[int]]) -> None:
        if len(trees) >= best[0]:
            return
        if i == len(top):
            best[0] = len(trees)
            return
        for t in range(len(trees)):
            union = trees[t] | top[i]
            if _levels(union, groups) <= max_depth:
                place(i + 1, trees[:t] + [union] + trees[t + 1:])
        place(i + 1, trees + [set(top[i])])

    place(0, [])
    return best[0]


def test_cover_lower_bound_counts_monomials_no_two_of_which_share_a_tree() -> None:
    schema = lumber.Schema(features=default_features(6), task=lumber.ir.Task.REGRESSION, n_outputs=1,
                           base_score=(0.0,))
    cf, ck = np.arange(6), np.full(6, ConditionKind.GREATER, dtype=np.int8)
    ct, cn = np.zeros(6), np.zeros(6, dtype=bool)
    ids = np.array([[0, 1, 2], [3, 4, 5], [0, 3, 6]], dtype=np.int32)  # 6 pads: {0, 3}; any two need 4+ levels
    poly = from_terms(schema, cf, ck, ct, cn, ids, np.array([[1.0], [2.0], [3.0]]), np.array([0.0]))
    assert cover_lower_bound(poly, 3) == 3 == _optimal_cover(poly, 3)
    for strategy in ("greedy", "pack", "grow"):
        assert recompose(poly, max_depth=3, strategy=strategy)[0].n_trees == 3
    assert cover_lower_bound(poly, 4) == 2 == _optimal_cover(poly, 4)  # {0, 1, 2} and {3, 4, 5} take 6
    assert cover_lower_bound(poly, 6) == 1 == _optimal_cover(poly, 6)


@given(forests(max_trees=4, max_depth=3, multiclass=False), st.integers(0, 2))
def test_cover_lower_bound_is_below_the_optimum(forest: Forest, slack: int) -> None:
    poly = forest_to_polynomial(forest)
    depth = max(poly.max_degree, 1) + slack
    bound = cover_lower_bound(poly, depth)
    ids = np.asarray(poly.padded_ids, dtype=np.int64)
    if poly.n_monomials and int(maximal_monomials(ids, poly.degree).sum()) <= 8:
        assert bound <= _optimal_cover(poly, depth)
    for strategy in ("greedy", "pack", "grow"):
        assert bound <= recompose(poly, max_depth=depth, strategy=strategy)[0].n_trees
    if poly.n_monomials:
        groups = level_groups(poly)
        deg = poly.degree.astype(np.int64)
        raw = grow_sets(ids, deg, poly.n_conditions, depth, groups, polish=0)
        polished = grow_sets(ids, deg, poly.n_conditions, depth, groups)
        assert len(polished) <= len(raw)
        _assert_covers(polished, poly, depth)


def _assert_covers(sets: list[list[int]], poly: Polynomial, max_depth: int) -> None:
    """Every maximal monomial of ``poly`` lies in one of ``sets``, each at most ``max_depth`` levels."""
    ids = np.asarray(poly.padded_ids, dtype=np.int64)
    groups = level_groups(poly)
    assert all(_levels(s, groups) <= max_depth for s in sets)
    for r in ids[maximal_monomials(ids, poly.degree)]:
        assert any(set(r[r < poly.n_conditions].tolist()) <= set(s) for s in sets)


def test_polish_trims_trees_and_removes_one_whose_monomials_fit_elsewhere() -> None:
    schema = lumber.Schema(features=default_features(5), task=lumber.ir.Task.REGRESSION, n_outputs=1,
                           base_score=(0.0,))
    cf, ck = np.arange(5), np.full(5, ConditionKind.GREATER, dtype=np.int8)
    ct, cn = np.zeros(5), np.zeros(5, dtype=bool)
    ids = np.array([[0, 1], [2, 3], [0, 2], [4, 5]], dtype=np.int32)  # 5 pads
    poly = from_terms(schema, cf, ck, ct, cn, ids, np.array([[1.0], [2.0], [3.0], [4.0]]), np.array([0.0]))
    P = np.asarray(poly.padded_ids, dtype=np.int64)
    assert poly.n_conditions == 5 and sorted(P.tolist()) == [[0, 1], [0, 2], [2, 3], [4, 5]]
    deg, groups = poly.degree.astype(np.int64), level_groups(poly)
    # {4} is in two trees: the first is trimmed to {0, 1}, which then joins {0, 2}; {2, 3, 4} cannot take it
    out = polish_sets([[0, 1, 4], [2, 3, 4], [0, 2]], P, deg, 5, groups, 3)
    assert sorted(out) == [[0, 1, 2], [2, 3, 4]] and len(out) == _optimal_cover(poly, 3)
    _assert_covers(out, poly, 3)
    # at two levels nothing can move: the optimum is the cover itself
    out = polish_sets([[0, 1], [2, 3], [0, 2], [4]], P, deg, 5, groups, 2)
    assert sorted(out) == [[0, 1], [0, 2], [2, 3], [4]] and len(out) == _optimal_cover(poly, 2)


def test_polish_rounds_option() -> None:
    forest = _chain_forest()
    plain = lumber.run(forest, "polynomial,oblivious{strategy=grow,polish=0}")
    polished = lumber.run(forest, "polynomial,oblivious{strategy=grow,polish=3}")
    X = corpus(forest)
    assert_exact(forest, plain, X)
    assert_exact(forest, polished, X)
    assert polished.n_trees <= plain.n_trees
    from lumber.passes.transforms.recompose_oblivious import RecomposeOblivious
    with pytest.raises(CompileError, match="polish must be a number of rounds"):
        RecomposeOblivious(polish=-1)


@settings(max_examples=15, deadline=None)
@given(forests(max_trees=5, max_depth=3, multiclass=False), st.integers(0, 2))
def test_restarts_choose_the_fewest_trees_from_several_covers(forest: Forest, slack: int) -> None:
    poly = forest_to_polynomial(forest)
    depth = max(poly.max_degree, 1) + slack
    one, _ = recompose(poly, max_depth=depth, strategy="grow")
    pooled, _ = recompose(poly, max_depth=depth, strategy="grow", restarts=3)
    assert cover_lower_bound(poly, depth) <= pooled.n_trees <= one.n_trees
    assert_same_polynomial(poly, pooled)
    assert_exact(forest, pooled, corpus(forest))
    from lumber.passes.transforms.recompose_oblivious import RecomposeOblivious
    with pytest.raises(CompileError, match="restarts must be a number of covers"):
        RecomposeOblivious(restarts=-1)


@settings(max_examples=25, deadline=None)
@given(forests(categorical=True, missing_zero=False, max_trees=5, max_depth=4, input_dtype="float64"),
       st.sampled_from(["grow", "pack"]), st.sampled_from(["flat", "steep", "measured"]), st.sampled_from([2, 3, 5, 10]))
def test_auto_depth_is_the_cheapest_cover_and_exact(forest: Forest, strategy: str, prices: str, first: int) -> None:
    """``max-depth=auto`` (the default) prices unpolished ``grow`` covers by the cost model from the first
    depth deeper, then shallower, while they get cheaper, gives up a cover once it costs more than the
    cheapest, and builds the chosen depth exactly (NaN, categories, every output), whatever the table
    costs say."""
    from lumber.passes.transforms.recompose_oblivious import CostModel, choose_depth

    poly = forest_to_polynomial(forest)
    table_ns = {"flat": (1.0,) * 17, "steep": tuple(2.0 ** d for d in range(17)),
                "measured": CostModel().table_ns}[prices]
    cost = CostModel(table_ns=table_ns, depths=(2, 3, 5, 6), first=first)
    depth, tried, _ = choose_depth(poly, cost)
    assert depth >= max(poly.max_degree, 1) and (depth in tried or not poly.n_monomials)
    full = {d: v for d, v in tried.items() if not v.get("given_up")}
    if poly.n_monomials:
        assert tried[depth]["cost"] == min(v["cost"] for v in full.values()) and not tried[depth].get("given_up")
        # a cover given up cost more than the chosen one when it was dropped
        assert all(v["cost"] > tried[depth]["cost"] for v in tried.values() if v.get("given_up"))
        # the walk: from the first depth priced, deeper while cheaper, then shallower while cheaper
        cands = sorted(d for d in (2, 3, 5, 6) if d >= max(poly.max_degree, 1)) or [poly.max_degree]
        start = next((d for d in cands if d >= first), cands[-1])
        assert start in tried
        deeper = [d for d in cands if d > start]
        assert [d for d in deeper if d in tried] == deeper[:len([d for d in deeper if d in tried])]
        if prices == "flat":  # levels are free: the fewest trees
            assert tried[depth]["trees"] == min(v["trees"] for v in full.values())
    ens, stats = recompose(poly, max_depth="auto", strategy=strategy, cost=cost)
    if strategy == "grow":
        assert stats["max_depth_cap"] == depth and stats["depth_choice"] == tried
    else:  # pack keeps its depth: 8, or the degree
        depth = max(8, poly.max_degree)
        assert stats["max_depth_cap"] == depth and not stats["depth_choice"]
    assert ens.max_depth <= depth
    if strategy == "grow" and poly.n_monomials:  # the chosen cover, polished: no more trees than priced
        assert ens.n_trees <= tried[depth]["trees"]
    X = corpus(forest)
    if poly.n_outputs == 1:
        _assert_every_form_exact(forest, poly, ens, X)
    else:
        assert_exact(forest, ens, X)
        assert_same_polynomial(poly, ens)
        np.testing.assert_array_equal(TableEvaluator(quantize_ensemble(ens)).predict_raw(X), ens.evaluate(X))


def test_auto_depth_is_the_pass_default_and_reported(adult_split: tuple) -> None:
    """The pass's defaults (``grow``, ``max-depth=auto``) on LightGBM with native categories, on rows
    with NaN and unseen codes: exact against LightGBM; the report names the depths weighed."""
    bst, cats = _adult_native_categories(adult_split, 20)
    err = io.StringIO()
    ens = lumber.run(bst, "polynomial,oblivious", time_passes=True, stream=err)
    assert "strategy grow, max-depth " in err.getvalue() and "chosen among unpolished covers (" in err.getvalue()
    assert "10: " in err.getvalue()
    X = adult_split[4][:1000].copy()
    X[np.random.default_rng(2).random(X.shape) < 0.05] = np.nan
    X[:50, cats] = 99.0
    tol = 1e-12 * max(model_scale(lumber.load(bst)), 1.0)
    np.testing.assert_allclose(ens.evaluate(X), bst.predict(X, raw_score=True), rtol=0, atol=tol)


def test_auto_depth_keeps_the_tables_within_the_budget(adult_split: tuple) -> None:
    """A cover whose tables exceed ``budget_bytes`` is never chosen; when every one does, the shallowest
    candidate is built (exactly) and the report says why."""
    from lumber.passes.transforms.recompose_oblivious import CostModel, choose_depth

    bst, _ = _adult_native_categories(adult_split, 20)
    poly = forest_to_polynomial(lumber.load(bst))
    free = CostModel(table_ns=(1.0,) * 17, depths=(8, 10, 12), first=8)  # levels free: the deepest wins
    depth, tried, _ = choose_depth(poly, free)
    assert 8 in tried and not any(v.get("over_budget") for v in tried.values())
    tight = CostModel(table_ns=(1.0,) * 17, depths=(8, 10, 12), first=8,
                      budget_bytes=int(tried[8]["table_bytes"]) if 8 in tried else 1)
    depth, tried, _ = choose_depth(poly, tight)
    assert depth == 8 and all(v.get("over_budget") for d, v in tried.items() if d > 8)
    none = CostModel(depths=(8, 10, 12), budget_bytes=1)
    depth, tried, pre = choose_depth(poly, none)
    assert depth == 8 and pre == {} and all(v.get("over_budget") for v in tried.values())
    ens, stats = recompose(poly, max_depth="auto", cost=none)
    assert stats["max_depth_cap"] == 8
    assert_same_polynomial(poly, ens)


def test_table_costs_are_the_measured_data(tmp_path: Any) -> None:
    """The depth choice reads the measured costs with their provenance; depths between measured ones are
    interpolated, shallower ones cost as the shallowest, deeper ones add the last step per level."""
    import json

    from lumber.passes.transforms.recompose_oblivious import COST_FILE, TABLE_NS, measured_table_ns

    doc = json.loads(COST_FILE.read_text(encoding="utf-8"))
    assert doc["command"].startswith("python bench/oblivious.py --table-cost") and doc["ns_by_depth"]
    assert TABLE_NS == measured_table_ns() and len(TABLE_NS) == 25
    f = tmp_path / "cost.json"
    f.write_text(json.dumps({"ns_by_depth": {"8": 0.5, "10": 1.0, "12": 2.0}}))
    ns = measured_table_ns(f)
    assert ns[3] == ns[8] == 0.5 and ns[9] == 0.75 and ns[11] == 1.5 and ns[12] == 2.0 and ns[14] == 3.0
    f.write_text(json.dumps({"ns_by_depth": {}}))
    with pytest.raises(CompileError, match="holds no table costs"):
        measured_table_ns(f)
