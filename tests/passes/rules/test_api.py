"""``lumber.counterfactual_rules`` on real models: compas smoke test (LightGBM explained through a
surrogate random forest), a random forest explained by itself, regions, constraints and errors."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import lumber
from builders import make_forest
from lumber.compiler.api.rules import RuleExplainer, RuleOptions
from lumber.ir import InputDataError, UnsupportedModelError
from lumber.passes.analyses.rules import CounterfactualRule, RuleSet


@pytest.fixture(scope="module")
def compas_rules(compas_model: dict[str, Any]) -> tuple[RuleExplainer, RuleSet]:
    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"], options=RuleOptions(n_samples=1))
    return ex, ex.local(compas_model["Xte"].iloc[:12])


def test_compas_smoke(compas_model: dict[str, Any], compas_rules: tuple[RuleExplainer, RuleSet]) -> None:
    ex, rs = compas_rules
    assert ex.surrogate_kind == "fitted" and ex.fidelity >= 0.95
    assert ex.rule_forest.n_trees == 20 and ex.rule_forest.max_depth <= 10
    found = [r for r in rs if r.found]
    assert len(found) >= 10
    m = compas_model["model"]
    for r in found:
        assert all(rule.probability >= 0.9 for rule in r.rules)
        [s] = r.samples
        assert s.verified
        want = r.target.labels[r.target.classes[0]]  # type: ignore[index]
        assert m.predict(_frame(compas_model, s.x))[0] == want  # checked again here on LightGBM itself
        moved = {c.feature for c in s.changes}
        assert moved <= set(r.features)
        assert any(rule.contains(ex.rule_forest.prepare_input(s.x[None]))[0] for rule in r.rules)
    doc = json.dumps(rs.to_dict())
    assert '"status": "found"' in doc and rs.to_dict()["info"]["surrogate"] == "fitted"
    assert rs.to_text().startswith(f"counterfactual rules: {len(found)} of 12 found")


def _frame(compas_model: dict[str, Any], x: np.ndarray) -> Any:
    import pandas as pd

    return pd.DataFrame(x[None, :], columns=compas_model["Xtr"].columns)


def test_single_case_and_constraints(compas_model: dict[str, Any]) -> None:
    m, Xtr, Xte = compas_model["model"], compas_model["Xtr"], compas_model["Xte"]
    cons = {"immutable": ["Race", "Sex", "AgeGroup"]}
    res = lumber.counterfactual_rules(m, Xtr, Xte.iloc[3], constraints=cons, options=RuleOptions(max_sets=3))
    assert isinstance(res, CounterfactualRule)
    assert not {"Race", "Sex", "AgeGroup"} & set(res.features)
    for s in res.samples:
        assert {c.feature for c in s.changes}.isdisjoint({"Race", "Sex", "AgeGroup"})
    one = lumber.counterfactual_rules(m, Xtr, Xte.iloc[:4], constraints={"max_changes": 1},
                                      options=RuleOptions(n_samples=0))
    assert all(r.sparsity <= 1 for r in one if r.found)
    as_dict = lumber.counterfactual_rules(m, Xtr, Xte.iloc[3].to_dict(), constraints=cons,
                                          options=RuleOptions(max_sets=3))
    assert as_dict.to_dict() == res.to_dict()


def test_constraint_file_text(compas_model: dict[str, Any], tmp_path: Any) -> None:
    p = tmp_path / "c.lum"
    p.write_text("immutable Race, Sex\n")
    res = lumber.counterfactual_rules(compas_model["model"], compas_model["Xtr"], compas_model["Xte"].iloc[0],
                                      constraints=str(p), options=RuleOptions(n_samples=0))
    assert not {"Race", "Sex"} & set(res.features)


def test_region_through_the_api(compas_model: dict[str, Any]) -> None:
    m, Xtr = compas_model["model"], compas_model["Xtr"]
    res = lumber.counterfactual_rules(m, Xtr, {"PriorsCount": (8, None), "AgeGroup": (1, 1)},
                                      options=RuleOptions(n_samples=0))
    assert isinstance(res, CounterfactualRule) and res.is_regional and res.region_rows > 0
    assert res.found and res.prediction == 1
    both = lumber.counterfactual_rules(m, Xtr, [{"PriorsCount": (8, None)}, {"PriorsCount": (None, 0)}],
                                       options=RuleOptions(n_samples=0))
    assert isinstance(both, RuleSet) and len(both) == 2


def test_random_forest_explains_itself() -> None:
    from sklearn.ensemble import RandomForestRegressor

    d = lumber.datasets.load("compas")
    X, y = d.X.iloc[:1500], d.y[:1500]
    rf = RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0, n_jobs=1).fit(X, y + X["PriorsCount"] / 10)
    res = lumber.counterfactual_rules(rf, X, X.iloc[:3], target=(1.0, 3.0))
    assert res.info["surrogate"] == "model" and res.info["surrogate_fidelity"] == 1.0
    for r in res:
        for s in r.samples:
            assert 1.0 <= rf.predict(X.iloc[:1] * 0 + s.x[None, :])[0] <= 3.0 or not s.verified


def test_errors(compas_model: dict[str, Any]) -> None:
    m, Xtr, Xte = compas_model["model"], compas_model["Xtr"], compas_model["Xte"]
    with pytest.raises(InputDataError, match="data has 3 columns but the model reads 5 features"):
        lumber.counterfactual_rules(m, Xtr.iloc[:, :3].to_numpy(), Xte.iloc[0])
    with pytest.raises(InputDataError, match="no case or region"):
        lumber.counterfactual_rules(m, Xtr)
    with pytest.raises(InputDataError, match="surrogate='forest' is not understood"):
        lumber.counterfactual_rules(m, Xtr, Xte.iloc[0], options=RuleOptions(surrogate="forest"))
    with pytest.raises(InputDataError, match="unknown feature"):
        lumber.counterfactual_rules(m, Xtr, Xte.iloc[0], constraints={"immutable": ["Height"]})
    cat = make_forest([("Race", {1}, 0.0, 1.0)], list(Xtr.columns), average=True)
    with pytest.raises(UnsupportedModelError, match="categorical splits"):
        lumber.counterfactual_rules(m, Xtr, Xte.iloc[0], options=RuleOptions(surrogate=cat))
    with pytest.raises(InputDataError, match="lacks feature"):
        lumber.counterfactual_rules(m, Xtr, {"Race": 1.0})


def test_sampled_subset_search_finds_the_two_features_that_matter() -> None:
    """20 features, the decision depends on f3 and f11 only: the sampled search (drawn from the
    forest's decision paths) finds a rule over a small S containing them."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(800, 20))
    y = ((X[:, 3] > 0.3) & (X[:, 11] < 0.5)).astype(int)
    rf = RandomForestClassifier(n_estimators=20, max_depth=8, random_state=0, n_jobs=1).fit(X, y)
    case = np.where(np.arange(20) == 3, -1.0, 0.0)
    res = lumber.counterfactual_rules(rf, X, case, target=1, options=RuleOptions(k=20, search="sampled",
                                                                                 max_subsets=40, n_samples=1))
    assert res.found and res.search is not None and res.search.sampled
    assert "f3" in res.features and len(res.features) <= 3
    assert res.samples[0].verified and rf.predict(res.samples[0].x[None, :])[0] == 1


def test_multiclass_target_set() -> None:
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(1)
    X = rng.uniform(0, 3, size=(600, 3))
    y = np.floor(X[:, 0]).astype(int)  # classes 0, 1, 2 by x0
    rf = RandomForestClassifier(n_estimators=20, random_state=0, n_jobs=1).fit(X, y)  # deep trees: pure leaves
    case = np.array([0.5, 1.0, 1.0])
    res = lumber.counterfactual_rules(rf, X, case, target=[1, 2], options=RuleOptions(widen=0))
    assert res.found and res.target.describe() == "a class in {1, 2}" and res.features == ("f0",)
    assert res.samples[0].verified and rf.predict(res.samples[0].x[None, :])[0] in (1, 2)
    other = lumber.counterfactual_rules(rf, X, case)  # any other class
    assert other.target.classes == (1, 2)
    two = lumber.counterfactual_rules(rf, X, case, target=2, options=RuleOptions(widen=0))
    assert two.found and all(iv.lo >= 1.5 for r in two.rules for iv in r.intervals)


def test_samples_are_checked_on_the_source_model(compas_model: dict[str, Any]) -> None:
    """A sample counts as verified only when the source object's own predict agrees too."""
    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"])

    class Disagrees:
        feature_names_in_ = np.array(compas_model["Xtr"].columns)

        def fit(self) -> None:  # pragma: no cover - marks a scikit-learn style estimator
            pass

        def predict(self, X: Any) -> np.ndarray:
            return 1 - compas_model["model"].predict(X)

    ok = ex.local(compas_model["Xte"].iloc[:2])
    assert all(s.verified for r in ok for s in r.samples)
    ex.model = Disagrees()
    bad = ex.local(compas_model["Xte"].iloc[:2])
    assert [s.verified for r in bad for s in r.samples] == [False] * sum(len(r.samples) for r in bad)


def test_default_isolation_forest_is_calibrated(compas_model: dict[str, Any],
                                                compas_rules: tuple[RuleExplainer, RuleSet]) -> None:
    """The default detector calls 10% of the training rows outliers (contamination=0.1, like
    lumber.counterfactual's plausibility); ``contamination="auto"`` is scikit-learn's fixed threshold,
    which on compas calls about half of them outliers."""
    ex, rs = compas_rules
    X = ex.forest.prepare_input(compas_model["Xtr"])
    share = float((ex.inlier_score(X) >= 0).mean())
    assert 0.88 <= share <= 0.92
    auto = RuleExplainer(compas_model["model"], compas_model["Xtr"], options=RuleOptions(n_samples=0,
                                                                                         contamination="auto"))
    assert float((auto.inlier_score(X) >= 0).mean()) < 0.7
    for r in rs:  # local rules report how much of each box is plausible
        assert all(rule.inliers is not None and 0.0 <= rule.inliers <= rule.plausibility + 1e-12 for rule in r.rules)
    with pytest.raises(InputDataError, match="contamination must be 'auto' or in"):
        RuleExplainer(compas_model["model"], compas_model["Xtr"], options=RuleOptions(contamination=0.9))


def test_regions_that_are_not_regions_are_a_clear_error(compas_rules: tuple[RuleExplainer, RuleSet]) -> None:
    ex, _ = compas_rules
    with pytest.raises(InputDataError, match=r"region 0 is a NoneType, not a Region"):
        ex.regional([None])


def test_fallback_and_cell_size_reach_the_search(compas_model: dict[str, Any]) -> None:
    ex = RuleExplainer(compas_model["model"], compas_model["Xtr"],
                       options=RuleOptions(n_samples=0, fallback="smallest", min_cell_rows=5))
    assert ex.context.options.fallback == "smallest" and ex.context.cells.min_rows == 5
    r = lumber.counterfactual_rules(compas_model["model"], compas_model["Xtr"], compas_model["Xte"].iloc[0],
                                    options=RuleOptions(n_samples=0, fallback="smallest", min_cell_rows=5))
    assert r.status in ("found", "no_rule", "no_divergent_set", "already_target")
    with pytest.raises(InputDataError, match="fallback must be one of"):
        RuleExplainer(compas_model["model"], compas_model["Xtr"], options=RuleOptions(fallback="largest"))


def test_worker_processes_give_the_same_rules(compas_model: dict[str, Any],
                                              compas_rules: tuple[RuleExplainer, RuleSet]) -> None:
    """``n_jobs=2``: each worker fits the same estimators and keys each case's random stream by its row, so
    the rules and samples equal those of one process, in order, and ``progress`` counts every case."""
    _, one = compas_rules
    seen: list[int] = []
    two = lumber.counterfactual_rules(compas_model["model"], compas_model["Xtr"], compas_model["Xte"].iloc[:12],
                                      options=RuleOptions(n_samples=1), n_jobs=2, progress=seen.append)
    assert sum(seen) == 12 and [r.row for r in two] == list(range(12))
    assert [r.to_dict() for r in two] == [r.to_dict() for r in one]
