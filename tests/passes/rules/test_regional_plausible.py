"""Plausibility-aware regional rules on hand-built forests.

The inlier score is a plain function of the point (no isolation forest), so which
(region case, value) counterfactual points are plausible is known by hand.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from builders import make_forest
from rules_helpers import classifier
from test_plausible import bands, high, low  # noqa: F401  (fixture, scores)

from lumber.passes.analyses.rules import FOUND, Region, RuleOptions, apply_regional, build_context, regional_rules
from lumber.passes.analyses.rules.core import MAX_CASES, case_share, make_query

INF = np.inf


def _region(b: dict[str, Any], score: Any, **opts: Any) -> Any:
    """Region x0 > 3 (rows x0 = 3.5, 4.0, both off target): bands (0, 1] and (2, 3] both reach
    CRP 1 with the same plausibility."""
    ctx = build_context(b["model"], b["rule_forest"], b["X"], score=score, options=RuleOptions(**opts))
    return ctx, regional_rules(ctx, [Region.from_bounds(ctx.model.schema, {"x0": (3.2, None)})], target=1)[0]


@pytest.mark.parametrize("score, box", [(high, (2.0, 3.0)), (low, (0.0, 1.0))])
def test_plausible_box_chosen_for_a_region(bands: dict[str, Any], score: Any,  # noqa: F811
                                           box: tuple[float, float]) -> None:
    """With one rule kept, the region's rule is the band whose points are inliers for its cases,
    whichever band that is; its inlier share is its whole plausibility (every case, every value)."""
    ctx, res = _region(bands, score, max_rules=1)
    assert res.status == FOUND and res.is_regional
    [r] = res.rules
    assert (r.intervals[0].lo, r.intervals[0].hi) == box
    assert r.probability >= ctx.options.pi_c and r.probability == 1.0
    assert r.inliers == pytest.approx(r.plausibility) and r.inliers > 0
    assert res.extra["region_plausible_cases"] == 1.0
    for case, ss in zip(bands["X"][7:], apply_regional(ctx, res, bands["X"][7:])):
        [s] = ss
        assert s.verified and s.inlier and s.x[1] == case[1]


@pytest.mark.parametrize("score", [high, low])
def test_both_bands_ranked_by_plausible_share(bands: dict[str, Any], score: Any) -> None:  # noqa: F811
    """Both bands kept: the plausible one first with its share, the other with 0; CRP >= pi_c for both."""
    ctx, res = _region(bands, score)
    first, other = res.rules
    assert first.inliers is not None and first.inliers > 0 and other.inliers == 0.0
    assert score(np.array([[first.intervals[0].hi, 0.0]]))[0] >= 0
    assert all(r.probability >= ctx.options.pi_c for r in res.rules)
    assert res.to_dict()["rules"][0]["inliers"] == pytest.approx(first.inliers)


def test_share_counts_region_cases(bands: dict[str, Any]) -> None:  # noqa: F811
    """Inlier iff (x0 > 2) xor (x1 > 7.5): case x1 = 7 is served by (2, 3], case x1 = 8 by (0, 1].
    Each band's points are plausible for one case of two: inlier share half its plausibility."""
    _, res = _region(bands, lambda X: np.where((X[:, 0] > 2) != (X[:, 1] > 7.5), 1.0, -1.0))
    assert len(res.rules) == 2
    for r in res.rules:
        assert r.inliers == pytest.approx(r.plausibility / 2)
    assert res.extra["region_plausible_cases"] == 1.0


def test_no_scorer_no_share(bands: dict[str, Any]) -> None:  # noqa: F811
    _, res = _region(bands, None)
    assert res.status == FOUND and all(r.inliers is None for r in res.rules)
    assert "region_plausible_cases" not in res.extra


@pytest.fixture(scope="module")
def either() -> dict[str, Any]:
    """Target iff x0 <= 1 or x1 <= 1 (rule forest and model alike). Region x0 > 3 and x1 > 3 (three
    rows): moving x0 alone or x1 alone each has CDP 2/5 (pi = 0.35 here) and a box with CRP 1, so
    the search's first set is one of them."""
    spec = ("x0", 1.0, 1.0, ("x1", 1.0, 1.0, 0.0))
    rule_forest = make_forest([spec, spec], ["x0", "x1"], average=True)
    model = classifier([("x0", 1.0, 5.0, ("x1", 1.0, 5.0, -5.0))], ["x0", "x1"])
    X = np.array([[0.5, 5.0], [0.7, 6.0], [5.0, 0.5], [6.0, 0.7], [4.0, 4.0], [5.0, 5.0], [4.5, 4.5]])
    return {"rule_forest": rule_forest, "model": model, "X": X,
            "region": Region(np.array([3.0, 3.0]), np.array([INF, INF]), "both high")}


@pytest.mark.parametrize("moved", ["x0", "x1"])
def test_widening_picks_the_feature_set_with_plausible_points(either: dict[str, Any], moved: str) -> None:
    """Inliers only where the *other* feature stays high: the rules move ``moved``, whichever set the
    search tries first, and every case of the region gets an inlier sample reaching the target."""
    keep = 1 if moved == "x0" else 0
    def score(X: np.ndarray) -> np.ndarray:
        return X[:, keep] - 2.0

    ctx = build_context(either["model"], either["rule_forest"], either["X"], score=score,
                        options=RuleOptions(pi=0.35))
    res = regional_rules(ctx, [either["region"]], target=1)[0]
    assert res.status == FOUND and res.features == (moved,)
    assert all(r.probability >= ctx.options.pi_c for r in res.rules)
    assert res.extra["region_plausible_cases"] == 1.0 and res.rules[0].inliers > 0
    cases = either["X"][4:]
    for case, ss in zip(cases, apply_regional(ctx, res, cases)):
        [s] = ss
        assert s.verified and s.inlier and s.x[keep] == case[keep]
    # without widening the search's first set ({x0}: the search order) is kept, implausible for moved = x1
    off = build_context(either["model"], either["rule_forest"], either["X"], score=score,
                        options=RuleOptions(pi=0.35, widen=0))
    first = regional_rules(off, [either["region"]], target=1)[0]
    assert first.status == FOUND and "region_plausible_cases" not in first.extra
    assert first.features == ("x0",)
    assert (first.rules[0].inliers == 0.0) == (moved == "x1")


def test_case_share_subsamples_big_regions(either: dict[str, Any]) -> None:
    """More region rows than MAX_CASES: a fixed subset is scored (same answer twice)."""
    X = np.concatenate([either["X"], np.column_stack([np.linspace(3.1, 9, 80), np.linspace(3.1, 9, 80)])])
    ctx = build_context(either["model"], either["rule_forest"], X, score=lambda Z: Z[:, 1] - 2.0,
                        options=RuleOptions(pi=0.35))
    reg = either["region"]
    res = regional_rules(ctx, [reg], target=1)[0]
    assert res.region_rows > MAX_CASES and res.features == ("x0",)
    from lumber.passes.analyses.rules import action_space
    act = action_space(None, ctx.names, np.nextafter(reg.lo, INF), reg.hi)
    q = make_query(ctx, act, ctx.cells.interval_routes(reg.lo[None], reg.hi[None])[0], 5,
                   point=ctx.X_raw[reg.contains(ctx.table.X)])
    a = case_share(ctx, q, res.target, res.rules)
    assert a == case_share(ctx, q, res.target, res.rules) == 1.0
