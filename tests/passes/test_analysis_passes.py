"""The explainers and equivalence as registered analysis passes: pipeline text in, the same results as the
public API (which runs these passes) out."""

from __future__ import annotations

import numpy as np
import pytest

import lumber
from lumber.ir import CompileError, Constraints, Forest
from lumber.passes.analyses.explainers import Counterfactuals, RowContributions, SensitiveTests
from lumber.passes.analyses.equivalence import Equivalence
from lumber.passes.base import PassContext, PassData
from lumber.passes.manager import run_analysis
from lumber.passes.pipeline_text import build_passes, format_pipeline


@pytest.fixture(scope="module")
def model() -> tuple[Forest, np.ndarray]:
    from sklearn.datasets import make_classification
    from sklearn.ensemble import GradientBoostingClassifier

    X, y = make_classification(400, 4, n_informative=3, n_redundant=0, random_state=1)
    return lumber.load(GradientBoostingClassifier(n_estimators=6, max_depth=2, random_state=0).fit(X, y)), X


def test_option_dataclasses_are_the_passes_options() -> None:
    passes = build_passes("counterfactual{norm=l2,time-limit=5,strategy=whole},sensitive-tests{norm=l1,method=milp},"
                          "contributions{game=interventional},equivalence{rtol=1e-6}")
    assert passes == [Counterfactuals(norm="l2", time_limit=5.0, strategy="whole"),
                      SensitiveTests(norm="l1", method="milp"), RowContributions(game="interventional"),
                      Equivalence(rtol=1e-6)]
    assert build_passes(format_pipeline(passes)) == passes
    with pytest.raises(CompileError, match="unknown norm|norm"):
        build_passes("sensitive-tests{norm=l7}")
    with pytest.raises(CompileError, match="expects 'path' or 'interventional'"):
        build_passes("contributions{game=exact}")


def test_the_passes_give_what_the_public_api_gives(model: tuple[Forest, np.ndarray]) -> None:
    forest, X = model
    cases, ref = X[:3], X[100:300]
    ctx = PassContext(data=PassData(cases=cases, X_train=ref))
    out = lumber.run(forest, "sensitive-tests{time-limit=20},contributions{game=interventional},"
                             "counterfactual{time-limit=20}", context=ctx)
    assert out is forest, "analyses pass the IR through"
    st = ctx.results["sensitive-tests"]
    api = lumber.sensitive_tests(forest, cases, options=lumber.SensitiveOptions(time_limit=20))
    assert np.array_equal(st.distance, api.distance)
    np.testing.assert_array_equal(ctx.results["contributions"].values, lumber.contributions(forest, cases, ref).values)
    cfs = ctx.results["counterfactual"]
    want = lumber.counterfactual(forest, cases, reference=ref, options=lumber.CounterfactualOptions(time_limit=20))
    assert [c.status for c in cfs] == [w.status for w in want]
    assert [c.cost for c in cfs] == pytest.approx([w.cost for w in want], rel=1e-9)


def test_constraints_apply_through_the_pass_data(model: tuple[Forest, np.ndarray]) -> None:
    forest, X = model
    cons = Constraints.from_mapping({"immutable": ["f3"]})
    got = run_analysis(SensitiveTests(), forest, PassData(cases=X[:4], constraints=cons))
    moved = {t.feature for r in got for t in r.tests}
    assert moved and "f3" not in moved
    free = run_analysis(SensitiveTests(), forest, PassData(cases=X[:4]))
    assert "f3" in {t.feature for r in free for t in r.tests}, "without the rule f3 moves"
    with pytest.raises(CompileError, match="takes data\\['constraints'\\] as a lumber.Constraints"):
        run_analysis(SensitiveTests(), forest, PassData(cases=X[:1], constraints={"immutable": ["f0"]}))
    with pytest.raises(CompileError, match="plausibility"):
        run_analysis(Counterfactuals(contamination=0.1), forest, PassData(cases=X[:1]))


def test_options_holding_a_mapping_still_cache(model: tuple[Forest, np.ndarray]) -> None:
    forest, X = model
    ctx = PassContext(data=PassData(cases=X[:2]))
    p = SensitiveTests(weights={"f0": 2.0})
    first = ctx.analysis(p, forest)
    assert ctx.analysis(p, forest) is first


def test_equivalence_compares_with_the_pipeline_input(model: tuple[Forest, np.ndarray]) -> None:
    forest, X = model
    ctx = PassContext()
    lumber.run(forest, "polynomial,oblivious,to-forest,equivalence", context=ctx)
    assert ctx.results["equivalence"].equal
    other = lumber.load(__import__("sklearn.ensemble", fromlist=["x"]).GradientBoostingClassifier(
        n_estimators=3, max_depth=2, random_state=0).fit(X, X[:, 0] > 0))
    diff = run_analysis(Equivalence(), other, source=forest)
    assert not diff.equal and diff.verified
    assert not lumber.equivalent(forest, other).equal
    with pytest.raises(CompileError, match="compares the IR with the pipeline's input"):
        run_analysis(Equivalence(), forest)
    with pytest.raises(CompileError, match="needs cases"):
        lumber.run(forest, "sensitive-tests")
