"""Robust recourse: the sampler prefers the interior of a rule's box (its decision survives noise on the
changed features) and every sample carries a robustness report (papers.md section 4, noisy responses)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lumber.compiler.api.rules import RuleExplainer
from lumber.passes.analyses.rules import AnnealOptions
from lumber.passes.analyses.rules.recourse import ROBUSTNESS_SIGMA2, noisy_keep


@pytest.fixture(scope="module")
def step() -> dict[str, Any]:
    """Class 1 iff x0 > 0.5 (x1 is noise); training values of x0 spread evenly over [0, 1]."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = np.column_stack([np.linspace(0, 1, 401), rng.random(401)])
    y = (X[:, 0] > 0.5).astype(int)
    rf = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0, n_jobs=1).fit(X, y)
    return {"model": rf, "X": X, "x": np.array([0.1, 0.5])}


def _sample(step: dict[str, Any], **anneal: Any) -> Any:
    ex = RuleExplainer(step["model"], step["X"], seed=0, anneal=AnnealOptions(**anneal))
    res = ex.local(step["x"][None, :], target=1)[0]
    assert res.found and res.samples
    return ex, res.samples[0]


def test_robust_sample_sits_inside_the_box(step: dict[str, Any]) -> None:
    """The rule is x0 > 0.5; with noise of 0.1 (sigma^2 = 0.01 of the range) a sample keeps the target
    in >= 95% of its noisy copies only at x0 >= 0.5 + 1.65 * 0.1. The default (robust) sampler gets
    there; the paper's score-only energy is free to stop anywhere in the box."""
    _, s = _sample(step)
    assert s.verified and s.inlier
    assert [a for a, _ in s.robustness] == list(ROBUSTNESS_SIGMA2)
    assert s.robustness[0][1] >= 0.95 and s.x[0] >= 0.5 + 1.6 * 0.1
    _, plain = _sample(step, robust_sigma=0.0)
    assert plain.verified and plain.robustness[0][1] <= s.robustness[0][1]
    assert all(0.0 <= b <= 1.0 for _, b in s.robustness)


def test_noisy_keep_matches_the_normal_tail(step: dict[str, Any]) -> None:
    """A point at x0 = 0.7 with noise sd 0.1 on x0 stays above 0.5 with probability Phi(2) = 0.977."""
    ex, _ = _sample(step)
    ctx = ex.context
    tgt = ex.local(step["x"][None, :], target=1)[0].target
    x0 = np.array([[0.1, 0.5]])
    share = noisy_keep(ctx, x0, np.array([[0.7, 0.5]]), [tgt], 0.1, 2000, np.random.default_rng(1))
    assert share[0] == pytest.approx(0.977, abs=0.015)
    # nothing changed: no noise, the decision is kept by every copy
    same = noisy_keep(ctx, np.array([[0.7, 0.5]]), np.array([[0.7, 0.5]]), [tgt], 0.1, 50, np.random.default_rng(1))
    assert same[0] == 1.0


def test_robustness_is_reported_in_json_and_text(step: dict[str, Any]) -> None:
    ex, s = _sample(step)
    d = s.to_dict()
    assert [r["sigma2"] for r in d["robustness"]] == list(ROBUSTNESS_SIGMA2)
    assert "keeps the target under noise sigma^2 0.01/0.025/0.05" in s.to_text(ex.forest.schema.features)


@pytest.fixture(scope="module")
def corner() -> dict[str, Any]:
    """Class 1 iff x0 > 0.5 and x1 > 0.3, both spread evenly over [0, 1]."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.random((600, 2))
    y = ((X[:, 0] > 0.5) & (X[:, 1] > 0.3)).astype(int)
    rf = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0, n_jobs=1).fit(X, y)
    return {"model": rf, "X": X}


def test_a_feature_already_inside_its_interval_may_stay(corner: dict[str, Any]) -> None:
    """A rule x0 > 0.5 AND 0.3 < x1 <= 0.6 for the case (0.1, 0.45): x1 already satisfies it. Its pool
    holds the case's value (a quarter of the draws), x0's does not, the hit rate's pools hold training
    values only; and the robust sample keeps x1: moved anywhere in (0.3, 0.6] it would be perturbed
    (noise sd 0.158) and fall below 0.3 in some copies, unchanged it is not perturbed at all."""
    from lumber.passes.analyses.rules import Interval, Rule, sample_cases
    from lumber.passes.analyses.rules.recourse import STAY_SHARE, _job

    ex = RuleExplainer(corner["model"], corner["X"], seed=0)
    ctx = ex.context
    feats = ex.forest.schema.features
    x = np.array([0.1, 0.45])
    rule = Rule((Interval(feats[0], 0, 0.5, np.inf), Interval(feats[1], 1, 0.3, 0.6)), 1.0, 0.3, 0.3)
    job = _job(ctx, x, rule, 0)
    assert job is not None
    stay0, stay1 = (float(np.mean(p == v)) for p, v in zip(job.pools, x))
    assert stay0 == 0.0 and stay1 == pytest.approx(STAY_SHARE, abs=0.01)
    plain = _job(ctx, x, rule, 0, stay=False)
    assert plain is not None and not np.isin(x[1], plain.pools[1])
    tgt = ex.local(x[None, :], target=1)[0].target
    [[s]] = sample_cases(ctx, x[None, :], [[rule]], [tgt], [0], 1)
    assert s.verified and [c.feature for c in s.changes] == [feats[0].name]
    assert s.x[1] == 0.45 and s.robustness[0][1] >= 0.95
