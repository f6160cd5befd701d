"""``attribution``: nu(k) equals a literal evaluation of formula (8); sums and signs on hand-made trees."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given

import lumber
from builders import make_forest
from lumber.ir import ConditionKind, PostTransform, Task
from lumber.passes.analyses.attribution import Attribution, attribution
from lumber.passes.base import PassContext, PassData
from lumber.passes.transforms.polynomial import forest_to_polynomial
from strategies import boundary_rows, forests


def condition_truth(p: lumber.ir.Polynomial, x: np.ndarray, c: int) -> bool:
    """One condition on one row, read from the table the plain way."""
    v = x[p.cond_feature[c]]
    if p.cond_kind[c] == ConditionKind.MISSING:
        return bool(np.isnan(v))
    if np.isnan(v):
        return bool(p.cond_nan_true[c])
    if p.schema.input_dtype == "float32":
        v = float(np.float32(v))
    return bool(v > p.cond_threshold[c])


def formula_8(p: lumber.ir.Polynomial, X: np.ndarray) -> np.ndarray:
    """nu(k) = sum_i E_x[ I{c_ki(x)} * sum_{M subset of C_-k} w_{M + c_ki} prod_{c in M} c(x) ], literally:
    M runs over the subsets of the other features' conditions (at most one condition per feature: other
    subsets have no monomial, so their weight is 0)."""
    w = {frozenset(p.mono_cond[p.mono_offset[j]:p.mono_offset[j + 1]].tolist()): p.weight[j] for j in range(p.n_monomials)}
    by_feature = {f: [c for c in range(p.n_conditions) if p.cond_feature[c] == f] for f in range(p.n_features)}
    truth = np.array([[condition_truth(p, x, c) for c in range(p.n_conditions)] for x in X]).reshape(len(X), -1)
    nu = np.zeros((p.n_features, p.n_outputs))
    for k in range(p.n_features):
        others = [[None] + by_feature[f] for f in range(p.n_features) if f != k]
        subsets = [frozenset(c for c in choice if c is not None) for choice in itertools.product(*others)]
        for c in by_feature[k]:
            for r in range(len(X)):
                if not truth[r, c]:
                    continue
                for M in subsets:
                    wm = w.get(M | {c})
                    if wm is not None and all(truth[r, list(M)]):
                        nu[k] += wm / len(X)
    return nu


@given(forests(max_trees=3, max_depth=3, max_features=3, categorical=False, missing_zero=False))
def test_nu_equals_a_literal_evaluation_of_formula_8(forest: lumber.ir.Forest) -> None:
    p = forest_to_polynomial(forest)
    X = boundary_rows(forest, n_random=6)[:60]
    res = attribution(p, X)
    np.testing.assert_allclose(res.nu, formula_8(p, X), rtol=1e-9, atol=1e-12)
    # per-condition values add up to the feature's
    per_feature = np.zeros_like(res.nu)
    np.add.at(per_feature, res.condition_feature, res.condition_nu)
    np.testing.assert_allclose(per_feature, res.nu, rtol=1e-12, atol=1e-12)


def test_single_split_sign_and_size() -> None:
    f = make_forest([("x0", 0.5, 1.0, 3.0)], ["x0", "x1"])  # 1 + 2 [x0 > 0.5]
    X = np.array([[0.0, 9.0]] * 6 + [[1.0, -9.0]] * 4)
    res = attribution(forest_to_polynomial(f), X)
    assert res.nu[:, 0].tolist() == pytest.approx([0.8, 0.0])
    assert res.ranking() == [("x0", pytest.approx(0.8)), ("x1", 0.0)]
    assert res.expected_margin.tolist() == pytest.approx([1.8])


def test_interaction_counts_towards_both_features_with_its_sign() -> None:
    # x0<=0: (x1<=0: 0, else 1); x0>0: (x1<=0: 2, else 0)  ==  b + 2a - 3ab
    f = make_forest([("x0", 0.0, ("x1", 0.0, 0.0, 1.0), ("x1", 0.0, 2.0, 0.0))], ["x0", "x1"])
    X = np.array([[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [1.0, 1.0]])
    res = attribution(forest_to_polynomial(f), X)
    assert res.nu[:, 0].tolist() == pytest.approx([2 * 0.5 - 3 * 0.25, 0.5 - 3 * 0.25])
    assert res.nu[0, 0] > 0 > res.nu[1, 0]


def test_additive_model_nu_sums_to_mean_margin_minus_bias(rng: np.random.Generator) -> None:
    stumps = [("x0", 0.5, -1.0, 2.0), ("x1", 0.0, 3.0, -0.5), ("x0", 1.5, 0.0, 1.0), ("x2", -1.0, 0.25, 0.75)]
    f = make_forest(stumps, ["x0", "x1", "x2"], base_score=[0.3])
    p = forest_to_polynomial(f)
    X = rng.uniform(-2, 2, size=(500, 3))
    res = attribution(p, X)
    assert res.nu.sum() == pytest.approx(f.evaluate(X).mean() - p.bias[0], rel=1e-12)
    assert res.expected_margin[0] == pytest.approx(f.evaluate(X).mean(), rel=1e-12)


def test_multiclass_gives_one_signed_column_per_class() -> None:
    f = make_forest([("x0", 0.0, [1.0, 0.0, 0.0], [0.0, 0.0, 2.0])], ["x0"], task=Task.MULTICLASS, n_outputs=3,
                    post_transform=PostTransform.SOFTMAX, classes=["a", "b", "c"])
    res = attribution(forest_to_polynomial(f), np.array([[-1.0], [1.0]]))
    assert res.output_names == ("a", "b", "c")
    assert res.nu[0].tolist() == pytest.approx([-0.5, 0.0, 1.0])
    js = res.to_dict()
    assert [o["output"] for o in js["outputs"]] == ["a", "b", "c"]
    json.dumps(js)


def test_api_pipeline_and_cache(adult_split: tuple) -> None:
    import lightgbm as lgb
    Xtr, ytr, Xva, yva, _, _ = adult_split
    m = lgb.LGBMClassifier(n_estimators=15, num_leaves=8, verbose=-1, n_jobs=1).fit(Xtr, ytr)
    res = lumber.attribution(m, Xva)
    assert res.nu.shape == (Xtr.shape[1], 1) and res.n_rows == len(Xva)
    assert np.abs(res.nu).sum() > 0
    assert res.expected_margin[0] == pytest.approx(m.predict(Xva, raw_score=True).mean(), rel=1e-10)
    assert "global attribution (MonoForest nu(k))" in res.format_text()
    ctx = PassContext()
    p = lumber.run(m, "polynomial,attribution{rows=valid}", data={"train": (Xtr, ytr), "valid": (Xva, yva)},
                   context=ctx)
    np.testing.assert_allclose(ctx.results["attribution"].nu, res.nu, rtol=1e-12)
    calls = []

    class Counting(Attribution):
        def compute(self, ir, ctx):  # type: ignore[no-untyped-def, override]
            calls.append(1)
            return super().compute(ir, ctx)

    a = Counting(rows="valid")
    assert ctx.analysis(a, p) is ctx.analysis(a, p) and len(calls) == 1
    ctx2 = PassContext(data=PassData(X_valid=Xva))
    assert ctx2.analysis(a, p.select(np.arange(3))) is not None and len(calls) == 2


def test_explain_cli_writes_attribution_json(tmp_path, adult_split: tuple) -> None:  # type: ignore[no-untyped-def]
    import lightgbm as lgb
    import pandas as pd

    from lumber.compiler.cli import main

    Xtr, ytr, Xva, _, _, _ = adult_split
    names = [f"f{i}" for i in range(Xtr.shape[1])]
    m = lgb.LGBMClassifier(n_estimators=10, num_leaves=8, verbose=-1, n_jobs=1).fit(pd.DataFrame(Xtr, columns=names), ytr)
    m.booster_.save_model(str(tmp_path / "model.txt"))
    pd.DataFrame(Xva[:200], columns=names).to_csv(tmp_path / "rows.csv", index=False)
    out = tmp_path / "attr.json"
    code = main(["explain", str(tmp_path / "model.txt"), str(tmp_path / "rows.csv"), "--attribution",
                 "-o", str(out), "-q"])
    assert code == 0
    doc = json.loads(out.read_text())["analyses"]["attribution"]
    want = lumber.attribution(m, pd.DataFrame(Xva[:200], columns=names))
    got = {d["feature"]: d["nu"] for d in doc["outputs"][0]["features"]}
    assert got == pytest.approx(dict(zip(names, want.nu[:, 0])), rel=1e-12)
    assert doc["rows"] == 200 and doc["polynomial"]["monomials"] > 0
